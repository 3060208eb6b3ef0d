"""Daemon worker threads: a task that never ends cannot keep the process from exiting.

``concurrent.futures.ThreadPoolExecutor`` joins its workers when the interpreter exits, so one
plugin call that never returns would keep a bot from stopping. :class:`DaemonExecutor` is the
same interface on daemon threads; the stages of a turn, the sync retrievers and the background
jobs run on it.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["IDLE_WORKER_S", "DaemonExecutor"]

T = TypeVar("T")

#: A worker thread with nothing to do for this long exits; the next task starts another.
IDLE_WORKER_S = 30.0


class DaemonExecutor(concurrent.futures.Executor):
    """A thread pool of daemon threads: a task that never ends cannot hold up the interpreter's
    exit (``ThreadPoolExecutor`` joins its workers at exit). Idle workers exit after
    :data:`IDLE_WORKER_S`.

    :param max_workers: the most threads at once; more tasks wait in the queue.
    :param name: the threads' name prefix.
    """

    def __init__(self, max_workers: int = 32, name: str = "promptweave") -> None:
        self._max_workers = max_workers
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._tasks = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        # One count per worker waiting for a task; a submit takes one (that worker will run the
        # task) or else starts a thread. As in ThreadPoolExecutor, which counts the same way.
        self._idle = threading.Semaphore(0)
        self._shutdown = False
        self._numbers = itertools.count(1)

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._tasks.put((future, lambda: fn(*args, **kwargs)))
            if not self._idle.acquire(blocking=False) and self._threads < self._max_workers:
                self._threads += 1
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{next(self._numbers)}", daemon=True
                )
                thread.start()
        return future

    def _work(self) -> None:
        waiting = False
        while True:
            if waiting:
                self._idle.release()
            waiting = True
            try:
                future, task = self._tasks.get(timeout=IDLE_WORKER_S)
            except queue.Empty:
                # Leave only if no submit counted on this worker meanwhile (it took the count).
                with self._lock:
                    if self._idle.acquire(blocking=False):
                        self._threads -= 1
                        return
                waiting = False  # a task is on its way: wait for it without counting again
                continue
            if future is None:  # the shutdown signal
                with self._lock:
                    self._threads -= 1
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = task()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads exit. Busy ones finish their task first, and a hung one
        is never waited for (``wait`` only waits for the queue to drain)."""
        with self._lock:
            self._shutdown = True
            pending = []
            if cancel_futures:
                while True:
                    try:
                        pending.append(self._tasks.get_nowait())
                    except queue.Empty:
                        break
            for _ in range(self._threads):
                self._tasks.put((None, lambda: None))  # type: ignore[arg-type]
        for future, _task in pending:
            if future is not None:
                future.cancel()
