"""Plugin calls, bounded by the turn's deadline and named when they fail
(``docs/plugin_hooks.md``, "When a plugin misbehaves").

A turn's plugin work (routing rules and phrase pools, section renders and overrides, the hooks of
the turn context) runs in *stages*. :meth:`Watchdog.run` runs a stage on a daemon worker thread and
waits for it until the turn's :class:`Deadline`. Inside a stage every plugin call goes through
:func:`call_plugin`, which notes which plugin is running and where. When the deadline passes
during a plugin call, that plugin is *hung*: the stage is left behind, the call is named in the
turn's faults, and the stage runs again on a fresh thread, where every call of the hung plugin at
that place raises :class:`PluginHungError` (isolated and traced like any plugin error) until the
hung call returns. The thread left behind stops as soon as the plugin returns: it never touches
the turn again.

Worker threads are daemon threads (:class:`framework.plugins.workers.DaemonExecutor`), so a
plugin that never returns does not keep the process from exiting.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from framework.errors import PromptweaveError
from framework.plugins.workers import DaemonExecutor

__all__ = [
    "NETWORK_BOUND_FACTOR",
    "RERUN_GRACE_S",
    "Deadline",
    "PluginFault",
    "PluginHungError",
    "Watchdog",
    "call_plugin",
    "record_fault",
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


@attrs.frozen(kw_only=True)
class PluginFault:
    """One plugin misbehaving in one turn, as the trace shows it.

    :param plugin: the plugin's registered name.
    :param where: what was called: ``section 'memory'``, ``decision rule 'gate_x'``, ``hook
        override_section``…
    :param kind: ``hung`` (the deadline passed during the call: left behind), ``skipped`` (an
        earlier call hung and has not returned), ``raised`` or ``wrong_type``.
    :param detail: what happened, in words.
    """

    plugin: str
    where: str
    kind: str
    detail: str = ""

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


class _Abandoned(BaseException):
    """Unwinds a stage that was left behind, once its hung plugin returns. A ``BaseException``, so
    that the ``except Exception`` isolating plugin errors lets it through."""


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
    """One run of one stage on one worker thread."""

    watchdog: Watchdog
    deadline: Deadline
    # The plugin calls in flight with their start, outermost first: a plugin may call another
    # through a hook.
    calls: list[tuple[str, str, float]] = attrs.field(factory=list)
    abandoned: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def execute(self, stage: Callable[[], T]) -> T:
        _local.run = self
        try:
            return stage()
        finally:
            _local.run = None

    def call(
        self,
        plugin: str,
        where: str,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        since = self.watchdog.hung_since(plugin, where)
        if since is not None:
            fault = PluginFault(
                plugin=plugin,
                where=where,
                kind="skipped",
                detail=f"a call of an earlier turn has been running for "
                f"{time.monotonic() - since:.1f} s",
            )
            self.deadline.add(fault)
            raise PluginHungError(fault)
        with self._lock:
            self.calls.append((plugin, where, time.monotonic()))
        try:
            return fn(*args, **kwargs)
        finally:
            with self._lock:
                self.calls.pop()
                abandoned = self.abandoned
            if abandoned:
                self.watchdog.release(plugin, where, self)
                raise _Abandoned

    def abandon(self) -> tuple[str, str, float] | None:
        """Leave the run behind if a plugin call is in flight; the innermost such call (plugin,
        where, start), or ``None``."""
        with self._lock:
            if not self.calls:
                return None
            self.abandoned = True
            return self.calls[-1]


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


def record_fault(fault: PluginFault) -> None:
    """Note a fault of the current stage's turn; outside a stage, log it."""
    run: _StageRun | None = getattr(_local, "run", None)
    if run is None:
        log.warning("%s", fault.describe())
    else:
        run.deadline.add(fault)


@attrs.define
class Watchdog:
    """Runs a runtime's stages within their turn's deadline and remembers the hung plugins.

    :param deadline_s: each turn's budget (``[plugins] turn_deadline_s``); 0 turns it off.
    :param grace_s: see :data:`RERUN_GRACE_S`.
    """

    deadline_s: float
    grace_s: float = RERUN_GRACE_S
    _hung: dict[tuple[str, str], tuple[float, _StageRun]] = attrs.field(factory=dict, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def deadline(self) -> Deadline:
        """A fresh deadline for one turn."""
        return Deadline(seconds=self.deadline_s)

    def hung_since(self, plugin: str, where: str) -> float | None:
        with self._lock:
            found = self._hung.get((plugin, where))
        return None if found is None else found[0]

    def release(self, plugin: str, where: str, run: _StageRun) -> None:
        """The call ``run`` left behind returned: the plugin is called again from now on."""
        with self._lock:
            found = self._hung.get((plugin, where))
            if found is None or found[1] is not run:
                return
            del self._hung[(plugin, where)]
        log.info("%s of plugin %r returned after hanging; called again", where, plugin)

    def hung(self) -> list[tuple[str, str]]:
        """The ``(plugin, where)`` calls hung now."""
        with self._lock:
            return sorted(self._hung)

    def run(self, stage: Callable[[], T], deadline: Deadline) -> T:
        """Run ``stage`` within ``deadline``: on a worker thread, again without any plugin that
        hangs past it.

        Without a deadline (``seconds`` 0), or inside a stage already, ``stage`` runs here. A
        stage slow in the runtime's own work (a store) is waited for: only plugins are cut off.
        """
        if deadline.seconds <= 0 or getattr(_local, "run", None) is not None:
            return stage()
        while True:
            run = _StageRun(watchdog=self, deadline=deadline)
            context = contextvars.copy_context()
            future: concurrent.futures.Future[T] = _stage_workers().submit(
                context.run, run.execute, stage
            )
            hung = self._wait(future, run, max(deadline.remaining(), self.grace_s))
            if hung is None:
                return future.result()
            plugin, where, started = hung
            with self._lock:
                self._hung[(plugin, where)] = (started, run)
            fault = PluginFault(
                plugin=plugin,
                where=where,
                kind="hung",
                detail=f"no answer within the turn's deadline of {deadline.seconds:g} s; "
                "the turn went on without it, and it is skipped until it returns",
            )
            deadline.add(fault)
            log.warning("%s", fault.describe())

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
            deadline = Deadline(seconds=self.deadline_s if seconds is None else seconds)
        try:
            return self.run(lambda: call_plugin(plugin, where, fn, *args, **kwargs), deadline)
        except PluginHungError as exc:
            hung = PluginFault(plugin=plugin, where=where, kind="hung")
            for fault in deadline.faults:
                if attrs.evolve(fault, detail="") == hung:
                    raise PluginHungError(fault) from exc
            raise

    def _wait(
        self, future: concurrent.futures.Future[T], run: _StageRun, timeout: float
    ) -> tuple[str, str, float] | None:
        """Wait for the stage; the plugin call it was left behind in, or ``None`` when done."""
        while True:
            try:
                future.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                hung = run.abandon()
                if hung is not None:
                    return hung
                timeout = self.grace_s  # the runtime's own work: keep waiting
            except BaseException:
                return None  # raised: the caller gets the exception from the future
            else:
                return None

    def close(self) -> None:
        """Forget the hung calls. The stage workers are the process's: idle ones exit by
        themselves, and a hung one is left to the interpreter's exit."""
        with self._lock:
            self._hung.clear()
