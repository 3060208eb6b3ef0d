from __future__ import annotations

import asyncio
import threading
import time

import pytest
from retrieval_support import make_query

from promptweave import MemoryItem, RetrievalHit, RetrievalResult, Retriever
from promptweave.plugins.registry import Registered
from promptweave.retrieval.query import SkipReason
from promptweave.retrieval.runner import RetrievalRunner

QUESTION = "周六晚上桌游局还照常吗"


def entry(name, retrieve, **kwargs):
    return Registered(
        item=Retriever(name=name, feeds="memory", retrieve=retrieve, **kwargs), plugin="t"
    )


def memory(text):
    return MemoryItem(kind="group_memory", text=text, score=0.5)


def run(entries, query=None, timeouts=None):
    runner = RetrievalRunner(threads=8)
    try:
        return asyncio.run(runner.run(entries, query or make_query(QUESTION), timeouts))
    finally:
        runner.close()


def test_sync_retrievers_run_concurrently_in_threads():
    # Each waits until all five are inside retrieve(): only possible if they run at once.
    barrier = threading.Barrier(5, timeout=5)

    def waiting(query):
        barrier.wait()
        return [memory(threading.current_thread().name)]

    outcome = run([entry(f"r{i}", waiting) for i in range(5)])
    assert [t.status for t in outcome.traces] == ["hit"] * 5
    threads = {item.text for item in outcome.items["memory"]}
    assert len(threads) == 5 and all(name.startswith("promptweave-retriever") for name in threads)


def test_async_retrievers_run_concurrently_on_the_loop():
    started = 0
    everyone_in = None

    async def waiting(query):
        nonlocal started, everyone_in
        everyone_in = everyone_in or asyncio.Event()
        started += 1
        if started == 5:
            everyone_in.set()
        await asyncio.wait_for(everyone_in.wait(), 5)
        return [memory("async")]

    outcome = run([entry(f"r{i}", waiting) for i in range(5)])
    assert [t.status for t in outcome.traces] == ["hit"] * 5


def test_a_retriever_that_times_out_is_left_out_and_traced():
    release = threading.Event()

    def hangs(query):
        release.wait(10)
        return [memory("late")]

    async def slow(query):
        await asyncio.sleep(10)

    try:
        outcome = run(
            [
                entry("hangs", hangs, timeout_s=0.05),
                entry("slow", slow, timeout_s=0.05),
                entry("fine", lambda query: [memory("on time")]),
            ]
        )
    finally:
        release.set()
    by_name = {t.retriever: t for t in outcome.traces}
    for name in ("hangs", "slow"):
        assert by_name[name].status == "skipped"
        assert by_name[name].reason == SkipReason.TIMEOUT.value
    assert [item.text for item in outcome.items["memory"]] == ["on time"]


def test_a_configured_timeout_overrides_the_retrievers_own():
    def slow(query):
        time.sleep(0.3)
        return [memory("late")]

    outcome = run([entry("slow", slow, timeout_s=30)], timeouts={"slow": 0.01})
    assert outcome.traces[0].reason == "timeout"
    assert outcome.traces[0].details == {"timeout_s": 0.01}


def test_a_retriever_that_raises_is_left_out_and_traced_and_the_others_still_contribute():
    def broken(query):
        raise RuntimeError("index is corrupt")

    outcome = run([entry("broken", broken), entry("fine", lambda query: [memory("ok")])])
    broken_trace = outcome.traces[0]
    assert (broken_trace.status, broken_trace.reason) == ("skipped", "error")
    assert broken_trace.error == "RuntimeError: index is corrupt"
    assert [item.text for item in outcome.items["memory"]] == ["ok"]


def test_a_retriever_returning_a_non_iterable_is_an_error():
    outcome = run([entry("bad", lambda query: 42)])
    assert outcome.traces[0].reason == "error"
    assert "iterable" in (outcome.traces[0].error or "")


def test_persistent_retrievers_are_not_called_on_a_short_social_turn():
    called = []

    def persistent(query):
        called.append("persistent")
        return [memory("x")]

    def profile(query):
        called.append("profile")
        return [memory("y")]

    outcome = run(
        [entry("persistent", persistent), entry("profile", profile, persistent=False)],
        query=make_query("早上好", allow_persistent_memory=False),
    )
    assert called == ["profile"]
    assert outcome.traces[0].reason == "skipped_short_social_turn"
    assert outcome.trace()["allow_persistent_memory"] is False


def test_a_retriever_can_skip_with_a_reason_and_its_items_are_ignored():
    def skipping(query):
        return RetrievalResult(items=[memory("ignored")], skipped="private_chat")

    outcome = run([entry("skipping", skipping)])
    assert outcome.traces[0].reason == "private_chat"
    assert "memory" not in outcome.items


def test_hits_are_derived_from_items_unless_given():
    given = RetrievalHit(text="explicit", score=0.9, details={"bm25": 3.2})
    outcome = run(
        [
            entry("derived", lambda query: [memory("from item")]),
            entry("explicit", lambda query: RetrievalResult(items=[memory("i")], hits=[given])),
            entry("nothing", lambda query: []),
        ]
    )
    derived, explicit, nothing = outcome.traces
    assert [(h.text, h.score) for h in derived.hits] == [("from item", 0.5)]
    assert explicit.hits == (given,)
    assert explicit.to_json()["hits"] == [{"text": "explicit", "score": 0.9, "bm25": 3.2}]
    assert nothing.status == "empty"


def test_trace_groups_retrievers_by_section_and_durations_name_each_retriever():
    outcome = run([entry("one", lambda query: [memory("a")]), entry("two", lambda query: [])])
    trace = outcome.trace()
    assert trace["query"] == QUESTION
    assert [t["retriever"] for t in trace["sections"]["memory"]] == ["one", "two"]
    assert set(outcome.durations()) == {"retrieval", "retrieval.one", "retrieval.two"}


def test_async_callable_objects_are_awaited():
    class Searcher:
        async def __call__(self, query):
            return [memory("from object")]

    outcome = run([entry("object", Searcher())])
    assert [item.text for item in outcome.items["memory"]] == ["from object"]


@pytest.mark.parametrize("value", ["text", b"bytes"])
def test_a_string_is_not_taken_for_an_iterable_of_items(value):
    outcome = run([entry("bad", lambda query: value)])
    assert outcome.traces[0].reason == "error"


def test_non_blocking_sync_retrievers_run_on_the_event_loop_thread():
    def where(query):
        return [memory(threading.current_thread().name)]

    outcome = run(
        [
            entry("inline", where, blocking=False),
            entry("threaded", where),
            entry("decided", where, blocking=lambda query: query.text == QUESTION),
        ]
    )
    names = [item.text for item in outcome.items["memory"]]
    assert names[0] == threading.current_thread().name
    assert names[1].startswith("promptweave-retriever")
    assert names[2].startswith("promptweave-retriever")


def test_a_late_non_blocking_retriever_is_discarded_as_a_timeout():
    def slow(query):
        time.sleep(0.05)
        return [memory("late")]

    outcome = run([entry("slow", slow, blocking=False, timeout_s=0.01)])
    assert outcome.items == {}
    assert outcome.traces[0].reason == SkipReason.TIMEOUT.value


def test_a_plugin_not_shipped_with_promptweave_is_not_taken_at_its_word_that_it_never_blocks():
    # It says blocking=False and then hangs: run in a worker thread under its timeout, it holds
    # neither the event loop (the ticker goes on) nor the turn past the timeout.
    released = threading.Event()

    def hanging(query):
        released.wait(5)
        return [memory("late")]

    ticks = 0

    async def scenario():
        nonlocal ticks

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticking = asyncio.ensure_future(ticker())
        runner = RetrievalRunner(threads=2, trusted=lambda plugin: plugin != "t")
        try:
            assert (
                runner.run_inline([entry("hanging", hanging, blocking=False)], make_query(QUESTION))
                is None
            )
            return await runner.run(
                [entry("hanging", hanging, blocking=False, timeout_s=0.2)], make_query(QUESTION)
            )
        finally:
            ticking.cancel()
            released.set()
            runner.close()

    outcome = asyncio.run(scenario())
    assert outcome.traces[0].reason == SkipReason.TIMEOUT.value
    assert ticks >= 3


def test_a_shipped_plugins_non_blocking_retriever_still_runs_inline():
    runner = RetrievalRunner(threads=2, trusted=lambda plugin: plugin == "t")
    try:
        found = runner.run_inline(
            [entry("inline", lambda query: [memory("here")], blocking=False)], make_query(QUESTION)
        )
    finally:
        runner.close()
    assert found is not None and found.traces[0].status == "hit"


def test_builtin_retrievers_run_on_the_loop_unless_a_store_of_another_kind_may_block(tmp_path):
    from promptweave import Config, Promptweave, Stores
    from promptweave.config import StoreConfig
    from promptweave.store.stores import TopicSummaries
    from promptweave.testing import TEST_ENVIRON

    class RemoteRetrieval:
        """A retrieval store that says nothing of its reads: they may wait on the network."""

    class RemoteSummaries:
        def list_summaries(self, bot_id, group_id, user_id, limit):
            return []

    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    sqlite = Stores.from_config(Config(store=StoreConfig(path=str(tmp_path / "s.db"))))
    remote = Stores.sqlite(sqlite.database)
    remote.retrieval = RemoteRetrieval()
    remote.topic_summaries = TopicSummaries(remote.summaries, remote.retrieval)
    remote_topics = Stores.sqlite(sqlite.database)
    remote_topics.topic_summaries = TopicSummaries(RemoteSummaries(), remote_topics.retrieval)
    for entry_ in runtime.registries.retrievers.values():
        blocking = entry_.item.blocking
        assert callable(blocking)
        assert blocking(make_query(QUESTION, stores=runtime.stores)) is False
        assert blocking(make_query(QUESTION, stores=sqlite)) is False
        assert blocking(make_query(QUESTION, stores=remote)) is True
        topics = entry_.item.name == "mid_term"
        assert blocking(make_query(QUESTION, stores=remote_topics)) is topics


def test_unhashable_callable_retrievers_are_still_told_apart():
    class AsyncSearcher:
        __hash__ = None  # an attrs or dataclass object with eq is unhashable

        async def __call__(self, query):
            return [memory("awaited")]

    class SyncSearcher:
        __hash__ = None

        def __call__(self, query):
            return [memory(threading.current_thread().name)]

    outcome = run([entry("async", AsyncSearcher()), entry("sync", SyncSearcher())])
    texts = [item.text for item in outcome.items["memory"]]
    assert texts[0] == "awaited"
    assert texts[1].startswith("promptweave-retriever")


def test_waiting_retrievers_start_before_the_inline_ones_run():
    started = threading.Event()

    def threaded(query):
        started.set()
        time.sleep(0.05)
        return [memory("threaded")]

    def inline(query):
        # The threaded retriever registered after this one is already running.
        return [memory(f"saw threaded start: {started.wait(2)}")]

    outcome = run([entry("inline", inline, blocking=False), entry("threaded", threaded)])
    assert [item.text for item in outcome.items["memory"]] == [
        "saw threaded start: True",
        "threaded",
    ]


def run_inline(entries, query=None, timeouts=None):
    runner = RetrievalRunner(threads=8)
    try:
        return runner.run_inline(entries, query or make_query(QUESTION), timeouts)
    finally:
        runner.close()


def comparable(outcome):
    """The outcome without its timings."""
    traces = [{**t.to_json(), "duration_ms": None} for t in outcome.traces]
    return outcome.items, traces, outcome.trace()["sections"].keys()


def test_inline_retrievers_run_without_a_loop_or_thread_and_trace_as_on_the_loop():
    def where(query):
        asyncio.get_running_loop()  # raises without a running loop: an error in the trace
        return [memory("on a loop")]

    def broken(query):
        raise RuntimeError("index is corrupt")

    def skips(query):
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT, checked=1)

    def found(query):
        return RetrievalResult(
            items=[memory("hit")], hits=[RetrievalHit(text="shown", score=0.9)], details={"n": 1}
        )

    entries = [
        entry("found", found, blocking=False),
        entry("broken", broken, blocking=False),
        entry("skips", skips, blocking=False),
        entry("empty", lambda query: [], blocking=False),
        entry("bare", lambda query: [memory("bare")], blocking=lambda query: False),
    ]
    inline = run_inline(entries)
    assert inline is not None
    assert comparable(inline) == comparable(run(entries))
    assert [t.status for t in inline.traces] == ["hit", "skipped", "skipped", "empty", "hit"]
    assert inline.traces[1].error == "RuntimeError: index is corrupt"
    assert [item.text for item in inline.items["memory"]] == ["hit", "bare"]
    # Without a loop, a retriever asking for the running one fails; on the loop it finds it.
    on_loop = run([entry("where", where, blocking=False)])
    here = run_inline([entry("where", where, blocking=False)])
    assert on_loop.traces[0].status == "hit"
    assert here is not None and here.traces[0].reason == "error"


def test_run_inline_calls_nothing_when_one_retriever_would_wait():
    called = []

    def inline(query):
        called.append("inline")
        return [memory("x")]

    async def waits(query):
        called.append("async")
        return [memory("y")]

    def raising_blocking(query):
        raise RuntimeError("cannot tell")

    for waiting in (
        entry("threaded", inline),
        entry("async", waits, blocking=False),
        entry("decided", inline, blocking=lambda query: query.text == QUESTION),
        entry("undecided", inline, blocking=raising_blocking),
    ):
        assert run_inline([entry("inline", inline, blocking=False), waiting]) is None
    assert called == []
    # A persistent one skipped on a short social turn never waits.
    skipped = run_inline(
        [entry("inline", inline, blocking=False, persistent=False), entry("persistent", waits)],
        query=make_query("早上好", allow_persistent_memory=False),
    )
    assert skipped is not None
    assert [t.status for t in skipped.traces] == ["hit", "skipped"]
    assert skipped.traces[1].reason == "skipped_short_social_turn"
    assert called == ["inline"]


def test_inline_retrievers_keep_their_timeouts_and_the_turns_budget():
    def slow(query):
        time.sleep(0.03)
        return [memory("late")]

    outcome = run_inline(
        [
            entry("slow", slow, blocking=False, timeout_s=0.01),
            entry("configured", slow, blocking=False),
        ],
        timeouts={"configured": 0.01},
    )
    assert outcome is not None
    assert [t.reason for t in outcome.traces] == ["timeout", "timeout"]
    assert [t.details for t in outcome.traces] == [{"timeout_s": 0.01}, {"timeout_s": 0.01}]
    assert outcome.items == {}
    runner = RetrievalRunner()
    budgeted = runner.run_inline(
        [entry("slow", slow, blocking=False)], make_query(QUESTION), budget_s=0.01
    )
    assert budgeted is not None and budgeted.traces[0].details == {"timeout_s": 0.01}


def test_an_awaitable_from_an_inline_retriever_is_awaited_within_its_timeout():
    async def found():
        return [memory("awaited")]

    async def never():
        await asyncio.sleep(10)

    outcome = run_inline(
        [
            entry("hands_back", lambda query: found(), blocking=False),
            entry("hangs", lambda query: never(), blocking=False, timeout_s=0.05),
        ]
    )
    assert outcome is not None
    assert [item.text for item in outcome.items["memory"]] == ["awaited"]
    assert outcome.traces[1].reason == "timeout"


def test_a_hung_retriever_is_skipped_inline_until_it_returns():
    release = threading.Event()

    def hangs(query):
        release.wait(10)
        return [memory("late")]

    runner = RetrievalRunner()
    hung = [entry("hangs", hangs, timeout_s=0.05)]
    try:
        first = asyncio.run(runner.run(hung, make_query(QUESTION)))
        assert first.traces[0].reason == "timeout"
        # The same retriever, now saying it does not block, is still skipped while it hangs.
        now_inline = [entry("hangs", hangs, blocking=False)]
        second = runner.run_inline(now_inline, make_query(QUESTION))
        assert second is not None and second.traces[0].reason == "hung"
    finally:
        release.set()
        runner.close()


def test_a_store_outage_is_logged_once_per_retriever_and_its_end_once(caplog):
    from promptweave.store.sqlite import StoreUnavailableError

    state = {"down": True}

    def stored(query):
        if state["down"]:
            raise StoreUnavailableError("Redis store 127.0.0.1:6379/0: Connection refused")
        return [memory("back")]

    def broken(query):
        raise ValueError("a bug of the plugin")

    runner = RetrievalRunner()
    entries = [entry("stored", stored, blocking=False), entry("broken", broken, blocking=False)]
    caplog.set_level("INFO", logger="promptweave.retrieval")
    try:
        for _ in range(3):
            outcome = runner.run_inline(entries, make_query(QUESTION))
            assert outcome is not None
            assert [t.reason for t in outcome.traces] == ["error", "error"]
            assert "StoreUnavailableError" in str(outcome.traces[0].error)
        outage = [r for r in caplog.records if "'stored'" in r.getMessage()]
        assert len(outage) == 1 and outage[0].exc_info is None
        assert "said once per outage" in outage[0].getMessage()
        bugs = [r for r in caplog.records if "'broken' raised" in r.getMessage()]
        assert len(bugs) == 3 and all(r.exc_info for r in bugs)  # a plugin's bug, every time
        caplog.clear()
        state["down"] = False
        for _ in range(2):
            runner.run_inline(entries, make_query(QUESTION))
        back = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
        assert back == ["retriever 'stored': its store answers again"]
        caplog.clear()
        state["down"] = True  # a second outage is said again
        runner.run_inline(entries, make_query(QUESTION))
        assert (
            sum("'stored': its store is unavailable" in r.getMessage() for r in caplog.records) == 1
        )
    finally:
        runner.close()
