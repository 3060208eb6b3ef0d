"""Stage ``necessity``: a score of named terms, proceed at 50; addressed turns bypass it."""

from __future__ import annotations

import pytest
from routing_support import make_runtime, make_turn

from promptweave import DecisionRule, TurnAction, hookimpl

BOT_JUST_SPOKE = [{"text": "今天风好大", "sender": "阿蒙"}, {"text": "出门记得戴帽子", "bot": True}]


class _OpenGates:
    """Replaces the gates that would stop a message before its score is computed."""

    @hookimpl
    def register_decision_rules(self, register):
        for name in ("gate_noise", "gate_incomplete", "gate_bystander"):
            register(DecisionRule(name=name, stage="gate", evaluate=lambda c: None, replace=True))


def _terms(text: str, **fields: object) -> dict[str, int]:
    runtime = make_runtime(extra_plugins=(_OpenGates(),))
    necessity = runtime.decide(make_turn(text, **fields)).necessity
    assert necessity is not None
    return {term.name: term.points for term in necessity.terms}


@pytest.mark.parametrize(
    ("name", "points", "text", "fields"),
    [
        ("addressed", 55, "@小织 晚上好", {"addressed": True}),
        ("mention", 35, "小织今天好安静", {}),
        ("follow_up", 25, "那明天呢", {"trigger": "followup"}),
        ("bystander", -45, "@阿蒙 你到哪了", {}),
        ("noise", -40, "。。。", {}),
        ("spam", -50, "加微信领优惠券，名额有限", {}),
        ("incomplete", -20, "然后", {}),
        ("short_reaction", -25, "哈哈哈哈", {}),
        ("request_words", 25, "谁能帮我看看这个报错", {}),
        ("obligation", 20, "周六有人去看展吗", {}),
        ("low_value_social", -35, "今天好冷", {}),
        (
            "candidate_pool",
            10,
            "同意",
            {"reply_to": "c1", "context": [{"id": "c1", "text": "周六去露营吧"}]},
        ),
        ("length", 5, "今天好冷", {}),
    ],
)
def test_each_necessity_term_scores_its_points(name, points, text, fields):
    assert _terms(text, **fields)[name] == points


def test_terms_that_do_not_apply_are_left_out():
    terms = _terms("周六有人去看展吗")
    assert "addressed" not in terms
    assert "bystander" not in terms
    assert "low_value_social" not in terms


def test_low_value_social_is_not_charged_when_the_bot_is_named_or_followed_up():
    assert "low_value_social" not in _terms("小织晚安")
    assert "low_value_social" not in _terms("好的", trigger="followup")


def test_back_and_forth_with_the_bot_scores():
    context = [
        {"text": "明天要下雨吗", "sender": "阿蒙"},
        {"text": "明天多云，不下雨", "bot": True},
    ]
    assert _terms("太好了", sender="阿蒙", context=context)["back_and_forth"] == 15
    assert "back_and_forth" not in _terms("太好了", sender="北风", context=context)


def test_recent_bot_presence_costs_8_per_reply_capped_at_6():
    bot_lines = [{"text": f"第{i}句", "bot": True} for i in range(8)]
    assert _terms("今天好冷", context=bot_lines[:3])["recent_bot_presence"] == -24
    assert _terms("今天好冷", context=bot_lines)["recent_bot_presence"] == -48


def test_recent_bot_presence_never_starves_an_addressed_question():
    bot_lines = [{"text": f"第{i}句", "bot": True} for i in range(6)]
    terms = _terms("@小织 明天几点集合？", addressed=True, context=bot_lines)
    assert "recent_bot_presence" not in terms
    decision = make_runtime().decide(
        make_turn("@小织 明天几点集合？", addressed=True, context=bot_lines)
    )
    assert decision.action is TurnAction.REPLY


def test_recent_bot_presence_counts_replies_recorded_in_the_routing_state():
    runtime = make_runtime()
    turn = make_turn("今天好冷")
    for _ in range(2):
        runtime.stores.routing.note_bot_reply("10001", "20001", turn.message.time)
    decision = runtime.decide(turn)
    assert decision.necessity is not None
    assert {t.name: t.points for t in decision.necessity.terms}["recent_bot_presence"] == -16


def test_low_affinity_lowers_the_score_down_to_minus_30():
    assert _terms("周六有人去看展吗", affinity=-0.35)["low_affinity"] == -11
    assert _terms("周六有人去看展吗", affinity=-1.0)["low_affinity"] == -30
    assert "low_affinity" not in _terms("周六有人去看展吗", affinity=-0.2)
    assert "low_affinity" not in _terms("@小织 在吗", addressed=True, affinity=-0.9)


def test_below_the_threshold_the_turn_passes_in_silence():
    decision = make_runtime().decide(make_turn("周六有人去看展吗"))
    assert decision.action is TurnAction.PASS
    assert (decision.source, decision.reason) == ("necessity", "necessity_below_threshold")
    assert decision.necessity is not None and decision.necessity.score == 25


def test_at_the_threshold_the_turn_proceeds():
    decision = make_runtime().decide(make_turn("小织，周六有人去看展吗"))
    assert decision.necessity is not None
    assert decision.necessity.score >= 50
    assert decision.stage == "decide"


def test_the_threshold_is_configurable():
    decision = make_runtime(necessity_threshold=20).decide(make_turn("周六有人去看展吗"))
    assert decision.stage == "decide"


def test_addressed_turns_bypass_the_score():
    decision = make_runtime().decide(make_turn("@小织 。好", addressed=True, affinity=-1))
    assert decision.necessity is not None
    assert decision.necessity.bypassed == "addressed"
    assert decision.stage == "decide"


def test_a_required_tool_intent_bypasses_the_score():
    hints = {"tool_intent": "weather.lookup", "tools_permitted": True}
    decision = make_runtime().decide(make_turn("明天北京天气", hints=hints))
    assert decision.necessity is not None and decision.necessity.bypassed == "required_tool_intent"
    assert decision.action is TurnAction.TOOL


def test_the_terms_appear_in_the_render_trace():
    trace = make_runtime().render(make_turn("周六有人去看展吗")).trace
    necessity = trace["route"]["necessity"]
    assert {"name": "obligation", "points": 20} in necessity["terms"]
    assert necessity["score"] == 25 and necessity["threshold"] == 50
