"""Section 11, the group timeline, read from the group log (``docs/design.md#group-timeline``)."""

from __future__ import annotations

import datetime as dt

import attrs
from base_support import BOT, GROUP, T0, MessageFactory

from promptweave import ChatMessage, Promptweave, Turn
from promptweave.config import TimelineConfig
from promptweave.pipeline.stages import TurnPipeline
from promptweave.turn import SpeakTrigger


def timeline_of(runtime: Promptweave, current: ChatMessage, **turn: object) -> str:
    turn.setdefault("trigger", SpeakTrigger.MENTION)
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=current, **turn))
    return next((s.text for s in rendered.sections if s.id == "group_timeline"), "")


def record(runtime: Promptweave, *messages: ChatMessage) -> None:
    for item in messages:
        assert runtime.recorder.record_message(BOT.id, GROUP, item)


def test_timeline_labels_self_peer_bots_names_and_fallback(
    runtime: Promptweave, message: MessageFactory
) -> None:
    record(
        runtime,
        message("30022", "中午吃什么好纠结", sender_name="阿蒙", minute=1),
        message("10001", "楼下新开了家米线", minute=2),
        message("10002", "米线加个蛋", minute=3),
        message("11", "我也想吃", minute=4),
    )
    current = message("30022", "@小织 你推荐一个", sender_name="阿蒙", minute=5)
    record(runtime, current)
    text = timeline_of(runtime, current)
    assert text.splitlines() == [
        "【刚才的群聊】",
        "- 阿蒙：中午吃什么好纠结",
        "- 小织：楼下新开了家米线",
        "- 别的bot：米线加个蛋",
        "- 群友#0011：我也想吃",
    ]


def test_timeline_marks_replies_only_inside_the_window(
    runtime: Promptweave, message: MessageFactory
) -> None:
    old = message("30017", "早上好", sender_name="青柠汽水", minute=0)
    record(
        runtime,
        old,
        *(message("30017", f"闲聊{i}", sender_name="青柠汽水", minute=1 + i) for i in range(8)),
    )
    inside = message("30022", "对，汤底不错", sender_name="阿蒙", minute=10, reply_to="9005")
    outside = message("30022", "早", sender_name="阿蒙", minute=11, reply_to=old.id)
    record(runtime, inside, outside)
    text = timeline_of(runtime, message("30022", "小织你说呢", minute=12))
    assert "- 阿蒙（回青柠汽水的话）：对，汤底不错" in text
    assert "- 阿蒙：早" in text
    assert "9005" not in text


def test_timeline_excludes_the_current_message(
    runtime: Promptweave, message: MessageFactory
) -> None:
    current = message("30022", "这句是当前消息", minute=1)
    record(runtime, message("30017", "上一句", minute=0), current)
    text = timeline_of(runtime, current)
    assert "上一句" in text
    assert "这句是当前消息" not in text


def test_timeline_shows_eight_when_addressed_four_on_ambient_none_untriggered(
    runtime: Promptweave, message: MessageFactory
) -> None:
    record(runtime, *(message("30017", f"第{i}句", minute=i) for i in range(12)))
    current = message("30022", "嗯", minute=20)
    for trigger in (SpeakTrigger.MENTION, SpeakTrigger.ALIAS, SpeakTrigger.FOLLOWUP):
        assert len(timeline_of(runtime, current, trigger=trigger).splitlines()) == 1 + 8
    addressed = attrs.evolve(current, addressed=True)
    assert len(timeline_of(runtime, addressed, trigger=None).splitlines()) == 1 + 8
    ambient = timeline_of(runtime, current, trigger=SpeakTrigger.AMBIENT)
    assert ambient.splitlines()[1:] == [f"- 群友#0017：第{i}句" for i in range(8, 12)]
    assert timeline_of(runtime, current, trigger=None) == ""


def test_timeline_cuts_lines_at_240_and_keeps_newest_lines_when_block_is_full(
    runtime: Promptweave, message: MessageFactory
) -> None:
    name = "夜" * 40  # 40-character names and reply tails push eight full lines past 2400
    record(
        runtime,
        *(
            message(
                "30017",
                f"{i}" + "长" * 400,
                sender_name=name,
                minute=i,
                id=f"m{i}",
                reply_to=f"m{i - 1}",
            )
            for i in range(8)
        ),
    )
    text = timeline_of(runtime, message("30022", "？", minute=9))
    lines = text.splitlines()[1:]
    assert all(len(line.split("：", 1)[1]) <= 240 for line in lines)
    assert len(text) <= 2400
    assert lines[-1].startswith(f"- {name}（回{name}的话）：7")
    assert len(lines) < 8
    assert not any("：0长" in line for line in lines)


def test_timeline_block_limit_is_configurable(message: MessageFactory, clock: object) -> None:
    from promptweave import Config, Stores

    config = attrs.evolve(Config(), timeline=TimelineConfig(block_chars=60))
    runtime = Promptweave.from_config(config, stores=Stores.in_memory())
    record(runtime, *(message("30017", f"第{i}句话有点长", minute=i) for i in range(8)))
    text = timeline_of(runtime, message("30022", "？", minute=9))
    assert len(text) <= 60 and "第7句话有点长" in text


def test_image_messages_show_placeholder_and_three_newest_distinct_urls_in_order(
    runtime: Promptweave, message: MessageFactory
) -> None:
    urls = [f"https://img.example/{name}.jpg" for name in "abcd"]
    record(
        runtime,
        message("30017", "", minute=0, images=(urls[0],)),
        message("30017", "看这个", minute=1, images=(urls[1],)),
        message("30022", "", minute=2, images=(urls[2],)),
        message("30017", "同一张", minute=3, images=(urls[2].upper().replace("HTTPS", "https"),)),
        message("30022", "最后一张", minute=4, images=(urls[3],)),
    )
    current = message("30022", "哈哈哈", minute=5)
    rendered = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=current, trigger=SpeakTrigger.MENTION)
    )
    text = next(s.text for s in rendered.sections if s.id == "group_timeline")
    assert "- 群友#0017：[图片]" in text
    assert "- 群友#0017：[图片] 看这个" in text
    assert rendered.vision_images == (urls[1], urls[2].upper().replace("HTTPS", "https"), urls[3])
    assert rendered.trace["vision"]["images"] == list(rendered.vision_images)


def test_recognition_question_about_current_image_gets_no_history_images(
    runtime: Promptweave, message: MessageFactory
) -> None:
    record(runtime, message("30017", "表情包", minute=0, images=("https://img.example/old.jpg",)))
    asking = message("30022", "这是谁啊", minute=1, images=("https://img.example/now.jpg",))
    rendered = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=asking, trigger=SpeakTrigger.MENTION)
    )
    assert rendered.vision_images == ()
    assert rendered.trace["vision"]["withheld"] == "recognition_question"
    assert rendered.messages[-1].images == ("https://img.example/now.jpg",)
    chatting = attrs.evolve(asking, text="哈哈这个好好笑")
    kept = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=chatting, trigger=SpeakTrigger.MENTION)
    )
    assert kept.vision_images == ("https://img.example/old.jpg",)
    no_image = attrs.evolve(asking, images=())
    plain = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=no_image, trigger=SpeakTrigger.MENTION)
    )
    assert plain.vision_images == ("https://img.example/old.jpg",)


def test_recognition_question_about_a_quoted_image_gets_no_history_images(
    runtime: Promptweave, message: MessageFactory
) -> None:
    record(runtime, message("30017", "表情包", minute=0, images=("https://img.example/old.jpg",)))
    asking = message("30022", "这是谁啊", minute=1, reply_to="1234")
    turn = Turn(
        bot=BOT,
        group_id=GROUP,
        message=asking,
        trigger=SpeakTrigger.MENTION,
        quoted_message_images=("https://img.example/quoted.jpg",),
    )
    rendered = runtime.render(turn)
    assert rendered.vision_images == ()
    assert rendered.trace["vision"]["withheld"] == "recognition_question"


def test_reply_to_bot_message_shows_what_the_bot_just_said(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 你推荐一个", minute=0)
    record(runtime, asked)
    runtime.recorder.record_bot_reply(
        BOT.id,
        GROUP,
        "青柠说的那家米线可以试试",
        message_id="9309",
        answering=asked,
        time=T0 + dt.timedelta(minutes=1),
    )
    follow = message("30022", "哪一家？", minute=3, reply_to="9309")
    rendered = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=follow, trigger=SpeakTrigger.FOLLOWUP)
    )
    text = next(s.text for s in rendered.sections if s.id == "group_timeline")
    assert text.endswith("【小织刚才说】\n青柠说的那家米线可以试试")
    assert rendered.trace["messages"]["sources"]["quoted_bot_text"] == "bot_reply_context"


def test_quoted_bot_text_shows_even_without_a_timeline(
    runtime: Promptweave, message: MessageFactory
) -> None:
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "今天降温了记得加衣服", message_id="77", time=T0
    )
    reply = message("30022", "好的", minute=1, reply_to="77")
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=reply, trigger=None))
    text = next(s.text for s in rendered.sections if s.id == "group_timeline")
    assert text == "【小织刚才说】\n今天降温了记得加衣服"


def test_quoted_bot_text_expires_after_ttl(runtime: Promptweave, message: MessageFactory) -> None:
    runtime.recorder.record_bot_reply(BOT.id, GROUP, "周五交报告", message_id="78", time=T0)
    late = message("30022", "哪天来着", minute=10, reply_to="78")
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=late, trigger=None))
    assert not any(s.id == "group_timeline" and s.status == "rendered" for s in rendered.sections)


def test_turn_recent_messages_take_precedence_over_the_store(
    runtime: Promptweave, message: MessageFactory
) -> None:
    record(runtime, message("30017", "库里的话", minute=0))
    given = (message("30017", "回合文件里的话", minute=0),)
    text = timeline_of(runtime, message("30022", "嗯", minute=1), recent_messages=given)
    assert "回合文件里的话" in text and "库里的话" not in text


def test_timeline_reads_nothing_newer_than_the_message(
    runtime: Promptweave, message: MessageFactory
) -> None:
    current = message("30022", "现在", minute=5)
    record(runtime, message("30017", "之前", minute=4), current, message("30017", "之后", minute=6))
    text = timeline_of(runtime, current)
    assert "之前" in text and "之后" not in text


def test_recording_a_quoted_reply_starts_the_quote_cooldown(
    runtime: Promptweave, message: MessageFactory, clock
) -> None:
    asked = message("30022", "这家米线好吃吗", minute=0)
    runtime.recorder.record_message(BOT.id, GROUP, asked)
    assert runtime.stores.routing.last_quote_at(BOT.id, GROUP) is None
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "汤底不错", message_id="9901", answering=asked, quoted=True
    )
    assert runtime.stores.routing.last_quote_at(BOT.id, GROUP) == clock.now


def test_render_with_a_given_decision_does_not_route_again(
    runtime: Promptweave, message: MessageFactory, monkeypatch
) -> None:
    current = message("30022", "@小织 今晚几点开始？", minute=1, addressed=True)
    turn = Turn(bot=BOT, group_id=GROUP, message=current, trigger=SpeakTrigger.MENTION)
    decision = runtime.decide(turn)
    routed = []
    original = TurnPipeline._route
    monkeypatch.setattr(
        TurnPipeline, "_route", lambda self, *a, **k: routed.append(1) or original(self, *a, **k)
    )
    rendered = runtime.render(turn, decision=decision)
    assert rendered.decision is decision
    assert routed == []
    runtime.render(turn)
    assert routed == [1]


def test_decide_reads_the_store_like_render_does(runtime: Promptweave, message: MessageFactory):
    # "那个怎么弄" has its antecedent only in the stored group log: without reading it, routing
    # would ask a follow-up question; with it, it answers.
    record(runtime, message("30017", "新买的桌游说明书全是英文", minute=0))
    asking = message("30022", "@小织 那个怎么弄", minute=1, addressed=True)
    turn = Turn(bot=BOT, group_id=GROUP, message=asking, trigger=SpeakTrigger.MENTION)
    decided = runtime.decide(turn)
    rendered = runtime.render(turn)
    assert decided.trace() == rendered.decision.trace()
    assert decided.action.value != "follow_up"


def test_a_failing_routing_store_still_gives_a_decision(
    sqlite_runtime: Promptweave, message: MessageFactory, monkeypatch
) -> None:
    from promptweave.store.sqlite import StoreUnavailableError

    runtime = sqlite_runtime

    def broken(*args, **kwargs):
        raise StoreUnavailableError("database is locked")

    monkeypatch.setattr(type(runtime.stores.routing), "record_candidates", broken)
    asking = message("30022", "@小织 今晚几点开始？", minute=1, addressed=True)
    turn = Turn(bot=BOT, group_id=GROUP, message=asking, trigger=SpeakTrigger.MENTION)
    rendered = runtime.render(turn)
    assert rendered.decision.action.value == "reply"
    assert any("routing_state_unavailable" in note for note in rendered.trace["route"]["notes"])
    monkeypatch.setattr(type(runtime.stores.routing), "candidates", broken)
    quoting = attrs.evolve(rendered.decision, delivery_style="quote", reply_message_id="1")
    delivery = runtime.recorder.resolve_delivery(turn, quoting)
    assert (delivery.style.value, delivery.reason) == ("plain", "routing_state_unavailable")


def test_the_notes_hook_sees_what_the_sections_saw(
    runtime: Promptweave, message: MessageFactory
) -> None:
    from promptweave import build_turn_context, hookimpl

    seen = []

    class Notes:
        @hookimpl
        def collect_turn_notes(self, context):
            seen.append(context.timeline.text)
            return None

    runtime.add_plugin(Notes(), name="notes_probe")
    record(runtime, message("30017", "周六七点老地方", minute=0))
    asking = message("30022", "@小织 几点来着", minute=1, addressed=True)
    turn = Turn(bot=BOT, group_id=GROUP, message=asking, trigger=SpeakTrigger.MENTION)
    build_turn_context(runtime, turn, runtime.render(turn))
    assert seen and "周六七点老地方" in seen[0]


def test_a_quote_of_another_message_is_recorded_with_that_message(
    runtime: Promptweave, message: MessageFactory, clock
) -> None:
    quoted = message("30017", "楼下那家米线好吃", minute=0)
    asking = message("30022", "真的吗", minute=1, reply_to=quoted.id)
    runtime.recorder.record_message(BOT.id, GROUP, quoted)
    runtime.recorder.record_message(BOT.id, GROUP, asking)
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "真的，汤底是现熬的", message_id="9902", answering=asking, quote_of=quoted.id
    )
    assert runtime.stores.routing.last_quote_at(BOT.id, GROUP) == clock.now
    logged = runtime.stores.group_log.recent_group_messages(
        BOT.id, GROUP, until=clock.now + dt.timedelta(hours=1), limit=5
    )
    assert next(m for m in logged if m.id == "9902").reply_to == quoted.id


def test_a_reply_finds_the_quoted_image_in_the_group_log(
    runtime: Promptweave, message: MessageFactory
) -> None:
    photo = message("30017", "拍到了吗", images=("https://img.example/cat-1.jpg",), minute=0)
    record(runtime, photo, *(message("30022", f"闲聊{i}", minute=1 + i) for i in range(12)))
    current = message("30022", "@小织 这是什么猫", minute=20, reply_to=photo.id, addressed=True)
    record(runtime, current)
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=current, trigger=None))
    assert rendered.trace["messages"]["sources"]["quoted_message_images"] == "group_log"
    assert rendered.trace["messages"]["quoted_lookup"] == [
        {"source": "recent_messages", "result": "missing"},
        {"source": "group_log", "result": "found"},
    ]
    assert rendered.trace["vision"]["current"] == ["https://img.example/cat-1.jpg"]
    assert rendered.context is not None
    assert rendered.context.turn.quoted_message_images == ("https://img.example/cat-1.jpg",)


def test_a_reply_reads_no_quoted_image_newer_than_the_turn(
    runtime: Promptweave, message: MessageFactory
) -> None:
    current = message("30022", "@小织 这是什么", minute=0, reply_to="9900", addressed=True)
    record(
        runtime,
        message("30017", "后来的图", id="9900", images=("https://img.example/x.jpg",), minute=5),
    )
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=current, trigger=None))
    assert rendered.trace["messages"]["sources"]["quoted_message_images"] == "none"
    assert rendered.trace["messages"]["quoted_lookup"] == [
        {"source": "recent_messages", "result": "missing"},
        {"source": "group_log", "result": "newer_than_turn"},
    ]
    assert rendered.trace["vision"]["current"] == []
