"""Stage ``decide``: first match wins; every built-in rule, FOLLOW_UP, and replacing rules."""

from __future__ import annotations

import pytest
from routing_support import make_runtime, make_turn

from promptweave import (
    Decision,
    DecisionRule,
    DuplicateRegistrationError,
    GateSkip,
    TurnAction,
    hookimpl,
)
from promptweave.decision import DeliveryStyle, SocialAction
from promptweave.plugins.manager import build_plugin_manager
from promptweave.plugins.registry import collect_registries

TOOL = {"tool_intent": "calendar.lookup", "tools_permitted": True}


def _decide(text: str, seed: int = 0, **fields: object) -> Decision:
    return make_runtime(seed).decide(make_turn(text, **fields))


def test_required_tool_intent_with_permission_calls_the_tool():
    decision = _decide("@小织 帮我看看周六的日程", addressed=True, hints=TOOL)
    assert decision.trace() == {
        "action": "tool",
        "social_action": "answer",
        "delivery_style": "plain",
        "source": "rule",
        "reason": "required_tool_intent",
    }


def test_a_tool_intent_without_permission_is_answered_instead():
    hints = {"tool_intent": "calendar.lookup", "tools_permitted": False}
    decision = _decide("@小织 帮我看看周六的日程", addressed=True, hints=hints)
    assert decision.action is TurnAction.REPLY


def test_a_short_vent_gets_an_acknowledgement():
    decision = _decide("@小织 又要加班，烦", addressed=True)
    assert (decision.action, decision.social_action) == (TurnAction.REPLY, SocialAction.ACK)
    assert decision.reason == "rule_short_vent_ack"


def test_the_short_vent_rule_runs_before_the_quote_rule():
    context = [{"id": "c1", "text": "周五又要通宵改方案"}]
    decision = _decide("@小织 是真的服了", seed=1, addressed=True, reply_to="c1", context=context)
    assert decision.reason == "rule_short_vent_ack"


def test_a_reply_to_a_candidate_is_quoted_when_the_throttle_allows():
    context = [{"id": "c1", "text": "有人知道周末哪里有音乐节吗"}]
    # random.Random(1) draws 0.134 < 0.25: the throttle lets this quote through.
    decision = _decide("@小织 你知道吗？", seed=1, addressed=True, reply_to="c1", context=context)
    assert decision.delivery_style is DeliveryStyle.QUOTE
    assert decision.reply_message_id == "c1"
    assert decision.reason == "rule_reply_quote"


def test_a_reply_to_a_candidate_goes_plain_when_the_draw_misses():
    context = [{"id": "c1", "text": "有人知道周末哪里有音乐节吗"}]
    # random.Random(0) draws 0.844 >= 0.25.
    decision = _decide("@小织 你知道吗？", seed=0, addressed=True, reply_to="c1", context=context)
    assert decision.delivery_style is DeliveryStyle.PLAIN
    assert decision.reason == "rule_reply_obligation"


def test_low_value_social_talk_not_addressed_to_the_bot_passes():
    # Naming the bot and following up bring it past the score; it is still talk about the bot.
    context = [{"text": "我今天去看了猫展", "sender": "阿蒙"}, {"text": "有拍照吗", "bot": True}]
    decision = _decide("小织说得也太对了", sender="阿蒙", trigger="followup", context=context)
    assert (decision.action, decision.reason) == (TurnAction.PASS, "rule_low_value_social_pass")
    assert decision.source == "rule"


@pytest.mark.parametrize("text", ["@小织 晚安", "小织晚安", "晚安小织", "小织，今天辛苦啦"])
def test_low_value_social_talk_addressed_to_the_bot_is_answered(text):
    decision = _decide(text)
    assert (decision.action, decision.reason) == (TurnAction.REPLY, "rule_default_reply")


def test_a_question_is_answered():
    decision = _decide("@小织 周六的桌游局几点开始？", addressed=True)
    assert (decision.action, decision.reason) == (TurnAction.REPLY, "rule_reply_obligation")


def test_anything_else_gets_a_default_reply():
    decision = _decide(
        "@小织 我刚把周报交了，感觉今天效率还挺高的，准备下班回家做饭", addressed=True
    )
    assert decision.reason == "rule_default_reply"


@pytest.mark.parametrize(
    "text", ["@小织 帮我查一下", "@小织 那个怎么弄", "@小织 帮个忙", "@小织 这个是啥？"]
)
def test_an_addressed_request_missing_its_object_gets_a_follow_up(text):
    decision = _decide(text, addressed=True)
    assert decision.trace() == {
        "action": "follow_up",
        "social_action": "ask_one",
        "delivery_style": "plain",
        "source": "rule",
        "reason": "rule_follow_up_missing_object",
    }


def test_a_recent_message_gives_the_request_its_object():
    context = [{"text": "下周三北京会下雪吗", "sender": "阿蒙", "ago_s": 40}]
    decision = _decide("@小织 帮我查一下", sender="阿蒙", addressed=True, context=context)
    assert decision.action is TurnAction.REPLY


def test_an_old_message_does_not_give_the_request_its_object():
    context = [{"text": "下周三北京会下雪吗", "sender": "阿蒙", "ago_s": 3600}]
    decision = _decide("@小织 那个怎么弄", sender="阿蒙", addressed=True, context=context)
    assert decision.action is TurnAction.FOLLOW_UP


def test_a_quoted_message_or_an_image_gives_the_request_its_object():
    context = [{"id": "c1", "text": "这个链接打不开", "ago_s": 3600}]
    quoted = _decide("@小织 这个怎么办", addressed=True, reply_to="c1", context=context)
    assert quoted.action is TurnAction.REPLY
    image = _decide("@小织 这个是啥", addressed=True, images=["https://img.example.net/b.png"])
    assert image.action is TurnAction.REPLY


def test_a_request_with_its_object_is_no_follow_up():
    decision = _decide("@小织 帮我查一下明天上海的天气", addressed=True)
    assert decision.action is TurnAction.REPLY


def test_the_follow_up_policy_asks_one_question():
    runtime = make_runtime()
    result = runtime.render(make_turn("@小织 帮我查一下", addressed=True))
    section = next(s for s in result.sections if s.id == "turn_policy")
    assert "只追问一个最关键的问题" in section.text


class _Rules:
    def __init__(self, *rules: DecisionRule) -> None:
        self.rules = rules

    @hookimpl
    def register_decision_rules(self, register):
        for rule in self.rules:
            register(rule)


def test_a_plugin_rule_with_the_default_order_runs_before_the_built_ins():
    rule = DecisionRule(
        name="acme_joke",
        stage="decide",
        evaluate=lambda c: Decision(action="reply", social_action="joke", reason="acme_joke"),
    )
    runtime = make_runtime(extra_plugins=(_Rules(rule),))
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason == "acme_joke"


def test_a_plugin_replaces_a_built_in_rule_in_its_place():
    quiet_vent = DecisionRule(
        name="decide_short_vent",
        stage="decide",
        evaluate=lambda c: (
            Decision(action="pass", reason="acme_no_vent") if c.signals.short_vent else None
        ),
        replace=True,
    )
    runtime = make_runtime(extra_plugins=(_Rules(quiet_vent),))
    entry = runtime.registries.decision_rules["decide_short_vent"]
    assert entry.plugin != "routing_rules"
    assert entry.item.order == 1100  # the replaced rule's order, since it gave none
    assert runtime.decide(make_turn("@小织 又加班，烦", addressed=True)).reason == "acme_no_vent"


def test_a_plugin_reorders_a_built_in_rule_by_replacing_it_with_another_order():
    moved = DecisionRule(
        name="decide_reply_obligation",
        stage="decide",
        evaluate=lambda c: (
            Decision(action="reply", reason="rule_reply_obligation")
            if c.signals.obligation
            else None
        ),
        order=1050,
        replace=True,
    )
    runtime = make_runtime(extra_plugins=(_Rules(moved),))
    # Now before the short vent (1100): a question that ends with 烦 is answered as a question.
    decision = runtime.decide(make_turn("@小织 为什么周一总是这么烦", addressed=True))
    assert decision.reason == "rule_reply_obligation"


def test_a_duplicate_rule_without_replace_names_both_plugins():
    clash = DecisionRule(name="gate_face", stage="gate", evaluate=lambda c: None)
    with pytest.raises(
        DuplicateRegistrationError,
        match="decision rule 'gate_face' registered by plugin 'acme' is already registered by "
        "plugin 'routing_rules'",
    ):
        collect_registries(_manager(_Rules(clash), "acme"))


def test_replacing_one_rule_twice_names_both_plugins():
    first = DecisionRule(name="gate_face", stage="gate", evaluate=lambda c: None, replace=True)
    manager = _manager(_Rules(first), "acme")
    manager.register(_Rules(first), name="other")
    with pytest.raises(DuplicateRegistrationError, match="'acme' and plugin 'other'"):
        collect_registries(manager)


def test_replacing_an_unknown_rule_is_an_error():
    ghost = DecisionRule(name="gate_ghost", stage="gate", evaluate=lambda c: None, replace=True)
    with pytest.raises(DuplicateRegistrationError, match="which no plugin registered"):
        collect_registries(_manager(_Rules(ghost), "acme"))


def test_blocking_the_built_in_rules_plugin_leaves_only_the_default_decision():
    manager = build_plugin_manager(
        disabled=["routing_rules"], environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    assert not collect_registries(manager.pm).decision_rules


def test_a_rule_that_raises_is_left_out_and_noted():
    def broken(context):
        raise RuntimeError("no database")

    rule = DecisionRule(name="acme_broken", stage="gate", evaluate=broken)
    decision = make_runtime(extra_plugins=(_Rules(rule),)).decide(
        make_turn("@小织 几点了？", addressed=True)
    )
    assert decision.action is TurnAction.REPLY
    assert any("acme_broken" in note and "no database" in note for note in decision.notes)


def test_a_rule_returning_the_wrong_type_is_ignored_and_noted():
    rule = DecisionRule(
        name="acme_confused", stage="gate", evaluate=lambda c: Decision(action="pass")
    )
    decision = make_runtime(extra_plugins=(_Rules(rule),)).decide(
        make_turn("@小织 几点了？", addressed=True)
    )
    assert decision.action is TurnAction.REPLY
    assert any("expected GateSkip" in note for note in decision.notes)


def test_a_plugin_gate_skips_with_its_reason():
    rule = DecisionRule(
        name="acme_night", stage="gate", evaluate=lambda c: GateSkip(reason="acme_night")
    )
    decision = make_runtime(extra_plugins=(_Rules(rule),)).decide(
        make_turn("@小织 在吗", addressed=True)
    )
    assert (decision.source, decision.reason) == ("gate", "acme_night")


def _manager(plugin: object, name: str):
    manager = build_plugin_manager(environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    manager.pm.register(plugin, name=name)
    return manager.pm
