"""Routing defects found by review: advertising with a link, follow-ups the bot was called by, a
trailing 呢 that asks, and a trigger given as a plain string."""

from __future__ import annotations

import datetime as dt

import pytest
from routing_support import BASE_TIME, TEST_BOT, make_runtime, make_turn

from promptweave import ChatMessage, Turn
from promptweave.text import routing_words as ts
from promptweave.turn import SpeakTrigger

#: Adverts and scams as they are posted in groups; every one must read as spam.
ADVERTS = (
    "加群领取免费会员，私聊我发链接",
    "加群领取免费会员，私聊我发链接 https://vip.example.com/x",
    "兄弟们V信上找我，日入过千不是梦",
    "进群领红包，名额有限",
    "0元购！点击领取 t.example.cn/abc",
    "扫码进群，福利多多",
    "会员限时领取 https://a.example.top/r?id=1",
    "需要刷粉引流的私我",
    "看我主页有惊喜",
    "带你赚钱，稳赚不赔",
    "薇信：abc123，加我好友领资料",
    "代开发票，低息贷款，欢迎咨询",
)

#: Ordinary group talk that shares words or links with adverts; none of it is spam.
CHAT = (
    "这个链接打不开 https://docs.example.com/guide",
    "我私聊你了，看一下",
    "下班去驿站领快递",
    "视频会员到期了，续不续呢",
    "有没有免费的pdf工具推荐",
    "www.example.org 上那篇文章写得不错",
    "今天的红包雨抢到了吗",
    "哈哈哈哈",
)


@pytest.mark.parametrize("text", ADVERTS)
def test_an_advert_scores_the_spam_term_and_passes(text):
    decision = make_runtime().decide(make_turn(text, trigger="ambient"))
    assert decision.action.value == "pass"
    assert decision.necessity is not None
    assert "spam" in [term.name for term in decision.necessity.terms]


@pytest.mark.parametrize("text", CHAT)
def test_chat_sharing_words_or_links_with_adverts_is_not_spam(text):
    assert not ts.is_spam_text(text)


@pytest.mark.parametrize("word", ts.SPAM_WORDS)
def test_every_spam_word_is_spam_on_its_own(word):
    assert ts.is_spam_text(f"大家好，{word.upper()}，欢迎")


def test_a_link_is_spam_only_next_to_an_advert_word():
    assert ts.has_url("看 https://x.example/a") and ts.has_url("t.example.cn/x1")
    assert not ts.has_url("今天3.5折") and not ts.has_url("v1.2 发布了")
    assert not ts.is_spam_text("看这个 https://x.example/a")
    assert not ts.is_spam_text("限时折扣今天结束")
    for cue in ts.SPAM_CUES:
        assert ts.is_spam_text(f"{cue} https://x.example/a"), cue


# -- follow-ups ------------------------------------------------------------------------------


def _follow_up(text: str, bot_spoke_ago_s: float | None) -> Turn:
    context = [{"text": "明天会下雨吗", "sender": "阿蒙", "ago_s": 600}]
    if bot_spoke_ago_s is not None:
        context.append({"text": "明天小雨，记得带伞", "bot": True, "ago_s": bot_spoke_ago_s})
    return make_turn(text, sender="阿蒙", trigger="followup", context=context)


def test_a_follow_up_within_the_window_after_the_bots_reply_is_answered():
    decision = make_runtime().decide(_follow_up("那明天呢", bot_spoke_ago_s=30))
    assert (decision.action.value, decision.reason) == ("reply", "rule_reply_obligation")
    assert decision.necessity is not None and decision.necessity.bypassed == "follow_up"


def test_a_follow_up_trigger_long_after_the_bots_reply_is_scored_as_before():
    runtime = make_runtime()
    late = runtime.decide(_follow_up("那明天呢", bot_spoke_ago_s=500))
    assert late.necessity is not None and late.necessity.bypassed is None
    assert "follow_up" in [term.name for term in late.necessity.terms]
    never = runtime.decide(_follow_up("那明天呢", bot_spoke_ago_s=None))
    assert never.necessity is not None and never.necessity.bypassed is None


def test_the_routing_states_reply_log_opens_the_follow_up_window():
    runtime = make_runtime()
    turn = _follow_up("那明天呢", bot_spoke_ago_s=None)
    assert turn.group_id is not None
    runtime.stores.routing.note_bot_reply(
        TEST_BOT.id, turn.group_id, turn.message.time - dt.timedelta(seconds=60)
    )
    decision = runtime.decide(turn)
    assert decision.necessity is not None and decision.necessity.bypassed == "follow_up"


def test_a_called_follow_up_that_owes_nothing_still_passes():
    decision = make_runtime().decide(_follow_up("好的知道了", bot_spoke_ago_s=30))
    assert (decision.action.value, decision.reason) == ("pass", "rule_low_value_social_pass")


@pytest.mark.parametrize(
    ("text", "asks"),
    [("那明天呢", True), ("你呢～", True), ("人呢？", True), ("好的呢", False), ("是的呢~", False)],
)
def test_a_trailing_ne_asks_as_the_gentle_phrase_rule_reads_it(text, asks):
    assert ts.has_reply_obligation(text) is asks
    if asks and text.endswith("呢"):
        assert not ts.is_gentle_phrase(text)  # a question to the one rule, so to the other


# -- the trigger as a string -------------------------------------------------------------------


def test_a_trigger_given_as_a_string_is_the_trigger():
    message = ChatMessage(id="m1", sender_id="30017", text="那明天呢", time=BASE_TIME)
    turn = Turn(bot=TEST_BOT, group_id="20001", trigger="followup", message=message)  # type: ignore[arg-type]
    assert turn.trigger is SpeakTrigger.FOLLOWUP
    recent = (
        ChatMessage(
            id="b1",
            sender_id=TEST_BOT.id,
            text="明天小雨",
            time=BASE_TIME - dt.timedelta(seconds=20),
        ),
    )
    from_string = make_runtime().decide(Turn(**{**_fields(turn), "recent_messages": recent}))
    assert from_string.necessity is not None and from_string.necessity.bypassed == "follow_up"
    with pytest.raises(ValueError, match="trigger must be one of mention, alias, followup"):
        Turn(bot=TEST_BOT, trigger="follow-up", message=message)  # type: ignore[arg-type]


def _fields(turn: Turn) -> dict[str, object]:
    return {name: getattr(turn, name) for name in ("bot", "group_id", "trigger", "message")}
