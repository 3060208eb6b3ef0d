"""The delivery plan: quote and mention on the first bubble, paced bubbles, the sticker last."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptweave import Config, ConfigError, Decision, ModelAnswer, Segment
from promptweave.config import DeliveryConfig
from promptweave.decision import DeliveryStyle
from promptweave.delivery.outgoing import DeliveryPlan
from promptweave.delivery.plan import PauseConfig, plan_delivery, plan_phrase

BOT, GROUP, USER = "10001", "20001", "30017"
PAUSE = PauseConfig(base_s=0.6, per_char_s=0.05, max_s=3.0)


def plan(
    answer: ModelAnswer,
    decision: Decision | None = None,
    *,
    group_id: str | None = GROUP,
    candidates: tuple[str, ...] = (),
    sticker: Segment | None = None,
    pause: PauseConfig = PAUSE,
) -> DeliveryPlan:
    return plan_delivery(
        answer,
        bot_id=BOT,
        group_id=group_id,
        user_id=USER,
        decision=decision or Decision(action="reply"),
        quote_candidate_ids=candidates,
        sticker_segment=sticker,
        pause=pause,
    )


def quote(message_id: str | None = "9309") -> Decision:
    return Decision(action="reply", delivery_style="quote", reply_message_id=message_id)


def kinds(plan: DeliveryPlan) -> list[list[str]]:
    return [[segment.kind for segment in message.segments] for message in plan.messages]


def test_one_message_per_bubble_in_order_to_the_group() -> None:
    found = plan(ModelAnswer(bubbles=("确实", "我也想去")))
    assert [m.text for m in found.messages] == ["确实", "我也想去"]
    assert [m.bubble_index for m in found.messages] == [0, 1]
    assert {(m.bot_id, m.group_id, m.user_id) for m in found.messages} == {(BOT, GROUP, USER)}
    assert found.style is DeliveryStyle.PLAIN
    assert kinds(found) == [["text"], ["text"]]


def test_a_quote_of_a_current_candidate_rides_the_first_bubble_only() -> None:
    found = plan(ModelAnswer(bubbles=("八点", "别迟到")), quote(), candidates=("9301", "9309"))
    assert found.style is DeliveryStyle.QUOTE
    assert found.quoted_message_id == "9309"
    assert found.messages[0].segments[0] == Segment.reply("9309")
    assert kinds(found) == [["reply", "text"], ["text"]]
    assert "quote_dropped" not in found.trace


def test_a_quote_of_a_message_no_longer_a_candidate_goes_out_plain() -> None:
    found = plan(ModelAnswer(bubbles=("八点",)), quote("9309"), candidates=("9310",))
    assert found.style is DeliveryStyle.PLAIN
    assert found.quoted_message_id is None
    assert kinds(found) == [["text"]]
    assert found.trace["quote_dropped"] == "not a candidate"
    assert found.trace["decided_style"] == "quote"


def test_a_quote_without_a_target_goes_out_plain() -> None:
    found = plan(ModelAnswer(bubbles=("嗯",)), quote(None), candidates=("9309",))
    assert (found.style, found.trace["quote_dropped"]) == (DeliveryStyle.PLAIN, "no target")


def test_a_mention_puts_the_speaker_first_then_a_space() -> None:
    decision = Decision(action="reply", delivery_style="mention")
    found = plan(ModelAnswer(bubbles=("你来啦", "快坐")), decision)
    first = found.messages[0].segments
    assert first == (Segment.at(USER), Segment.text(" 你来啦"))
    assert found.messages[1].segments == (Segment.text("快坐"),)
    assert found.style is DeliveryStyle.MENTION


def test_a_mention_in_a_private_chat_is_dropped() -> None:
    decision = Decision(action="reply", delivery_style="mention")
    found = plan(ModelAnswer(bubbles=("在的",)), decision, group_id=None)
    assert kinds(found) == [["text"]]
    assert found.trace["mention_dropped"] == "private chat"


def test_a_mention_during_the_groups_mention_cooldown_goes_out_plain() -> None:
    decision = Decision(action="reply", delivery_style="mention")
    found = plan_delivery(
        ModelAnswer(bubbles=("你来啦",)),
        bot_id=BOT,
        group_id=GROUP,
        user_id=USER,
        decision=decision,
        quote_candidate_ids=(),
        sticker_segment=None,
        pause=PAUSE,
        mention_allowed=False,
    )
    assert kinds(found) == [["text"]]
    assert found.style is DeliveryStyle.PLAIN
    assert (found.trace["decided_style"], found.trace["mention_dropped"]) == ("mention", "cooldown")


def test_the_mention_cooldown_counts_per_group_from_the_last_mention_sent() -> None:
    import datetime as dt

    from promptweave.delivery.mention import MentionCooldown

    start = dt.datetime(2026, 5, 1, 20, 0, tzinfo=dt.UTC)
    later = start + dt.timedelta(seconds=899)
    cooldown = MentionCooldown(900)
    assert cooldown.allows(BOT, GROUP, start)
    cooldown.note(BOT, GROUP, start)
    assert not cooldown.allows(BOT, GROUP, later)
    assert cooldown.allows(BOT, "20002", later)
    assert cooldown.allows("10002", GROUP, later)
    assert cooldown.allows(BOT, None, later)
    assert cooldown.allows(BOT, GROUP, start + dt.timedelta(seconds=900))
    off = MentionCooldown(0)
    off.note(BOT, GROUP, start)
    assert off.allows(BOT, GROUP, start)


def test_pauses_grow_with_each_bubbles_length_and_the_first_waits_none() -> None:
    bubbles = ("嗯", "我想想", "好像是周六晚上七点吧")
    found = plan(ModelAnswer(bubbles=bubbles))
    pauses = [m.pause_s for m in found.messages]
    assert pauses[0] == 0.0
    assert pauses[1] == pytest.approx(0.6 + 0.05 * len(bubbles[1]))
    assert pauses[2] == pytest.approx(0.6 + 0.05 * len(bubbles[2]))
    assert pauses[1] < pauses[2]


def test_a_pause_is_capped() -> None:
    found = plan(ModelAnswer(bubbles=("嗯", "长" * 200)))
    assert found.messages[1].pause_s == PAUSE.max_s


def test_the_sticker_is_its_own_last_message() -> None:
    face = Segment.face("178")
    found = plan(
        ModelAnswer(bubbles=("笑死",), sticker="笑"), quote(), candidates=("9309",), sticker=face
    )
    assert kinds(found) == [["reply", "text"], ["face"]]
    assert found.messages[-1].segments == (face,)
    assert found.messages[-1].pause_s == pytest.approx(PAUSE.base_s)
    assert found.trace["sticker"] == "笑"


def test_a_sticker_intent_without_a_segment_is_dropped_and_traced() -> None:
    found = plan(ModelAnswer(bubbles=("笑死",), sticker="笑"), sticker=None)
    assert kinds(found) == [["text"]]
    assert found.trace["sticker"] == "dropped"


def test_a_sticker_only_answer_carries_the_quote() -> None:
    found = plan(
        ModelAnswer(bubbles=(), sticker="点赞"),
        quote(),
        candidates=("9309",),
        sticker=Segment.face("76"),
    )
    assert kinds(found) == [["reply", "face"]]
    assert found.messages[0].pause_s == 0.0


def test_a_silent_answer_plans_nothing() -> None:
    found = plan(ModelAnswer.silence("pass"), quote(), candidates=("9309",))
    assert found.is_empty
    assert (found.style, found.quoted_message_id) == (DeliveryStyle.PLAIN, None)
    assert found.trace["silent"] == "pass"


def test_the_trace_carries_what_reading_the_answer_removed() -> None:
    answer = ModelAnswer(bubbles=("哈哈",), removed=("markdown", "preamble"))
    assert plan(answer).trace["answer"]["removed"] == ["markdown", "preamble"]


def test_a_private_chat_plan_targets_the_user() -> None:
    found = plan(ModelAnswer(bubbles=("在的",)), group_id=None)
    assert (found.messages[0].group_id, found.messages[0].user_id) == (None, USER)


def test_pause_config_comes_from_the_delivery_table() -> None:
    config = Config(
        delivery=DeliveryConfig(pause_base_s=1.0, pause_per_char_s=0.1, pause_max_s=2.0)
    )
    pause = PauseConfig.from_config(config)
    assert pause == PauseConfig(base_s=1.0, per_char_s=0.1, max_s=2.0)
    assert PauseConfig.from_config(config.delivery) == pause
    assert pause.pause_for("四个字啊") == pytest.approx(1.4)
    assert pause.pause_for("长" * 50) == 2.0


def test_default_pauses_are_the_documented_ones() -> None:
    assert PauseConfig.from_config(Config()) == PauseConfig(base_s=0.6, per_char_s=0.05, max_s=3.0)


def test_negative_pauses_are_refused() -> None:
    with pytest.raises(ValueError, match="base_s must not be negative"):
        PauseConfig(base_s=-1.0)


def test_the_low_engagement_phrase_is_one_plain_bubble_without_pause() -> None:
    found = plan_phrase("哈哈", bot_id=BOT, group_id=GROUP, user_id=USER)
    assert kinds(found) == [["text"]]
    assert (found.messages[0].text, found.messages[0].pause_s) == ("哈哈", 0.0)
    assert found.style is DeliveryStyle.PLAIN
    assert found.trace["source"] == "low_engagement"


def test_a_blank_phrase_plans_nothing() -> None:
    assert plan_phrase("  ", bot_id=BOT, group_id=GROUP, user_id=USER).is_empty


def test_segments_hold_text_data_and_compare_by_value() -> None:
    assert Segment.face(178) == Segment(kind="face", data={"id": "178"})  # type: ignore[arg-type]
    assert hash(Segment.text("a")) == hash(Segment.text("a"))
    with pytest.raises(ValueError, match="segment data maps names to text or numbers"):
        Segment(kind="face", data={"id": True})  # type: ignore[dict-item]


def test_the_delivery_table_is_read_from_promptweave_toml(tmp_path: Path) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text(
        '[delivery]\npause_max_s = 1.5\nsticker = "drop"\n\n[delivery.faces]\n"笑" = 178\n"捂脸" = "264"\n',
        encoding="utf-8",
    )
    delivery = Config.from_file(path).delivery
    assert delivery == DeliveryConfig(
        pause_max_s=1.5, sticker="drop", faces={"笑": "178", "捂脸": "264"}
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('sticker = "gif"', "sticker must be one of 'face', 'drop', not 'gif'"),
        ("pause_base_s = -0.5", "pause_base_s"),
        ('faces = { "笑" = "smile" }', "the face id of '笑' must be a number"),
        ('faces = { " " = 1 }', "a sticker intent cannot be blank"),
        ('faces = { "笑" = true }', "expected a string"),
        ("stickers = true", "stickers"),
    ],
)
def test_a_wrong_delivery_setting_is_a_one_line_error_naming_it(
    tmp_path: Path, table: str, message: str
) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text(f"[delivery]\n{table}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        Config.from_file(path)
    assert "delivery" in str(raised.value)
