"""The low-engagement exit: a canned phrase on a PASS, no LLM, with its probability table."""

from __future__ import annotations

import random

import attrs
import pytest
from routing_support import make_runtime, make_turn

from promptweave import Decision, DecisionRule, PhrasePool, PoolQuery, TurnAction, hookimpl
from promptweave._convert import structure
from promptweave.plugins.registry import Registered
from promptweave.routing.low_engagement import emit_probability, pick_phrase
from promptweave.store.retrieval import ExpressionPairRecord, RetrievalBatch
from promptweave.text.routing_words import is_gentle_phrase
from promptweave.turn import GroupExpression, TurnRetrieved

# Named and followed up: past the score, then passed by the rule (not addressed, low value).
FOLLOW = {"trigger": "followup", "sender": "阿蒙"}


def _pass_turn(text: str = "小织说得也太对了", **fields: object):
    return make_turn(text, **{**FOLLOW, **fields})


@pytest.mark.parametrize(
    ("replies", "probability"),
    [(0, 0.35), (1, 0.20), (2, 0.20), (3, 0.10), (4, 0.10), (5, 0.05), (6, 0.05), (-1, 0.35)],
)
def test_the_emit_probability_falls_with_recent_bot_replies(replies, probability):
    assert emit_probability(replies, (0.35, 0.20, 0.10, 0.05)) == probability


def test_a_rule_pass_emits_a_phrase_when_the_roll_hits():
    # random.Random(1) draws 0.134 < 0.35 (no bot reply in the window).
    decision = make_runtime(1).decide(_pass_turn())
    assert (decision.action, decision.reason) == (TurnAction.PASS, "rule_low_value_social_pass")
    low = decision.low_engagement
    assert low is not None and low.trigger == "rule_pass"
    assert (low.probability, low.recent_bot_replies) == (0.35, 0)
    assert decision.low_engagement_phrase is not None


def test_a_rule_pass_stays_silent_when_the_roll_misses():
    decision = make_runtime(0).decide(_pass_turn())
    assert decision.low_engagement is not None
    assert decision.low_engagement.roll >= 0.35
    assert decision.low_engagement_phrase is None


def test_the_probability_uses_the_recent_bot_replies():
    context = [{"text": f"第{i}句", "bot": True} for i in range(3)]
    decision = make_runtime(1, necessity_threshold=0).decide(_pass_turn(context=context))
    assert decision.low_engagement is not None
    assert decision.low_engagement.probability == 0.10


def test_a_necessity_skip_of_a_short_reaction_may_bubble():
    decision = make_runtime(1).decide(make_turn("哈哈哈哈"))
    assert decision.reason == "necessity_below_threshold"
    assert decision.low_engagement is not None
    assert decision.low_engagement.trigger == "necessity_short_reaction"


def test_a_necessity_skip_of_anything_else_stays_silent():
    decision = make_runtime(1).decide(make_turn("今天好冷"))
    assert decision.reason == "necessity_below_threshold"
    assert decision.low_engagement is None


def test_a_gate_skip_never_bubbles():
    assert make_runtime(1).decide(make_turn("[doge]")).low_engagement is None


def test_a_pass_of_an_addressed_turn_never_bubbles():
    class _PassAll:
        @hookimpl
        def register_decision_rules(self, register):
            register(
                DecisionRule(
                    name="acme_quiet",
                    stage="decide",
                    evaluate=lambda c: Decision(action="pass", reason="acme_quiet"),
                )
            )

    runtime = make_runtime(1, extra_plugins=(_PassAll(),))
    decision = runtime.decide(make_turn("@小织 晚安", addressed=True))
    assert decision.action is TurnAction.PASS and decision.low_engagement is None


def test_the_exit_can_be_switched_off():
    assert make_runtime(1, low_engagement=False).decide(_pass_turn()).low_engagement is None


def test_phrases_are_short_and_never_ask():
    phrases = set()
    for seed in range(200):
        phrase = make_runtime(seed).decide(_pass_turn()).low_engagement_phrase
        if phrase:
            phrases.add(phrase)
    assert len(phrases) > 5
    for phrase in phrases:
        assert len(phrase) <= 12
        assert "?" not in phrase and "？" not in phrase


def test_emotion_words_select_the_tangent_pool():
    pools = set()
    for seed in range(60):
        decision = make_runtime(seed).decide(_pass_turn("小织我今天真的麻了"))
        if decision.low_engagement is not None and decision.low_engagement.pool:
            pools.add(decision.low_engagement.pool)
            assert decision.low_engagement.emotion
    assert pools <= {"emotion_tangent", "emoji_fallback"}
    assert "emotion_tangent" in pools


def test_calm_messages_never_get_the_tangent_pool():
    for seed in range(60):
        decision = make_runtime(seed).decide(_pass_turn())
        assert decision.low_engagement is not None
        assert decision.low_engagement.pool != "emotion_tangent"


def test_a_phrase_is_never_repeated_right_away_within_a_group():
    runtime = make_runtime(3, low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0))
    previous = None
    for index in range(30):
        turn = _pass_turn(message_id=f"m{index}", time=f"2026-11-30T20:{index:02d}:00+08:00")
        phrase = runtime.decide(turn).low_engagement_phrase
        assert phrase is not None and phrase != previous
        previous = phrase


def test_the_last_phrase_is_kept_per_group():
    runtime = make_runtime(3, low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0))
    runtime.decide(_pass_turn(group_id="20001"))
    first = runtime.stores.routing.last_phrase("10001", "20001")
    assert first is not None
    assert runtime.stores.routing.last_phrase("10001", "20002") is None


def test_the_only_phrase_left_may_repeat():
    pool = Registered(item=PhrasePool(name="only", phrases=["嗯", "好耶吧"]), plugin="acme")
    query = PoolQuery(text="x", emotion=False, bot_id="1", group_id="2", turn=_pass_turn())
    # "好耶吧" ends with a questioning particle and is left out; "嗯" was just used.
    assert pick_phrase([pool], query, last_phrase="嗯", max_chars=12) == [("嗯", "only")]


def test_the_groups_own_short_phrases_are_offered():
    pairs = [
        {"trigger": "又下雨了", "reply": "出门带伞"},
        {"trigger": "周五了", "reply": "冲冲冲！"},
        {"trigger": "好困", "reply": "去睡吧你"},
    ]
    expression = structure({"pairs": pairs}, GroupExpression, "test")
    turn = attrs.evolve(_pass_turn(), retrieved=TurnRetrieved(group_expression=expression))
    pool = make_runtime().registries.pools["group_phrases"].item
    query = PoolQuery(
        text="x",
        emotion=False,
        bot_id="10001",
        group_id="20001",
        turn=turn,
        learned_replies=tuple(pair["reply"] for pair in pairs),
    )
    assert pool.phrases_for is not None
    # "冲冲冲！" has an exclamation mark: not gentle, left out.
    assert list(pool.phrases_for(query)) == ["出门带伞", "去睡吧你"]
    assert pool.applies is not None and not pool.applies(attrs.evolve(query, emotion=True))


def test_hook_register_low_engagement_pools_with_dynamic_phrases():
    class _Weather:
        @hookimpl
        def register_low_engagement_pools(self, register):
            register(
                PhrasePool(
                    name="weather",
                    applies=lambda query: "雨" in query.text,
                    phrases_for=lambda query: ["记得带伞"],
                )
            )

    runtime = make_runtime(
        1, extra_plugins=(_Weather(),), low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0)
    )
    seen = {
        runtime.decide(_pass_turn("小织外面下雨了", message_id=f"r{i}")).low_engagement_phrase
        for i in range(40)
    }
    assert "记得带伞" in seen


def test_a_pool_that_raises_is_left_out_and_noted():
    def broken(query):
        raise RuntimeError("pool down")

    class _Broken:
        @hookimpl
        def register_low_engagement_pools(self, register):
            register(PhrasePool(name="broken", phrases=["嗯"], applies=broken))

    runtime = make_runtime(
        1, extra_plugins=(_Broken(),), low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0)
    )
    decision = runtime.decide(_pass_turn())
    assert decision.low_engagement_phrase is not None
    assert any("pool down" in note for note in decision.notes)


def test_the_phrase_comes_back_in_the_render_result_without_any_request():
    runtime = make_runtime(1)
    result = runtime.render(_pass_turn())
    assert result.to_json()["low_engagement_phrase"] == result.decision.low_engagement_phrase
    assert result.trace["route"]["low_engagement"]["phrase"] is not None


@pytest.mark.parametrize(
    ("phrase", "fit"),
    [
        ("哈哈", True),
        ("你说呢", False),
        ("好吧", False),
        ("真的？", False),
        ("好！", False),
        ("这句话实在是太长了超过十二个字", False),
        ("[CQ:face,id=1]", False),
        ("", False),
    ],
)
def test_gentle_phrases_are_short_plain_statements(phrase, fit):
    assert is_gentle_phrase(phrase) is fit


def test_the_pools_are_deterministic_for_one_seed():
    first = [make_runtime(7).decide(_pass_turn()).low_engagement_phrase for _ in range(3)]
    assert len(set(first)) == 1
    assert random.Random(7).random() < 0.35


def test_the_exit_offers_the_groups_stored_replies_and_the_turns_own():
    seen = []

    class Spy:
        @hookimpl
        def register_low_engagement_pools(self, register):
            register(PhrasePool(name="spy", phrases=(), phrases_for=seen.append))

    runtime = make_runtime(extra_plugins=(Spy(),), low_engagement_probabilities=(1, 1, 1, 1))
    runtime.stores.retrieval.write(
        RetrievalBatch(
            expression_pairs=(
                ExpressionPairRecord(
                    bot_id="10001", group_id="20001", trigger="好困", reply="去睡吧你"
                ),
                ExpressionPairRecord(
                    bot_id="10001", group_id="20099", trigger="好困", reply="别的群的话"
                ),
            )
        )
    )
    expression = structure(
        {"pairs": [{"trigger": "下雨", "reply": "出门带伞"}]}, GroupExpression, "test"
    )
    turn = attrs.evolve(_pass_turn(), retrieved=TurnRetrieved(group_expression=expression))
    decision = runtime.decide(turn)
    assert decision.low_engagement_phrase is not None
    assert seen and seen[-1].learned_replies == ("出门带伞", "去睡吧你")


@pytest.mark.parametrize("phrase", ["傻逼吧你", "滚你妈的", "SB一个", "你个废物"])
def test_insults_never_enter_a_pool(phrase):
    assert not is_gentle_phrase(phrase)
    pool = make_runtime().registries.pools["group_phrases"].item
    query = PoolQuery(
        text="x",
        emotion=False,
        bot_id="1",
        group_id="2",
        turn=_pass_turn(),
        learned_replies=(phrase, "确实"),
    )
    assert list(pool.phrases_for(query)) == ["确实"]


def test_the_tangent_pool_holds_the_documented_examples():
    from promptweave.builtin_plugins.phrase_pools import EMOTION_TANGENT_POOL

    assert {"阴完了", "没绷住", "休息会"} <= set(EMOTION_TANGENT_POOL)


def test_a_pool_whose_applies_answers_no_bool_sits_out_and_is_named():
    class _Vague:
        @hookimpl
        def register_low_engagement_pools(self, register):
            register(PhrasePool(name="vague", phrases=["喵喵喵"], applies=lambda query: "yes"))

    runtime = make_runtime(
        1, extra_plugins=(_Vague(),), low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0)
    )
    rendered = runtime.render(_pass_turn())
    assert rendered.decision.low_engagement_phrase != "喵喵喵"
    faults = rendered.trace["plugin_faults"]
    assert {
        "plugin": faults[0]["plugin"],
        "where": "phrase pool 'vague'",
        "kind": "wrong_type",
        "detail": "applies returned str, expected bool; left out",
    } in faults
