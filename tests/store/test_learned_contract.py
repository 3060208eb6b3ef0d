"""The learned store (``promptweave.store.learned.LearnedStore``) and the group log's learning
source (``LearningSource``) on the in-memory, SQLite and Redis backends (``docs/learning.md``).

The in-memory store is the reference: every backend must keep, merge, evict and forget exactly as
it does (the randomized test replays one sequence of writes on both and compares every answer).
Leases are raced by real processes on SQLite and Redis. The Redis runs need
``$PROMPTWEAVE_TEST_REDIS_URL`` (``tests/runtime_fixtures.py``).
"""

from __future__ import annotations

import datetime as dt
import functools
import multiprocessing
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from base_support import T0

from promptweave import ChatMessage
from promptweave.store.learned import (
    SOURCE_IDS_KEPT,
    DeliveredInjection,
    LearnedItem,
    LearnedStore,
    LearnerCursor,
    LearningSource,
)
from promptweave.store.learned_memory import MemoryLearnedStore
from promptweave.store.learned_sqlite import LEARNED_MIGRATIONS, SQLiteLearnedStore
from promptweave.store.sessions import GroupLog
from promptweave.store.sessions_memory import MemoryGroupLog
from promptweave.store.sessions_sqlite import SESSION_MIGRATIONS, SQLiteGroupLog
from promptweave.store.sqlite import SQLiteDatabase, StoreUnavailableError

BOT, GROUP = "10001", "20001"
RACERS = 3


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def pair(
    key: str,
    *ids: str,
    when: float = 0,
    count: int = 1,
    kind: str = "expression_pair",
    scope: tuple[str, str] = (BOT, GROUP),
    user_id: str = "",
    **fields: Any,
) -> LearnedItem:
    return LearnedItem(
        kind=kind,
        bot_id=scope[0],
        group_id=scope[1],
        key=key,
        fields=fields or {"trigger": f"问{key}", "reply": f"答{key}"},
        user_id=user_id,
        source_message_ids=ids,
        count=count,
        learner="expressions",
        learned_at=at(when),
    )


def said(number: int, *, seconds: float | None = None) -> ChatMessage:
    return ChatMessage(
        id=f"m{number}",
        sender_id="30022",
        text=f"第{number}条",
        time=at(number if seconds is None else seconds),
    )


# -- backends ------------------------------------------------------------------------------------


def open_learned(kind: str, where: str, prefix: str = "") -> LearnedStore:
    """A learned store over the storage ``where`` names (picklable: the racers call it)."""
    if kind == "sqlite":
        database = SQLiteDatabase(where)
        database.migrate(LEARNED_MIGRATIONS)
        return SQLiteLearnedStore(database)
    from promptweave.contrib.redis_store import RedisLearnedStore, RedisNamespace, connect

    return RedisLearnedStore(RedisNamespace(connect(where), prefix))


@attrs.frozen
class Backend:
    """One storage: ``learned()`` and ``log()`` open stores over it; ``opener`` opens the learned
    store in another process."""

    name: str
    learned: Callable[[], LearnedStore]
    log: Callable[[], GroupLog]
    opener: Callable[[], LearnedStore] | None = None


@pytest.fixture(params=["memory", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from _backend(request, tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def shared_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends several processes share."""
    yield from _backend(request, tmp_path)


def _backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        learned, log = MemoryLearnedStore(), MemoryGroupLog()
        yield Backend("memory", lambda: learned, lambda: log)
    elif request.param == "sqlite":
        path = tmp_path / "store.sqlite3"
        database = SQLiteDatabase(path)
        database.migrate((*SESSION_MIGRATIONS, *LEARNED_MIGRATIONS))
        yield Backend(
            "sqlite",
            lambda: SQLiteLearnedStore(database),
            lambda: SQLiteGroupLog(database),
            functools.partial(open_learned, "sqlite", str(path)),
        )
        database.close()
    else:
        from promptweave.contrib.redis_store import RedisGroupLog, RedisLearnedStore

        namespace = request.getfixturevalue("redis_namespace")
        url = request.getfixturevalue("redis_url")
        yield Backend(
            "redis",
            lambda: RedisLearnedStore(namespace),
            lambda: RedisGroupLog(namespace),
            functools.partial(open_learned, "redis", url, namespace.prefix),
        )


@pytest.fixture
def store(backend: Backend) -> LearnedStore:
    learned = backend.learned()
    assert isinstance(learned, LearnedStore)
    return learned


# -- items ---------------------------------------------------------------------------------------


def test_learning_a_key_again_merges_fields_counts_and_ids(store: LearnedStore) -> None:
    first = store.put_items([pair("k", "m1", "m2", when=0, trigger="早", reply="早啊")])
    assert first.unchanged == 0 and first.evicted == ()
    assert [i.source_message_ids for i in first.stored] == [("m1", "m2")]
    again = store.put_items([pair("k", "m2", "m3", when=60, count=2, trigger="早", reply="早上好")])
    merged = store.item(BOT, GROUP, "expression_pair", "k")
    assert merged is not None and again.stored == (merged,)
    assert merged.fields == {"trigger": "早", "reply": "早上好"}
    assert merged.count == 3
    assert merged.source_message_ids == ("m1", "m2", "m3")
    assert merged.learned_at == at(0) and merged.updated_at == at(60)
    assert merged.learner == "expressions"


def test_the_same_ids_twice_change_nothing(store: LearnedStore) -> None:
    store.put_items([pair("k", "m1", "m2")])
    before = store.version(BOT, GROUP)
    result = store.put_items([pair("k", "m2", "m1", when=30, reply="别的")])
    assert result.stored == () and result.unchanged == 1
    item = store.item(BOT, GROUP, "expression_pair", "k")
    assert item is not None and item.count == 1 and item.fields["reply"] == "答k"
    assert store.version(BOT, GROUP) == before


def test_an_item_without_ids_always_replaces(store: LearnedStore) -> None:
    store.put_items([pair("rhythm", kind="rhythm", peak=9)])
    store.put_items([pair("rhythm", kind="rhythm", when=5, peak=21)])
    item = store.item(BOT, GROUP, "rhythm", "rhythm")
    assert item is not None and item.fields == {"peak": 21} and item.count == 1


def test_ids_keep_the_newest_source_ids_kept(store: LearnedStore) -> None:
    ids = [f"m{n}" for n in range(SOURCE_IDS_KEPT + 5)]
    store.put_items([pair("k", *ids[:10])])
    store.put_items([pair("k", *ids[10:], when=1)])
    item = store.item(BOT, GROUP, "expression_pair", "k")
    assert item is not None
    assert item.source_message_ids == tuple(ids[-SOURCE_IDS_KEPT:])
    assert item.count == 2


def test_caps_evict_the_least_counted_then_the_least_recent(store: LearnedStore) -> None:
    store.put_items([pair("a", "m1", count=3), pair("b", "m2", when=10), pair("c", "m3", when=5)])
    result = store.put_items([pair("d", "m4", when=20, count=2)], caps={"expression_pair": 2})
    # b and c count 1 each; c was learned before b.
    assert result.evicted == (("expression_pair", "c"), ("expression_pair", "b"))
    assert [i.key for i in result.stored] == ["d"]
    assert [i.key for i in store.items(BOT, GROUP)] == ["a", "d"]
    # An item evicted in the same call is not reported stored.
    late = store.put_items([pair("e", "m5", when=30)], caps={"expression_pair": 2})
    assert late.stored == () and late.evicted == (("expression_pair", "e"),)
    # A cap of another kind leaves these alone.
    store.put_items([pair("r", kind="rhythm")], caps={"rhythm": 1, "expression_pair": 0})
    assert store.counts() == {"expression_pair": 2, "rhythm": 1}


def test_an_eviction_in_one_group_leaves_what_another_stored_in_the_same_call(
    store: LearnedStore,
) -> None:
    full = (BOT, "full")
    store.put_items([pair("x", "m0", count=9, scope=full), pair("z", "m1", count=5, scope=full)])
    result = store.put_items(
        [pair("k", "n1", scope=(BOT, GROUP)), pair("k", "m2", scope=full)],
        caps={"expression_pair": 2},
    )
    # "k" of group "full" was evicted there at once; "k" of GROUP, the same key, is stored.
    assert result.evicted == (("expression_pair", "k"),)
    assert [(i.group_id, i.key) for i in result.stored] == [(GROUP, "k")]
    assert [i.key for i in store.items(*full)] == ["x", "z"]


def test_forget_one_a_kind_or_all_and_never_learn_back(store: LearnedStore) -> None:
    store.put_items(
        [
            pair("a", "m1", "m2"),
            pair("b", "m3"),
            pair("t", "m4", kind="teaching", user_id="30022"),
        ]
    )
    gone = store.forget(BOT, GROUP, kind="expression_pair", key="a")
    assert [i.key for i in gone] == ["a"]
    assert store.forgotten(BOT, GROUP, "expression_pair") == {"a": ("m1", "m2")}
    # Learned again from the same messages: nothing; from a new one: counted afresh.
    assert store.put_items([pair("a", "m2", "m1", when=9)]).unchanged == 1
    assert store.item(BOT, GROUP, "expression_pair", "a") is None
    again = store.put_items([pair("a", "m1", "m9", when=9)])
    assert [(i.source_message_ids, i.count) for i in again.stored] == [(("m9",), 1)]
    assert store.forget(BOT, GROUP, kind="nothing") == []
    gone = store.forget(BOT, GROUP, kind="expression_pair")
    assert sorted(i.key for i in gone) == ["a", "b"]
    assert store.forgotten(BOT, GROUP, "expression_pair") == {"a": ("m1", "m2", "m9"), "b": ("m3",)}
    assert [i.key for i in store.items(BOT, GROUP)] == ["t"]
    assert [i.key for i in store.forget(BOT, GROUP)] == ["t"]
    assert store.items(BOT, GROUP) == [] and store.counts() == {}
    assert store.forgotten(BOT, GROUP, "teaching") == {"t": ("m4",)}


def test_items_are_listed_most_counted_then_most_recent(store: LearnedStore) -> None:
    store.put_items(
        [
            pair("old", "m1", when=0),
            pair("new", "m2", when=50),
            pair("many", "m3", when=10, count=4),
            pair("mine", "m4", when=20, kind="teaching", user_id="30022"),
            pair("yours", "m5", when=30, kind="teaching", user_id="30023"),
        ]
    )
    assert [i.key for i in store.items(BOT, GROUP)] == ["many", "new", "yours", "mine", "old"]
    assert [i.key for i in store.items(BOT, GROUP, kind="teaching")] == ["yours", "mine"]
    assert [i.key for i in store.items(BOT, GROUP, user_id="30022")] == ["mine"]
    assert [i.key for i in store.items(BOT, GROUP, kind="teaching", user_id="30023")] == ["yours"]
    assert [i.key for i in store.items(BOT, GROUP, limit=2)] == ["many", "new"]
    assert store.items(BOT, GROUP, limit=0) == []
    assert store.items(BOT, GROUP, kind="rhythm") == []
    assert store.counts() == {"expression_pair": 3, "teaching": 2}


def test_version_changes_when_items_change_only(store: LearnedStore) -> None:
    assert store.version(BOT, GROUP) == 0
    store.put_items([pair("a", "m1")])
    one = store.version(BOT, GROUP)
    assert one != 0
    store.put_items([pair("a", "m1")])
    store.forget(BOT, GROUP, kind="expression_pair", key="missing")
    store.remember_injection(_injection("r1"))
    store.claim("expressions", BOT, GROUP, "p1", now=T0)
    assert store.version(BOT, GROUP) == one
    assert store.version(BOT, "20002") == 0
    store.put_items([pair("a", "m2")])
    two = store.version(BOT, GROUP)
    assert two != one
    store.forget(BOT, GROUP, kind="expression_pair", key="a")
    assert store.version(BOT, GROUP) not in (one, two)


LOOKALIKES = [
    (("1", "2:3"), ("1:2", "3")),
    (("1", ""), ("1", "private")),
    (("1", "a%3Ab"), ("1", "a:b")),
]


@pytest.mark.parametrize(("one", "other"), LOOKALIKES)
def test_lookalike_scopes_share_nothing(
    store: LearnedStore, one: tuple[str, str], other: tuple[str, str]
) -> None:
    store.put_items([pair("k", "m1", scope=one, reply="一")])
    store.put_items([pair("k", "m2", scope=other, reply="二"), pair("only", "m3", scope=other)])
    for holder, scope in (("p1", one), ("p2", other)):
        assert store.claim("expressions", *scope, holder, now=T0)
        assert store.advance(
            "expressions",
            *scope,
            holder,
            LearnerCursor(position=len(holder) + len(scope[1])),
            now=T0,
        )
        store.remember_injection(_injection("r1", scope=scope, text=f"{scope}"))
    assert [i.fields["reply"] for i in store.items(*one)] == ["一"]
    assert sorted(i.key for i in store.items(*other)) == ["k", "only"]
    assert store.cursor("expressions", *one).position == 2 + len(one[1])
    assert store.cursor("expressions", *other).position == 2 + len(other[1])
    assert store.injection(*one, "r1").text == f"{one}"  # type: ignore[union-attr]
    assert store.injection(*other, "r1").text == f"{other}"  # type: ignore[union-attr]
    store.forget(*one)
    assert store.items(*one) == [] and len(store.items(*other)) == 2
    assert store.forgotten(*other, "expression_pair") == {}
    store.reset(*one)
    assert store.cursor("expressions", *one) == LearnerCursor()
    assert store.cursor("expressions", *other).position == 2 + len(other[1])
    assert store.scopes() == sorted([one, other])


def test_scopes_are_those_with_items_cursors_or_injections(store: LearnedStore) -> None:
    assert store.scopes() == []
    store.put_items([pair("k", "m1", scope=("b1", "g1"))])
    store.claim("expressions", "b2", "g2", "p1", now=T0)  # a lease alone is no scope
    assert store.scopes() == [("b1", "g1")]
    store.advance("expressions", "b2", "g2", "p1", LearnerCursor(position=3), now=T0)
    store.remember_injection(_injection("r1", scope=("b3", "")))
    assert store.scopes() == [("b1", "g1"), ("b2", "g2"), ("b3", "")]
    store.forget("b1", "g1")
    store.reset("b2", "g2")
    assert store.scopes() == [("b3", "")]


# -- cursors and leases --------------------------------------------------------------------------


def test_a_cursor_starts_at_zero(store: LearnedStore) -> None:
    assert store.cursor("expressions", BOT, GROUP) == LearnerCursor(position=0, state={})


def test_one_holder_at_a_time_until_the_lease_expires(store: LearnedStore) -> None:
    assert store.claim("expressions", BOT, GROUP, "p1", now=T0, lease_s=60)
    assert not store.claim("expressions", BOT, GROUP, "p2", now=at(59), lease_s=60)
    assert store.claim("rhythm", BOT, GROUP, "p2", now=at(59), lease_s=60)  # another learner
    assert store.claim("expressions", BOT, GROUP, "p1", now=at(30), lease_s=60)  # renewed: 90
    assert not store.claim("expressions", BOT, GROUP, "p2", now=at(89.5), lease_s=60)
    assert store.claim("expressions", BOT, GROUP, "p2", now=at(90), lease_s=60)
    assert not store.claim("expressions", BOT, GROUP, "p1", now=at(91), lease_s=60)


def test_only_the_holder_advances_and_only_before_expiry(store: LearnedStore) -> None:
    moved = LearnerCursor(position=7, state={"seen": ["m7"], "n": 2})
    assert not store.advance("expressions", BOT, GROUP, "p1", moved, now=T0)  # no lease
    assert store.claim("expressions", BOT, GROUP, "p1", now=T0, lease_s=60)
    assert not store.advance("expressions", BOT, GROUP, "p2", moved, now=at(1))
    assert store.cursor("expressions", BOT, GROUP) == LearnerCursor()
    assert store.advance("expressions", BOT, GROUP, "p1", moved, now=at(2))
    assert store.cursor("expressions", BOT, GROUP) == attrs.evolve(moved, updated_at=at(2))
    assert not store.advance("expressions", BOT, GROUP, "p1", LearnerCursor(position=9), now=at(60))
    assert store.cursor("expressions", BOT, GROUP).position == 7


def test_release_frees_the_lease_of_its_holder_only(store: LearnedStore) -> None:
    assert store.claim("expressions", BOT, GROUP, "p1", now=T0)
    store.release("expressions", BOT, GROUP, "p2")
    assert not store.claim("expressions", BOT, GROUP, "p2", now=at(1))
    store.release("expressions", BOT, GROUP, "p1")
    assert not store.advance("expressions", BOT, GROUP, "p1", LearnerCursor(position=1), now=at(1))
    assert store.claim("expressions", BOT, GROUP, "p2", now=at(1))


def test_reset_deletes_every_cursor_and_lease_of_the_scope(store: LearnedStore) -> None:
    for learner in ("expressions", "rhythm"):
        for group in (GROUP, "20002"):
            assert store.claim(learner, BOT, group, "p1", now=T0)
            assert store.advance(learner, BOT, group, "p1", LearnerCursor(position=5), now=T0)
    store.put_items([pair("k", "m1")])
    store.reset(BOT, GROUP)
    assert store.cursor("expressions", BOT, GROUP) == LearnerCursor()
    assert store.cursor("rhythm", BOT, GROUP) == LearnerCursor()
    assert store.claim("expressions", BOT, GROUP, "p2", now=at(1))  # the lease went too
    assert store.cursor("rhythm", BOT, "20002").position == 5
    assert not store.claim("rhythm", BOT, "20002", "p2", now=at(1))
    assert len(store.items(BOT, GROUP)) == 1  # items stay


# -- delivered injections ------------------------------------------------------------------------


def _injection(
    message_id: str, *, scope: tuple[str, str] = (BOT, GROUP), text: str = "七点，老地方"
) -> DeliveredInjection:
    return DeliveredInjection(
        bot_id=scope[0],
        group_id=scope[1],
        message_id=message_id,
        text=text,
        answering="9412",
        sources=(
            {"type": "expression", "id": "k", "text_hash": "ab12", "preview": "早"},
            {"type": "ambient", "id": 3, "text_hash": None, "preview": "明天见"},
        ),
        delivered_at=at(5),
    )


def test_injections_keep_the_newest(store: LearnedStore) -> None:
    assert store.injection(BOT, GROUP, "r0") is None
    for number in range(5):
        store.remember_injection(_injection(f"r{number}"), keep=3)
    assert [store.injection(BOT, GROUP, f"r{n}") is not None for n in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    store.remember_injection(_injection("r2", text="又一次"), keep=3)  # newest again
    store.remember_injection(_injection("r5"), keep=3)
    assert store.injection(BOT, GROUP, "r3") is None
    kept = store.injection(BOT, GROUP, "r2")
    assert kept is not None and kept.text == "又一次"
    assert store.injection(BOT, GROUP, "r4") == _injection("r4")
    assert store.injection(BOT, "20002", "r4") is None


# -- the same answers as the memory store ------------------------------------------------------


def test_every_answer_is_the_memory_stores(shared_backend: Backend) -> None:
    store, reference = shared_backend.learned(), MemoryLearnedStore()
    rng = random.Random(21)
    scopes = [(BOT, GROUP), (BOT, "20002")]
    for step in range(60):
        action = rng.random()
        if action < 0.75:
            batch = [
                pair(
                    f"k{rng.randrange(8)}",
                    *(f"m{rng.randrange(40)}" for _ in range(rng.randrange(3))),
                    when=step + rng.random(),
                    count=rng.randrange(1, 3),
                    kind=rng.choice(["expression_pair", "teaching"]),
                    scope=rng.choice(scopes),
                    user_id=rng.choice(["", "30022"]),
                    n=step,
                )
                for _ in range(rng.randrange(1, 4))
            ]
            caps = rng.choice([None, {"expression_pair": 4}, {"teaching": 2, "expression_pair": 5}])
            assert store.put_items(batch, caps=caps) == reference.put_items(batch, caps=caps)
        else:
            scope = rng.choice(scopes)
            kind = rng.choice([None, "expression_pair", "teaching"])
            key = rng.choice([None, f"k{rng.randrange(8)}"]) if kind else None
            assert store.forget(*scope, kind=kind, key=key) == reference.forget(
                *scope, kind=kind, key=key
            )
        for scope in scopes:
            assert store.items(*scope) == reference.items(*scope)
            for kind in ("expression_pair", "teaching"):
                assert store.forgotten(*scope, kind) == reference.forgotten(*scope, kind)
    assert store.counts() == reference.counts()
    assert store.scopes() == reference.scopes()


# -- the group log as a learning source ----------------------------------------------------------


def test_messages_after_follow_the_order_appended(backend: Backend) -> None:
    log = backend.log()
    assert isinstance(log, LearningSource)
    assert log.messages_after(BOT, GROUP, 0, limit=10) == []
    for number in (1, 2, 3):
        assert log.append_group_message(BOT, GROUP, said(number))
    # Older by its time, appended later: it comes after them.
    assert log.append_group_message(BOT, GROUP, said(4, seconds=-100))
    assert not log.append_group_message(BOT, GROUP, said(2))  # a duplicate id: no position
    log.append_group_message(BOT, "20002", said(9))
    found = log.messages_after(BOT, GROUP, 0, limit=10)
    assert [m.message.id for m in found] == ["m1", "m2", "m3", "m4"]
    positions = [m.position for m in found]
    assert positions == sorted(positions) and len(set(positions)) == 4 and positions[0] > 0
    assert found[3].message == said(4, seconds=-100)
    assert [m.message.id for m in log.messages_after(BOT, GROUP, 0, limit=2)] == ["m1", "m2"]
    after = log.messages_after(BOT, GROUP, positions[1], limit=10)
    assert [m.message.id for m in after] == ["m3", "m4"]
    assert log.messages_after(BOT, GROUP, positions[-1], limit=10) == []
    assert log.messages_after(BOT, GROUP, 0, limit=0) == []
    log.append_group_message(BOT, GROUP, said(5))
    newest = log.messages_after(BOT, GROUP, positions[-1], limit=10)
    assert [m.message.id for m in newest] == ["m5"] and newest[0].position > positions[-1]


def test_group_scopes_leave_private_chats_out(backend: Backend) -> None:
    log = backend.log()
    assert isinstance(log, LearningSource)
    assert log.group_scopes() == []
    for bot, group in (("1", "2:3"), ("1:2", "3"), (BOT, ""), (BOT, GROUP), (BOT, GROUP)):
        log.append_group_message(bot, group, said(len(group)))
    assert log.group_scopes() == sorted([("1", "2:3"), ("1:2", "3"), (BOT, GROUP)])


# -- processes racing for one lease --------------------------------------------------------------


def _claim_once(opener: Callable[[], LearnedStore], holder: str, ready: Any, results: Any) -> None:
    learned = opener()
    learned.cursor("expressions", BOT, GROUP)  # connected before the start
    ready.wait()
    results.put((holder, learned.claim("expressions", BOT, GROUP, holder, now=T0)))


def test_processes_claiming_at_once_one_wins(shared_backend: Backend) -> None:
    backend = shared_backend
    assert backend.opener is not None
    context = multiprocessing.get_context("spawn")
    ready, results = context.Barrier(RACERS), context.Queue()
    racers = [
        context.Process(target=_claim_once, args=(backend.opener, f"p{n}", ready, results))
        for n in range(RACERS)
    ]
    for racer in racers:
        racer.start()
    outcomes = dict(results.get(timeout=60) for _ in racers)
    for racer in racers:
        racer.join(timeout=60)
    assert [racer.exitcode for racer in racers] == [0] * RACERS
    winners = [holder for holder, won in outcomes.items() if won]
    assert len(outcomes) == RACERS and len(winners) == 1
    store = backend.learned()
    others = [holder for holder in outcomes if holder != winners[0]]
    assert not store.claim("expressions", BOT, GROUP, others[0], now=at(1))
    assert store.advance(
        "expressions", BOT, GROUP, winners[0], LearnerCursor(position=1), now=at(1)
    )


def test_an_unreachable_redis_is_a_store_error(redis_url: str) -> None:
    from promptweave.contrib.redis_store import (
        RedisGroupLog,
        RedisLearnedStore,
        RedisNamespace,
        connect,
    )

    namespace = RedisNamespace(connect("redis://127.0.0.1:1/0"), "pwtest:unreachable:")
    learned, log = RedisLearnedStore(namespace), RedisGroupLog(namespace)
    calls: list[Callable[[], object]] = [
        lambda: learned.put_items([pair("k", "m1")], caps={"expression_pair": 1}),
        lambda: learned.items(BOT, GROUP),
        lambda: learned.item(BOT, GROUP, "expression_pair", "k"),
        lambda: learned.forget(BOT, GROUP),
        lambda: learned.forgotten(BOT, GROUP, "expression_pair"),
        learned.scopes,
        learned.counts,
        lambda: learned.version(BOT, GROUP),
        lambda: learned.cursor("expressions", BOT, GROUP),
        lambda: learned.claim("expressions", BOT, GROUP, "p1", now=T0),
        lambda: learned.advance("expressions", BOT, GROUP, "p1", LearnerCursor(), now=T0),
        lambda: learned.release("expressions", BOT, GROUP, "p1"),
        lambda: learned.reset(BOT, GROUP),
        lambda: learned.remember_injection(_injection("r1")),
        lambda: learned.injection(BOT, GROUP, "r1"),
        lambda: log.messages_after(BOT, GROUP, 0, limit=5),
        log.group_scopes,
    ]
    for call in calls:
        with pytest.raises(StoreUnavailableError):
            call()
    namespace.client.close()


def test_the_stores_of_each_backend_hold_its_learned_store(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    from base_support import redis_config, sqlite_config

    from promptweave import Stores
    from promptweave.contrib.redis_store import RedisLearnedStore

    sqlite = Stores.from_config(sqlite_config(tmp_path / "store.sqlite3"))
    assert isinstance(sqlite.learned, SQLiteLearnedStore)
    assert sqlite.database is not None and sqlite.database.schema_version("learning") == 1
    sqlite.learned.put_items([pair("k", "m1")])
    assert sqlite.learned.counts() == {"expression_pair": 1}
    sqlite.close()
    redis = Stores.from_config(redis_config(redis_url, redis_prefix))
    try:
        assert isinstance(redis.learned, RedisLearnedStore)
        assert redis.learned.version(BOT, GROUP) == 0
    finally:
        redis.close()
