"""The mention cooldown: a bot @-mentions someone in a group at most once per
``[delivery] mention_cooldown_s`` (``docs/delivery.md``, "The delivery plan").

Routing may decide ``mention`` on any turn where several people talk over each other; sent every
time, the @ would turn the bot into a reminder service. The cooldown counts from the last @ that
actually went out in the group; while it runs, a decided mention goes out plain. Quotes and plain
replies are not affected. The times are kept by the process that sends (a live loop), not in the
store: a restart forgets them, as it forgets nothing else that matters.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict

import attrs

__all__ = ["MENTION_GROUPS_KEPT", "MentionCooldown"]

#: The groups whose last @ is remembered; the least recently mentioned are forgotten past it.
MENTION_GROUPS_KEPT = 65536


@attrs.define(eq=False)
class MentionCooldown:
    """When the bot last @-mentioned someone, per bot and group.

    :param seconds: the cooldown; 0 lets every decided mention out.
    """

    seconds: float
    _last: OrderedDict[tuple[str, str], dt.datetime] = attrs.field(
        factory=OrderedDict, init=False, repr=False
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def allows(self, bot_id: str, group_id: str | None, now: dt.datetime) -> bool:
        """Whether an @ may go out in the group now (always outside a group)."""
        if group_id is None or self.seconds <= 0:
            return True
        with self._lock:
            last = self._last.get((bot_id, group_id))
        return last is None or (now - last).total_seconds() >= self.seconds

    def note(self, bot_id: str, group_id: str | None, at: dt.datetime) -> None:
        """An @ went out in the group at ``at``."""
        if group_id is None:
            return
        key = (bot_id, group_id)
        with self._lock:
            self._last[key] = at
            self._last.move_to_end(key)
            while len(self._last) > MENTION_GROUPS_KEPT:
                self._last.popitem(last=False)
