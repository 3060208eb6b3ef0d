"""A restart, a process that dies mid-run, and two processes over one store learn nothing twice
(``docs/learning.md``, the learner stage): what is learned equals one uninterrupted run over the
whole chat, and no cursor moves back."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest
from base_support import Clock
from learning_backends_support import (
    LEARNERS,
    T0,
    Line,
    Scope,
    ScopeTransport,
    Site,
    catch_up,
    cursors,
    feed,
    learned,
    learning_config,
    open_site,
    shape,
)
from runtime_fixtures import redis_prefix, redis_url

from promptweave import BotLoop, Promptweave
from promptweave.learning.stage import LearnerRun, LearningStage, RunStatus
from promptweave.store.learned import LearnedStore, LearnerCursor, LearningSource

__all__ = ["redis_prefix", "redis_url"]

#: The same exchange three times, a teaching the bot answers and a member reacts to, a quote.
ROUND = (
    Line("301", "阿蒙", "今天去爬山吗"),
    Line("302", "小林", "爬哪座山啊"),
    Line("303", "老王", "香山红叶正好"),
)
CHAT = Scope(
    bot_id="10001",
    group_id="20001",
    tag="r",
    base=8_000_000,
    lines=(
        *ROUND,
        Line("301", "阿蒙", "小织记住，我叫阿蒙不叫阿猛"),
        Line("302", "小林", "哈哈哈被记住了"),
        *ROUND,
        Line("302", "小林", "红叶拍照超好看", quotes=2),
        Line("301", "阿蒙", "小织以后叫我蒙哥"),
        Line("303", "老王", "蒙哥好"),
        *ROUND,
        Line("302", "小林", "红叶拍照超好看", quotes=11),
    ),
)
OTHER = Scope(
    bot_id="10001",
    group_id="20002",
    tag="s",
    base=9_000_000,
    lines=tuple(
        Line(sender, name, text)
        for _ in range(5)
        for sender, name, text in (("301", "老周", "晚上吃火锅吗"), ("302", "大刘", "哪家火锅店啊"))
    ),
)
SCOPES = (CHAT, OTHER)
HALF = 7
END = T0 + dt.timedelta(hours=1)
#: Every learner runs as soon as one message waits; rhythm writes from three turns on.
LEARNING = learning_config(tick_s=0.005, min_batch=1, tables={"rhythm": {"min_turns": 3}})


async def _no_pause(_seconds: float) -> None:
    return None


def _feed(
    runtime: Promptweave,
    transports: dict[str, ScopeTransport],
    indexes: Iterable[int],
    clock: Clock,
    *,
    learn: bool,
) -> None:
    async def run() -> None:
        loop = BotLoop(runtime=runtime, sleep=_no_pause, learn=learn)
        await feed(loop, SCOPES, transports, indexes, clock=clock, pause_s=0.01 if learn else 0)
        await loop.aclose()

    asyncio.run(run())


def _transports() -> dict[str, ScopeTransport]:
    return {scope.tag: ScopeTransport(scope.base) for scope in SCOPES}


def _everything(runtime: Promptweave) -> dict[str, list[dict[str, Any]]]:
    return {s.tag: shape(learned(runtime.stores.learned, s.bot_id, s.group_id)) for s in SCOPES}


def _uninterrupted(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """What one run over the whole chat learns, in a store of its own."""
    site = open_site(request, "memory", tmp_path, "uninterrupted")
    try:
        clock = Clock(T0)
        runtime = site.runtime(learning=LEARNING, clock=clock)
        _feed(runtime, _transports(), range(len(CHAT.lines)), clock, learn=False)
        catch_up(runtime, END)
        return _everything(runtime)
    finally:
        site.close()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    opened = open_site(request, request.param, tmp_path, "site")
    request.addfinalizer(opened.close)
    return opened


def _counted_more_than_once(expected: dict[str, Any]) -> bool:
    return any(item["count"] > 1 for items in expected.values() for item in items)


def test_a_restart_in_the_middle_of_a_live_run_learns_nothing_twice(
    site: Site, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    expected = _uninterrupted(request, tmp_path)
    assert _counted_more_than_once(expected)
    clock, transports = Clock(T0), _transports()
    first = site.runtime(learning=LEARNING, clock=clock)
    _feed(first, transports, range(HALF), clock, learn=True)
    before = cursors(first.stores.learned, SCOPES)
    first.close()
    # The platform's message ids go on; the bot's process is new.
    second = site.runtime(learning=LEARNING, clock=clock)
    _feed(second, transports, range(HALF, len(CHAT.lines)), clock, learn=True)
    catch_up(second, END)
    after = cursors(second.stores.learned, SCOPES)
    assert all(after[key] >= position for key, position in before.items()), (before, after)
    assert after == {(name, s.tag): _last_position(second, s) for name in LEARNERS for s in SCOPES}
    assert _everything(second) == expected


def test_a_process_that_dies_between_storing_and_moving_its_cursor_counts_nothing_twice(
    site: Site, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    expected = _uninterrupted(request, tmp_path)
    clock, transports = Clock(T0), _transports()
    first = site.runtime(learning=LEARNING, clock=clock)
    _feed(first, transports, range(len(CHAT.lines) - 3), clock, learn=False)
    store = first.stores.learned
    assert store is not None

    # A stage whose process dies once its items are stored: its cursor never moves and its
    # lease is never released.
    dying = LearningStage(
        learners=first.learning.learners,
        stores=attrs.evolve(first.stores, learned=_Dies(store)),
        config=first.config,
    )
    died_at = clock.now
    for learner in dying.plans:
        with pytest.raises(SystemExit):
            dying.run_one(learner, CHAT.bot_id, CHAT.group_id, died_at)
    assert learned(store, CHAT.bot_id, CHAT.group_id) != []
    assert all(store.cursor(name, CHAT.bot_id, CHAT.group_id).position == 0 for name in LEARNERS)
    second = site.runtime(learning=LEARNING, clock=clock)
    # While the dead holder's lease runs, nobody learns its batch; once it expired, one does.
    [held] = second.learning.run_all(died_at, scopes=[(CHAT.bot_id, CHAT.group_id)])[:1]
    assert held.status == RunStatus.LEASED_ELSEWHERE
    _feed(second, transports, range(len(CHAT.lines) - 3, len(CHAT.lines)), clock, learn=False)
    catch_up(second, END)
    assert _everything(second) == expected


class _Dies:
    """A learned store whose process dies when it would move a cursor (after storing what was
    learned), leaving its lease to expire."""

    def __init__(self, store: LearnedStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def advance(self, *_args: Any, **_kwargs: Any) -> bool:
        raise SystemExit("the process died")

    def release(self, *_args: Any) -> None:
        return None


def _last_position(runtime: Promptweave, scope: Scope) -> int:
    source = runtime.stores.group_log
    assert isinstance(source, LearningSource)
    return source.messages_after(scope.bot_id, scope.group_id, 0, limit=1000)[-1].position


def _at_once(runtimes: list[Promptweave], work: Any) -> list[LearnerRun]:
    """``work(runtime)`` in a thread per runtime, started together."""
    barrier = threading.Barrier(len(runtimes))
    runs: list[LearnerRun] = []
    lock = threading.Lock()

    def one(runtime: Promptweave) -> None:
        barrier.wait()
        found = work(runtime)
        with lock:
            runs.extend(found)

    threads = [threading.Thread(target=one, args=(runtime,)) for runtime in runtimes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return runs


def test_two_processes_learning_one_store_at_once_count_nothing_twice(
    site: Site, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    expected = _uninterrupted(request, tmp_path)
    clock, transports = Clock(T0), _transports()
    recording = site.runtime(learning=LEARNING, clock=clock)
    _feed(recording, transports, range(len(CHAT.lines)), clock, learn=False)
    processes = [recording, site.runtime(learning=LEARNING, clock=clock)]
    runs = _at_once(processes, lambda runtime: runtime.learning.run_all(END))
    assert {run.status for run in runs} <= {
        RunStatus.LEARNED,
        RunStatus.NOTHING_NEW,
        RunStatus.LEASED_ELSEWHERE,
    }
    for runtime in processes:
        catch_up(runtime, END)
    assert _everything(processes[1]) == expected


def test_two_processes_running_what_is_due_at_once_count_nothing_twice(
    site: Site, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    expected = _uninterrupted(request, tmp_path)
    clock, transports = Clock(T0), _transports()
    recording = site.runtime(learning=LEARNING, clock=clock)
    _feed(recording, transports, range(len(CHAT.lines)), clock, learn=False)
    processes = [recording, site.runtime(learning=LEARNING, clock=clock)]
    for runtime in processes:
        runtime.learning.prime(END)

    def ticks(runtime: Promptweave) -> list[LearnerRun]:
        found: list[LearnerRun] = []
        for tick in range(6):
            # Past the lease each tick: a run left to the other process is tried again.
            found += runtime.learning.run_due(END + dt.timedelta(seconds=200 * tick))
        return found

    runs = _at_once(processes, ticks)
    assert any(run.status == RunStatus.LEARNED and run.messages for run in runs)
    last = END + dt.timedelta(hours=1)
    for runtime in processes:
        catch_up(runtime, last)
    assert _everything(processes[0]) == expected
    for scope in SCOPES:
        for name in LEARNERS:
            cursor: LearnerCursor = processes[0].stores.learned.cursor(  # type: ignore[union-attr]
                name, scope.bot_id, scope.group_id
            )
            assert cursor.position > 0
