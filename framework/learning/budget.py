"""What learning may spend, and what it spent (``docs/learning.md``, the budget).

Every call of the learning model is counted here: its tokens (the prompt and output tokens the
provider reported; the cached ones apart) by (bot, group, learner) and by the hour it was made in
(UTC hours). Limits hold over a rolling hour and a rolling day (the last 24 hourly buckets),
overall and per (bot, group) (``[learning.budget]``). Before a call, :meth:`LearningBudget.check`
says whether a limit is reached and, if so, when the oldest bucket that holds it leaves the window:
the learner waits until then. A call is counted once made, so one call may go past a token limit
by its own size; no call starts past one.

The counts are kept in the learned store as items of kind ``spend`` (one per bot, group, learner
and hour, its fields the sums), so ``promptweave learned stats`` reads them and a restarted bot
keeps its day's spend: the first check reads them back (:meth:`LearningBudget.prime`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from promptweave.config import LearningBudgetConfig
from promptweave.store.learned import LearnedItem, LearnedStore, item_key
from promptweave.store.sqlite import STORE_ERRORS

__all__ = [
    "SPEND_KIND",
    "BudgetSpent",
    "LearningBudget",
    "Spend",
    "hour_of",
    "spend_totals",
]

#: The kind of the learned items that keep what learning spent.
SPEND_KIND = "spend"
#: The most spend items kept per (bot, group): several learners' hours over more than a day.
SPEND_CAP = 400
_HOUR = dt.timedelta(hours=1)
log = logging.getLogger("promptweave.learning")
_DAY_HOURS = 24


def hour_of(moment: dt.datetime) -> dt.datetime:
    """The UTC hour ``moment`` falls in (its bucket)."""
    return moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


@attrs.define
class Spend:
    """Calls and tokens: of one bucket, or summed."""

    calls: int = 0
    invalid: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def tokens(self) -> int:
        """What a token limit counts: the prompt and the output tokens."""
        return self.prompt_tokens + self.output_tokens

    def add(self, other: Spend) -> None:
        self.calls += other.calls
        self.invalid += other.invalid
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens

    def to_json(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "invalid": self.invalid,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "tokens": self.tokens,
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Spend:
        def number(key: str) -> int:
            value = fields.get(key, 0)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return cls(
            calls=number("calls"),
            invalid=number("invalid"),
            prompt_tokens=number("prompt_tokens"),
            output_tokens=number("output_tokens"),
            cached_tokens=number("cached_tokens"),
        )


class BudgetSpent(Exception):
    """A limit of ``[learning.budget]`` is reached: the learner waits until ``retry_at``.

    :param limit: which limit, as the operator reads it (``group tokens per hour 50000``).
    """

    def __init__(self, limit: str, retry_at: dt.datetime) -> None:
        super().__init__(f"learning budget spent ({limit}); waiting until {retry_at.isoformat()}")
        self.limit = limit
        self.retry_at = retry_at


_Bucket = tuple[str, str, str, dt.datetime]  # bot, group, learner, hour


@attrs.define
class LearningBudget:
    """The counts and limits of one runtime's learning model.

    :param limits: ``[learning.budget]``.
    :param store: where spend items are kept (``None``: counted in this process only).
    """

    limits: LearningBudgetConfig
    store: LearnedStore | None = None
    _buckets: dict[_Bucket, Spend] = attrs.field(factory=dict, init=False)
    _primed: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def prime(self, now: dt.datetime) -> int:
        """Read back the spend of the last day from the store (after a restart).
        :returns: the buckets read."""
        if self.store is None:
            return 0
        since = hour_of(now) - _HOUR * (_DAY_HOURS - 1)
        read = 0
        for bot_id, group_id in self.store.scopes():
            for item in self.store.items(bot_id, group_id, kind=SPEND_KIND, limit=SPEND_CAP):
                hour = _hour_field(item.fields.get("hour"))
                if hour is None or hour < since:
                    continue
                key = (bot_id, group_id, str(item.fields.get("learner", "")), hour)
                with self._lock:
                    self._buckets[key] = Spend.from_fields(item.fields)
                read += 1
        return read

    def check(self, bot_id: str, group_id: str, now: dt.datetime) -> None:
        """Raise :class:`BudgetSpent` when a limit is reached at ``now``. The first check reads
        back the last day's spend from the store (:meth:`prime`), so a command that never asks
        the model never reads it."""
        if not self._primed:
            self._primed = True
            try:
                self.prime(now)
            except STORE_ERRORS as exc:
                log.warning("learning spend of the last day not read back: %s", exc)
        hour = hour_of(now)
        day_start = hour - _HOUR * (_DAY_HOURS - 1)
        limits = self.limits
        with self._lock:
            self._drop_before(day_start)
            checks = (
                ("group", limits.group_calls_per_hour, limits.group_tokens_per_hour, True, True),
                ("group", limits.group_calls_per_day, limits.group_tokens_per_day, True, False),
                ("overall", limits.calls_per_hour, limits.tokens_per_hour, False, True),
                ("overall", limits.calls_per_day, limits.tokens_per_day, False, False),
            )
            for scope, call_limit, token_limit, own_group, hourly in checks:
                buckets = [
                    (key[3], spend)
                    for key, spend in self._buckets.items()
                    if (not own_group or key[:2] == (bot_id, group_id))
                    and (key[3] == hour if hourly else True)
                ]
                total = Spend()
                for _hour, spend in buckets:
                    total.add(spend)
                window = "hour" if hourly else "day"
                for what, limit, used in (
                    ("calls", call_limit, total.calls),
                    ("tokens", token_limit, total.tokens),
                ):
                    if limit and used >= limit:
                        oldest = min(bucket_hour for bucket_hour, _ in buckets)
                        retry_at = hour + _HOUR if hourly else oldest + _HOUR * _DAY_HOURS
                        raise BudgetSpent(f"{scope} {what} per {window} {limit}", retry_at)

    def record(
        self, bot_id: str, group_id: str, learner: str, now: dt.datetime, spend: Spend
    ) -> None:
        """Count one call's spend, and keep the bucket's sums in the store. A failing store is
        the caller's to log: the count in this process stands."""
        hour = hour_of(now)
        key = (bot_id, group_id, learner, hour)
        with self._lock:
            bucket = self._buckets.setdefault(key, Spend())
            bucket.add(spend)
            fields = {"learner": learner, "hour": hour.isoformat(), **bucket.to_json()}
        if self.store is not None:
            self.store.put_items(
                [
                    LearnedItem(
                        kind=SPEND_KIND,
                        bot_id=bot_id,
                        group_id=group_id,
                        key=item_key(learner, hour.isoformat()),
                        fields=fields,
                        learner=learner,
                        learned_at=now,
                    )
                ],
                caps={SPEND_KIND: SPEND_CAP},
            )

    def spent(
        self, now: dt.datetime, *, bot_id: str | None = None, group_id: str | None = None
    ) -> dict[str, Spend]:
        """What was spent over the rolling day, per learner (of one scope, or overall)."""
        day_start = hour_of(now) - _HOUR * (_DAY_HOURS - 1)
        found: dict[str, Spend] = {}
        with self._lock:
            for (bot, group, learner, hour), spend in self._buckets.items():
                if hour < day_start or (bot_id is not None and (bot, group) != (bot_id, group_id)):
                    continue
                found.setdefault(learner, Spend()).add(spend)
        return found

    def _drop_before(self, day_start: dt.datetime) -> None:
        for key in [key for key in self._buckets if key[3] < day_start]:
            del self._buckets[key]


def _hour_field(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return None if moment.tzinfo is None else hour_of(moment)


def spend_totals(items: Iterable[LearnedItem]) -> dict[tuple[str, str, str], Spend]:
    """The sums of spend items, by (bot, group, learner): what ``learned stats`` shows."""
    totals: dict[tuple[str, str, str], Spend] = {}
    for item in items:
        if item.kind != SPEND_KIND:
            continue
        key = (item.bot_id, item.group_id, str(item.fields.get("learner", item.learner)))
        totals.setdefault(key, Spend()).add(Spend.from_fields(item.fields))
    return totals
