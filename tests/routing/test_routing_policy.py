"""Memory policy, turn policy and reply shape resolution (sections 12 and 13)."""

from __future__ import annotations

import random

import attrs
import pytest
from routing_support import make_runtime, make_turn

from promptweave import Decision, ReplyShape, TurnAction
from promptweave.config import RoutingConfig
from promptweave.decision import SocialAction, allows_persistent_memory
from promptweave.items import RhythmProfile, TurnPolicy
from promptweave.routing.shape import resolve_reply_shape, resolve_turn_policy
from promptweave.routing.signals import MessageSignals


def _section(result, section_id: str) -> str:
    return next(s.text for s in result.sections if s.id == section_id)


@pytest.mark.parametrize("text", ["@小织 晚安", "@小织 又加班了，烦", "@小织 哈哈哈哈"])
def test_short_social_turns_read_no_persistent_memory(text):
    decision = make_runtime().decide(make_turn(text, addressed=True))
    assert decision.action is TurnAction.REPLY
    assert not allows_persistent_memory(decision)
    assert decision.memory_policy.reason == "short_social_turn"


@pytest.mark.parametrize(
    "text", ["@小织 周六的桌游局几点开始？", "@小织 帮我推荐一本科幻小说", "@小织 " + "今天" * 13]
)
def test_questions_requests_and_long_messages_read_persistent_memory(text):
    decision = make_runtime().decide(make_turn(text, addressed=True))
    assert allows_persistent_memory(decision)
    assert decision.memory_policy.reason == "substantive"


def test_a_short_social_turn_right_after_the_bot_answered_drops_the_ambient_excerpt():
    history = [{"role": "user", "content": "漂亮小织"}, {"role": "assistant", "content": "嘿嘿"}]
    decision = make_runtime().decide(make_turn("@小织 看看", addressed=True, history=history))
    policy = decision.memory_policy
    assert not policy.read_persistent_memory
    assert not policy.include_ambient_excerpt


def test_a_pass_reads_nothing():
    decision = make_runtime().decide(make_turn("今天好冷"))
    assert decision.memory_policy.reason == "silent"
    assert not allows_persistent_memory(decision)


def test_a_tool_turn_is_serious_task_work():
    hints = {"tool_intent": "calendar.lookup", "tools_permitted": True}
    decision = make_runtime().decide(
        make_turn("@小织 帮我看看周六的日程", addressed=True, hints=hints)
    )
    assert decision.turn_policy is not None and decision.turn_policy.needs_tool
    assert decision.reply_shape == ReplyShape(
        preferred_bubbles=1, max_bubbles=2, min_chars=8, max_chars=160, band="task"
    )


def test_a_request_is_light_help_answered_completely_and_grounded():
    decision = make_runtime().decide(make_turn("@小织 帮我推荐一本科幻小说", addressed=True))
    policy = decision.turn_policy
    assert policy is not None
    assert (policy.seriousness, policy.reply_target) == ("serious", "answer")
    assert policy.needs_grounding and not policy.allow_teasing
    assert decision.reply_shape is not None and decision.reply_shape.band == "complete"
    assert (decision.reply_shape.min_chars, decision.reply_shape.max_chars) == (8, 80)


def test_a_vent_answers_the_emotion_casually():
    decision = make_runtime().decide(make_turn("@小织 又加班了，烦", addressed=True))
    policy = decision.turn_policy
    assert policy is not None
    assert (policy.reply_target, policy.seriousness, policy.social_action) == (
        "emotion",
        "casual",
        "ack",
    )
    assert not policy.allow_teasing


def test_the_scene_given_by_the_bot_wins():
    decision = make_runtime().decide(
        make_turn("@小织 晚安", addressed=True, hints={"scene": "serious"})
    )
    assert decision.turn_policy is not None and decision.turn_policy.seriousness == "serious"


def test_an_unknown_scene_asks_for_grounding_and_never_teases():
    decision = make_runtime().decide(
        make_turn("@小织 晚安", addressed=True, hints={"scene": "karaoke"})
    )
    policy = decision.turn_policy
    assert policy is not None and policy.needs_grounding and not policy.allow_teasing


def test_casual_shape_follows_the_groups_rhythm_profile():
    profile = RhythmProfile(bubble_count_p50=2, bubble_count_p90=4, single_weight=1, multi_weight=3)
    shape = resolve_reply_shape(TurnPolicy(), profile, random.Random(0))
    assert shape == ReplyShape(
        preferred_bubbles=2, max_bubbles=4, min_chars=4, max_chars=18, rhythm="multi", band="short"
    )


@pytest.mark.parametrize(
    ("p50", "p90", "preferred", "maximum"),
    [(None, None, 2, 3), (7, 9, 3, 5), (1, 1, 1, 1), (0.4, None, 1, 3)],
)
def test_casual_bubble_counts_are_clamped(p50, p90, preferred, maximum):
    profile = RhythmProfile(bubble_count_p50=p50, bubble_count_p90=p90)
    shape = resolve_reply_shape(TurnPolicy(), profile, random.Random(0))
    assert (shape.preferred_bubbles, shape.max_bubbles) == (preferred, maximum)


@pytest.mark.parametrize(
    ("single", "multi", "rhythm"),
    [(2, 2, "single"), (0, 0, "single"), (1, 2, "multi"), (3, 1, "single")],
)
def test_the_rhythm_is_the_strictly_favoured_one(single, multi, rhythm):
    profile = RhythmProfile(single_weight=single, multi_weight=multi)
    assert resolve_reply_shape(TurnPolicy(), profile, random.Random(0)).rhythm == rhythm


def test_without_a_profile_the_bubble_count_is_drawn_from_the_rng():
    counts = {
        resolve_reply_shape(TurnPolicy(), None, random.Random(seed)).preferred_bubbles
        for seed in range(30)
    }
    assert counts == {1, 2, 3}


def test_the_rhythm_profile_comes_from_the_routing_state():
    runtime = make_runtime()
    profile = RhythmProfile(bubble_count_p50=3, bubble_count_p90=5, multi_weight=1)
    runtime.stores.routing.set_rhythm("10001", "20001", profile)
    decision = runtime.decide(make_turn("@小织 晚安", addressed=True))
    assert decision.reply_shape is not None
    assert (decision.reply_shape.preferred_bubbles, decision.reply_shape.rhythm) == (3, "multi")


def test_the_stored_rhythm_baseline_shapes_the_reply_like_section_4_shows_it():
    from promptweave.store.retrieval import RetrievalBatch, RhythmRecord

    runtime = make_runtime()
    runtime.stores.retrieval.write(
        RetrievalBatch(
            rhythms=(
                RhythmRecord(
                    bot_id="10001",
                    group_id="20001",
                    single_bubble_share=0.1,
                    median_segment_chars=6,
                ),
            )
        )
    )
    result = runtime.render(make_turn("@小织 晚安", addressed=True))
    assert "常连发多条气泡（单条占比约 10%）" in _section(result, "group_expression")
    assert result.decision.reply_shape is not None
    assert result.decision.reply_shape.rhythm == "multi"
    assert "节奏偏多条连发" in _section(result, "reply_shape")


def test_the_resolved_shape_and_policy_feed_sections_12_and_13():
    runtime = make_runtime()
    profile = RhythmProfile(bubble_count_p50=2, bubble_count_p90=4, multi_weight=1)
    runtime.stores.routing.set_rhythm("10001", "20001", profile)
    result = runtime.render(make_turn("@小织 又加班了，烦", addressed=True))
    assert "最多 4 段；推荐 2 段，节奏偏多条连发" in _section(result, "reply_shape")
    assert "先回应对方的情绪" in _section(result, "turn_policy")


def test_a_turn_that_brings_its_own_shape_keeps_it():
    turn = make_turn("@小织 晚安", addressed=True)
    own = attrs.evolve(turn, reply_shape=ReplyShape(max_bubbles=1, preferred_bubbles=1))
    assert "最多 1 段" in _section(make_runtime().render(own), "reply_shape")


def test_the_policy_of_a_joke_is_a_short_tease():
    turn = make_turn("@小织 晚安", addressed=True)
    signals = MessageSignals.read(
        turn, config=RoutingConfig(), candidates=(), now=turn.message.time
    )
    decision = Decision(action=TurnAction.REPLY, social_action=SocialAction.JOKE)
    policy = resolve_turn_policy(decision, signals, "banter")
    assert (policy.reply_target, policy.allow_teasing) == ("short_tease", True)
