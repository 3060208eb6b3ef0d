"""Native quoting: candidates per group, a cooldown from delivery, probability, delivery check."""

from __future__ import annotations

import datetime as dt

from routing_support import BASE_TIME, make_runtime, make_turn

from promptweave import Decision, TurnAction
from promptweave.decision import DeliveryStyle

CONTEXT = [{"id": "c1", "text": "有人知道周末哪里有音乐节吗", "sender": "北风"}]


def _quote_turn(at: str = "2026-11-30T20:00:00+08:00", message_id: str = "q1"):
    return make_turn(
        "@小织 你知道吗？",
        addressed=True,
        reply_to="c1",
        context=CONTEXT,
        time=at,
        message_id=message_id,
    )


def test_candidates_are_the_last_six_messages_of_the_group():
    runtime = make_runtime()
    context = [{"id": f"c{i}", "text": f"第{i}条消息"} for i in range(1, 9)]
    runtime.decide(make_turn("大家好", context=context, message_id="now"))
    ids = [c.message_id for c in runtime.stores.routing.candidates("10001", "20001")]
    assert ids == ["c4", "c5", "c6", "c7", "c8", "now"]


def test_the_bots_own_messages_are_never_candidates():
    runtime = make_runtime()
    runtime.decide(make_turn("大家好", context=[{"id": "b1", "text": "晚上好", "bot": True}]))
    assert "b1" not in [c.message_id for c in runtime.stores.routing.candidates("10001", "20001")]


def test_candidates_are_kept_per_group():
    runtime = make_runtime()
    runtime.decide(make_turn("大家好", group_id="20001", message_id="a1"))
    runtime.decide(make_turn("晚上好", group_id="20002", message_id="b1"))
    assert [c.message_id for c in runtime.stores.routing.candidates("10001", "20002")] == ["b1"]


def test_the_quote_probability_is_0_25():
    quoted = 0
    for seed in range(400):
        decision = make_runtime(seed).decide(_quote_turn())
        quoted += decision.delivery_style is DeliveryStyle.QUOTE
    assert 70 <= quoted <= 130


def test_a_reply_to_an_unknown_message_is_never_quoted():
    decision = make_runtime(1).decide(
        make_turn("@小织 你知道吗？", addressed=True, reply_to="gone", context=CONTEXT)
    )
    assert decision.delivery_style is DeliveryStyle.PLAIN


def test_the_quote_cooldown_counts_from_delivery_not_from_the_decision():
    runtime = make_runtime(1, quote_probability=1.0)
    first = _quote_turn()
    decision = runtime.decide(first)
    assert decision.delivery_style is DeliveryStyle.QUOTE
    # Not delivered yet: a second quote decision is still allowed.
    second = _quote_turn("2026-11-30T20:00:30+08:00", "q2")
    assert runtime.decide(second).delivery_style is DeliveryStyle.QUOTE
    runtime.recorder.note_delivered(
        second, runtime.recorder.resolve_delivery(second, decision), at=second.message.time
    )
    within = _quote_turn("2026-11-30T20:02:29+08:00", "q3")
    assert runtime.decide(within).delivery_style is DeliveryStyle.PLAIN
    after = _quote_turn("2026-11-30T20:02:31+08:00", "q4")
    assert runtime.decide(after).delivery_style is DeliveryStyle.QUOTE


def test_the_quote_cooldown_is_per_group():
    runtime = make_runtime(quote_probability=1.0)
    runtime.stores.routing.note_quote_delivered("10001", "20002", "x", BASE_TIME)
    assert runtime.decide(_quote_turn()).delivery_style is DeliveryStyle.QUOTE


def test_delivery_quotes_only_a_target_that_is_still_a_candidate():
    runtime = make_runtime(quote_probability=1.0)
    turn = _quote_turn()
    decision = runtime.decide(turn)
    delivery = runtime.recorder.resolve_delivery(turn, decision)
    assert (delivery.style, delivery.reply_message_id) == (DeliveryStyle.QUOTE, "c1")
    # Six newer messages push c1 out of the candidates before delivery.
    later = [{"id": f"n{i}", "text": f"新消息{i}", "ago_s": 10 - i} for i in range(6)]
    runtime.decide(make_turn("刷屏了", context=later, time="2026-11-30T20:00:20+08:00"))
    late = runtime.recorder.resolve_delivery(turn, decision)
    assert (late.style, late.reason) == (DeliveryStyle.PLAIN, "quote_target_not_candidate")


def test_a_plain_reply_is_delivered_as_decided():
    runtime = make_runtime()
    turn = make_turn("@小织 在吗", addressed=True)
    delivery = runtime.recorder.resolve_delivery(turn, Decision(action=TurnAction.REPLY))
    assert (delivery.style, delivery.reason) == (DeliveryStyle.PLAIN, "as_decided")


def test_a_delivered_plain_reply_leaves_the_quote_cooldown_alone():
    runtime = make_runtime(1, quote_probability=1.0)
    turn = make_turn("@小织 在吗", addressed=True)
    runtime.recorder.note_delivered(
        turn, runtime.recorder.resolve_delivery(turn, runtime.decide(turn))
    )
    assert runtime.stores.routing.last_quote_at("10001", "20001") is None
    assert (
        runtime.stores.routing.bot_replies_since("10001", "20001", BASE_TIME - dt.timedelta(days=1))
        == 1
    )


def test_a_reply_named_only_in_the_raw_message_is_read_from_it():
    def decided(**reply):
        turn = make_turn(
            "@小织 你知道吗？", addressed=True, context=CONTEXT, message_id="q1", **reply
        )
        return make_runtime(seed=8).decide(turn)

    given = decided(reply_to="c1")
    from_cq = decided(raw="[CQ:reply,id=c1][CQ:at,qq=10001] 你知道吗？")
    from_segments = decided(
        raw=[
            {"type": "reply", "data": {"id": "c1"}},
            {"type": "text", "data": {"text": "你知道吗"}},
        ]
    )
    plain = decided()
    assert given.reason == "rule_reply_quote"
    for decision in (from_cq, from_segments):
        assert (decision.reason, decision.delivery_style) == (
            given.reason,
            given.delivery_style,
        )
    assert plain.reason != "rule_reply_quote"
