from __future__ import annotations

import datetime as dt
import random

import pytest

from framework import query_terms
from framework.store import retrieval_sqlite
from framework.store.retrieval import (
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
from framework.store.retrieval_memory import InMemoryRetrievalStore
from framework.store.retrieval_sqlite import SQLiteRetrievalStore
from framework.store.sqlite import SQLiteDatabase

UTC8 = dt.timezone(dt.timedelta(hours=8))


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    if request.param == "memory":
        return InMemoryRetrievalStore()
    return SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "store.sqlite3"))


def memory(text, kind="group_memory", bot="b1", group="g1", **kwargs):
    return MemoryRecord(bot_id=bot, group_id=group, kind=kind, text=text, **kwargs)


def test_memory_search_ranks_by_score_within_the_scope(store):
    store.write(
        RetrievalBatch(
            memories=(
                memory("青柠汽水说周末可能要加班"),
                memory("桌游局一般在周六晚上七点开始", kind="teaching", id="m1"),
                memory("今天好冷，出门差点被风吹回去"),
            )
        )
    )
    hits = store.search_memories("b1", "g1", query_terms("周六晚上桌游局还照常吗"), limit=5)
    assert [hit.record.text for hit in hits] == ["桌游局一般在周六晚上七点开始"]
    assert hits[0].record.id == "m1" and hits[0].record.kind == "teaching"
    assert 0 < hits[0].score <= 1 and hits[0].matched == 5


def test_sqlite_hits_carry_bm25_and_memory_hits_do_not(store):
    store.write(RetrievalBatch(memories=(memory("桌游局在周六"), memory("猫"))))
    (hit,) = store.search_memories("b1", "g1", query_terms("周六桌游局"), limit=5)
    assert (hit.bm25 is not None) is isinstance(store, SQLiteRetrievalStore)


def test_writing_the_same_memory_twice_keeps_one(store):
    batch = RetrievalBatch(memories=(memory("桌游局在周六", source="a"),))
    store.write(batch)
    store.write(RetrievalBatch(memories=(memory("桌游局在周六", source="b"),)))
    hits = store.search_memories("b1", "g1", query_terms("周六桌游局"), limit=5)
    assert [(h.record.text, h.record.source) for h in hits] == [("桌游局在周六", "b")]
    assert store.counts()["memories"] == 1


def test_reimporting_a_document_replaces_its_chunks(store):
    old = KnowledgeDocument(
        bot_id="b1", group_id="g1", source="rules.md", text="# 群规\n\n旧的桌游规则"
    )
    new = KnowledgeDocument(
        bot_id="b1", group_id="g1", source="rules.md", text="# 群规\n\n新的报名流程"
    )
    store.write(RetrievalBatch(knowledge=(old,)))
    store.write(RetrievalBatch(knowledge=(new,)))
    assert store.search_knowledge("b1", "g1", query_terms("桌游规则"), limit=5) == []
    (hit,) = store.search_knowledge("b1", "g1", query_terms("报名流程"), limit=5)
    assert (hit.record.title, hit.record.text, hit.record.chunk_id) == (
        "群规",
        "新的报名流程",
        "rules.md#0",
    )


def test_profile_records_are_read_by_scope(store):
    store.write(
        RetrievalBatch(
            relationships=(
                RelationshipRecord(
                    bot_id="b1", group_id="g1", user_id="u1", facts=["常客"], affinity=0.5
                ),
            ),
            person_facts=(
                PersonFactRecord(bot_id="b1", group_id="g1", user_id="u1", text="不吃香菜"),
                PersonFactRecord(bot_id="b1", group_id="g1", user_id="u1", text="喜欢柠檬茶"),
            ),
            expression_pairs=(
                ExpressionPairRecord(bot_id="b1", group_id="g1", trigger="快了", reply="确实可以"),
                ExpressionPairRecord(bot_id="b1", group_id="g1", trigger="好冷", reply="多穿点"),
            ),
            rhythms=(
                RhythmRecord(
                    bot_id="b1", group_id="g1", single_bubble_share=0.8, median_segment_chars=7
                ),
            ),
            strategies=(
                BehaviorRecord(bot_id="b1", group_id="g1", scene="a", action="x", support=1),
                BehaviorRecord(bot_id="b1", group_id="g1", scene="b", action="y", support=5),
            ),
        )
    )
    assert store.relationship("b1", "g1", "u1").facts == ("常客",)
    assert store.relationship("b1", "g1", "u2") is None
    assert [f.text for f in store.person_facts("b1", "g1", "u1", limit=5)] == [
        "不吃香菜",
        "喜欢柠檬茶",
    ]
    assert [p.trigger for p in store.expression_pairs("b1", "g1", limit=5)] == ["好冷", "快了"]
    assert store.rhythm_baseline("b1", "g1").median_segment_chars == 7
    assert [s.scene for s in store.behavior_strategies("b1", "g1", limit=5)] == ["b", "a"]


def test_summaries_are_listed_newest_first(store):
    def summary(text, day):
        at = None if day is None else dt.datetime(2026, 11, day, tzinfo=UTC8)
        return SummaryRecord(bot_id="b1", group_id="g1", user_id="u1", text=text, created_at=at)

    store.write(
        RetrievalBatch(summaries=(summary("旧", 1), summary("无时间", None), summary("新", 20)))
    )
    assert store.list_summaries("b1", "g1", "u1", 5) == ["新", "旧", "无时间"]
    assert store.list_summaries("b1", "g1", "u1", 1) == ["新"]
    assert store.list_summaries("b1", None, "u1", 5) == []  # the private scope is another scope


def test_a_failing_write_leaves_nothing_behind(store, monkeypatch):
    def broken(document):
        raise RuntimeError("disk full")

    module = (
        "framework.store.retrieval_memory"
        if isinstance(store, InMemoryRetrievalStore)
        else "framework.store.retrieval_sqlite"
    )
    monkeypatch.setattr(f"{module}.chunk_document", broken)
    batch = RetrievalBatch(
        memories=(memory("桌游局在周六"),),
        knowledge=(KnowledgeDocument(bot_id="b1", group_id="g1", source="s", text="正文"),),
    )
    with pytest.raises(RuntimeError):
        store.write(batch)
    assert store.counts()["memories"] == 0


def test_a_missing_sqlite_file_reads_as_empty_and_is_not_created(tmp_path):
    path = tmp_path / "absent.sqlite3"
    store = SQLiteRetrievalStore(SQLiteDatabase(path))
    assert store.search_memories("b", "g", ["桌游"], limit=3) == []
    assert store.relationship("b", "g", "u") is None
    assert not path.exists()


def test_the_retrieval_schema_is_a_versioned_component(tmp_path):
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    SQLiteRetrievalStore(database).write(RetrievalBatch())
    assert database.schema_version("retrieval") == len(retrieval_sqlite.MIGRATIONS)


def test_records_refuse_blank_text_and_naive_times():
    with pytest.raises(ValueError, match="text must not be empty"):
        memory("  ")
    with pytest.raises(ValueError, match="no UTC offset"):
        memory("x", created_at=dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        RelationshipRecord(bot_id="b", group_id="g", user_id="u", affinity=1.5)


VOCABULARY = [
    "周六",
    "晚上",
    "桌游",
    "地铁",
    "米线",
    "报表",
    "加班",
    "柠檬",
    "阿瓦",
    "卡坦",
    "生日",
    "蛋糕",
    "订位",
    "格子",
    "咖啡",
    "猫咪",
]


def _sentence(rng):
    return "".join(rng.sample(VOCABULARY, rng.randint(2, 5))) + f"（{rng.randint(0, 10**6)}）"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_search_ever_returns_another_bots_or_groups_data(store, seed):
    """Randomized: many bots and groups share one vocabulary; every hit stays in its scope."""
    rng = random.Random(seed)
    scopes = [(f"b{b}", f"g{g}") for b in range(3) for g in range(4)] + [("b0", "")]
    users = ["u1", "u2"]
    batch = RetrievalBatch(
        memories=tuple(
            MemoryRecord(
                bot_id=b,
                group_id=g,
                kind=rng.choice(["teaching", "group_event", "ip_knowledge", "group_memory"]),
                text=f"{b}/{g}:{_sentence(rng)}",
            )
            for b, g in scopes
            for _ in range(30)
        ),
        knowledge=tuple(
            KnowledgeDocument(
                bot_id=b,
                group_id=g,
                source=f"doc{i}",
                text="\n\n".join(f"{b}/{g}:{_sentence(rng)}" for _ in range(5)),
            )
            for b, g in scopes
            for i in range(2)
        ),
        relationships=tuple(
            RelationshipRecord(bot_id=b, group_id=g, user_id=u, facts=[f"{b}/{g}/{u}"])
            for b, g in scopes
            for u in users
        ),
        person_facts=tuple(
            PersonFactRecord(bot_id=b, group_id=g, user_id=u, text=f"{b}/{g}/{u}:{_sentence(rng)}")
            for b, g in scopes
            for u in users
        ),
        expression_pairs=tuple(
            ExpressionPairRecord(bot_id=b, group_id=g, trigger=_sentence(rng), reply=f"{b}/{g}")
            for b, g in scopes
            for _ in range(5)
        ),
        rhythms=tuple(
            RhythmRecord(
                bot_id=b,
                group_id=g,
                single_bubble_share=rng.random(),
                median_segment_chars=len(b + g),
            )
            for b, g in scopes
        ),
        strategies=tuple(
            BehaviorRecord(bot_id=b, group_id=g, scene=_sentence(rng), action=f"{b}/{g}")
            for b, g in scopes
            for _ in range(3)
        ),
        summaries=tuple(
            SummaryRecord(bot_id=b, group_id=g, user_id=u, text=f"{b}/{g}/{u}:{_sentence(rng)}")
            for b, g in scopes
            for u in users
        ),
    )
    store.write(batch)
    for _ in range(40):
        bot, group = rng.choice(scopes)
        user = rng.choice(users)
        terms = query_terms(_sentence(rng))
        memories = store.search_memories(bot, group, terms, limit=20)
        chunks = store.search_knowledge(bot, group, terms, limit=20)
        assert memories and chunks  # the shared vocabulary guarantees candidates
        assert all((h.record.bot_id, h.record.group_id) == (bot, group) for h in memories)
        assert all(h.record.text.startswith(f"{bot}/{group}:") for h in memories)
        assert all(h.record.text.startswith(f"{bot}/{group}:") for h in chunks)
        assert store.relationship(bot, group, user).facts == (f"{bot}/{group}/{user}",)
        assert all(
            f.text.startswith(f"{bot}/{group}/{user}:")
            for f in store.person_facts(bot, group, user, limit=10)
        )
        assert {p.reply for p in store.expression_pairs(bot, group, limit=50)} == {f"{bot}/{group}"}
        assert store.rhythm_baseline(bot, group).median_segment_chars == len(bot + group)
        assert {s.action for s in store.behavior_strategies(bot, group, limit=50)} == {
            f"{bot}/{group}"
        }
        summaries = store.list_summaries(bot, group or None, user, 50)
        assert len(summaries) == 1 and summaries[0].startswith(f"{bot}/{group}/{user}:")


def test_sqlite_search_matches_on_the_rarest_query_terms(tmp_path):
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    common = "周六晚上一起去公园散步看花喝茶聊天拍照"
    store.write(
        RetrievalBatch(
            memories=(
                *(memory(f"{common}（{i}）") for i in range(30)),
                memory("格子桌游吧要提前订位"),
            )
        )
    )
    terms = query_terms(common + "，格子桌游吧")
    assert len(terms) > retrieval_sqlite.MAX_MATCH_TERMS
    found = store._match_terms(retrieval_sqlite._MEMORIES, terms)
    assert len(found) == retrieval_sqlite.MAX_MATCH_TERMS
    assert {"格子", "子桌", "桌游", "游吧"} <= set(found)  # in one document each: the rarest
    texts = [hit.record.text for hit in store.search_memories("b1", "g1", terms, limit=40)]
    assert "格子桌游吧要提前订位" in texts
