"""build_turn_context: the snapshot, the active system prompt, notes, the sidecar, replay."""

from __future__ import annotations

import json

import attrs
import pytest
from support_turn_context import example_turn, later, make_runtime

from promptweave import (
    Bot,
    ChatMessage,
    PromptMessage,
    ProviderApi,
    Turn,
    build_provider_request,
    build_turn_context,
    hookimpl,
)
from promptweave.messages.timeline import TIMELINE_HEADER
from promptweave.providers.exchange import ProviderSpec
from promptweave.turn_context.conversation_state import conversation_key


def build(runtime, turn, **kwargs):
    return build_turn_context(runtime, turn, runtime.render(turn), **kwargs)


def test_current_message_is_sanitized_and_original_text_kept_clean():
    runtime = make_runtime()
    turn = later(example_turn(), 0, text="@小织 周六\ud800还去吗")
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    context = build(runtime, turn, memory_context="她周末可能加班")
    assert "\ud800" not in context.user_message
    assert context.user_message.endswith("周六还去吗")
    assert context.original_user_message == "@小织 周六还去吗"
    current = context.current_message
    assert current is not None and current.content == context.user_message
    assert "首次对话" not in context.original_user_message
    assert "首次对话" in (current.api_content or "")


def test_persist_user_message_overrides_the_original_text():
    runtime = make_runtime()
    context = build(runtime, example_turn(), persist_user_message="周六还照常吗")
    assert context.original_user_message == "周六还照常吗"


def test_history_is_a_copy_and_the_rendered_turn_is_untouched():
    runtime = make_runtime()
    turn = example_turn()
    rendered = runtime.render(turn)
    before = rendered.messages
    runtime.conversations.notes.push(conversation_key(turn), "备注")
    context = build_turn_context(runtime, turn, rendered)
    assert rendered.messages == before
    assert all(m.api_content is None for m in rendered.messages)
    assert context.conversation_history == rendered.messages[:-1]
    assert context.messages[:-1] == rendered.messages[:-1]


def test_turn_and_task_ids():
    runtime = make_runtime()
    turn = example_turn()
    first = build(runtime, turn, task_id="task-7")
    second = build(runtime, turn)
    assert first.task_id == "task-7"
    key, task, tail = first.turn_id.rsplit(":", 2)
    assert (key, task, len(tail)) == (conversation_key(turn), "task-7", 8)
    int(tail, 16)
    assert second.task_id != first.task_id and second.turn_id != first.turn_id


def test_current_turn_user_idx_points_at_the_current_message():
    context = build(make_runtime(), example_turn())
    assert context.current_turn_user_idx == len(context.messages) - 1
    assert context.messages[context.current_turn_user_idx].source == "current"


# -- the active system prompt -------------------------------------------------------------------


def test_active_system_prompt_is_reused_byte_for_byte_until_its_sections_change():
    runtime = make_runtime()
    turn = example_turn()
    first = build(runtime, turn)
    assert first.system_prompt_status == "built"
    assert [s for s, _ in first.active_system_prompt.sections] == [
        "injection_guard",
        "persona",
        "identity",
        "group_expression",
        "behavior_reference",
    ]
    changed = attrs.evolve(
        later(turn, 3, "@小织 那换个话题"),
        retrieved=attrs.evolve(turn.retrieved, group_expression=None, behavior_reference=()),
    )
    second = build(runtime, changed)
    # Only profile sections changed: the prompt is rebuilt with them, its static part unchanged.
    assert second.system_prompt_status == "rebuilt_profile_changed"
    assert "【群表达指导】" not in second.active_system_prompt.text
    static = first.active_system_prompt.text.split("\n\n【群表达指导】")[0]
    assert second.active_system_prompt.text.startswith(static)
    third = build(runtime, changed)
    assert third.system_prompt_status == "reused"


def test_a_changed_static_section_rebuilds_the_prompt():
    runtime = make_runtime()
    turn = example_turn()
    build(runtime, turn)
    renamed = attrs.evolve(turn, bot=attrs.evolve(turn.bot, aliases=("织宝",)))
    context = build(runtime, renamed)
    assert context.system_prompt_status == "rebuilt_static_changed"
    assert "织宝" in context.active_system_prompt.text


def test_each_conversation_has_its_own_active_prompt():
    runtime = make_runtime()
    turn = example_turn()
    build(runtime, turn)
    other = attrs.evolve(turn, message=attrs.evolve(turn.message, sender_id="30099"))
    assert build(runtime, other).system_prompt_status == "built"


def test_note_time_and_timeline_line_never_change_the_stable_prefix_bytes():
    runtime = make_runtime()
    turn = example_turn()
    spec = ProviderSpec(api=ProviderApi.ANTHROPIC, model="claude-sonnet-4-5")
    first = build_provider_request(runtime, build(runtime, turn), spec)
    runtime.conversations.notes.push(
        conversation_key(turn), "[系统备注：语音频道已切换到 桌游-语音]"
    )
    newer = later(turn, 7)
    newer = attrs.evolve(
        newer,
        recent_messages=(
            *turn.recent_messages,
            ChatMessage(
                id="9120",
                sender_id="30022",
                sender_name="阿蒙",
                text="我已经订好位了",
                time=newer.message.time,
            ),
        ),
    )
    context = build(runtime, newer)
    second = build_provider_request(runtime, context, spec)
    stable_first = first.body["system"][0]
    stable_second = second.body["system"][0]
    assert stable_first == stable_second
    assert "cache_control" in stable_second
    # The per-turn facts did change, after the breakpoint and in the user message.
    assert "我已经订好位了" in second.body["system"][1]["text"]
    assert first.body["system"][1]["text"] != second.body["system"][1]["text"]
    assert "语音频道已切换" in second.body["messages"][-1]["content"][0]["text"]
    assert "语音频道" not in str(second.body["system"])
    assert second.prefix is not None
    assert second.prefix.common_prefix_bytes >= len(
        (
            '{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":'
            + stable_first["text"]
        ).encode()
    )
    assert second.prefix.first_difference == "section group_timeline"


# -- notes ----------------------------------------------------------------------------------------


def test_queued_notes_are_delivered_once_in_the_sidecar():
    runtime = make_runtime()
    turn = example_turn()
    key = conversation_key(turn)
    runtime.conversations.notes.push(key, "[系统备注：你刚被重置过，这是新的对话。]")
    runtime.conversations.notes.push(key, "  ")
    first = build(runtime, turn)
    assert first.notes == ("[系统备注：你刚被重置过，这是新的对话。]",)
    assert runtime.conversations.notes.pending(key) == ()
    assert first.current_message.api_content == (
        first.user_message + "\n\n[系统备注：你刚被重置过，这是新的对话。]"
    )
    second = build(runtime, later(turn, 1, "@小织 那我先去订位"))
    assert second.notes == ()
    assert second.current_message.api_content is None
    assert first.trace["stamp"] == "sidecar" and second.trace["stamp"] == "none"


def test_notes_never_reach_the_system_prompt():
    runtime = make_runtime()
    turn = example_turn()
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：第一次见面]")
    context = build(runtime, turn)
    assert "第一次见面" not in context.system_prompt


def test_notes_are_sanitized_cut_and_deduplicated():
    runtime = make_runtime(note_max_chars=10)
    turn = example_turn()
    key = conversation_key(turn)
    runtime.conversations.notes.push(key, "语音\u200b频道\x07切换了，成员有三位一二三四")
    runtime.conversations.notes.push(key, "语音频道切换了，成员有三位一二三四")
    context = build(runtime, turn)
    assert context.notes == ("语音频道切换了，成员",)


def test_notes_wait_for_a_turn_with_a_user_message():
    runtime = make_runtime()
    turn = later(example_turn(), 0, text="")
    # Empty and not addressed (an addressed empty message is a summons and gets "@小织").
    turn = attrs.evolve(turn, message=attrs.evolve(turn.message, addressed=False))
    key = conversation_key(turn)
    runtime.conversations.notes.push(key, "[系统备注：首次对话]")
    context = build(runtime, turn)
    assert context.current_turn_user_idx == -1 and context.notes == ()
    assert runtime.conversations.notes.pending(key) == ("[系统备注：首次对话]",)


def test_memory_and_notes_ride_the_sidecar_in_order():
    runtime = make_runtime()
    turn = example_turn()
    runtime.conversations.notes.push(conversation_key(turn), "NOTE")
    sidecar = build(runtime, turn, memory_context="MEMORY").current_message.api_content
    assert sidecar.index("MEMORY") < sidecar.index("NOTE")
    assert sidecar.startswith(build(make_runtime(), turn).user_message + "\n\n<memory-context>")


# -- multimodal turns ------------------------------------------------------------------------------


def test_multimodal_turn_gets_notes_as_a_durable_part_not_a_sidecar():
    runtime = make_runtime()
    turn = example_turn()
    turn = attrs.evolve(
        turn,
        message=attrs.evolve(turn.message, images=("https://img.example.net/board.jpg",)),
        quoted_message_images=("https://img.example.net/map.jpg",),
    )
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    context = build(runtime, turn)
    current = context.current_message
    assert current.images == (
        "https://img.example.net/board.jpg",
        "https://img.example.net/map.jpg",
    )
    assert current.api_content is None
    assert current.parts == ("[系统备注：首次对话]",)
    assert context.trace["stamp"] == "part"


def test_image_only_message_still_is_the_turns_user_message():
    runtime = make_runtime()
    turn = later(example_turn(), 0, text="")
    turn = attrs.evolve(
        turn, message=attrs.evolve(turn.message, images=("https://img.example.net/a.png",))
    )
    context = build(runtime, turn)
    assert context.current_message.images == ("https://img.example.net/a.png",)
    assert context.current_message.content.endswith("[图片]")


# -- what was sent is replayed ---------------------------------------------------------------------


def test_what_was_sent_is_replayed_byte_identically_on_the_next_turn():
    runtime = make_runtime()
    first_turn = example_turn("at_question")
    runtime.conversations.notes.push(conversation_key(first_turn), "[系统备注：首次对话]")
    first = build(runtime, first_turn, memory_context="她周末可能加班")
    spec = ProviderSpec(api=ProviderApi.OPENAI_CHAT, model="gpt-4o-mini")
    sent_first = build_provider_request(runtime, first, spec)
    second = build(runtime, example_turn("at_question_followup"))
    replayed = [m for m in second.messages if m.content == first.user_message]
    assert len(replayed) == 1
    assert replayed[0].api_content == first.current_message.api_content
    sent_second = build_provider_request(runtime, second, spec)
    old_user = sent_first.body["messages"][-1]
    assert old_user in sent_second.body["messages"]


def test_a_multimodal_turns_notes_part_is_replayed_with_the_message():
    runtime = make_runtime()
    turn = example_turn()
    turn = attrs.evolve(
        turn, message=attrs.evolve(turn.message, images=("https://img.example.net/board.jpg",))
    )
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    first = build(runtime, turn)
    # The stored history holds the image message as it was sent: with its [图片] mark.
    followup = example_turn("at_question_followup")
    history = tuple(
        attrs.evolve(entry, content=f"[图片] {entry.content}")
        if entry.content == turn.message.text
        else entry
        for entry in followup.history
    )
    second = build(runtime, attrs.evolve(followup, history=history))
    replayed = next(m for m in second.messages if m.content == first.user_message)
    assert replayed.parts == ("[系统备注：首次对话]",)
    assert second.current_message.parts == ()


def test_transcript_matches_repeated_messages_from_the_newest():
    runtime = make_runtime()
    transcript = runtime.conversations.transcript
    plain = PromptMessage(role="user", content="好")
    transcript.record("k", attrs.evolve(plain, api_content="好\n\n旧备注"))
    transcript.record("k", plain)
    replayed = transcript.replay("k", [plain, PromptMessage(role="assistant", content="嗯"), plain])
    assert [m.api_content for m in replayed] == ["好\n\n旧备注", None, None]
    transcript.forget("k")
    assert transcript.replay("k", [plain]) == [plain]


# -- compression -------------------------------------------------------------------------------------


def _long_history_turn(entries: int) -> Turn:
    history = []
    for i in range(entries):
        history.append({"role": "user", "content": f"第{i}个问题：" + "桌游" * 80})
        history.append({"role": "assistant", "content": f"第{i}个回答"})
    from promptweave import HistoryEntry

    return Turn(
        bot=Bot(id="10001", name="小织"),
        group_id="20001",
        message=ChatMessage(
            sender_id="30017", text="那最后定在哪？", time=example_turn().message.time
        ),
        history=tuple(HistoryEntry(**h) for h in history),
    )


def test_compression_rebuilds_the_prompt_and_reanchors_the_current_message():
    runtime = make_runtime(threshold_tokens=500, protect_first=1, protect_last=2)
    runtime.config = attrs.evolve(
        runtime.config, budget=attrs.evolve(runtime.config.budget, chars=0)
    )
    turn = _long_history_turn(8)
    build(runtime, turn)  # a first turn builds the prompt
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    context = build(runtime, turn)
    assert context.preflight.compressed
    assert context.system_prompt_status == "rebuilt_after_compression"
    assert context.conversation_history is None
    assert len(context.messages) < 17
    index = context.current_turn_user_idx
    assert context.messages[index].content == context.user_message
    assert "首次对话" in context.messages[index].api_content
    assert len(context.preflight.passes) <= 3
    assert_durations(context.stage_durations_ms, TURN_CONTEXT_STAGES)


TURN_CONTEXT_STAGES = [
    "turn_context",
    "turn_context.notes",
    "turn_context.preflight",
    "turn_context.budget",
]


def assert_durations(durations, keys):
    assert list(durations) == keys
    assert all(isinstance(ms, float) and ms >= 0 for ms in durations.values())


def test_turn_context_records_its_stage_durations():
    runtime = make_runtime()
    context = build(runtime, example_turn())
    assert_durations(context.stage_durations_ms, TURN_CONTEXT_STAGES)


def test_stage_durations_are_not_part_of_a_turn_contexts_value():
    context = build(make_runtime(), example_turn())
    timed_differently = attrs.evolve(context, stage_durations_ms={"turn_context": 1e6})
    assert timed_differently == context


@pytest.mark.parametrize("placement", ["system", "user"])
def test_turn_sections_placement(placement):
    runtime = make_runtime(turn_sections=placement)
    context = build(runtime, example_turn())
    current = context.current_message
    if placement == "system":
        assert "【当前时间】" in context.system_prompt
        assert current.api_content is None
    else:
        assert context.turn_sections == ()
        assert "【当前时间】" not in context.system_prompt
        # The turn's part trails the message as a part of its own, never as a sidecar.
        assert current.api_content is None and context.turn_part == "part"
        assert "【当前时间】" in current.parts[-1]
        assert TIMELINE_HEADER in current.parts[-1]


def test_user_placement_keeps_the_whole_history_a_byte_identical_prefix():
    runtime = make_runtime(turn_sections="user")
    spec = ProviderSpec(api=ProviderApi.OPENAI_CHAT, model="gpt-4o-mini", supports_images=False)
    first_context = build(runtime, example_turn("at_question"))
    first = build_provider_request(runtime, first_context, spec)
    second = build_provider_request(
        runtime, build(runtime, example_turn("at_question_followup")), spec
    )
    assert second.prefix is not None
    # Everything up to the end of the first request's current message's own words is reused:
    # the next turn sends it as it was said, without the first turn's part.
    said = json.dumps(first_context.current_message.content, ensure_ascii=False)[1:-1]
    text = first.body_text()
    reused = text[: text.rindex(said) + len(said)]
    assert second.prefix.common_prefix_bytes == len(reused.encode())
    assert second.prefix.first_difference == "message 4 (user)"
    assert second.prefix.uncached_bytes <= 1.2 * second.prefix.new_bytes
    # One speaker's turns share their prompt cache key.
    assert second.body["prompt_cache_key"] == first.body["prompt_cache_key"]


def test_timeline_images_message_is_where_an_image_turns_prefix_ends():
    runtime = make_runtime(turn_sections="user")
    spec = ProviderSpec(
        api=ProviderApi.OPENAI_CHAT, model="gpt-4o-mini", supports_images=True, inline_images=False
    )
    first = build_provider_request(runtime, build(runtime, example_turn("at_question")), spec)
    second = build_provider_request(
        runtime, build(runtime, example_turn("at_question_followup")), spec
    )
    assert first.body["messages"][4]["content"][1]["type"] == "image_url"
    assert second.prefix.first_difference == "message 4 (user)"


class _Notes:
    @hookimpl
    def collect_turn_notes(self, context):
        return "[系统备注：语音频道 桌游-语音（3 人）]"


def test_hook_notes_follow_queued_notes():
    runtime = make_runtime(extra_plugins=(_Notes(),))
    turn = example_turn()
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    context = build(runtime, turn)
    assert context.notes == ("[系统备注：首次对话]", "[系统备注：语音频道 桌游-语音（3 人）]")
