"""What the retrieval stores cache per group is dropped as soon as its data changes, whoever writes
it: this store, another connection or process sharing the SQLite file, or plain SQL."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest
from base_support import ROOT
from retrieval_support import BOT, GROUP, USER, make_turn

from promptweave import Config, Promptweave
from promptweave.config import StoreConfig
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RhythmRecord,
    SummaryRecord,
)
from promptweave.store.retrieval_cache import ScopeCache
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase

NO_AUTOLOAD = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    if request.param == "memory":
        return InMemoryRetrievalStore()
    return SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "store.sqlite3"))


def pair(trigger, reply="好", group=GROUP):
    return ExpressionPairRecord(bot_id=BOT, group_id=group, trigger=trigger, reply=reply)


class Builds:
    """A ``build`` for ``cached`` that counts its calls and reads the group's triggers."""

    def __init__(self, store):
        self.store = store
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return [p.trigger for p in self.store.expression_pairs(BOT, GROUP, limit=100)]

    def read(self):
        return self.store.cached(BOT, GROUP, "triggers", self, kinds=("expression_pairs",))


def test_a_cached_value_is_built_once_and_rebuilt_after_a_write_of_its_kind(store):
    store.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    builds = Builds(store)
    assert builds.read() == ["快了"]
    assert builds.read() == ["快了"]
    assert builds.calls == 1
    store.write(RetrievalBatch(expression_pairs=(pair("好冷"),)))
    assert builds.read() == ["好冷", "快了"]
    assert builds.calls == 2


def test_writes_of_other_groups_or_other_kinds_keep_the_cached_value(store):
    store.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    builds = Builds(store)
    builds.read()
    store.write(
        RetrievalBatch(
            expression_pairs=(pair("别的群", group="29999"),),
            memories=(MemoryRecord(bot_id=BOT, group_id=GROUP, kind="teaching", text="桌游"),),
            rhythms=(
                RhythmRecord(
                    bot_id=BOT, group_id=GROUP, single_bubble_share=0.5, median_segment_chars=5
                ),
            ),
        )
    )
    assert builds.read() == ["快了"]
    assert builds.calls == 1


def test_a_value_depending_on_several_kinds_is_rebuilt_after_a_write_of_any(store):
    calls = []

    def read():
        return store.cached(
            BOT, GROUP, "both", lambda: calls.append(1), kinds=("expression_pairs", "strategies")
        )

    read()
    store.write(
        RetrievalBatch(
            strategies=(BehaviorRecord(bot_id=BOT, group_id=GROUP, scene="s", action="a"),)
        )
    )
    read()
    read()
    assert len(calls) == 2


def test_every_read_by_scope_sees_the_latest_write(store):
    def everything():
        return (
            store.relationship(BOT, GROUP, USER),
            store.person_facts(BOT, GROUP, USER, limit=5),
            store.expression_pairs(BOT, GROUP, limit=5),
            store.rhythm_baseline(BOT, GROUP),
            store.behavior_strategies(BOT, GROUP, limit=5),
            store.list_summaries(BOT, GROUP, USER, 5),
        )

    empty = everything()
    assert empty == (None, [], [], None, [], [])
    assert everything() == empty  # cached
    store.write(
        RetrievalBatch(
            relationships=(
                RelationshipRecord(bot_id=BOT, group_id=GROUP, user_id=USER, affinity=0.5),
            ),
            person_facts=(PersonFactRecord(bot_id=BOT, group_id=GROUP, user_id=USER, text="猫"),),
            expression_pairs=(pair("快了"),),
            rhythms=(
                RhythmRecord(
                    bot_id=BOT, group_id=GROUP, single_bubble_share=0.5, median_segment_chars=5
                ),
            ),
            strategies=(BehaviorRecord(bot_id=BOT, group_id=GROUP, scene="s", action="a"),),
            summaries=(SummaryRecord(bot_id=BOT, group_id=GROUP, user_id=USER, text="旧话题"),),
        )
    )
    relationship, facts, pairs, rhythm, strategies, summaries = everything()
    assert relationship.affinity == 0.5
    assert [f.text for f in facts] == ["猫"]
    assert [p.trigger for p in pairs] == ["快了"]
    assert rhythm.median_segment_chars == 5
    assert [s.scene for s in strategies] == ["s"]
    assert summaries == ["旧话题"]


def test_searches_see_the_latest_write_of_their_scope_only(store):
    def memories(group=GROUP):
        found = store.search_memories(BOT, group, ("桌游", "周六"), limit=5)
        return [hit.record.text for hit in found]

    def knowledge():
        found = store.search_knowledge(BOT, GROUP, ("报名", "流程"), limit=5)
        return [hit.record.text for hit in found]

    def memory(text, group=GROUP):
        return MemoryRecord(bot_id=BOT, group_id=group, kind="teaching", text=text)

    assert (memories(), knowledge()) == ([], [])
    store.write(RetrievalBatch(memories=(memory("周六晚上桌游局"),)))
    assert memories() == ["周六晚上桌游局"]
    store.write(RetrievalBatch(memories=(memory("桌游局换地方了"), memory("周六桌游", "other"))))
    assert memories() == ["周六晚上桌游局", "桌游局换地方了"]
    assert memories("other") == ["周六桌游"]
    document = KnowledgeDocument(bot_id=BOT, group_id=GROUP, source="faq", text="报名流程：先填表")
    store.write(RetrievalBatch(knowledge=(document,)))
    assert knowledge() == ["报名流程：先填表"]
    replaced = KnowledgeDocument(bot_id=BOT, group_id=GROUP, source="faq", text="报名改到线上")
    store.write(RetrievalBatch(knowledge=(replaced,)))
    assert knowledge() == ["报名改到线上"]
    assert memories() == ["周六晚上桌游局", "桌游局换地方了"]


def test_a_read_cannot_change_what_the_cache_holds(store):
    store.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    store.expression_pairs(BOT, GROUP, limit=5).clear()
    assert [p.trigger for p in store.expression_pairs(BOT, GROUP, limit=5)] == ["快了"]


def test_a_failed_write_keeps_the_cached_value(tmp_path):
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    store.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    builds = Builds(store)
    builds.read()
    bad = SummaryRecord(bot_id=BOT, group_id=GROUP, user_id=USER, text="旧话题")
    object.__setattr__(bad, "created_at", "not a time")  # fails after the pairs are written
    with pytest.raises(AttributeError):
        store.write(RetrievalBatch(expression_pairs=(pair("好冷"),), summaries=(bad,)))
    assert builds.read() == ["快了"]
    assert builds.calls == 1


def test_a_write_through_another_connection_to_the_file_is_seen(tmp_path):
    path = tmp_path / "s.sqlite3"
    reader = SQLiteRetrievalStore(SQLiteDatabase(path))
    writer = SQLiteRetrievalStore(SQLiteDatabase(path))
    writer.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    builds = Builds(reader)
    assert builds.read() == ["快了"]
    writer.write(RetrievalBatch(expression_pairs=(pair("好冷"),)))
    assert builds.read() == ["好冷", "快了"]
    assert builds.calls == 2


def test_plain_sql_changes_are_counted_too(tmp_path):
    """Triggers count the changes, so even a write that bypasses the store is seen."""
    path = tmp_path / "s.sqlite3"
    store = SQLiteRetrievalStore(SQLiteDatabase(path))
    store.write(RetrievalBatch(expression_pairs=(pair("快了"), pair("好冷"))))
    builds = Builds(store)
    builds.read()
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM expression_pairs WHERE trigger = '好冷'")
    assert builds.read() == ["快了"]
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE expression_pairs SET trigger = '快到了'")
    assert builds.read() == ["快到了"]
    assert builds.calls == 3


def test_a_pair_written_by_another_process_is_recalled_on_the_next_turn(tmp_path):
    path = tmp_path / "bot.sqlite3"
    pw = Promptweave.from_config(
        Config(store=StoreConfig(backend="sqlite", path=str(path))), environ=NO_AUTOLOAD
    )
    pw.stores.retrieval.write(RetrievalBatch(expression_pairs=(pair("下雨了", "带伞了吗"),)))
    turn = make_turn("周六桌游局还去吗")

    def recalled():
        (trace,) = pw.render(turn).trace["retrieval"]["sections"]["group_expression"]
        return [hit["text"] for hit in trace["hits"]]

    assert recalled() == []
    assert recalled() == []  # from the cached index
    script = textwrap.dedent(
        f"""
        from promptweave.store.retrieval import ExpressionPairRecord, RetrievalBatch
        from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
        from promptweave.store.sqlite import SQLiteDatabase

        SQLiteRetrievalStore(SQLiteDatabase({str(path)!r})).write(RetrievalBatch(
            expression_pairs=(ExpressionPairRecord(
                bot_id={BOT!r}, group_id={GROUP!r}, trigger="周六桌游局", reply="去！"),)
        ))
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True)
    assert recalled() == ["触发「周六桌游局」时：去！"]
    pw.close()


def test_a_memory_written_by_another_process_is_found_on_the_next_turn(tmp_path):
    path = tmp_path / "bot.sqlite3"
    pw = Promptweave.from_config(
        Config(store=StoreConfig(backend="sqlite", path=str(path))), environ=NO_AUTOLOAD
    )
    turn = make_turn("@小织 周六晚上桌游局还照常吗？我记得上次说要换地方")

    def found():
        (trace,) = pw.render(turn).trace["retrieval"]["sections"]["memory"]
        return [hit["text"] for hit in trace["hits"]]

    assert found() == []
    script = textwrap.dedent(
        f"""
        from promptweave.store.retrieval import MemoryRecord, RetrievalBatch
        from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
        from promptweave.store.sqlite import SQLiteDatabase

        SQLiteRetrievalStore(SQLiteDatabase({str(path)!r})).write(RetrievalBatch(
            memories=(MemoryRecord(bot_id={BOT!r}, group_id={GROUP!r}, kind="teaching",
                                   text="桌游局一般在周六晚上七点开始"),)
        ))
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True)
    assert found() == ["桌游局一般在周六晚上七点开始"]
    pw.close()


def test_the_cache_keeps_the_most_recently_read_scopes():
    cache = ScopeCache(max_scopes=2)
    built = []

    def read(scope):
        return cache.get(scope, "k", 0, lambda: built.append(scope) or scope)

    read(("b", "1"))
    read(("b", "2"))
    read(("b", "1"))
    read(("b", "3"))  # drops ("b", "2"), the least recently read
    read(("b", "1"))
    read(("b", "2"))
    assert built == [("b", "1"), ("b", "2"), ("b", "3"), ("b", "2")]


def test_a_value_built_at_another_version_is_not_handed_out():
    cache = ScopeCache()
    assert cache.get(("b", "g"), "k", 1, lambda: "old") == "old"
    assert cache.get(("b", "g"), "k", 1, lambda: "new") == "old"
    assert cache.get(("b", "g"), "k", 2, lambda: "new") == "new"


def test_a_scope_read_again_while_nothing_changed_costs_no_query(tmp_path):
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    store = SQLiteRetrievalStore(database)
    store.write(RetrievalBatch(expression_pairs=(pair("快了"),)))
    builds = Builds(store)
    builds.read()
    statements = []
    database.connection().set_trace_callback(statements.append)
    assert builds.read() == ["快了"]
    # Only the check that no other connection committed: the version is kept.
    assert statements == ["PRAGMA data_version"]
    store.write(RetrievalBatch(expression_pairs=(pair("好冷"),)))
    statements.clear()
    assert builds.read() == ["好冷", "快了"]
    assert any("retrieval_versions" in s for s in statements)
