"""The word lists and text predicates of routing."""

from __future__ import annotations

import pytest

from promptweave.text import routing_words as ts


@pytest.mark.parametrize(
    ("text", "owed"),
    [("周六几点集合", True), ("真的吗", True), ("你说呢?", True), ("帮我看看", True),
     ("刚才那个人是谁", True), ("今天好冷", False), ("哈哈哈", False)],
)  # fmt: skip
def test_reply_obligation(text, owed):
    assert ts.has_reply_obligation(text) is owed


def test_low_value_social_is_short_and_owes_nothing():
    assert ts.is_low_value_social("今天好冷")
    assert not ts.is_low_value_social("今天好冷吗")
    assert not ts.is_low_value_social("今天" * 13)
    assert ts.is_low_value_social("今天" * 13, max_chars=30)
    assert not ts.is_low_value_social("  ")


@pytest.mark.parametrize(
    ("text", "vent"),
    [("又加班，烦", True), ("唉", True), ("服了~", True), ("累。", True), ("难受 ", True),
     ("我好累啊", False), ("烦死人的周一终于过去了", False), ("这周" * 11 + "真的好烦", False)],
)  # fmt: skip
def test_short_vent_ends_with_a_sigh(text, vent):
    assert ts.is_short_vent(text) is vent


@pytest.mark.parametrize("text", ["难绷", "我破防了", "麻了", "今天好emo", "心累", "气死我了"])
def test_emotion_words(text):
    assert ts.has_emotion_words(text)


@pytest.mark.parametrize(
    "text", ["哈哈哈哈", "hhhh", "草", "666", "六六六", "2333", "确实！", "绷不住了", "XSWL"]
)
def test_short_reactions(text):
    assert ts.is_short_reaction(text)


def test_a_long_message_is_never_a_short_reaction():
    assert not ts.is_short_reaction("哈哈哈哈你今天怎么这么好笑")


def test_spam_phrasing_and_long_runs():
    assert ts.is_spam_text("加V领取资料")
    assert ts.is_spam_text("哈" * 15)
    assert not ts.is_spam_text("哈" * 14)


@pytest.mark.parametrize(
    ("text", "bare"),
    [("帮我查一下", True), ("帮我看看", True), ("查一下吧", True), ("帮个忙", True),
     ("帮我查一下明天的天气", False), ("推荐一下", False), ("帮我看看这个", False)],
)  # fmt: skip
def test_bare_requests_have_no_object(text, bare):
    assert ts.is_bare_request(text) is bare


@pytest.mark.parametrize(
    ("text", "deictic"),
    [("那个怎么弄", True), ("这个是啥？", True), ("上次那个呢", True),
     ("那个链接怎么打不开", False), ("这个周末去哪", False)],
)  # fmt: skip
def test_deictic_questions_point_at_nothing_else(text, deictic):
    assert ts.is_deictic_question(text) is deictic


def test_focus_text_removes_the_bots_mentions_and_cq_codes():
    names = ("小织", "织织")
    assert ts.focus_text("[CQ:reply,id=1]@小织  周六 去吗", names) == "周六 去吗"
    assert ts.focus_text("@织织 [CQ:face,id=1]", names, keep_cq=True) == "[CQ:face,id=1]"


def test_mentions_in_text_and_cq_codes():
    assert ts.mentioned_names("@阿蒙 @北风，来开会") == ("阿蒙", "北风")
    assert ts.cq_mentions("[CQ:at,qq=30017] 在吗 [CQ:at,qq=all]") == ("30017", "all")
