from __future__ import annotations

import pytest
from retrieval_support import make_turn

from framework import Decision, allows_persistent_memory, looks_like_knowledge_question
from framework.decision import SocialAction, TurnAction
from framework.retrieval import reads_as_event


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("早上好", False),
        ("烦死了，唉", False),
        ("@小织 哈哈哈哈哈", False),  # the mention does not count towards the length
        ("周六晚上桌游局还照常吗", True),  # a question
        ("帮我看看这个", True),  # a request
        ("今天下班路上看到一只橘猫在便利店门口蹲着，瘦瘦的，我给它买了根火腿肠", True),
    ],
)
def test_short_social_turns_do_not_allow_persistent_memory(text, allowed):
    assert allows_persistent_memory(make_turn(text)) is allowed


def test_a_purely_social_decision_disallows_persistent_memory_whatever_the_length():
    joke = Decision(action=TurnAction.REPLY, social_action=SocialAction.JOKE)
    text = "今天下班路上看到一只橘猫在便利店门口蹲着，瘦瘦的，我给它买了根火腿肠"
    assert allows_persistent_memory(make_turn(text), joke) is False
    assert allows_persistent_memory(make_turn(text + "，你说它吃饱了吗"), joke) is True


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
