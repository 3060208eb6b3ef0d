"""Run a turn's retrievers concurrently, each within its timeout, and trace what each did.

``docs/design.md#retrieval-order``: every retrieval step records its duration and a trace. Async retrievers
run on the event loop; sync ones in a worker thread (like :func:`asyncio.to_thread`, but on the
runner's own pool of daemon threads, so a sync retriever that hangs past its timeout never holds up
the turn, the shutdown of the event loop or the exit of the process). A retriever that raises or
times out contributes nothing; the trace says why and the turn goes on. A sync retriever still
running from an earlier turn is skipped (``hung``) until it returns, so a hung one never ties up
more than one thread.

When every retriever of a turn runs inline (a sync function that says it does not block, or one
skipped for the turn), :meth:`RetrievalRunner.run_inline` runs them one after the other on the
caller's thread with no event loop at all: the synchronous :meth:`promptweave.Promptweave.render`
takes that path, and awaits :meth:`RetrievalRunner.run` only when some retriever waits.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.plugins.contributions import Retriever
from promptweave.plugins.registry import Registered
from promptweave.plugins.workers import DaemonExecutor
from promptweave.retrieval.query import RetrievalHit, RetrievalQuery, RetrievalResult, SkipReason
from promptweave.store.sqlite import StoreUnavailableError

__all__ = ["RetrievalOutcome", "RetrievalRunner", "RetrieverTrace"]

log = logging.getLogger("promptweave.retrieval")

#: The trace shortens hit texts to this many characters.
TRACE_TEXT_CHARS = 120
#: The trace lists at most this many hits of one retriever.
TRACE_HITS_MAX = 50
#: The most items one retriever contributes to a turn; more are cut (and the trace says so).
ITEMS_MAX = 1000


def _ms(start: float) -> float:
    """Milliseconds since ``start``, to the microsecond (``round(…, 3)`` costs more than a
    retriever's trace)."""
    return int((time.perf_counter() - start) * 1_000_000 + 0.5) / 1000


@attrs.frozen(kw_only=True)
class RetrieverTrace:
    """What one retriever did in one turn.

    :param status: ``hit`` (it returned items), ``empty`` (it searched and found nothing) or
        ``skipped`` (see ``reason``).
    :param reason: a :class:`SkipReason` value when skipped.
    :param error: the exception, when ``reason`` is ``error``.
    """

    retriever: str
    plugin: str
    section: str
    status: str
    duration_ms: float
    hits: tuple[RetrievalHit, ...] = ()
    reason: str | None = None
    error: str | None = None
    details: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "retriever": self.retriever,
            "plugin": self.plugin,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "hits": [{**hit.to_json(), "text": hit.text[:TRACE_TEXT_CHARS]} for hit in self.hits],
        }
        if self.reason is not None:
            data["reason"] = self.reason
        if self.error is not None:
            data["error"] = self.error
        if self.details:
            data["details"] = dict(self.details)
        return data


@attrs.frozen(kw_only=True)
class RetrievalOutcome:
    """Everything the retrievers of one turn produced.

    :param items: the retrievers' items per section id, in retriever registration order.
    :param traces: one trace per retriever, in registration order.
    :param duration_ms: the wall time of the whole stage.
    """

    query: RetrievalQuery
    items: Mapping[str, tuple[Any, ...]]
    traces: tuple[RetrieverTrace, ...]
    duration_ms: float

    def trace(self) -> dict[str, Any]:
        """The retrieval trace: the query, then per section what each retriever found."""
        sections: dict[str, list[dict[str, Any]]] = {}
        for entry in self.traces:
            sections.setdefault(entry.section, []).append(entry.to_json())
        return {
            "query": self.query.text,
            "allow_persistent_memory": self.query.allow_persistent_memory,
            "sections": sections,
        }

    def durations(self) -> dict[str, float]:
        """``retrieval`` for the stage and ``retrieval.<name>`` for each retriever."""
        found = {"retrieval": self.duration_ms}
        found.update({f"retrieval.{t.retriever}": t.duration_ms for t in self.traces})
        return found


def _describe(item: Any) -> RetrievalHit:
    text = getattr(item, "text", None)
    if not isinstance(text, str):
        text = repr(item)
    score = getattr(item, "score", 0.0)
    return RetrievalHit(
        text=text,
        score=float(score) if isinstance(score, int | float) else 0.0,
        id=str(getattr(item, "id", "") or getattr(item, "chunk_id", "") or ""),
        source=str(getattr(item, "source", "") or ""),
    )


def _normalize(found: Any) -> RetrievalResult:
    if type(found) is RetrievalResult:
        return found
    if found is None:
        return RetrievalResult()
    if isinstance(found, RetrievalResult):
        return found
    if isinstance(found, str | bytes) or not isinstance(found, Iterable):
        raise TypeError(
            f"retrieve() must return an iterable of items or a RetrievalResult, "
            f"not {type(found).__name__}"
        )
    # One more than kept, so the cut is known; an endless iterator ends here too.
    return RetrievalResult(items=tuple(itertools.islice(found, ITEMS_MAX + 1)))


def _is_async(function: Any) -> bool:
    try:
        return _is_async_cached(function)
    except TypeError:  # an unhashable callable object
        return _inspect_async(function)


def _inspect_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - a callable object's async __call__
    )


# A retriever's function does not change, so it is inspected once, not on every turn.
_is_async_cached = functools.lru_cache(maxsize=1024)(_inspect_async)


def _runs_inline(retriever: Retriever, query: RetrievalQuery, trusted: bool = True) -> bool:
    """Whether the retriever runs on the loop's thread without waiting: it is skipped for this
    turn, or it is a sync function that says it does not block and ships with promptweave
    (``trusted``: another plugin's word is not taken, so a hang of its cannot hold the loop). A
    ``blocking`` callable that raises counts as waiting, so the error is traced where the
    retriever runs."""
    if retriever.persistent and not query.allow_persistent_memory:
        return True
    if _is_async(retriever.retrieve):
        return False
    if not trusted:
        return False
    blocking = retriever.blocking
    if not callable(blocking):
        return not blocking
    try:
        return not blocking(query)
    except Exception:
        return False


async def _settle(found: Awaitable[Any], timeout: float) -> Any:
    import asyncio  # here: the render command loads no event loop (docs/performance.md)

    return await asyncio.wait_for(found, timeout)


#: What a retriever returns that cannot be awaitable: no need to ask.
_PLAIN = (RetrievalResult, list, tuple)


def _call_inline(retriever: Retriever, query: RetrievalQuery, timeout: float, start: float) -> Any:
    """Call a sync retriever that does not block, here, at ``start``; a call that returns past
    its timeout counts as timed out. An awaitable it hands back is awaited on an event loop of
    its own, for what is left of the timeout (no loop runs on this thread: see
    :meth:`RetrievalRunner.run_inline`)."""
    found = retriever.retrieve(query)
    left = timeout - (time.perf_counter() - start)
    if left < 0:
        raise TimeoutError
    if not isinstance(found, _PLAIN) and inspect.isawaitable(found):
        import asyncio

        found = asyncio.run(_settle(found, left))
    return found


def _traced(
    entry: Registered[Retriever], result: RetrievalResult, start: float
) -> tuple[RetrieverTrace, tuple[Any, ...]]:
    """The trace and the items of a retriever that returned ``result``."""
    retriever = entry.item
    duration = _ms(start)
    if result.skipped is not None:
        return RetrieverTrace(
            retriever=retriever.name,
            plugin=entry.plugin,
            section=retriever.feeds,
            status="skipped",
            reason=result.skipped.value,
            duration_ms=duration,
            details=result.details,
        ), ()
    items, details, hits = result.items, result.details, result.hits
    if len(items) > ITEMS_MAX:
        items, details = items[:ITEMS_MAX], {**details, "items_cut_at": ITEMS_MAX}
    if len(hits) > TRACE_HITS_MAX:
        hits = hits[:TRACE_HITS_MAX]
    elif not hits and items:
        hits = tuple(map(_describe, items[:TRACE_HITS_MAX]))
    return RetrieverTrace(
        retriever=retriever.name,
        plugin=entry.plugin,
        section=retriever.feeds,
        status="hit" if items else "empty",
        hits=hits,
        duration_ms=duration,
        details=details,
    ), items


def _timed_out(
    entry: Registered[Retriever], timeout: float, start: float
) -> tuple[RetrieverTrace, tuple[Any, ...]]:
    retriever = entry.item
    log.warning("retriever %r timed out after %.3f s", retriever.name, timeout)
    return RetrieverTrace(
        retriever=retriever.name,
        plugin=entry.plugin,
        section=retriever.feeds,
        status="skipped",
        reason=SkipReason.TIMEOUT.value,
        duration_ms=_ms(start),
        details={"timeout_s": timeout},
    ), ()


def _failed(
    entry: Registered[Retriever], exc: Exception, start: float, *, logged: bool = False
) -> tuple[RetrieverTrace, tuple[Any, ...]]:
    """The trace of a retriever that raised; logged with its traceback unless ``logged``."""
    retriever = entry.item
    if not logged:
        log.warning("retriever %r raised", retriever.name, exc_info=True)
    return RetrieverTrace(
        retriever=retriever.name,
        plugin=entry.plugin,
        section=retriever.feeds,
        status="skipped",
        reason=SkipReason.ERROR.value,
        error=f"{type(exc).__name__}: {exc}",
        duration_ms=_ms(start),
    ), ()


def _outcome(
    query: RetrievalQuery,
    traced: Iterable[tuple[RetrieverTrace, tuple[Any, ...]]],
    start: float,
) -> RetrievalOutcome:
    items: dict[str, tuple[Any, ...]] = {}
    traces = []
    for trace, found in traced:
        traces.append(trace)
        if found:
            items[trace.section] = items.get(trace.section, ()) + found
    return RetrievalOutcome(query=query, items=items, traces=tuple(traces), duration_ms=_ms(start))


@attrs.define
class RetrievalRunner:
    """Owns the worker threads of sync retrievers and runs retrievers concurrently.

    :param threads: the most sync retrievers running at once.
    :param trusted: whether a plugin ships with promptweave; only such a plugin's retriever that
        says it does not block (``Retriever.blocking``) runs on the caller's thread, every other
        sync retriever in a worker thread under its timeout. ``None`` trusts every plugin.
    """

    threads: int = 8
    trusted: Callable[[str], bool] | None = None
    _pool: DaemonExecutor | None = attrs.field(default=None, init=False, repr=False)
    # Sync retrievers still running past their timeout, by name, with the time they started.
    _hung: dict[str, float] = attrs.field(factory=dict, init=False, repr=False)
    # Retrievers whose store is unavailable (a Redis outage), by name: logged once when the
    # outage begins and once when it ends, not with a traceback every turn (docs/store.md).
    _outages: set[str] = attrs.field(factory=set, init=False, repr=False)
    _outages_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def _raised(
        self, entry: Registered[Retriever], exc: Exception, start: float
    ) -> tuple[RetrieverTrace, tuple[Any, ...]]:
        """The trace of a retriever that raised; a store outage is logged once per outage."""
        # A store that cannot be reached (Redis away, a SQLite file failing), not any OSError a
        # plugin's own code may raise.
        if not isinstance(exc, StoreUnavailableError | sqlite3.Error):
            return _failed(entry, exc, start)
        name = entry.item.name
        with self._outages_lock:
            begins = name not in self._outages
            self._outages.add(name)
        if begins:
            log.warning(
                "retriever %r: its store is unavailable; it contributes nothing until the store "
                "answers again (said once per outage): %s: %s",
                name,
                type(exc).__name__,
                exc,
            )
        else:
            log.debug("retriever %r: store still unavailable: %s", name, exc)
        return _failed(entry, exc, start, logged=True)

    def _answered(
        self, entry: Registered[Retriever], result: RetrievalResult, start: float
    ) -> tuple[RetrieverTrace, tuple[Any, ...]]:
        """The trace of a retriever that returned; the end of its store's outage is logged."""
        if self._outages:
            name = entry.item.name
            with self._outages_lock:
                ended = name in self._outages
                self._outages.discard(name)
            if ended:
                log.info("retriever %r: its store answers again", name)
        return _traced(entry, result, start)

    def _executor(self) -> DaemonExecutor:
        if self._pool is None:
            self._pool = DaemonExecutor(max_workers=self.threads, name="promptweave-retriever")
        return self._pool

    def close(self) -> None:
        """Let the worker threads finish and stop them (without waiting for hung ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def run(
        self,
        retrievers: Sequence[Registered[Retriever]],
        query: RetrievalQuery,
        timeouts: Mapping[str, float] | None = None,
        *,
        budget_s: float | None = None,
    ) -> RetrievalOutcome:
        """Run ``retrievers`` concurrently for ``query``.

        :param timeouts: per-retriever timeouts by name, overriding ``Retriever.timeout_s``.
        :param budget_s: what is left of the turn's deadline: no retriever waits longer.
        """
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        start = time.perf_counter()
        timeouts = timeouts or {}

        def one(entry: Registered[Retriever]) -> Awaitable[tuple[RetrieverTrace, tuple[Any, ...]]]:
            return self._run_one(entry, query, _timeout(entry, timeouts, budget_s))

        # Retrievers that wait (async ones, sync ones in worker threads) become tasks and start
        # first; the inline ones then run one after the other on this thread, awaited directly:
        # no task and no turn of the event loop each.
        waiting = {
            index: asyncio.ensure_future(one(entry))
            for index, entry in enumerate(retrievers)
            if not _runs_inline(entry.item, query, self._trusts(entry.plugin))
        }
        if waiting:
            await asyncio.sleep(0)  # let them start before the inline ones take the thread
        traced = [
            await (waiting[index] if index in waiting else one(entry))
            for index, entry in enumerate(retrievers)
        ]
        return _outcome(query, traced, start)

    def run_inline(
        self,
        retrievers: Sequence[Registered[Retriever]],
        query: RetrievalQuery,
        timeouts: Mapping[str, float] | None = None,
        *,
        budget_s: float | None = None,
    ) -> RetrievalOutcome | None:
        """What :meth:`run` gives, without an event loop or a thread, when every retriever runs
        inline: each is a sync function that does not block (``Retriever.blocking``), or is
        skipped for the turn. ``None``, having called none of them, when one would wait; then
        the caller awaits :meth:`run`. Not for a thread with a running event loop."""
        start = time.perf_counter()
        for entry in retrievers:
            if not _runs_inline(entry.item, query, self._trusts(entry.plugin)):
                return None
        timeouts = timeouts or {}
        traced = []
        for entry in retrievers:
            skipped = self._skipped(entry, query)
            if skipped is not None:
                traced.append((skipped, ()))
                continue
            timeout = _timeout(entry, timeouts, budget_s)
            called = time.perf_counter()
            try:
                result = _normalize(_call_inline(entry.item, query, timeout, called))
            except TimeoutError:
                traced.append(_timed_out(entry, timeout, called))
            except Exception as exc:
                traced.append(self._raised(entry, exc, called))
            else:
                traced.append(self._answered(entry, result, called))
        return _outcome(query, traced, start)

    def _trusts(self, plugin: str) -> bool:
        return self.trusted is None or self.trusted(plugin)

    async def _call(
        self, retriever: Retriever, query: RetrievalQuery, timeout: float, trusted: bool = True
    ) -> Any:
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        deadline = time.monotonic() + timeout
        if _is_async(retriever.retrieve):
            return await asyncio.wait_for(retriever.retrieve(query), timeout)
        blocking = not trusted or (
            retriever.blocking(query) if callable(retriever.blocking) else retriever.blocking
        )
        if not blocking:
            found = retriever.retrieve(query)
            if time.monotonic() > deadline:
                raise TimeoutError
            if inspect.isawaitable(found):
                found = await asyncio.wait_for(found, max(0.0, deadline - time.monotonic()))
            return found
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, retriever.retrieve, query)
        running = self._executor().submit(call)
        try:
            found = await asyncio.wait_for(asyncio.wrap_future(running, loop=loop), timeout)
        except TimeoutError:
            if not running.done():
                self._note_hung(retriever.name, running)
            raise
        if inspect.isawaitable(found):  # a sync callable that hands back a coroutine
            found = await asyncio.wait_for(found, max(0.0, deadline - time.monotonic()))
        return found

    def _note_hung(self, name: str, running: Any) -> None:
        """Skip ``name`` until its call returns (``running`` is its future)."""
        self._hung[name] = time.monotonic()

        def returned(_future: Any) -> None:
            self._hung.pop(name, None)

        running.add_done_callback(returned)

    def _skipped(
        self, entry: Registered[Retriever], query: RetrievalQuery
    ) -> RetrieverTrace | None:
        """The trace of a retriever not called this turn: persistent on a short social turn,
        or still hung from an earlier one."""
        retriever = entry.item
        if retriever.persistent and not query.allow_persistent_memory:
            return RetrieverTrace(
                retriever=retriever.name,
                plugin=entry.plugin,
                section=retriever.feeds,
                status="skipped",
                reason=SkipReason.SHORT_SOCIAL_TURN.value,
                duration_ms=0.0,
            )
        hung_since = self._hung.get(retriever.name)
        if hung_since is not None:
            return RetrieverTrace(
                retriever=retriever.name,
                plugin=entry.plugin,
                section=retriever.feeds,
                status="skipped",
                reason=SkipReason.HUNG.value,
                duration_ms=0.0,
                details={"hung_s": round(time.monotonic() - hung_since, 3)},
            )
        return None

    async def _run_one(
        self, entry: Registered[Retriever], query: RetrievalQuery, timeout: float
    ) -> tuple[RetrieverTrace, tuple[Any, ...]]:
        skipped = self._skipped(entry, query)
        if skipped is not None:
            return skipped, ()
        start = time.perf_counter()
        try:
            result = _normalize(
                await self._call(entry.item, query, timeout, self._trusts(entry.plugin))
            )
        except TimeoutError:
            return _timed_out(entry, timeout, start)
        except Exception as exc:
            return self._raised(entry, exc, start)
        return self._answered(entry, result, start)


def _timeout(
    entry: Registered[Retriever], timeouts: Mapping[str, float], budget_s: float | None
) -> float:
    timeout = timeouts.get(entry.item.name, entry.item.timeout_s)
    return timeout if budget_s is None else min(timeout, budget_s)
