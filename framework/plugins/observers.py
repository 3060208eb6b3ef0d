"""The observation hooks, called off the turn's path (``docs/plugin_hooks.md``, "Observation").

``observe_message_recorded`` and ``observe_reply_delivered`` tell plugins, after the fact, what the
recorder wrote. The recorder only queues the observation (:meth:`Observations.submit`, which never
blocks); one dispatcher thread takes the observations in order and calls each implementation on a
worker of its own, waiting for it at most :attr:`Observations.call_timeout_s`. An implementation
that raises is logged and traced as a :class:`PluginFault` (``raised``); one that does not answer in
time is left behind (``hung``) and skipped (``skipped``) until it returns, so a hung observer ties
up one worker, never the dispatcher, the turn or the loop. When the queue is full the observation
is dropped, logged and counted (:attr:`Observations.dropped`).

Observers receive frozen records and their answers are ignored, so they cannot change what the bot
does: a replay repeats exactly with or without them.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptweave.plugins.watchdog import PluginFault, record_fault
from promptweave.plugins.workers import DaemonExecutor

__all__ = [
    "CLOSE_WAIT_S",
    "FAULTS_KEPT",
    "OBSERVATION_QUEUE_MAX",
    "OBSERVE_CALL_TIMEOUT_S",
    "OBSERVE_WORKERS_MAX",
    "Observations",
]

log = logging.getLogger("promptweave")

#: The most observations waiting for the dispatcher; more are dropped (logged and counted).
OBSERVATION_QUEUE_MAX = 1000
#: How long the dispatcher waits for one implementation before it counts as hung.
OBSERVE_CALL_TIMEOUT_S = 5.0
#: The most observer calls running at once (hung ones included).
OBSERVE_WORKERS_MAX = 8
#: How long closing a runtime waits for the observations still queued.
CLOSE_WAIT_S = 10.0
#: The faults kept for inspection (:attr:`Observations.faults`), the newest last.
FAULTS_KEPT = 100

#: One implementation to call: its plugin's name and the call taking the hook's arguments.
Call = tuple[str, Callable[..., Any]]


@attrs.frozen
class _Observation:
    hook_name: str
    calls: Sequence[Call]
    kwargs: dict[str, Any]


@attrs.define(eq=False)
class Observations:
    """The bounded queue of observations and the thread that delivers them.

    :param queue_max: see :data:`OBSERVATION_QUEUE_MAX`.
    :param call_timeout_s: see :data:`OBSERVE_CALL_TIMEOUT_S`.
    """

    queue_max: int = OBSERVATION_QUEUE_MAX
    call_timeout_s: float = OBSERVE_CALL_TIMEOUT_S
    #: Observations dropped because the queue was full.
    dropped: int = attrs.field(default=0, init=False)
    #: The newest faults of observers, oldest first.
    faults: deque[PluginFault] = attrs.field(factory=lambda: deque(maxlen=FAULTS_KEPT), init=False)
    _queue: queue.Queue[_Observation | None] | None = attrs.field(default=None, init=False)
    _dispatcher: threading.Thread | None = attrs.field(default=None, init=False)
    _workers: DaemonExecutor | None = attrs.field(default=None, init=False)
    _hung: dict[tuple[str, str], float] = attrs.field(factory=dict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def submit(self, hook_name: str, calls: Sequence[Call], **kwargs: Any) -> bool:
        """Queue one observation for ``calls``; never blocks.

        :returns: ``False`` when there is nothing to call or the observation was dropped.
        """
        if not calls:
            return False
        with self._lock:
            if self._queue is None:
                self._queue = queue.Queue(maxsize=self.queue_max)
                self._workers = DaemonExecutor(
                    max_workers=OBSERVE_WORKERS_MAX, name="promptweave-observe"
                )
                # A daemon thread: an observer stuck forever cannot keep the process from exiting.
                self._dispatcher = threading.Thread(
                    target=self._dispatch,
                    args=(self._queue, self._workers),
                    name="promptweave-observations",
                    daemon=True,
                )
                self._dispatcher.start()
            observations = self._queue
        try:
            observations.put_nowait(_Observation(hook_name, tuple(calls), kwargs))
        except queue.Full:
            with self._lock:
                self.dropped += 1
                dropped = self.dropped
            log.warning(
                "%s: the observation queue is full (%d waiting); observation dropped "
                "(%d dropped so far)",
                hook_name,
                self.queue_max,
                dropped,
            )
            return False
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every queued observation was handed to its observers (a hung one counts as
        handed once it was left behind).

        :returns: ``True`` when done within ``timeout``.
        """
        observations = self._queue
        if observations is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with observations.all_tasks_done:
            while observations.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                observations.all_tasks_done.wait(remaining)
        return True

    def hung(self) -> list[tuple[str, str]]:
        """``(plugin, where)`` of each observer call left behind that has not returned yet."""
        with self._lock:
            return sorted(self._hung)

    def close(self, timeout: float = CLOSE_WAIT_S) -> bool:
        """Wait (at most ``timeout``) for the observations queued, then stop the dispatcher; a
        later :meth:`submit` starts another. Observer calls still running are left behind.

        :returns: ``True`` when every queued observation was handed to its observers.
        """
        done = self.wait(timeout)
        with self._lock:
            observations, self._queue = self._queue, None
            self._workers = None
            self._dispatcher = None
        if observations is not None:
            # Past the bound of the queue: the stop signal is never dropped.
            with observations.mutex:
                observations.queue.append(None)
                observations.unfinished_tasks += 1
                observations.not_empty.notify()
        return done

    def _dispatch(
        self, observations: queue.Queue[_Observation | None], workers: DaemonExecutor
    ) -> None:
        while True:
            observation = observations.get()
            if observation is None:  # closed: what was queued before is done
                observations.task_done()
                workers.shutdown(wait=False)
                return
            try:
                for plugin, call in observation.calls:
                    self._call(workers, observation.hook_name, plugin, call, observation.kwargs)
            except Exception:  # the dispatcher's own fault must not stop it
                log.exception("observation %s failed", observation.hook_name)
            finally:
                observations.task_done()

    def _call(
        self,
        workers: DaemonExecutor,
        hook_name: str,
        plugin: str,
        call: Callable[..., Any],
        kwargs: dict[str, Any],
    ) -> None:
        where = f"hook {hook_name}"
        key = (plugin, where)
        with self._lock:
            since = self._hung.get(key)
        if since is not None:
            self._fault(
                plugin,
                where,
                "skipped",
                f"an earlier call has been running for {time.monotonic() - since:.1f} s",
            )
            return
        started = time.monotonic()
        future = workers.submit(call, **kwargs)
        # Waited for with ``wait``: an observer raising ``TimeoutError`` of its own is its error.
        concurrent.futures.wait((future,), self.call_timeout_s)
        if not future.done():
            with self._lock:
                self._hung[key] = started
            future.add_done_callback(lambda _done: self._returned(key))
            self._fault(
                plugin,
                where,
                "hung",
                f"no answer within {self.call_timeout_s:g} s; left behind, and skipped until "
                "it returns",
            )
            return
        exc = future.exception()
        if exc is not None:
            log.error("%s of plugin %r raised", where, plugin, exc_info=exc)
            self._fault(plugin, where, "raised", f"{type(exc).__name__}: {exc}")

    def _returned(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._hung.pop(key, None)

    def _fault(self, plugin: str, where: str, kind: str, detail: str) -> None:
        fault = PluginFault(plugin=plugin, where=where, kind=kind, detail=detail)
        with self._lock:
            self.faults.append(fault)
        if kind == "skipped":
            # The hang was logged when it happened; a skip on every observation is not news.
            log.info("%s", fault.describe())
        else:
            # No turn runs on the dispatcher: the fault is logged on the ``promptweave`` logger.
            record_fault(fault)
