"""The model-based decision behind ``[routing] model_decision``: strict validation, fallbacks."""

from __future__ import annotations

import json

import pytest
from routing_support import make_runtime, make_turn

from promptweave import TurnAction, hookimpl
from promptweave.decision import DeliveryStyle
from promptweave.routing.model import ModelAnswerError, parse_model_answer


class _Model:
    """A plugin whose model answers with a fixed text (or raises)."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls = 0

    @hookimpl
    def decide_with_model(self, context):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is None or isinstance(self.answer, str):
            return self.answer
        return json.dumps(self.answer)


def _decide(answer: object, text: str = "@小织 周六几点集合？", seed: int = 0, **fields: object):
    model = _Model(answer)
    runtime = make_runtime(seed, extra_plugins=(model,), model_decision=True)
    fields.setdefault("addressed", True)
    return runtime.decide(make_turn(text, **fields)), model


def test_hook_decide_with_model():
    decision, model = _decide({"action": "reply", "social_action": "stance", "reason": "表态"})
    assert model.calls == 1
    assert decision.trace() == {
        "action": "reply",
        "social_action": "stance",
        "delivery_style": "plain",
        "source": "model",
        "reason": "model_action",
    }


def test_the_model_is_not_asked_when_the_flag_is_off():
    model = _Model({"action": "pass"})
    runtime = make_runtime(extra_plugins=(model,))
    assert runtime.decide(make_turn("@小织 在吗？", addressed=True)).source == "rule"
    assert model.calls == 0


def test_no_answer_from_any_plugin_leaves_the_decision_to_the_rules():
    decision, _ = _decide(None)
    assert (decision.source, decision.reason) == ("rule", "rule_reply_obligation")


@pytest.mark.parametrize(
    "answer",
    [
        "好的，我觉得应该回复",
        "[]",
        {"action": "reply", "mood": "happy"},
        {"action": "shout"},
        {"action": "reply", "social_action": "flirt"},
        {"action": "reply", "delivery_style": "carrier_pigeon"},
        {"social_action": "answer"},
    ],
)
def test_an_invalid_answer_falls_back_to_the_rules(answer):
    decision, _ = _decide(answer)
    assert (decision.action, decision.source, decision.reason) == (
        TurnAction.REPLY,
        "fallback",
        "invalid_model_response",
    )
    assert any("fallback to the rules" in note for note in decision.notes)


def test_a_failed_request_falls_back_to_the_rules():
    decision, _ = _decide(TimeoutError("model timed out"))
    assert (decision.source, decision.reason) == ("fallback", "model_request_failed")
    assert any("model timed out" in note for note in decision.notes)


def test_a_tool_without_permission_becomes_a_reply():
    decision, _ = _decide({"action": "tool"})
    assert (decision.action, decision.source, decision.reason) == (
        TurnAction.REPLY,
        "fallback",
        "tool_not_permitted",
    )


def test_silence_on_an_addressed_question_becomes_a_reply():
    decision, _ = _decide({"action": "pass", "social_action": "ack"})
    assert (decision.action, decision.source, decision.reason) == (
        TurnAction.REPLY,
        "rule",
        "addressed_obligation_reply",
    )


@pytest.mark.parametrize("social", ["ack", "joke"])
def test_an_ack_or_joke_to_low_value_talk_not_addressed_becomes_a_pass(social):
    context = [{"text": "我今天去看了猫展", "sender": "阿蒙"}, {"text": "有拍照吗", "bot": True}]
    decision, _ = _decide(
        {"action": "reply", "social_action": social},
        text="小织说得也太对了",
        addressed=False,
        trigger="followup",
        sender="阿蒙",
        context=context,
    )
    assert (decision.action, decision.reason) == (TurnAction.PASS, f"low_value_{social}_pass")


def test_a_mention_without_several_members_talking_goes_plain():
    decision, _ = _decide({"action": "reply", "delivery_style": "mention"})
    assert (decision.delivery_style, decision.source, decision.reason) == (
        DeliveryStyle.PLAIN,
        "fallback",
        "mention_without_multi_party_overlap",
    )
    allowed, _ = _decide(
        {"action": "reply", "delivery_style": "mention"}, hints={"multi_party_overlap": True}
    )
    assert allowed.delivery_style is DeliveryStyle.MENTION


def test_another_member_among_the_recent_messages_allows_a_mention_the_bot_does_not():
    mention = {"action": "reply", "delivery_style": "mention"}
    others = [{"text": "周六去哪", "sender": "阿哲"}, {"text": "我也想知道", "sender": "小林"}]
    talking, _ = _decide(mention, context=others)
    assert talking.delivery_style is DeliveryStyle.MENTION
    only_the_bot_and_the_speaker = [
        {"text": "我觉得是周六", "bot": True},
        {"text": "上次不是周日吗", "sender": "群友"},
    ]
    alone, _ = _decide(mention, context=only_the_bot_and_the_speaker)
    assert (alone.delivery_style, alone.reason) == (
        DeliveryStyle.PLAIN,
        "mention_without_multi_party_overlap",
    )


def test_a_quote_target_among_the_candidates_forces_a_quote_and_others_are_dropped():
    context = [{"id": "c1", "text": "周六去露营吧"}]
    quoted, _ = _decide({"action": "reply", "reply_message_id": "c1"}, context=context)
    assert (quoted.delivery_style, quoted.reply_message_id) == (DeliveryStyle.QUOTE, "c1")
    dropped, _ = _decide(
        {"action": "reply", "delivery_style": "quote", "reply_message_id": "zz"}, context=context
    )
    assert (dropped.delivery_style, dropped.reply_message_id) == (DeliveryStyle.PLAIN, None)


def test_a_required_tool_intent_decides_without_the_model():
    hints = {"tool_intent": "calendar.lookup", "tools_permitted": True}
    decision, model = _decide({"action": "pass"}, hints=hints)
    assert (decision.action, decision.reason) == (TurnAction.TOOL, "required_tool_intent")
    assert model.calls == 0


def test_gates_and_necessity_run_before_the_model():
    decision, model = _decide({"action": "reply"}, text="[doge]", addressed=False)
    assert decision.reason == "face" and model.calls == 0


def test_parse_model_answer_names_each_problem():
    with pytest.raises(ModelAnswerError, match="mood"):
        parse_model_answer('{"action": "reply", "mood": "happy"}')
