"""The cached, bounded retrieval finds what the earlier retrieval found.

:mod:`retrieval_reference` is the earlier code (every expression pair and strategy compared on
every turn, the scope filtered after the full-text match, nothing cached). Here both run over
identical stores, the example data and randomised ones, and must give the same items, hits and
rendered turns, byte for byte. Randomised stores stay below ``RANKED_MATCHES`` texts per term, so
the bounded search has nothing to leave out (what it leaves out beyond is pinned in
``test_retrieval_bounds.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
from retrieval_reference import ReferenceRetrievers, ReferenceStore

from promptweave import Bot, ChatMessage, Config, Promptweave, Stores, Turn, load_turn_file
from promptweave.config import RetrievalConfig, StoreConfig
from promptweave.store import retrieval_sqlite
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
from promptweave.store.retrieval_import import read_files
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.stores import TopicSummaries
from promptweave.text.scoring import query_terms
from promptweave.turn import SpeakTrigger

EXAMPLES = Path(__file__).parent.parent / "examples"
NO_AUTOLOAD = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
UTC8 = dt.timezone(dt.timedelta(hours=8))
NOW = dt.datetime(2026, 11, 28, 20, 41, tzinfo=UTC8)

WORDS = (
    "周六", "晚上", "桌游", "地铁", "米线", "报表", "加班", "柠檬", "阿瓦隆", "卡坦", "生日",
    "蛋糕", "订位", "格子", "咖啡", "猫咪", "今天", "明天", "规则", "报名", "换到", "地方",
    "好的", "哈哈", "确实", "可以", "真的", "ok", "bug", "ps5", "steam", "的", "了", "吗",
)  # fmt: skip
MARKS = ("", "", "", "，", "。", "？", "！", " ", "～", "...", "、")
QUESTIONS = ("怎么", "在哪", "几点", "是什么", "规则", "能不能", "吗", "")
SCOPES = (("10001", "20001"), ("10001", "20002"), ("10002", "20001"), ("10001", ""))
USERS = ("30017", "30022", "30031")


def _text(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(MARKS) for _ in range(rng.randint(low, high)))


def random_batch(rng: random.Random) -> RetrievalBatch:
    """Every kind of record in four scopes, from a small shared vocabulary: many shared terms,
    duplicate triggers, equal supports and equally long texts, so ties are everywhere."""
    memories, knowledge, relationships, facts, pairs, rhythms, strategies, summaries = (
        [] for _ in range(8)
    )
    for bot_id, group_id in SCOPES:
        scope = {"bot_id": bot_id, "group_id": group_id}
        for i in range(rng.randint(20, 60)):
            memories.append(
                MemoryRecord(
                    **scope,
                    kind=rng.choice(("teaching", "group_event", "ip_knowledge", "group_memory")),
                    text=_text(rng, 1, 8) + rng.choice(("", f"（{i}）")),
                    id=f"m{i}",
                    created_at=NOW - dt.timedelta(days=i) if rng.random() < 0.5 else None,
                )
            )
        for d in range(rng.randint(0, 4)):
            sections = "\n\n".join(
                f"## {_text(rng, 1, 2)}\n\n{_text(rng, 3, 30)}" for _ in range(rng.randint(1, 4))
            )
            knowledge.append(
                KnowledgeDocument(
                    **scope, source=f"doc{d}.md", title=_text(rng, 1, 2), text=sections
                )
            )
        for user_id in USERS:
            if rng.random() < 0.7:
                relationships.append(
                    RelationshipRecord(
                        **scope,
                        user_id=user_id,
                        facts=[_text(rng, 1, 3) for _ in range(rng.randint(0, 2))],
                        guidance=[_text(rng, 1, 3) for _ in range(rng.randint(0, 2))],
                        affinity=round(rng.uniform(-1, 1), 2) if rng.random() < 0.8 else 0.0,
                    )
                )
            facts.extend(
                PersonFactRecord(**scope, user_id=user_id, text=_text(rng, 1, 4))
                for _ in range(rng.randint(0, 8))
            )
            summaries.extend(
                SummaryRecord(
                    **scope,
                    user_id=user_id,
                    text=rng.choice(("【此前对话摘要】", "")) + _text(rng, 2, 12),
                    created_at=NOW - dt.timedelta(hours=rng.randint(0, 300))
                    if rng.random() < 0.8
                    else None,
                )
                for _ in range(rng.randint(0, 10))
            )
        triggers = [_text(rng, 1, 3) for _ in range(rng.randint(0, 60))]
        pairs.extend(
            ExpressionPairRecord(**scope, trigger=rng.choice(triggers), reply=_text(rng, 1, 2))
            for _ in range(len(triggers) * 2)
        )
        if rng.random() < 0.8:
            rhythms.append(
                RhythmRecord(
                    **scope,
                    single_bubble_share=round(rng.random(), 2),
                    median_segment_chars=rng.randint(3, 20),
                )
            )
        strategies.extend(
            BehaviorRecord(
                **scope,
                scene=_text(rng, 1, 3),
                action=_text(rng, 1, 3),
                outcome=_text(rng, 0, 2),
                learning_type=rng.choice(("observed", "self_reflection")),
                support=rng.randint(1, 4),
            )
            for _ in range(rng.randint(0, 40))
        )
    return RetrievalBatch(
        memories=tuple(memories),
        knowledge=tuple(knowledge),
        relationships=tuple(relationships),
        person_facts=tuple(facts),
        expression_pairs=tuple(pairs),
        rhythms=tuple(rhythms),
        strategies=tuple(strategies),
        summaries=tuple(summaries),
    )


def random_turn(rng: random.Random, number: int) -> Turn:
    bot_id, group_id = rng.choice(SCOPES)
    at = NOW + dt.timedelta(minutes=3 * number)
    text = _text(rng, 1, 6) + rng.choice(QUESTIONS) + rng.choice(("？", "", "。"))
    addressed = rng.random() < 0.7
    return Turn(
        bot=Bot(id=bot_id, name="小织", peer_bot_ids=("10009",)),
        group_id=group_id or None,
        trigger=SpeakTrigger.MENTION if addressed else None,
        message=ChatMessage(
            id=f"t{number}",
            sender_id=rng.choice(USERS),
            sender_name="青柠汽水",
            text=f"@小织 {text}" if addressed else text,
            addressed=addressed,
            time=at,
        ),
        recent_messages=tuple(
            ChatMessage(
                id=f"t{number}-{i}",
                sender_id=rng.choice((*USERS, "10009")),
                text=_text(rng, 1, 5) + rng.choice(("明晚", "周六", "改到", "")),
                time=at - dt.timedelta(seconds=30 * (6 - i)),
            )
            for i in range(rng.randint(0, 6))
        ),
    )


def _comparable(value: Any) -> Any:
    """A rendered turn without what differs between any two runs: times taken, plugin names."""
    if isinstance(value, dict):
        return {
            key: _comparable(item)
            for key, item in value.items()
            if key not in ("duration_ms", "stage_durations_ms", "plugin")
        }
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


def runtimes(
    tmp_path: Path, backend: str, batch: RetrievalBatch, retrieval: RetrievalConfig, seed: int
) -> tuple[Promptweave, Promptweave]:
    """A runtime with today's retrievers and one with the earlier ones, over identical stores
    filled with ``batch``, routing with the same random numbers."""
    built = []
    for name in ("current", "reference"):
        config = Config(
            store=StoreConfig(backend=backend, path=str(tmp_path / f"{name}.sqlite3")),
            retrieval=retrieval,
        )
        stores = Stores.from_config(config)
        stores.retrieval.write(batch)
        environ = dict(NO_AUTOLOAD)
        plugins: list[object] = []
        if name == "reference":
            environ["PROMPTWEAVE_DISABLE_PLUGINS"] = "retrievers"
            plugins.append(ReferenceRetrievers())
            if stores.database is not None:
                stores.retrieval = ReferenceStore(SQLiteDatabase(stores.database.path))  # type: ignore[assignment]
                stores.topic_summaries = TopicSummaries(stores.summaries, stores.retrieval)
        built.append(
            Promptweave.from_config(
                config,
                extra_plugins=plugins,
                environ=environ,
                stores=stores,
                rng=random.Random(seed),
            )
        )
    return built[0], built[1]


def assert_same_turns(
    current: Promptweave, reference: Promptweave, turns: list[Turn]
) -> dict[str, int]:
    """Render ``turns`` with both; returns how many hits each retriever had."""
    hits: dict[str, int] = {}
    for turn in turns:
        now, before = current.render(turn), reference.render(turn)
        assert now.system_prompt == before.system_prompt
        assert now.messages == before.messages
        assert _comparable(now.to_json()) == _comparable(before.to_json())
        for traces in now.trace["retrieval"]["sections"].values():
            for trace in traces:
                assert trace.get("reason") not in ("error", "timeout"), trace
                hits[trace["retriever"]] = hits.get(trace["retriever"], 0) + len(trace["hits"])
    return hits


@pytest.mark.parametrize("backend", ["sqlite", "memory"])
def test_the_example_turns_render_byte_for_byte_as_before(tmp_path, backend):
    batch = read_files("auto", [EXAMPLES / "data"], bot_id="10001", group_id="20001")
    current, reference = runtimes(tmp_path, backend, batch, RetrievalConfig(), seed=5)
    turns = [load_turn_file(path) for path in sorted((EXAMPLES / "turns").glob("*.json"))]
    assert_same_turns(current, reference, turns * 2)  # the second time from warm caches
    rendered = current.render(load_turn_file(EXAMPLES / "turns" / "at_question_store.json"))
    sections = rendered.trace["retrieval"]["sections"]
    assert sections["memory"][0]["status"] == "hit"  # the comparison covers real hits
    assert sections["group_expression"][0]["details"]["pairs_compared"] > 0


RETRIEVERS = (
    "memory",
    "knowledge",
    "relationship",
    "person_facts",
    "mid_term",
    "group_expression",
    "behavior_reference",
)
RETRIEVAL_CONFIGS = {
    "defaults": RetrievalConfig(),
    "loose": RetrievalConfig(
        expression_min_similarity=0.2, memory_min_score=0.0, knowledge_min_score=0.0, strategies=6
    ),
    "no_minimum": RetrievalConfig(expression_min_similarity=0.0, expression_pairs=5),
}


@pytest.mark.parametrize("config", sorted(RETRIEVAL_CONFIGS))
@pytest.mark.parametrize("backend", ["sqlite", "memory"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomised_stores_render_byte_for_byte_as_before(tmp_path, backend, seed, config):
    rng = random.Random(seed)
    batch = random_batch(rng)
    current, reference = runtimes(tmp_path, backend, batch, RETRIEVAL_CONFIGS[config], seed)
    turns = [random_turn(rng, number) for number in range(40)]
    hits = assert_same_turns(current, reference, turns)
    assert all(hits.get(name, 0) >= 5 for name in RETRIEVERS), hits


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_sqlite_searches_give_the_same_hits_in_the_same_order_as_before(tmp_path, seed):
    rng = random.Random(seed)
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    store.write(random_batch(rng))
    reference = ReferenceStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    compared = 0
    for _ in range(150):
        bot_id, group_id = rng.choice(SCOPES)
        terms = query_terms(_text(rng, 1, 12))
        limit = rng.choice((1, 3, 6, 12, 40))
        # The kept document counts choose the terms the index's vocabulary chose, and none
        # is left out: these stores stay within the ranked texts.
        assert store._match_terms(retrieval_sqlite._MEMORIES, terms) == (
            reference._match_terms("memories_vocab", terms)
        )
        assert store._match_terms(retrieval_sqlite._KNOWLEDGE, terms) == (
            reference._match_terms("knowledge_vocab", terms)
        )
        for search in ("search_memories", "search_knowledge"):
            found = getattr(store, search)(bot_id, group_id, terms, limit=limit)
            assert found == getattr(reference, search)(bot_id, group_id, terms, limit=limit)
            compared += len(found)
    assert compared > 1000


def test_the_reference_and_the_current_reads_by_scope_agree(tmp_path):
    rng = random.Random(9)
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    store.write(random_batch(rng))
    reference = ReferenceStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    for bot_id, group_id in SCOPES:
        for _ in range(2):  # read, then read from the cache
            assert store.expression_pairs(bot_id, group_id, limit=50) == (
                reference.expression_pairs(bot_id, group_id, limit=50)
            )
            assert store.behavior_strategies(bot_id, group_id, limit=9) == (
                reference.behavior_strategies(bot_id, group_id, limit=9)
            )
            assert store.rhythm_baseline(bot_id, group_id) == (
                reference.rhythm_baseline(bot_id, group_id)
            )
            for user_id in USERS:
                assert store.relationship(bot_id, group_id, user_id) == (
                    reference.relationship(bot_id, group_id, user_id)
                )
                assert store.person_facts(bot_id, group_id, user_id, limit=4) == (
                    reference.person_facts(bot_id, group_id, user_id, limit=4)
                )
                assert store.list_summaries(bot_id, group_id or None, user_id, 5) == (
                    reference.list_summaries(bot_id, group_id or None, user_id, 5)
                )


def test_the_comparison_sees_differences(tmp_path):
    """The reference comparison is not vacuous: a store with one more memory renders otherwise."""
    batch = read_files("auto", [EXAMPLES / "data"], bot_id="10001", group_id="20001")
    current, reference = runtimes(tmp_path, "sqlite", batch, RetrievalConfig(), seed=5)
    current.stores.retrieval.write(
        RetrievalBatch(
            memories=(
                MemoryRecord(
                    bot_id="10001", group_id="20001", kind="teaching", text="周六桌游局改到格子"
                ),
            )
        )
    )
    turn = load_turn_file(EXAMPLES / "turns" / "at_question_store.json")
    with pytest.raises(AssertionError):
        assert_same_turns(current, reference, [turn])
    assert json.dumps(_comparable(current.render(turn).to_json()), ensure_ascii=False).count(
        "周六桌游局改到格子"
    )
