"""The learner stage: which learner runs when, for which (bot, group), and what it did.

Every message recorded in a group is *noted* (:meth:`LearningStage.note`): a learner of that
group then has work waiting. It runs once ``min_batch`` messages wait or ``interval_s`` has passed
since the first of them (``docs/learning.md``, when a learner runs). Runs are picked waiting
longest first, at most ``max_runs_per_tick`` a tick and ``max_concurrency`` at once, so a group
with waiting work is served within a bounded time even while a busier group has a backlog (a
group whose batch was full waits again at the back).

One run: take the lease of (learner, bot, group) in the learned store; read the learner's cursor
and the messages appended after it; call the learner; store what it returned (merged and capped by
the store); move the cursor past the batch (only while still holding the lease); release the
lease. A run that raises, times out or meets a failing store keeps the cursor and is retried after
``retry_s``, doubled per further failure up to ``retry_max_s``. Every run becomes a
:class:`LearnerRun`, logged on ``promptweave.learning`` and kept for the trace and the replay
report.

The stage is driven by the caller's clock: :meth:`run_due` runs what is due at a given time, in
worker threads or (``threads=False``, as a replay does, so it repeats exactly) one after another
on the caller's thread; :meth:`serve` is the live loop's ticking task.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from time import perf_counter
from typing import Any

import attrs

from promptweave._dates import shifted
from promptweave.config import Config
from promptweave.delivery.outgoing import ReplyInjection
from promptweave.learning.budget import SPEND_KIND, BudgetSpent
from promptweave.learning.model import LearningModel, ModelCall, ModelUnavailable, RunModel
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import (
    DeliveredInjection,
    LearnedItem,
    LearnerCursor,
    LearningSource,
)
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.turn import ChatMessage

__all__ = [
    "RUNS_KEPT",
    "SOURCE_TYPES",
    "LearnerRun",
    "LearningStage",
    "RunStatus",
    "delivered_injection",
]

log = logging.getLogger("promptweave.learning")

#: The most recent runs a stage keeps for the trace and the report.
RUNS_KEPT = 1000

#: The keys of ``[learning.learners.NAME]`` the stage reads itself; the rest go to the learner.
STAGE_KEYS = frozenset({"enabled", "min_batch", "interval_s", "max_batch", "max_items"})

_Scope = tuple[str, str]


class RunStatus:
    """What became of one run."""

    LEARNED = "learned"  # it ran; its items (maybe none) were stored and the cursor moved
    NOTHING_NEW = "nothing_new"  # no message after the cursor
    LEASED_ELSEWHERE = "leased_elsewhere"  # another process holds the lease
    LEASE_LOST = "lease_lost"  # the lease expired during the run: nothing kept
    FAILED = "failed"  # the learner raised or timed out, or a store failed
    OPTED_OUT = "opted_out"
    WAITING_BUDGET = "waiting_budget"  # [learning.budget] is spent: the cursor stays until then


@attrs.frozen(kw_only=True)
class LearnerRun:
    """One run of one learner in one (bot, group), for the log, the trace and the report.

    :param learned: items stored per kind (new or counted again).
    :param evicted: items evicted to stay within a cap, per kind.
    :param position: the cursor after the run.
    :param retry_at: when a failed run, or one waiting for the budget, is tried again.
    :param model_calls: what it asked the learning model (each call's status and spend).
    """

    learner: str
    bot_id: str
    group_id: str
    status: str
    at: dt.datetime
    messages: int = 0
    learned: Mapping[str, int] = attrs.field(factory=dict)
    evicted: Mapping[str, int] = attrs.field(factory=dict)
    unchanged: int = 0
    position: int = 0
    items: tuple[LearnedItem, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""
    retry_at: dt.datetime | None = None
    duration_ms: float = 0.0
    model_calls: tuple[ModelCall, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "learner": self.learner,
            "bot_id": self.bot_id,
            "group_id": self.group_id,
            "status": self.status,
            "at": self.at.isoformat(),
            "messages": self.messages,
            "learned": dict(self.learned),
            "evicted": dict(self.evicted),
            "unchanged": self.unchanged,
            "position": self.position,
            "notes": list(self.notes),
            "error": self.error,
            "retry_at": None if self.retry_at is None else self.retry_at.isoformat(),
            "duration_ms": round(self.duration_ms, 3),
            "model_calls": [call.to_json() for call in self.model_calls],
        }

    def spent(self) -> str:
        """What its model calls spent, for the log: ``2 model calls, 1,234 tokens`` (``""``
        when it made none)."""
        calls = sum(call.spend.calls for call in self.model_calls)
        if not calls:
            return ""
        tokens = sum(call.spend.tokens for call in self.model_calls)
        invalid = sum(call.spend.invalid for call in self.model_calls)
        text = f"{calls} model call{'s' if calls != 1 else ''}, {tokens:,} tokens"
        return text + (
            f", {invalid} invalid answer{'s' if invalid != 1 else ''}" if invalid else ""
        )

    def describe(self) -> str:
        """One line for the operator's log."""
        where = f"learner {self.learner} in group {self.group_id} (bot {self.bot_id})"
        if self.status == RunStatus.FAILED:
            retry = "" if self.retry_at is None else f"; retrying at {self.retry_at.isoformat()}"
            spent = f" ({self.spent()})" if self.spent() else ""
            return f"{where} failed on {self.messages} messages: {self.error}{spent}{retry}"
        if self.status == RunStatus.WAITING_BUDGET:
            return f"{where} waits: {self.error}"
        if self.status == RunStatus.LEARNED:
            learned = ", ".join(f"{n} {kind}" for kind, n in self.learned.items()) or "nothing"
            text = f"{where} learned {learned} from {self.messages} messages"
            if self.evicted:
                text += " (evicted " + ", ".join(f"{n} {k}" for k, n in self.evicted.items()) + ")"
            if self.spent():
                text += f" ({self.spent()})"
            if self.notes:
                text += "; " + "; ".join(self.notes)
            return text
        return f"{where}: {self.status}"


@attrs.frozen(kw_only=True)
class _Plan:
    learner: Learner
    min_batch: int
    interval_s: float
    max_batch: int
    caps: Mapping[str, int]
    settings: Mapping[str, Any]


def _plan(learner: Learner, table: Mapping[str, Any]) -> _Plan:
    def number(key: str, default: Any, minimum: float) -> Any:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise ValueError(
                f"learning.learners.{learner.name}.{key} must be a number of at least "
                f"{minimum}, not {value!r}"
            )
        return value

    max_items = table.get("max_items")
    caps = dict(learner.caps)
    if max_items is not None:
        cap = int(number("max_items", 1, 1))
        caps = {kind: cap for kind in learner.writes}
    return _Plan(
        learner=learner,
        min_batch=int(number("min_batch", learner.min_batch, 1)),
        interval_s=float(number("interval_s", learner.interval_s, 0)),
        max_batch=int(number("max_batch", learner.max_batch, 1)),
        caps=caps,
        settings={k: v for k, v in table.items() if k not in STAGE_KEYS},
    )


@attrs.define
class _Waiting:
    """A (learner, scope)'s waiting work, as noted in this process."""

    noted: int = 0
    since: dt.datetime | None = None
    failures: int = 0
    retry_at: dt.datetime | None = None
    running: bool = False


@attrs.define
class LearningStage:
    """The learners of one runtime and their scheduling.

    :param learners: the registered learners, in registration order.
    :param stores: the runtime's stores; ``stores.learned`` keeps what is learned, cursors and
        leases, ``stores.group_log`` is read (it must be a
        :class:`promptweave.store.learned.LearningSource`).
    :param config: ``[learning]`` and the bots' peer accounts.
    :param holder: this stage's name in leases (unique per process by default).
    :param bot_names: the names and aliases of a bot account (the runtime's ``bot_for``); the
        ``[bots."ID"]`` table's by default.
    """

    learners: Sequence[Learner]
    stores: Stores
    config: Config
    holder: str = attrs.field(factory=lambda: f"pw-{uuid.uuid4().hex[:12]}")
    runs: deque[LearnerRun] = attrs.field(factory=lambda: deque(maxlen=RUNS_KEPT))
    listeners: list[Callable[[LearnerRun], None]] = attrs.field(factory=list)
    bot_names: Callable[[str], Sequence[str]] | None = None
    #: The learning model (``[learning.model]``); ``None`` when there is none, and then the
    #: learners that use one do not run (:attr:`model_unavailable` says why).
    model: LearningModel | None = None
    model_unavailable: str | None = None
    persona: PersonaPack | None = None
    #: The learners that do not run, with why (``[learning.learners.NAME] enabled = false``, no
    #: learning model), for ``promptweave learn`` and the replay's report.
    skipped: dict[str, str] = attrs.field(factory=dict)
    _plans: list[_Plan] = attrs.field(factory=list, init=False)
    _waiting: dict[tuple[str, str, str], _Waiting] = attrs.field(factory=dict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _pool: concurrent.futures.ThreadPoolExecutor | None = attrs.field(default=None, init=False)
    _unavailable: str | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        settings = self.config.learning
        for learner in self.learners:
            table = settings.learner(learner.name)
            if table.get("enabled", True) is False:
                log.info("learner %s is off ([learning.learners.%s])", learner.name, learner.name)
                self.skipped[learner.name] = f"[learning.learners.{learner.name}] enabled = false"
                continue
            if learner.uses_model and self.model is None:
                why = self.model_unavailable or "no learning model"
                self.skipped[learner.name] = why
                if settings.enabled:  # said once; `learn`, a replay and its report say it too
                    log.info("learner %s does not run: %s", learner.name, why)
                continue
            self._plans.append(_plan(learner, table))
        unknown = sorted(set(settings.learners) - {learner.name for learner in self.learners})
        for name in unknown:
            log.warning("[learning.learners.%s] names no registered learner; ignored", name)
        self._unavailable = self._why_unavailable()
        if self._unavailable is not None:
            log.info("learning is off: %s", self._unavailable)

    def _why_unavailable(self) -> str | None:
        if not self.config.learning.enabled:
            return "[learning] enabled = false"
        if self.stores.learned is None:
            return self.stores.unavailable or "the store keeps no learned data"
        if not isinstance(self.stores.group_log, LearningSource):
            return "the group log cannot be read after a position (no LearningSource)"
        return None

    @property
    def enabled(self) -> bool:
        """Whether anything can be learned: learning on, stores that keep it, a learner on."""
        return self._unavailable is None and bool(self._plans)

    @property
    def unavailable(self) -> str | None:
        """Why nothing is learned, when it is not."""
        if self._unavailable is None and not self._plans:
            return "every learner is off"
        return self._unavailable

    @property
    def plans(self) -> tuple[Learner, ...]:
        """The learners that run."""
        return tuple(plan.learner for plan in self._plans)

    # -- noting work ---------------------------------------------------------------------------

    def note(self, bot_id: str, group_id: str | None, now: dt.datetime, count: int = 1) -> None:
        """``count`` messages were recorded in the group at ``now``; private chats and groups
        that opted out are not learned from."""
        if not group_id or self._unavailable is not None:
            return
        if self.config.learning.opt_out_groups and self.config.learning.opted_out(bot_id, group_id):
            return
        with self._lock:
            for plan in self._plans:
                # Every recorded message comes here: a scope's record is made once, not built
                # and dropped on every message as setdefault's default would be.
                key = (plan.learner.name, bot_id, group_id)
                waiting = self._waiting.get(key)
                if waiting is None:
                    waiting = self._waiting[key] = _Waiting()
                if waiting.noted == 0:
                    waiting.since = now
                waiting.noted += count

    def note_delivered(self, injection: DeliveredInjection) -> None:
        """Keep the injection of a delivered reply for negative feedback (not for a group that
        opted out). Never raises: a failing store is logged."""
        if self._unavailable is not None or not injection.group_id:
            return
        if self.config.learning.opted_out(injection.bot_id, injection.group_id):
            return
        learned = self.stores.learned
        assert learned is not None
        try:
            learned.remember_injection(injection)
        except STORE_ERRORS as exc:
            log.warning(
                "injection of delivered message %s not kept (negative feedback cannot score "
                "it): %s",
                injection.message_id,
                exc,
            )

    def note_reply(
        self,
        bot_id: str,
        group_id: str,
        message_id: str,
        text: str,
        answering: ChatMessage | None,
        injection: ReplyInjection,
        at: dt.datetime,
    ) -> None:
        """A bot message was delivered with ``injection``: keep it (:meth:`note_delivered`)."""
        self.note_delivered(
            delivered_injection(bot_id, group_id, message_id, text, answering, injection, at)
        )

    def prime(self, now: dt.datetime) -> int:
        """Note one waiting message in every group the group log holds (after a restart, what
        was recorded but not yet learned is learned once ``interval_s`` passes); and delete what
        was learned of groups that opted out. :returns: the groups noted."""
        if self._unavailable is not None:
            return 0
        source = self.stores.group_log
        assert isinstance(source, LearningSource)
        self.forget_opted_out()
        try:
            scopes = source.group_scopes()
        except STORE_ERRORS as exc:
            log.warning("learning cannot list the groups to resume: %s", exc)
            return 0
        for bot_id, group_id in scopes:
            self.note(bot_id, group_id, now)
        return len(scopes)

    def forget_opted_out(self) -> list[LearnedItem]:
        """Delete the items, cursors and injections of every group that opted out."""
        learned = self.stores.learned
        if learned is None or not self.config.learning.opt_out_groups:
            return []
        gone: list[LearnedItem] = []
        try:
            for bot_id, group_id in learned.scopes():
                if self.config.learning.opted_out(bot_id, group_id):
                    gone += self.forget(bot_id, group_id)
                    learned.forget(bot_id, group_id, kind=SPEND_KIND)  # nothing of it is kept
                    learned.reset(bot_id, group_id)
        except STORE_ERRORS as exc:
            log.warning("learned data of opted-out groups not deleted: %s", exc)
        if gone:
            log.info("deleted %d learned items of groups that opted out", len(gone))
        return gone

    def forget(
        self, bot_id: str, group_id: str, *, kind: str | None = None, key: str | None = None
    ) -> list[LearnedItem]:
        """Forget items (one, a kind, or all of the group) and tell the learners that wrote
        them (``Learner.forgotten``). All of the group leaves what learning spent there (kind
        ``spend``, which is no knowledge of the group: the budget goes on counting it); asked by
        its kind, it goes too."""
        learned = self.stores.learned
        if learned is None:
            return []
        if kind is None and key is None:
            kinds = {item.kind for item in learned.items(bot_id, group_id, limit=10**9)}
            gone = []
            for each in sorted(kinds - {SPEND_KIND}):
                gone += learned.forget(bot_id, group_id, kind=each)
        else:
            gone = learned.forget(bot_id, group_id, kind=kind, key=key)
        for plan in self._plans:
            mine = [item for item in gone if item.kind in plan.learner.writes]
            if mine and plan.learner.forgotten is not None:
                plan.learner.forgotten(mine, self.stores)
        return gone

    def forget_member(
        self, bot_id: str, group_id: str, user_id: str, *, kind: str | None = None
    ) -> list[LearnedItem]:
        """Forget what was learned about one member of the group (the items of ``user_id``: their
        teachings, the pick-ups and outcomes of their reactions…; of ``kind`` only, when given),
        each as :meth:`forget` forgets an item. Group-level items (expression pairs, the rhythm)
        belong to no member and stay."""
        learned = self.stores.learned
        if learned is None:
            return []
        gone: list[LearnedItem] = []
        for item in learned.items(bot_id, group_id, kind=kind, user_id=user_id, limit=10**9):
            gone += self.forget(bot_id, group_id, kind=item.kind, key=item.key)
        return gone

    # -- what is due ---------------------------------------------------------------------------

    def due(self, now: dt.datetime) -> list[tuple[Learner, str, str]]:
        """The (learner, bot, group) runs due at ``now``, waiting longest first."""
        if not self.enabled:
            return []
        plans = {plan.learner.name: plan for plan in self._plans}
        found: list[tuple[dt.datetime, str, str, str]] = []
        with self._lock:
            for (name, bot_id, group_id), waiting in self._waiting.items():
                plan = plans.get(name)
                if plan is None or waiting.noted <= 0 or waiting.running:
                    continue
                if waiting.retry_at is not None and now < waiting.retry_at:
                    continue
                since = waiting.since or now
                waited = (now - since).total_seconds()
                if waiting.noted >= plan.min_batch or waited >= plan.interval_s:
                    found.append((since, name, bot_id, group_id))
        found.sort()
        return [(plans[name].learner, bot_id, group_id) for _since, name, bot_id, group_id in found]

    def run_due(
        self, now: dt.datetime, *, threads: bool = True, limit: int | None = None
    ) -> list[LearnerRun]:
        """Run what is due at ``now`` (at most ``limit``, by default ``max_runs_per_tick``)."""
        chosen = self.due(now)[: limit or self.config.learning.max_runs_per_tick]
        if not chosen:
            return []
        if not threads:
            return [
                self.run_one(learner, bot_id, group_id, now) for learner, bot_id, group_id in chosen
            ]
        pool = self._executor()
        futures = [
            pool.submit(self.run_one, learner, bot_id, group_id, now)
            for learner, bot_id, group_id in chosen
        ]
        return [future.result() for future in futures]

    def run_all(
        self,
        now: dt.datetime,
        *,
        scopes: Iterable[tuple[str, str]] | None = None,
        progress: Callable[[LearnerRun], None] | None = None,
    ) -> list[LearnerRun]:
        """Run every learner over every group (or ``scopes``) until each has caught up with the
        group log (``promptweave learn``). One after another, on this thread."""
        if not self.enabled:
            return []
        source = self.stores.group_log
        assert isinstance(source, LearningSource)
        targets = list(scopes) if scopes is not None else source.group_scopes()
        runs: list[LearnerRun] = []
        for bot_id, group_id in targets:
            for plan in self._plans:
                while True:
                    run = self.run_one(plan.learner, bot_id, group_id, now)
                    runs.append(run)
                    if progress is not None:
                        progress(run)
                    if run.status != RunStatus.LEARNED or run.messages < plan.max_batch:
                        break
        return runs

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.config.learning.max_concurrency,
                thread_name_prefix="promptweave-learner",
            )
        return self._pool

    def close(self) -> None:
        """Stop the worker threads (a run in progress finishes)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def serve(self, clock: Callable[[], dt.datetime]) -> None:
        """The live loop's task: every ``tick_s``, run what is due, off the event loop."""
        if not self.enabled:
            return
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        # Listing the groups reads the store: off the event loop, like every run.
        await asyncio.to_thread(self.prime, clock())
        tick = self.config.learning.tick_s
        while True:
            await asyncio.sleep(tick)
            try:
                await asyncio.to_thread(self.run_due, clock())
            except Exception:  # the stage never ends the bot; each run reports its own fault
                log.exception("learning tick failed")

    # -- one run -------------------------------------------------------------------------------

    def run_one(self, learner: Learner, bot_id: str, group_id: str, now: dt.datetime) -> LearnerRun:
        """Run ``learner`` once over the scope's next batch (see the module's docs)."""
        plan = next(p for p in self._plans if p.learner is learner)
        key = (learner.name, bot_id, group_id)
        with self._lock:
            waiting = self._waiting.setdefault(key, _Waiting())
            noted, waiting.running = waiting.noted, True
        start = perf_counter()
        try:
            run = self._run(plan, bot_id, group_id, now)
        finally:
            with self._lock:
                waiting.running = False
        run = attrs.evolve(run, duration_ms=(perf_counter() - start) * 1000)
        with self._lock:
            if run.status == RunStatus.FAILED:
                waiting.failures += 1
                delay = min(
                    self.config.learning.retry_max_s,
                    self.config.learning.retry_s * 2 ** (waiting.failures - 1),
                )
                waiting.retry_at = shifted(now, delay)
                run = attrs.evolve(run, retry_at=waiting.retry_at)
            elif run.status == RunStatus.WAITING_BUDGET:
                waiting.retry_at = run.retry_at  # not a failure: no backoff, the window frees
            elif run.status in (RunStatus.LEASED_ELSEWHERE, RunStatus.LEASE_LOST):
                waiting.since = now  # try again after interval_s: another process learns it
            else:
                waiting.failures, waiting.retry_at = 0, None
                # What was noted while it ran stays waiting; a full batch leaves more to learn.
                waiting.noted = max(0, waiting.noted - noted)
                if run.messages >= plan.max_batch:
                    waiting.noted = max(waiting.noted, 1)
                waiting.since = now if waiting.noted else None
        self._report(run)
        return run

    def _run(self, plan: _Plan, bot_id: str, group_id: str, now: dt.datetime) -> LearnerRun:
        learner = plan.learner
        run_model: RunModel | None = None

        def done(status: str, **details: Any) -> LearnerRun:
            return LearnerRun(
                learner=learner.name,
                bot_id=bot_id,
                group_id=group_id,
                at=now,
                status=status,
                model_calls=() if run_model is None else tuple(run_model.calls),
                **details,
            )

        if self.config.learning.opted_out(bot_id, group_id):
            return done(RunStatus.OPTED_OUT)
        if learner.uses_model and self.model is not None:
            try:
                self.model.budget.check(bot_id, group_id, now)
            except BudgetSpent as spent:
                return done(RunStatus.WAITING_BUDGET, error=str(spent), retry_at=spent.retry_at)
            run_model = RunModel(
                model=self.model,
                learner=learner.name,
                bot_id=bot_id,
                group_id=group_id,
                now=now,
                persona=self.persona,
            )
        learned = self.stores.learned
        source = self.stores.group_log
        assert learned is not None and isinstance(source, LearningSource)
        try:
            if not learned.claim(
                learner.name,
                bot_id,
                group_id,
                self.holder,
                now=now,
                lease_s=self.config.learning.lease_s,
            ):
                return done(RunStatus.LEASED_ELSEWHERE)
        except STORE_ERRORS as exc:
            return done(RunStatus.FAILED, error=f"store: {exc}")
        messages: Sequence[Any] = ()
        try:
            cursor = learned.cursor(learner.name, bot_id, group_id)
            messages = source.messages_after(
                bot_id, group_id, cursor.position, limit=plan.max_batch
            )
            if not messages:
                return done(RunStatus.NOTHING_NEW, position=cursor.position)
            batch = LearnerBatch(
                learner=learner.name,
                bot_id=bot_id,
                group_id=group_id,
                messages=tuple(messages),
                state=cursor.state,
                now=now,
                bot_ids=self._bot_ids(bot_id),
                bot_names=self._bot_names(bot_id),
                settings=plan.settings,
                stores=self.stores,
                config=self.config,
                persona=self.persona,
                model=run_model,
            )
            result = self._call(learner, batch)
            stored = learned.put_items(result.items, caps=plan.caps)
            if learner.stored is not None and stored.stored:
                learner.stored(list(stored.stored), self.stores)
            moved = LearnerCursor(
                position=messages[-1].position,
                state=cursor.state if result.state is None else result.state,
            )
            if not learned.advance(learner.name, bot_id, group_id, self.holder, moved, now=now):
                return done(
                    RunStatus.LEASE_LOST,
                    messages=len(messages),
                    error="the lease expired during the run; another process may learn the batch",
                )
        except BudgetSpent as spent:
            return done(
                RunStatus.WAITING_BUDGET,
                messages=len(messages),
                error=str(spent),
                retry_at=spent.retry_at,
            )
        except ModelUnavailable as exc:
            return done(RunStatus.FAILED, messages=len(messages), error=str(exc))
        except _Timeout as exc:
            return done(RunStatus.FAILED, messages=len(messages), error=str(exc))
        except STORE_ERRORS as exc:
            return done(RunStatus.FAILED, messages=len(messages), error=f"store: {exc}")
        except Exception as exc:  # a learner's fault is its run's, never the bot's
            log.debug("learner %s raised", learner.name, exc_info=True)
            return done(
                RunStatus.FAILED, messages=len(messages), error=f"{type(exc).__name__}: {exc}"
            )
        finally:
            with contextlib.suppress(*STORE_ERRORS):  # the lease expires by itself
                learned.release(learner.name, bot_id, group_id, self.holder)
        return done(
            RunStatus.LEARNED,
            messages=len(messages),
            learned=_by_kind(stored.stored),
            evicted=_by_kind_keys(stored.evicted),
            unchanged=stored.unchanged,
            position=moved.position,
            items=stored.stored,
            notes=result.notes,
        )

    def _call(self, learner: Learner, batch: LearnerBatch) -> LearnerResult:
        outcome = _with_deadline(learner, batch)
        if outcome is None:
            return LearnerResult()
        if not isinstance(outcome, LearnerResult):
            raise TypeError(f"returned {type(outcome).__name__}, not a promptweave LearnerResult")
        for item in outcome.items:
            if not isinstance(item, LearnedItem):
                raise TypeError(f"returned an item {type(item).__name__}, not a LearnedItem")
            if (item.bot_id, item.group_id) != (batch.bot_id, batch.group_id):
                raise ValueError(
                    f"returned an item of bot {item.bot_id} group {item.group_id}, outside its "
                    "batch's scope"
                )
            if item.kind not in learner.writes:
                raise ValueError(f"returned an item of kind {item.kind!r}, not one it writes")
        return outcome

    def _bot_ids(self, bot_id: str) -> frozenset[str]:
        bot = self.config.bots.get(bot_id)
        return frozenset((bot_id, *(bot.peer_bot_ids if bot is not None else ())))

    def _bot_names(self, bot_id: str) -> tuple[str, ...]:
        if self.bot_names is not None:
            return tuple(name for name in self.bot_names(bot_id) if name)
        bot = self.config.bots.get(bot_id)
        return () if bot is None else tuple(n for n in (bot.name, *bot.aliases) if n)

    def _report(self, run: LearnerRun) -> None:
        self.runs.append(run)
        if run.status == RunStatus.FAILED:
            log.warning("%s", run.describe())
        elif run.status == RunStatus.LEARNED and (run.learned or run.notes):
            log.info("%s", run.describe())
        elif run.status in (RunStatus.LEASE_LOST, RunStatus.WAITING_BUDGET):
            log.warning("%s", run.describe())
        else:
            log.debug("%s", run.describe())
        for listener in self.listeners:
            try:
                listener(run)
            except Exception:
                log.exception("a learning listener raised")


#: The source type of the items each section's retrievers found, as negative feedback scores
#: them (``docs/learning.md``, negative feedback); another section's items keep its id.
SOURCE_TYPES = {
    "group_expression": "expression",
    "behavior_reference": "strategy",
    "memory": "memory",
    "knowledge": "knowledge",
}


def delivered_injection(
    bot_id: str,
    group_id: str,
    message_id: str,
    text: str,
    answering: ChatMessage | None,
    injection: ReplyInjection,
    at: dt.datetime,
) -> DeliveredInjection:
    """The injection snapshot kept with a delivered message: every source of its reply, typed
    (``ambient``, ``expression``, ``strategy``, ``memory``, ``knowledge``, ``self_alias``, or the
    section's id), with its id, text hash and preview."""
    sources: list[dict[str, str]] = [
        {"type": "ambient", "id": s.id, "text_hash": s.text_hash, "preview": s.preview}
        for s in injection.ambient
    ]
    sources += [
        {
            "type": SOURCE_TYPES.get(s.section, s.section),
            "id": s.id,
            "text_hash": s.text_hash,
            "preview": s.preview,
            "retriever": s.retriever,
        }
        for s in injection.retrieved
    ]
    sources += [
        {"type": "self_alias", "id": alias, "text_hash": "", "preview": alias}
        for alias in injection.self_aliases
    ]
    sources += [
        {"type": "section", "id": s.section, "text_hash": s.text_hash, "preview": ""}
        for s in injection.sections
    ]
    return DeliveredInjection(
        bot_id=bot_id,
        group_id=group_id,
        message_id=message_id,
        text=text,
        answering=None if answering is None else answering.id,
        sources=sources,
        delivered_at=at,
    )


class _Timeout(Exception):
    pass


def _with_deadline(learner: Learner, batch: LearnerBatch) -> Any:
    """Call the learner in a thread of its own and wait at most its ``timeout_s``: a learner
    that hangs loses its run (its late result is dropped) and holds only its own thread."""
    done = concurrent.futures.Future[Any]()

    def call() -> None:
        try:
            done.set_result(learner.run(batch))
        except BaseException as exc:  # handed to the waiting run
            done.set_exception(exc)

    threading.Thread(target=call, name=f"promptweave-learner-{learner.name}", daemon=True).start()
    try:
        return done.result(timeout=learner.timeout_s)
    except concurrent.futures.TimeoutError:
        raise _Timeout(f"timed out after {learner.timeout_s:g} s") from None


def _by_kind(items: Iterable[LearnedItem]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item.kind] = counts.get(item.kind, 0) + 1
    return counts


def _by_kind_keys(keys: Iterable[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind, _key in keys:
        counts[kind] = counts.get(kind, 0) + 1
    return counts
