"""Plugin calls, bounded by the turn's deadline and named when they fail
(``docs/plugin_hooks.md``, "When a plugin misbehaves").

A turn's plugin work (routing rules and phrase pools, section renders and overrides, the hooks of
the turn context) runs in *stages*. :meth:`Watchdog.run` runs a stage on the caller's thread;
inside it every plugin call goes through :func:`call_plugin`. A call of a plugin the watchdog
trusts (the built-in plugins and the ``contrib`` plugins shipped with promptweave) is made there
and then; a call of any other plugin is handed to a daemon worker thread and waited for until the
turn's :class:`Deadline`. When the deadline passes during such a call, that plugin is *hung*: the
call is left behind on its worker, named in the turn's faults, and raises
:class:`PluginHungError` in the stage (isolated and traced like any plugin error), and every later
call of the hung plugin at that place raises it at once, without being made, until the hung call
returns. What the call left behind returns is thrown away: it never touches the turn again.

A hook that reaches the network (``submit_request``, ``fetch_image``, ``summarize_session``,
``describe_image``) is bounded by :meth:`Watchdog.call` with its own budget; such a call is handed
to a worker whoever made the plugin, since its own timeout is the plugin's to keep.

In the live loop a stage runs off the event loop's thread (:meth:`Watchdog.arun`, one worker
call for the whole stage) whenever a plugin the watchdog does not trust takes part in it, and a
hook the loop calls on its own (``parse_event``, the synchronous part of ``send_message`` and
``submit_request_async``) goes through :meth:`Watchdog.acall`: a plugin that hangs or is merely
slow holds its own turn, never another conversation's.

A plugin that hung is *quarantined*: every call of it, at any place, is skipped while its hung
call runs and for ``[plugins] quarantine_s`` after it returned, so its threads cannot pile up.
Every fault's detail is cut at :data:`DETAIL_MAX_CHARS` characters (a plugin's ten-megabyte
answer never reaches a trace or a log whole).

Worker threads are daemon threads (:class:`promptweave.plugins.workers.DaemonExecutor`), so a
plugin that never returns does not keep the process from exiting.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from promptweave.errors import PromptweaveError
from promptweave.plugins.workers import DaemonExecutor

__all__ = [
    "DETAIL_MAX_CHARS",
    "NETWORK_BOUND_FACTOR",
    "OFF_LOOP_STAGES_MAX",
    "QUARANTINE_S",
    "RERUN_GRACE_S",
    "Deadline",
    "PluginFault",
    "PluginHungError",
    "Watchdog",
    "call_in",
    "call_plugin",
    "current_stage",
    "cut",
    "on_worker",
    "raised_fault",
    "record_fault",
    "turn_faults",
    "type_name",
]

log = logging.getLogger("promptweave")

T = TypeVar("T")

#: After the deadline has passed, each run of a stage (once a hung plugin is left behind) may take
#: this long before the plugin it is waiting on counts as hung too.
RERUN_GRACE_S = 0.25
#: The hooks that call a model or fetch from the network (``submit_request``, ``fetch_image``,
#: ``summarize_session``, ``describe_image``) are bounded by ``[provider] timeout_s`` times this,
#: not by the turn's deadline: their own timeout should fire first.
NETWORK_BOUND_FACTOR = 2.0
#: The most characters of a fault's detail (and of any value a fault quotes) that a trace or a
#: log line carries; the rest is cut, with the cut length said.
DETAIL_MAX_CHARS = 300
#: How long a plugin that hung stays quarantined after its hung call returned, by default
#: (``[plugins] quarantine_s``).
QUARANTINE_S = 60.0
#: Worker threads for the stages the live loop runs off its thread (one per turn in a stage at
#: most; ``[loop] max_in_flight`` bounds the turns).
OFF_LOOP_STAGES_MAX = 64


def cut(text: str, limit: int = DETAIL_MAX_CHARS) -> str:
    """``text`` cut at ``limit`` characters, saying how long it was when it is cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (cut, {len(text)} chars)"


def _cut_detail(value: object) -> str:
    return cut(str(value))


@attrs.frozen(kw_only=True)
class PluginFault:
    """One plugin misbehaving in one turn, as the trace shows it.

    :param plugin: the plugin's registered name.
    :param where: what was called: ``section 'memory'``, ``decision rule 'gate_x'``, ``hook
        override_section``…
    :param kind: ``hung`` (the deadline passed during the call: left behind), ``skipped`` (the
        plugin is quarantined: an earlier call hung), ``raised`` or ``wrong_type``.
    :param detail: what happened, in words, cut at :data:`DETAIL_MAX_CHARS`.
    """

    plugin: str
    where: str
    kind: str
    detail: str = attrs.field(default="", converter=_cut_detail)

    def describe(self) -> str:
        return f"{self.where} of plugin {self.plugin!r} {self.kind}: {self.detail}".rstrip(": ")

    def to_json(self) -> dict[str, str]:
        return {
            "plugin": self.plugin,
            "where": self.where,
            "kind": self.kind,
            "detail": self.detail,
        }


class PluginHungError(PromptweaveError):
    """A plugin call was not made: an earlier call of the same plugin at the same place hung past
    a turn's deadline and has not returned yet."""

    def __init__(self, fault: PluginFault) -> None:
        self.fault = fault
        super().__init__(fault.describe())


def type_name(value: object) -> str:
    """``int``, ``bytes``, ``list``: how a fault names a wrong return value."""
    return type(value).__name__


@attrs.define
class Deadline:
    """The time budget of one turn's plugin work, and the faults met on the way.

    :param seconds: the budget; 0 means none (every stage runs on the caller's thread, unbounded).
    """

    seconds: float
    started: float = attrs.field(factory=time.monotonic)
    faults: list[PluginFault] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def remaining(self) -> float:
        return max(0.0, self.started + self.seconds - time.monotonic())

    def renewed(self) -> Deadline:
        """A fresh budget of the same length from now, noting its faults with this one's (the
        live loop gives each stage of a turn its own budget and one list of faults)."""
        return Deadline(seconds=self.seconds, faults=self.faults, lock=self._lock)

    def add(self, fault: PluginFault) -> None:
        """Note a fault once (a measure plugin may fail on every message of a turn); a call
        skipped in the turn its plugin hung in is that hang, noted already."""
        with self._lock:
            if fault in self.faults:
                return
            if fault.kind == "skipped" and any(
                (f.plugin, f.where, f.kind) == (fault.plugin, fault.where, "hung")
                for f in self.faults
            ):
                return
            self.faults.append(fault)

    def trace(self) -> list[dict[str, str]]:
        with self._lock:
            return [fault.to_json() for fault in self.faults]


_local = threading.local()

# The stage workers are generic, so every runtime of the process shares them: a process that
# builds many runtimes (tests, one per bot) does not start a thread for each.
_stage_executor: DaemonExecutor | None = None
_stage_executor_lock = threading.Lock()


def _stage_workers() -> DaemonExecutor:
    global _stage_executor
    with _stage_executor_lock:
        if _stage_executor is None:
            _stage_executor = DaemonExecutor(max_workers=256, name="promptweave-stage")
        return _stage_executor


@attrs.define(eq=False)
class _StageRun:
    """One run of one stage on the caller's thread.

    :param bound_all: hand every plugin call to a worker, trusted or not (a network-bound hook).
    """

    watchdog: Watchdog
    deadline: Deadline
    bound_all: bool = False

    def execute(self, stage: Callable[[], T]) -> T:
        outer: _StageRun | None = getattr(_local, "run", None)
        _local.run = self
        try:
            return stage()
        finally:
            _local.run = outer

    def call(
        self,
        plugin: str,
        where: str,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        watchdog = self.watchdog
        skipped = watchdog.quarantined(plugin, where)
        if skipped is not None:
            self.deadline.add(skipped)
            raise PluginHungError(skipped)
        try:
            if not self.bound_all and watchdog.trusted(plugin):
                return fn(*args, **kwargs)
            return self._bounded(plugin, where, fn, args, kwargs)
        except PluginHungError:
            raise
        except Exception as exc:
            # Named here, whoever catches it: the caller falls back, the turn's trace keeps it.
            self.deadline.add(raised_fault(plugin, where, exc))
            raise

    def trusts(self, plugin: str) -> bool:
        """Whether :meth:`call` calls ``plugin`` right here, as it is (unless it is quarantined):
        the watchdog trusts it and this stage does not hand every call to a worker."""
        return not self.bound_all and self.watchdog.trusted(plugin)

    def call_trusted(self, plugin: str, where: str, fn: Callable[[Any], T], arg: Any) -> T:
        """:meth:`call` of ``fn(arg)`` for a ``plugin`` that :meth:`trusts` said yes to, without
        asking again: made right here, an error named in the turn's faults and raised, as
        :meth:`call` makes it. While any plugin is hung or quarantined, :meth:`call` decides (the
        quarantine of this plugin applies to it as to every call)."""
        watchdog = self.watchdog
        if watchdog._hung or watchdog._quarantined:
            return self.call(plugin, where, fn, (arg,), {})
        try:
            return fn(arg)
        except PluginHungError:
            raise
        except Exception as exc:
            self.deadline.add(raised_fault(plugin, where, exc))
            raise

    def _bounded(
        self,
        plugin: str,
        where: str,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        """The call on a worker thread, waited for until the deadline (at least the grace)."""
        started = time.monotonic()
        context = contextvars.copy_context()
        future: concurrent.futures.Future[T] = _stage_workers().submit(
            context.run, _call_unbounded, fn, args, kwargs
        )
        # Waited for with ``wait``, not ``result(timeout=…)``: a plugin raising ``TimeoutError``
        # of its own must reach the stage as that plugin's error, not as a hang.
        concurrent.futures.wait((future,), max(self.deadline.remaining(), self.watchdog.grace_s))
        if future.done():
            return future.result()
        fault = self.watchdog.hang(plugin, where, started, future, self.deadline.seconds)
        self.deadline.add(fault)
        raise PluginHungError(fault)


def raised_fault(plugin: str, where: str, exc: BaseException) -> PluginFault:
    """The fault of a plugin call that raised ``exc``."""
    return PluginFault(
        plugin=plugin, where=where, kind="raised", detail=f"{type(exc).__name__}: {exc}"
    )


def on_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
    """``fn(*args, **kwargs)`` on a stage worker thread (a daemon thread), with this context."""
    context = contextvars.copy_context()
    return _stage_workers().submit(context.run, _call_unbounded, fn, args, kwargs)


def _call_unbounded(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    """A plugin call on a worker: a plugin it calls in turn (through a hook) is called as it is,
    within the budget of the call that reached it."""
    _local.run = None
    return fn(*args, **kwargs)


def current_stage() -> _StageRun | None:
    """The stage running on this thread (:meth:`Watchdog.run`), or ``None``: a caller that makes
    many plugin calls in one stage (the sections of a turn) asks once, and calls a plugin the
    stage :meth:`~_StageRun.trusts` with :meth:`~_StageRun.call_trusted`."""
    return getattr(_local, "run", None)


def call_in(
    run: _StageRun | None, trusted: bool, plugin: str, where: str, fn: Callable[[Any], T], arg: Any
) -> T:
    """:func:`call_plugin` of ``fn(arg)`` for a caller that looked the stage up once
    (:func:`current_stage`, ``run``) and asked once whether it :meth:`~_StageRun.trusts` the
    plugin (``trusted``): the many calls of one stage (the sections of a turn) skip both."""
    if run is None:
        return fn(arg)
    if trusted:
        return run.call_trusted(plugin, where, fn, arg)
    return run.call(plugin, where, fn, (arg,), {})


def call_plugin(plugin: str, where: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call a plugin's ``fn(*args, **kwargs)`` inside the current stage, which names it if it
    hangs.

    Outside a stage (a runtime without deadline, a plugin called directly) the call is made as it
    is.

    :raises PluginHungError: an earlier call of ``plugin`` at ``where`` hung and has not returned.
    """
    run: _StageRun | None = getattr(_local, "run", None)
    if run is None:
        return fn(*args, **kwargs)
    return run.call(plugin, where, fn, args, kwargs)


#: The faults of the live loop's turn running in this task (its hooks called on the event loop
#: note theirs there); ``None`` outside a turn.
turn_faults: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "promptweave_turn_faults", default=None
)


def record_fault(fault: PluginFault) -> None:
    """Note a fault of the current stage's turn (or of the live loop's turn in this task);
    outside both, log it."""
    run: _StageRun | None = getattr(_local, "run", None)
    if run is not None:
        run.deadline.add(fault)
        return
    collector = turn_faults.get()
    if collector is not None:
        collector.add(fault)
    else:
        log.warning("%s", fault.describe())


_off_loop_executor: DaemonExecutor | None = None


def _off_loop_workers() -> DaemonExecutor:
    global _off_loop_executor
    with _stage_executor_lock:
        if _off_loop_executor is None:
            _off_loop_executor = DaemonExecutor(
                max_workers=OFF_LOOP_STAGES_MAX, name="promptweave-offloop"
            )
        return _off_loop_executor


@attrs.define
class Watchdog:
    """Runs a runtime's stages within their turn's deadline and remembers the hung plugins.

    :param deadline_s: each turn's budget (``[plugins] turn_deadline_s``); 0 turns it off.
    :param grace_s: see :data:`RERUN_GRACE_S`.
    :param trusted: whether a plugin, by its registered name, is called on the stage's own
        thread without a bound (the runtime trusts the plugins shipped with promptweave); by
        default none is.
    """

    deadline_s: float
    grace_s: float = RERUN_GRACE_S
    trusted: Callable[[str], bool] = attrs.field(default=lambda plugin: False, repr=False)
    quarantine_s: float = QUARANTINE_S
    _hung: dict[tuple[str, str], tuple[float, object]] = attrs.field(factory=dict, repr=False)
    #: Plugins whose hung calls all returned, and when their quarantine ends (monotonic time).
    _quarantined: dict[str, tuple[float, str]] = attrs.field(factory=dict, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def deadline(self) -> Deadline:
        """A fresh deadline for one turn."""
        return Deadline(seconds=self.deadline_s)

    def hung_since(self, plugin: str, where: str) -> float | None:
        """When the hung call of ``plugin`` at ``where`` started, or ``None``."""
        if not self._hung:
            # Nothing hung, the usual case: no lock taken (a dict's size is read whole). A hang
            # noted at this very moment by another thread is seen by the next call.
            return None
        with self._lock:
            found = self._hung.get((plugin, where))
        return None if found is None else found[0]

    def quarantined(self, plugin: str, where: str) -> PluginFault | None:
        """The ``skipped`` fault of a call of ``plugin`` at ``where`` while the plugin is
        quarantined (a call of it hung and has not returned, or returned less than
        :attr:`quarantine_s` ago), else ``None``."""
        if not self._hung and not self._quarantined:
            return None  # nothing hung, the usual case: no lock taken
        now = time.monotonic()
        with self._lock:
            running = [
                (since, place) for (name, place), (since, _) in self._hung.items() if name == plugin
            ]
            ended = self._quarantined.get(plugin)
            if ended is not None and ended[0] <= now:
                del self._quarantined[plugin]
                ended = None
        if running:
            since, place = min(running)
            detail = f"quarantined: its call at {place} has been running for {now - since:.1f} s"
        elif ended is not None:
            detail = (
                f"quarantined for {ended[0] - now:.1f} s more: its call at {ended[1]} hung "
                "and returned late"
            )
        else:
            return None
        return PluginFault(plugin=plugin, where=where, kind="skipped", detail=detail)

    def hang(
        self,
        plugin: str,
        where: str,
        started: float,
        call: concurrent.futures.Future[Any],
        waited_s: float,
    ) -> PluginFault:
        """Note the call left behind as hung until it returns (the plugin is quarantined), log it
        once, and give its ``hung`` fault."""
        with self._lock:
            self._hung[(plugin, where)] = (started, call)
        call.add_done_callback(lambda _done: self.release(plugin, where, call))
        fault = PluginFault(
            plugin=plugin,
            where=where,
            kind="hung",
            detail=f"no answer within the deadline of {waited_s:g} s; the turn went on without "
            "it, and the plugin is quarantined until it returns and "
            f"{self.quarantine_s:g} s more",
        )
        log.warning("%s", fault.describe())
        return fault

    def release(self, plugin: str, where: str, call: object) -> None:
        """The call left behind returned: the plugin is called again once its quarantine ends."""
        with self._lock:
            found = self._hung.get((plugin, where))
            if found is None or found[1] is not call:
                return
            del self._hung[(plugin, where)]
            if self.quarantine_s > 0:
                self._quarantined[plugin] = (time.monotonic() + self.quarantine_s, where)
        log.info(
            "%s of plugin %r returned after hanging; called again in %g s",
            where,
            plugin,
            self.quarantine_s,
        )

    def hung(self) -> list[tuple[str, str]]:
        """The ``(plugin, where)`` calls hung now."""
        with self._lock:
            return sorted(self._hung)

    def run(self, stage: Callable[[], T], deadline: Deadline) -> T:
        """Run ``stage`` within ``deadline``, on the caller's thread: each call of a plugin not
        trusted is bounded by what is left of the deadline.

        Without a deadline (``seconds`` 0), or inside a stage already, ``stage`` runs as it is. A
        stage slow in the runtime's own work (a store) is waited for: only plugins are cut off.
        """
        if deadline.seconds <= 0 or getattr(_local, "run", None) is not None:
            return stage()
        return _StageRun(watchdog=self, deadline=deadline).execute(stage)

    def call(
        self,
        plugin: str,
        where: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        seconds: float | None = None,
        deadline: Deadline | None = None,
        **kwargs: Any,
    ) -> T:
        """One plugin call as a stage of its own.

        :param seconds: its budget (the turn deadline by default; 0: unbounded).
        :param deadline: the turn's deadline, which then also collects the fault.
        :raises PluginHungError: the call hung past its budget (the error's fault says so), or
            an earlier one has not returned.
        """
        if deadline is None:
            outer: _StageRun | None = getattr(_local, "run", None)
            if seconds is None and outer is not None:
                return call_plugin(plugin, where, fn, *args, **kwargs)  # within the stage's own
            budget = self.deadline_s if seconds is None else seconds
            if outer is not None:
                # A budget of its own; its faults are the turn's, as the stage's are.
                shared = outer.deadline
                deadline = Deadline(seconds=budget, faults=shared.faults, lock=shared._lock)
            else:
                deadline = Deadline(seconds=budget)
        if deadline.seconds <= 0:
            return call_plugin(plugin, where, fn, *args, **kwargs)
        run = _StageRun(watchdog=self, deadline=deadline, bound_all=seconds is not None)
        return run.execute(lambda: run.call(plugin, where, fn, args, kwargs))

    async def arun(self, stage: Callable[[], T], deadline: Deadline, *, off_loop: bool) -> T:
        """:meth:`run` for the event loop: with ``off_loop`` (a plugin not trusted takes part in
        the stage), the whole stage runs on one worker thread and is awaited, so nothing in it
        can hold the event loop; else on the loop's thread as :meth:`run` does (the trusted
        plugins and the runtime's own work only).

        Cancelling the caller leaves the stage to finish on its worker; its plugin calls are
        bounded by ``deadline`` as in :meth:`run`.
        """
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        if not off_loop or deadline.seconds <= 0:
            return self.run(stage, deadline)
        context = contextvars.copy_context()
        run = _StageRun(watchdog=self, deadline=deadline)
        future = _off_loop_workers().submit(context.run, _off_loop_stage, run, stage)
        return await asyncio.wrap_future(future)

    async def acall(
        self,
        plugin: str,
        where: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        deadline: Deadline,
        **kwargs: Any,
    ) -> T:
        """One plugin call from the event loop, bounded by ``deadline`` without holding the
        loop: a plugin the watchdog trusts, or an ``async def`` (whose call only makes its
        coroutine), is called on the loop's thread; any other call runs on a worker thread and is
        awaited. A raise, a hang and a skipped call are noted in ``deadline``.

        :raises PluginHungError: the call hung past the deadline, or the plugin is quarantined.
        """
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        skipped = self.quarantined(plugin, where)
        if skipped is not None:
            deadline.add(skipped)
            raise PluginHungError(skipped)
        try:
            if (
                deadline.seconds <= 0
                or self.trusted(plugin)
                or getattr(fn, "is_async", False)
                or inspect.iscoroutinefunction(fn)
            ):
                return fn(*args, **kwargs)
            started = time.monotonic()
            context = contextvars.copy_context()
            future: concurrent.futures.Future[T] = _stage_workers().submit(
                context.run, _call_unbounded, fn, args, kwargs
            )
            waited = asyncio.wrap_future(future)
            # Waited for with ``wait``, not ``wait_for``: a plugin raising ``TimeoutError`` of its
            # own is that plugin's error, not a hang.
            await asyncio.wait((waited,), timeout=max(deadline.remaining(), self.grace_s))
            if waited.done():
                return waited.result()
            waited.cancel()
            fault = self.hang(plugin, where, started, future, deadline.seconds)
            deadline.add(fault)
            raise PluginHungError(fault)
        except PluginHungError:
            raise
        except Exception as exc:
            deadline.add(raised_fault(plugin, where, exc))
            raise

    async def awaited(
        self,
        plugin: str,
        where: str,
        pending: Awaitable[T],
        *,
        seconds: float,
        deadline: Deadline,
    ) -> T:
        """``pending`` (what an async hook gave) awaited for at most ``seconds``; past them the
        wait is cancelled and the plugin named as hung (not quarantined: nothing of it is left
        running once its task is cancelled). A raise is noted in ``deadline`` too.

        :raises PluginHungError: it took longer.
        """
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        bound = asyncio.timeout(seconds)
        try:
            async with bound:
                return await pending
        except TimeoutError as exc:
            if not bound.expired():  # the plugin's own TimeoutError: its error, not a hang
                deadline.add(raised_fault(plugin, where, exc))
                raise
            fault = PluginFault(
                plugin=plugin,
                where=where,
                kind="hung",
                detail=f"its awaitable did not finish within {seconds:g} s; cancelled",
            )
            deadline.add(fault)
            log.warning("%s", fault.describe())
            raise PluginHungError(fault) from None
        except Exception as exc:
            deadline.add(raised_fault(plugin, where, exc))
            raise

    def close(self) -> None:
        """Forget the hung calls. The stage workers are the process's: idle ones exit by
        themselves, and a hung one is left to the interpreter's exit."""
        with self._lock:
            self._hung.clear()
            self._quarantined.clear()


def _off_loop_stage(run: _StageRun, stage: Callable[[], T]) -> T:
    """A stage on an off-loop worker: what the worker's last task left behind is not read."""
    _local.run = None
    return run.execute(stage)
