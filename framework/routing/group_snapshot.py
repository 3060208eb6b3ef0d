"""The routing state as one route sees it: the routed group read once (``docs/routing.md``).

A route asks the same group's small values several times: the recent-reply count, then the
disabled, silence and cooldown gates, the quote throttle, the last phrase, the rhythm.
:class:`RouteState` answers all of them from one :meth:`RoutingState.snapshot
<promptweave.store.routing_state.RoutingState.snapshot>` taken at the first of those reads, and
passes everything else to the store. It lives for one route only, so nothing outlives the turn
that read it; a change written through it to the routed group drops the snapshot, and the next
read goes to the store again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import attrs

from promptweave.items import RhythmProfile
from promptweave.store.routing_state import (
    GroupMute,
    GroupSnapshot,
    GroupSwitch,
    QuoteCandidate,
    RoutingState,
)
from promptweave.turn import ChatMessage

__all__ = ["RouteState"]


@attrs.define
class RouteState(RoutingState):
    """The routing state of one route of ``bot_id`` in ``group_id`` (``None``: a private chat,
    nothing to snapshot).

    :param store: the deployment's routing state.
    """

    store: RoutingState
    bot_id: str
    group_id: str | None
    _snapshot: GroupSnapshot | None = attrs.field(default=None, init=False)

    def _routed(self, bot_id: str, group_id: str) -> bool:
        return group_id == self.group_id and bot_id == self.bot_id

    def _read(self, replies_since: dt.datetime | None = None) -> GroupSnapshot:
        if self._snapshot is None:
            assert self.group_id is not None  # only the routed group is snapshotted
            self._snapshot = self.store.snapshot(
                self.bot_id, self.group_id, replies_since=replies_since
            )
        return self._snapshot

    def _changed(self, bot_id: str, group_id: str) -> None:
        if self._routed(bot_id, group_id):
            self._snapshot = None

    # -- reads of the routed group come from the snapshot ----------------------------------

    def snapshot(
        self, bot_id: str, group_id: str, *, replies_since: dt.datetime | None = None
    ) -> GroupSnapshot:
        if self._routed(bot_id, group_id):
            found = self._read(replies_since)
            if replies_since is None or found.replies_since == replies_since:
                return found
        return self.store.snapshot(bot_id, group_id, replies_since=replies_since)

    def mute(self, bot_id: str, group_id: str) -> GroupMute:
        if self._routed(bot_id, group_id):
            return self._read().mute
        return self.store.mute(bot_id, group_id)

    def last_quote_at(self, bot_id: str, group_id: str) -> dt.datetime | None:
        if self._routed(bot_id, group_id):
            return self._read().last_quote_at
        return self.store.last_quote_at(bot_id, group_id)

    def last_phrase(self, bot_id: str, group_id: str) -> str | None:
        if self._routed(bot_id, group_id):
            return self._read().last_phrase
        return self.store.last_phrase(bot_id, group_id)

    def rhythm(self, bot_id: str, group_id: str) -> RhythmProfile | None:
        if self._routed(bot_id, group_id):
            return self._read().rhythm
        return self.store.rhythm(bot_id, group_id)

    def bot_replies_since(self, bot_id: str, group_id: str, since: dt.datetime) -> int:
        if self._routed(bot_id, group_id):
            found = self._read(since)
            if found.replies_since == since:
                return found.bot_replies
        return self.store.bot_replies_since(bot_id, group_id, since)

    # -- everything else goes to the store -------------------------------------------------

    def candidates(self, bot_id: str, group_id: str) -> tuple[QuoteCandidate, ...]:
        return self.store.candidates(bot_id, group_id)

    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...] | None:
        return self.store.record_candidates(bot_id, group_id, candidates, limit)

    def take_kept_messages(self, bot_id: str, group_id: str) -> tuple[ChatMessage, ...]:
        return self.store.take_kept_messages(bot_id, group_id)

    def keep_message(self, bot_id: str, group_id: str, message: ChatMessage, limit: int) -> None:
        self.store.keep_message(bot_id, group_id, message, limit)

    def set_switch(self, bot_id: str, group_id: str, switch: GroupSwitch | None) -> None:
        self._changed(bot_id, group_id)
        self.store.set_switch(bot_id, group_id, switch)

    def switches(self, bot_id: str | None = None) -> tuple[tuple[str, str, GroupSwitch], ...]:
        return self.store.switches(bot_id)

    def start_cooldown(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._changed(bot_id, group_id)
        self.store.start_cooldown(bot_id, group_id, until)

    def start_silence(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._changed(bot_id, group_id)
        self.store.start_silence(bot_id, group_id, until)

    def note_quote_delivered(
        self, bot_id: str, group_id: str, message_id: str, at: dt.datetime
    ) -> None:
        self._changed(bot_id, group_id)
        self.store.note_quote_delivered(bot_id, group_id, message_id, at)

    def note_phrase(self, bot_id: str, group_id: str, phrase: str) -> None:
        self._changed(bot_id, group_id)
        self.store.note_phrase(bot_id, group_id, phrase)

    def note_bot_reply(self, bot_id: str, group_id: str, at: dt.datetime) -> None:
        self._changed(bot_id, group_id)
        self.store.note_bot_reply(bot_id, group_id, at)

    def set_rhythm(self, bot_id: str, group_id: str, profile: RhythmProfile) -> None:
        self._changed(bot_id, group_id)
        self.store.set_rhythm(bot_id, group_id, profile)
