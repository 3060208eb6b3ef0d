"""What the sections read of the model learners' kinds: strategies, person facts, relationship
notes and confirmed group events, beside what an operator imported (``docs/learning.md``)."""

from __future__ import annotations

from typing import Any

import pytest
from base_support import BOT, GROUP, T0

from promptweave.items import LearningType, MemoryKind
from promptweave.store.learned import LearnedItem, item_key
from promptweave.store.learned_memory import MemoryLearnedStore
from promptweave.store.learned_retrieval import LearnedRetrievalStore, learned_id
from promptweave.store.retrieval import (
    BehaviorRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
)
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.text.scoring import text_terms


def _item(
    kind: str, key: str, fields: dict[str, Any], *, user: str = "", count: int = 1
) -> LearnedItem:
    return LearnedItem(
        kind=kind,
        bot_id=BOT.id,
        group_id=GROUP,
        key=key,
        fields=fields,
        user_id=user,
        source_message_ids=(f"m-{key}",),
        count=count,
        learned_at=T0,
    )


@pytest.fixture
def store() -> LearnedRetrievalStore:
    imported = InMemoryRetrievalStore()
    imported.write(
        RetrievalBatch(
            strategies=(
                BehaviorRecord(bot_id=BOT.id, group_id=GROUP, scene="对方吐槽时", action="先共情"),
            ),
            person_facts=(
                PersonFactRecord(bot_id=BOT.id, group_id=GROUP, user_id="30001", text="ta 喜欢猫"),
            ),
            relationships=(
                RelationshipRecord(
                    bot_id=BOT.id, group_id=GROUP, user_id="30009", facts=("老朋友",), affinity=0.5
                ),
            ),
        )
    )
    return LearnedRetrievalStore(imported=imported, learned=MemoryLearnedStore(), clock=lambda: T0)


def test_learned_strategies_of_both_types_come_first_by_support(
    store: LearnedRetrievalStore,
) -> None:
    store.learned.put_items(
        [
            _item(
                "strategy",
                "s1",
                {
                    "learning_type": "observed",
                    "scene": "对方分享进展时",
                    "action": "追问细节",
                    "outcome": "",
                },
            ),
            _item(
                "strategy",
                "s2",
                {
                    "learning_type": "self_reflection",
                    "scene": "对方提问时",
                    "action": "用一句短话回答",
                    "outcome": "对方接着聊了",
                },
                count=3,
            ),
            _item("strategy", "bad", {"learning_type": "guess", "scene": "x", "action": "y"}),
        ]
    )
    found = store.behavior_strategies(BOT.id, GROUP, limit=10)
    assert [(s.scene, s.learning_type, s.support, s.id) for s in found] == [
        ("对方提问时", LearningType.SELF_REFLECTION, 3, "learned:strategy:s2"),
        ("对方分享进展时", LearningType.OBSERVED, 1, "learned:strategy:s1"),
        ("对方吐槽时", LearningType.OBSERVED, 1, ""),
    ]
    assert len(store.behavior_strategies(BOT.id, GROUP, limit=1)) == 1


def test_a_member_reads_their_own_learned_facts_before_the_imported_ones(
    store: LearnedRetrievalStore,
) -> None:
    store.learned.put_items(
        [
            _item("person_fact", "f1", {"text": "ta 在学日语"}, user="30001"),
            _item("person_fact", "f2", {"text": "ta 喜欢猫"}, user="30001"),  # imported too: once
            _item("person_fact", "f3", {"text": "ta 讨厌香菜"}, user="30002"),
        ]
    )
    facts = store.person_facts(BOT.id, GROUP, "30001", limit=5)
    assert [(f.text, f.id) for f in facts] == [
        ("ta 在学日语", "learned:person_fact:f1"),
        ("ta 喜欢猫", "learned:person_fact:f2"),
    ]
    assert [f.text for f in store.person_facts(BOT.id, GROUP, "30002", limit=5)] == ["ta 讨厌香菜"]


def test_an_imported_relationship_wins_else_the_learned_one_is_read(
    store: LearnedRetrievalStore,
) -> None:
    store.learned.put_items(
        [
            _item(
                "relationship",
                item_key("relationship", "30001"),
                {
                    "facts": ["聊过桌游", ""],
                    "guidance": ["回答要具体"],
                    "affinity": 0.09,
                    "exchanges": 3,
                },
                user="30001",
            ),
            _item(
                "relationship",
                item_key("relationship", "30009"),
                {"facts": ["学到的"], "guidance": [], "affinity": 0.3, "exchanges": 1},
                user="30009",
            ),
        ]
    )
    learned = store.relationship(BOT.id, GROUP, "30001")
    assert learned is not None
    assert (learned.facts, learned.guidance, learned.affinity) == (
        ("聊过桌游",),
        ("回答要具体",),
        0.09,
    )
    assert learned.id == f"learned:relationship:{item_key('relationship', '30001')}"
    imported = store.relationship(BOT.id, GROUP, "30009")
    assert imported is not None and imported.facts == ("老朋友",)
    assert store.relationship(BOT.id, GROUP, "30077") is None


def test_a_confirmed_group_event_is_a_memory_of_its_own_block(store: LearnedRetrievalStore) -> None:
    store.learned.put_items(
        [
            _item(
                "group_event",
                "e1",
                {
                    "text": "2026-12-05：周六下午三点格子桌游吧集合",
                    "date": "2026-12-05",
                    "confirmed_by": ["1", "2"],
                },
            )
        ]
    )
    (hit,) = store.search_memories(BOT.id, GROUP, text_terms("周六去桌游吧吗"), limit=5)
    assert hit.record.kind is MemoryKind.GROUP_EVENT
    assert hit.record.source == "group_event"
    assert hit.record.id == "learned:group_event:e1"
    assert store.search_memories(BOT.id, GROUP, text_terms("今天天气"), limit=5) == []


def test_negative_feedback_drops_a_learned_strategy_and_group_event(
    store: LearnedRetrievalStore,
) -> None:
    strategy = _item(
        "strategy", "s1", {"learning_type": "observed", "scene": "对方提问时", "action": "抖机灵"}
    )
    event = _item("group_event", "e1", {"text": "2026-12-05：周六桌游", "date": "2026-12-05"})
    store.learned.put_items([strategy, event])
    outcome = LearnedItem(
        kind="feedback",
        bot_id=BOT.id,
        group_id=GROUP,
        key="o1",
        fields={
            "scores": [
                {"type": "strategy", "id": learned_id(strategy), "delta": -3},
                {"type": "memory", "id": learned_id(event), "delta": -3},
            ]
        },
        source_message_ids=("b1",),
        learned_at=T0,
    )
    store.learned.put_items([outcome])
    assert [s.id for s in store.behavior_strategies(BOT.id, GROUP, limit=5)] == [""]
    assert store.search_memories(BOT.id, GROUP, text_terms("周六桌游"), limit=5) == []
