from __future__ import annotations

import pytest
from retrieval_support import BOT, GROUP, NOW, USER, make_query

from promptweave import ChatMessage, Config, Stores
from promptweave.builtin_plugins import retrievers
from promptweave.config import RetrievalConfig
from promptweave.items import LearningType
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
from promptweave.store.retrieval_memory import InMemoryRetrievalStore

QUESTION = "周六晚上桌游局还照常吗？我记得上次说要换地方"


def stores_with(**records) -> Stores:
    store = InMemoryRetrievalStore()
    store.write(RetrievalBatch(**records))
    return Stores(retrieval=store)


def memory(text, kind="group_memory", group=GROUP):
    return MemoryRecord(bot_id=BOT, group_id=group, kind=kind, text=text)


def test_memory_returns_hits_above_the_minimum_score_without_duplicates_or_echoes():
    stores = stores_with(
        memories=(
            memory("桌游局一般在周六晚上七点开始", kind="teaching"),
            memory("桌游局一般在周六晚上七点开始", kind="group_memory"),
            memory("周六晚上桌游局还照常吗？我记得上次说要换地方", kind="group_event"),
            memory("今天好冷"),
        )
    )
    result = retrievers.retrieve_memory(make_query(QUESTION, stores=stores))
    assert [item.text for item in result.items] == ["桌游局一般在周六晚上七点开始"]
    assert result.hits[0].details["matched"] == 5


def test_memory_respects_the_configured_limit_and_minimum():
    stores = stores_with(memories=tuple(memory(f"周六桌游局第{i}次") for i in range(10)))
    config = Config(retrieval=RetrievalConfig(memory_limit=3))
    assert (
        len(retrievers.retrieve_memory(make_query(QUESTION, stores=stores, config=config)).items)
        == 3
    )
    strict = Config(retrieval=RetrievalConfig(memory_min_score=1.0))
    assert (
        retrievers.retrieve_memory(make_query(QUESTION, stores=stores, config=strict)).items == ()
    )


def test_recent_event_lines_fill_in_when_the_group_has_no_persistent_hit():
    recent = (
        ChatMessage(id="1", sender_id="30022", text="周六晚上桌游局换到格子桌游吧了", time=NOW),
        ChatMessage(id="2", sender_id="30022", text="哈哈哈哈哈哈", time=NOW),
        ChatMessage(id="3", sender_id=BOT, text="周六晚上桌游局我也去", time=NOW),  # the bot's own
    )
    result = retrievers.retrieve_memory(make_query(QUESTION, recent_messages=recent))
    assert [(item.text, item.source) for item in result.items] == [
        ("周六晚上桌游局换到格子桌游吧了", "recent_group_line")
    ]
    assert result.details["event_fill"] == 1
    stored = stores_with(memories=(memory("桌游局一般在周六晚上七点开始"),))
    result = retrievers.retrieve_memory(make_query(QUESTION, stores=stored, recent_messages=recent))
    assert [item.source for item in result.items] == ["group_memory"]  # no fill-in then


def test_knowledge_is_searched_only_for_knowledge_questions():
    document = KnowledgeDocument(
        bot_id=BOT, group_id=GROUP, source="rules.md",
        text="# 活动须知\n\n## 时间和地点\n\n桌游局每周六晚上七点开始，临时换地方会提前一天通知。",
    )  # fmt: skip
    stores = stores_with(knowledge=(document,))
    skipped = retrievers.retrieve_knowledge(make_query("周六晚上桌游局好开心", stores=stores))
    assert skipped.skipped == "not_a_knowledge_question"
    result = retrievers.retrieve_knowledge(make_query(QUESTION, stores=stores))
    (item,) = result.items
    assert (item.title, item.source, item.chunk_id) == (
        "活动须知 › 时间和地点",
        "rules.md",
        "rules.md#0",
    )


def test_relationship_and_person_facts_are_skipped_in_private_chats():
    for retrieve in (retrievers.retrieve_relationship, retrievers.retrieve_person_facts,
                     retrievers.retrieve_group_expression, retrievers.retrieve_behavior_reference):  # fmt: skip
        assert retrieve(make_query(QUESTION, group_id=None)).skipped == "private_chat"


def test_relationship_gives_facts_guidance_and_affinity_with_its_level():
    note = RelationshipRecord(
        bot_id=BOT,
        group_id=GROUP,
        user_id=USER,
        facts=["常客"],
        guidance=["喜欢直接"],
        affinity=0.62,
    )
    result = retrievers.retrieve_relationship(
        make_query(QUESTION, stores=stores_with(relationships=(note,)))
    )
    (item,) = result.items
    assert (item.facts, item.guidance, item.affinity) == (("常客",), ("喜欢直接",), 0.62)
    assert result.hits[0].details == {"affinity": 0.62, "level": "朋友"}
    other_user = retrievers.retrieve_relationship(
        make_query(QUESTION, stores=stores_with(relationships=(note,)), user_id="x")
    )
    assert other_user.items == ()


def test_person_facts_put_the_ones_touching_the_message_first():
    facts = tuple(
        PersonFactRecord(bot_id=BOT, group_id=GROUP, user_id=USER, text=text)
        for text in ("不喝咖啡", "周六晚上要早点回家")
    )
    result = retrievers.retrieve_person_facts(
        make_query(QUESTION, stores=stores_with(person_facts=facts))
    )
    assert [fact.text for fact in result.items] == ["周六晚上要早点回家", "不喝咖啡"]


def test_old_topics_keep_at_most_three_above_the_minimum_score_without_the_summary_mark():
    summaries = tuple(
        SummaryRecord(bot_id=BOT, group_id=GROUP, user_id=USER, text=text)
        for text in (
            "【此前对话摘要】聊过桌游局换地方的事，周六晚上要提前订位",
            "周六晚上桌游局照常，换地方以后要早点到",
            "桌游局换地方后周六晚上人多",
            "上次说周六晚上桌游局可能换地方",
            "聊过柠檬茶哪家好喝",
        )
    )
    result = retrievers.retrieve_mid_term(
        make_query(QUESTION, stores=stores_with(summaries=summaries))
    )
    assert len(result.items) == 3
    assert all(not item.text.startswith("【") and item.score >= 0.2 for item in result.items)
    assert "聊过柠檬茶哪家好喝" not in [item.text for item in result.items]
    assert result.details == {"scanned": 5}


def test_old_topics_come_from_the_pluggable_summary_source():
    class SessionSummaries:
        def list_summaries(self, bot_id, group_id, user_id, limit):
            assert (bot_id, group_id, user_id) == (BOT, GROUP, USER)
            return ["【此前对话摘要】周六晚上桌游局换地方了"]

    stores = Stores(topic_summaries=SessionSummaries())
    (item,) = retrievers.retrieve_mid_term(make_query(QUESTION, stores=stores)).items
    assert item.text == "周六晚上桌游局换地方了"


def test_group_expression_recalls_at_most_two_similar_pairs_and_the_baseline():
    pairs = tuple(
        ExpressionPairRecord(bot_id=BOT, group_id=GROUP, trigger=trigger, reply=reply)
        for trigger, reply in (
            ("桌游局还照常吗", "照常，七点老地方"),
            ("换地方了吗", "换了，看群公告"),
            ("周六还去吗", "去！"),
            ("今天好冷", "多穿点"),
        )
    )
    rhythm = RhythmRecord(
        bot_id=BOT, group_id=GROUP, single_bubble_share=0.86, median_segment_chars=9
    )
    result = retrievers.retrieve_group_expression(
        make_query(QUESTION, stores=stores_with(expression_pairs=pairs, rhythms=(rhythm,)))
    )
    pairs_found = [item for item in result.items if hasattr(item, "trigger")]
    assert [pair.trigger for pair in pairs_found] == ["桌游局还照常吗", "换地方了吗"]
    assert pairs_found[0].score > pairs_found[1].score >= 0.5
    assert result.items[-1].median_segment_chars == 9


def test_group_expression_recalls_no_pair_below_the_minimum_similarity():
    pairs = (ExpressionPairRecord(bot_id=BOT, group_id=GROUP, trigger="今天好冷", reply="多穿点"),)
    result = retrievers.retrieve_group_expression(
        make_query(QUESTION, stores=stores_with(expression_pairs=pairs))
    )
    assert result.items == ()


def test_behavior_strategies_give_at_most_three_of_each_kind():
    strategies = tuple(
        BehaviorRecord(
            bot_id=BOT,
            group_id=GROUP,
            scene=f"场景{i}",
            action="接话",
            learning_type=kind,
            support=i + 1,
        )
        for kind in LearningType
        for i in range(5)
    )
    result = retrievers.retrieve_behavior_reference(
        make_query(QUESTION, stores=stores_with(strategies=strategies))
    )
    observed = [s.scene for s in result.items if s.learning_type is LearningType.OBSERVED]
    assert observed == ["场景4", "场景3", "场景2"]  # the best supported first
    assert len(result.items) == 6


@pytest.mark.parametrize(
    "name",
    [
        "memory",
        "knowledge",
        "relationship",
        "person_facts",
        "mid_term",
        "group_expression",
        "behavior_reference",
    ],
)
def test_every_builtin_retriever_feeds_the_section_of_its_name(name):
    found = {}
    retrievers.register_retrievers(lambda retriever: found.setdefault(retriever.name, retriever))
    assert found[name].feeds == name
    assert found[name].persistent is (
        name in {"memory", "relationship", "person_facts", "mid_term"}
    )
