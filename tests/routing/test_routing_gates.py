"""Stage ``gate``: skip in silence, with the reason; cooldown keeps the message."""

from __future__ import annotations

import datetime as dt

import pytest
from routing_support import BASE_TIME, make_runtime, make_turn
from timeline_support import timeline_lines

from promptweave import ConfigError, TurnAction
from promptweave.config import Config, RoutingConfig


def _gate(text: str, **fields: object) -> str:
    decision = make_runtime().decide(make_turn(text, **fields))
    assert decision.action is TurnAction.PASS
    assert decision.source == "gate"
    return decision.reason


def test_shut_up_addressed_to_the_bot_skips_and_silences_the_group():
    runtime = make_runtime(shut_up_silence_s=90)
    decision = runtime.decide(make_turn("@小织 闭嘴吧你", addressed=True))
    assert decision.reason == "shut_up"
    assert decision.silence_until == BASE_TIME + dt.timedelta(seconds=90)
    later = make_turn("大家晚上吃什么呀？", time="2026-11-30T20:01:00+08:00")
    assert runtime.decide(later).reason == "shut_up_silence"
    after = make_turn("大家晚上吃什么呀？", time="2026-11-30T20:01:31+08:00")
    assert runtime.decide(after).reason != "shut_up_silence"


def test_silence_lets_an_addressed_message_through():
    runtime = make_runtime()
    runtime.decide(make_turn("@小织 别说话了", addressed=True))
    asked = make_turn("@小织 明天几点开会？", addressed=True, time="2026-11-30T20:00:30+08:00")
    assert runtime.decide(asked).reason == "rule_reply_obligation"


def test_shut_up_words_to_someone_else_are_not_a_shut_up():
    decision = make_runtime().decide(make_turn("你俩别吵了", context=[{"text": "就你话多"}]))
    assert decision.reason != "shut_up"


def test_shut_up_right_after_the_bot_spoke_counts_as_directed_at_it():
    context = [{"text": "我觉得周五比较好", "bot": True}]
    assert _gate("闭嘴", context=context) == "shut_up"


def test_shut_up_silence_zero_turns_the_silence_off():
    decision = make_runtime(shut_up_silence_s=0).decide(make_turn("@小织 闭嘴", addressed=True))
    assert decision.reason == "shut_up"
    assert decision.silence_until is None


@pytest.mark.parametrize("seconds", [10, 29, 301])
def test_shut_up_silence_outside_30_to_300_seconds_is_refused(seconds):
    with pytest.raises(ValueError, match="between 30 and 300"):
        RoutingConfig(shut_up_silence_s=seconds)


def test_config_file_reports_a_bad_routing_value_with_its_path(tmp_path):
    path = tmp_path / "promptweave.toml"
    path.write_text("[routing]\nquote_probability = 2.0\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"quote_probability must be between 0 and 1 @ \$\.routing"
    ):
        Config.from_file(path)


@pytest.mark.parametrize(
    "text", ["[doge]", "😂😂😂", "[CQ:face,id=178]", "@小织 [CQ:face,id=14]", "[狗头][狗头]"]
)
def test_face_or_emoji_only_messages_skip_as_face(text):
    assert _gate(text) == "face"


@pytest.mark.parametrize("text", ["？？？", "……", "。", "asdfghjkl", "啊啊啊啊啊啊啊"])
def test_noise_fragments_skip_as_noise(text):
    assert _gate(text) == "noise"


@pytest.mark.parametrize("text", ["然后", "所以，", "我是", "因为…", "我想说的就是", "那你"])
def test_incomplete_utterances_skip_as_incomplete(text):
    assert _gate(text) == "incomplete"


def test_a_question_is_never_incomplete():
    decision = make_runtime().decide(make_turn("@小织 所以？", addressed=True))
    assert decision.reason != "incomplete"


def test_an_at_of_someone_else_skips_as_bystander():
    assert (
        _gate("[CQ:at,qq=30017] 你上次说的那家店叫啥", raw="[CQ:at,qq=30017] 你上次说的那家店叫啥")
        == "bystander"
    )
    assert _gate("@青柠汽水 晚上一起开黑吗") == "bystander"


def test_at_all_members_is_not_a_bystander_message():
    decision = make_runtime().decide(
        make_turn("@全体成员 周六的活动改到下午三点了", mentions=["all"])
    )
    assert decision.reason != "bystander"


def test_an_at_of_someone_else_that_also_names_the_bot_is_not_bystander():
    decision = make_runtime().decide(make_turn("@青柠汽水 你问问小织知不知道"))
    assert decision.reason != "bystander"


def test_too_short_messages_skip_as_short():
    assert make_runtime(min_chars=3).decide(make_turn("在吗")).reason == "short"
    assert make_runtime().decide(make_turn("   ")).reason == "short"


def test_an_image_message_without_text_is_not_short():
    decision = make_runtime().decide(make_turn("", images=["https://img.example.net/a.jpg"]))
    assert decision.reason != "short"


def test_a_bare_at_of_the_bot_is_a_summons_not_a_short_message():
    decision = make_runtime().decide(make_turn("@小织", addressed=True))
    assert decision.action is TurnAction.REPLY


def test_a_disabled_group_skips_everything():
    runtime = make_runtime()
    runtime.stores.routing.set_disabled("10001", "20001", True)
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason == "group_switched_off"
    runtime.stores.routing.set_disabled("10001", "20001", False)
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason != "group_switched_off"


def test_cooldown_keeps_the_message_for_the_next_trigger():
    runtime = make_runtime()
    runtime.stores.routing.start_cooldown("10001", "20001", BASE_TIME + dt.timedelta(seconds=60))
    kept = make_turn("@小织 周末去爬山吗？", addressed=True, message_id="m1")
    decision = runtime.decide(kept)
    assert (decision.source, decision.reason) == ("gate", "cooldown")
    again = make_turn("@小织 刚才问你的呢？", addressed=True, time="2026-11-30T20:01:30+08:00")
    answered = runtime.decide(again)
    assert answered.action is TurnAction.REPLY
    assert [m.text for m in answered.kept_messages] == ["@小织 周末去爬山吗？"]
    assert runtime.decide(again).kept_messages == ()


def test_kept_messages_join_the_timeline_of_the_next_turn():
    runtime = make_runtime()
    runtime.stores.routing.start_cooldown("10001", "20001", BASE_TIME + dt.timedelta(seconds=60))
    kept = make_turn("@小织 周末去爬山吗？", addressed=True, sender="阿蒙", message_id="m1")
    runtime.decide(kept)
    again = make_turn(
        "@小织 刚才问你的呢？", addressed=True, sender="阿蒙", time="2026-11-30T20:01:30+08:00"
    )
    [line] = timeline_lines(again, kept.message)
    assert line in runtime.render(again).system_prompt.splitlines()


def test_messages_kept_during_a_cooldown_are_bounded():
    runtime = make_runtime(kept_messages_max=2)
    runtime.stores.routing.start_cooldown("10001", "20001", BASE_TIME + dt.timedelta(seconds=60))
    for index in range(4):
        runtime.decide(
            make_turn(f"@小织 第{index}个问题？", addressed=True, message_id=f"k{index}")
        )
    kept = runtime.stores.routing.take_kept_messages("10001", "20001")
    assert [m.id for m in kept] == ["k2", "k3"]


def test_a_delivered_reply_starts_the_configured_cooldown():
    runtime = make_runtime(reply_cooldown_s=30)
    first = make_turn("@小织 周末去爬山吗？", addressed=True)
    decision = runtime.decide(first)
    runtime.recorder.note_delivered(
        first, runtime.recorder.resolve_delivery(first, decision), at=BASE_TIME
    )
    second = make_turn("@小织 几点出发？", addressed=True, time="2026-11-30T20:00:20+08:00")
    assert runtime.decide(second).reason == "cooldown"


def test_the_first_gate_in_order_gives_the_reason():
    # Face-only and too short at once: face (order 1100) runs before short (1500).
    assert make_runtime(min_chars=10).decide(make_turn("[doge]")).reason == "face"


def test_a_private_chat_is_not_held_by_its_group_state():
    runtime = make_runtime()
    runtime.stores.routing.set_disabled("10001", "20001", True)
    decision = runtime.decide(make_turn("在忙吗", private=True))
    assert decision.action is TurnAction.REPLY
