"""One warning in NoneBot's log for each cause of a turn the model left unanswered, at most one
a cause within :data:`WARN_INTERVAL_S` (``docs/bot.md``, "What the log says").

The loop names the cause, the reason and the fix in the turn's trace
(``trace["model_failure"]``, :class:`promptweave.providers.failures.ModelFailure`); a bot whose
key is missing fails the same way on every addressed message, so the log says it once, then once
again a while later with the number of messages it left unanswered since.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from promptweave import TurnOutcome
from promptweave.providers.failures import ModelFailure

__all__ = ["WARN_INTERVAL_S", "FailureLog"]

#: The least time between two warnings of the same cause.
WARN_INTERVAL_S = 600.0


@attrs.define(eq=False)
class _Cause:
    last_warned: float
    unwarned: int = 0


@attrs.define(eq=False)
class FailureLog:
    """Says, through ``warn``, why a turn's model gave no answer; once per cause per interval.

    :param warn: writes one warning line (NoneBot's ``logger.warning``).
    :param interval_s: the least time between two warnings of one cause.
    :param clock: monotonic seconds.
    """

    warn: Callable[[str], object]
    interval_s: float = WARN_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    _causes: dict[str, _Cause] = attrs.field(factory=dict, init=False)

    def note(self, outcome: TurnOutcome) -> bool:
        """Warn about ``outcome`` if its model failed and its cause was not warned of lately.

        :returns: whether a warning was written.
        """
        failure = ModelFailure.from_json(outcome.trace.get("model_failure"))
        if failure is None:
            return False
        now = self.clock()
        seen = self._causes.get(failure.cause)
        if seen is not None and now - seen.last_warned < self.interval_s:
            seen.unwarned += 1
            return False
        since = ""
        if seen is not None and seen.unwarned:
            since = f"; {seen.unwarned} more since the last warning of this cause"
        self._causes[failure.cause] = _Cause(last_warned=now)
        event = outcome.event
        where = "?"
        if event is not None:
            place = f"group {event.group_id}" if event.group_id is not None else "private chat"
            where = f"message {event.message.id} in {place}"
        self.warn(
            f"promptweave: {where} got no answer: the model failed ({failure.cause}): "
            f"{failure.reason}. Fix: {failure.fix}{since}"
        )
        return True
