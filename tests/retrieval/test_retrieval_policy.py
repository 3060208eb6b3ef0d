from __future__ import annotations

import attrs
import pytest
from retrieval_support import make_turn

from promptweave import Config, Promptweave
from promptweave.config import StoreConfig
from promptweave.retrieval.policy import looks_like_knowledge_question, reads_as_event
from promptweave.testing import TEST_ENVIRON


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("@小织 早上好", False),
        ("@小织 哈哈哈哈哈", False),
        ("@小织 周六晚上桌游局还照常吗", True),  # a question
        ("@小织 帮我看看群公告说的地点", True),  # a request
    ],
)
def test_retrieval_follows_the_routing_memory_policy(text, allowed):
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    turn = make_turn(text, trigger="mention")
    turn = attrs.evolve(turn, message=attrs.evolve(turn.message, addressed=True))
    result = runtime.render(turn)
    assert result.trace["retrieval"]["allow_persistent_memory"] is allowed
    statuses = {
        entry["retriever"]: entry.get("reason")
        for entries in result.trace["retrieval"]["sections"].values()
        for entry in entries
    }
    if not allowed:
        assert statuses["memory"] == "skipped_short_social_turn"
        assert statuses["person_facts"] == "skipped_short_social_turn"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("怎么绑定账号", True),
        ("群规是什么", True),
        ("FAQ 在哪", True),
        ("哈哈", False),
        ("怎", False),
    ],
)
def test_knowledge_questions_are_recognised_by_their_words(text, expected):
    assert looks_like_knowledge_question(text) is expected


def test_knowledge_question_words_can_be_extended():
    assert not looks_like_knowledge_question("桌游局取消了吗")
    assert looks_like_knowledge_question("桌游局取消了吗", ["取消"])


def test_event_lines_name_a_time_or_a_plan():
    assert reads_as_event("周六晚上七点格子桌游吧集合")
    assert not reads_as_event("哈哈哈哈哈哈")
    assert not reads_as_event("周六")  # too short to carry an event


@pytest.mark.parametrize(
    "words",
    [(), ("怎么",), ("a.b", "c|d", "(e)", "[f]"), ("",), ("HELP", "faq", "须知")],
)
@pytest.mark.parametrize(
    "text", ["怎么报名", "axb 还是 a.b", "c|d?", "(e) 吗", "[f]", "", "x", "Help me", "FAQ 在哪"]
)
def test_knowledge_words_given_as_a_tuple_match_as_when_given_one_by_one(words, text):
    # A tuple of words is matched with one compiled pattern, any other iterable word by word.
    assert looks_like_knowledge_question(text, words) == looks_like_knowledge_question(
        text, list(words)
    )
