"""Provider request bodies: formats, images, cache breakpoints, the sidecar never on the wire."""

from __future__ import annotations

import json

import attrs
import pytest
from support_turn_context import PNG_BYTES, PNG_DATA_URL, example_turn, make_runtime

from promptweave import (
    ImageFetchError,
    ProviderApi,
    build_provider_request,
    build_turn_context,
    hookimpl,
)
from promptweave.providers.bodies import MAX_CACHE_BREAKPOINTS
from promptweave.providers.exchange import ProviderSpec
from promptweave.providers.wire import TIMELINE_IMAGES_TEXT
from promptweave.turn_context.conversation_state import conversation_key, prompt_cache_key

CURRENT = "https://img.example.net/board.jpg"
QUOTED = "https://img.example.net/map.jpg"
TIMELINE = "https://img.example.net/cat-1.jpg"


def image_turn():
    turn = example_turn()
    return attrs.evolve(
        turn,
        message=attrs.evolve(turn.message, images=(CURRENT,)),
        quoted_message_images=(QUOTED,),
    )


#: A provider that declares images and is given their URLs (both off by default).
IMAGES_BY_URL = {"supports_images": True, "inline_images": False}


def request_for(api, turn=None, runtime=None, **spec):
    runtime = runtime or make_runtime()
    turn = turn or example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    options = {**IMAGES_BY_URL, **spec}
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="m", **options))


def test_openai_chat_body_shape():
    body = request_for(ProviderApi.OPENAI_CHAT, image_turn()).body
    assert list(body) == ["model", "messages", "max_tokens", "prompt_cache_key"]
    system, *rest = body["messages"]
    assert system["role"] == "system" and system["content"].startswith("【安全约束】")
    vision, current = rest[-2], rest[-1]
    assert vision["content"][0] == {"type": "text", "text": TIMELINE_IMAGES_TEXT}
    assert vision["content"][1] == {"type": "image_url", "image_url": {"url": TIMELINE}}
    assert [p["type"] for p in current["content"]] == ["text", "image_url", "image_url"]
    assert [p["image_url"]["url"] for p in current["content"][1:]] == [CURRENT, QUOTED]
    assert isinstance(rest[0]["content"], str)  # text-only messages are plain strings


def test_openai_responses_body_shape():
    body = request_for(ProviderApi.OPENAI_RESPONSES, image_turn()).body
    assert list(body) == ["model", "instructions", "input", "max_output_tokens", "prompt_cache_key"]
    assert body["instructions"].startswith("【安全约束】")
    current = body["input"][-1]
    assert [p["type"] for p in current["content"]] == ["input_text", "input_image", "input_image"]
    assert current["content"][1] == {"type": "input_image", "image_url": CURRENT, "detail": "auto"}
    assistant = next(item for item in body["input"] if item["role"] == "assistant")
    assert assistant["content"][0]["type"] == "output_text"


def test_anthropic_body_shape_and_cache_breakpoints():
    body = request_for(ProviderApi.ANTHROPIC, image_turn()).body
    assert list(body) == ["model", "max_tokens", "system", "messages"]
    stable, turn_block = body["system"]
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert stable["text"].endswith("聊得挺顺。")  # the last profile section
    assert "cache_control" not in turn_block
    assert turn_block["text"].startswith("【用户明确教导】")
    current = body["messages"][-1]["content"]
    assert current[1] == {"type": "image", "source": {"type": "url", "url": CURRENT}}
    marked = [
        block
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]
    assert len(marked) == 3
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    total = len(marked) + sum("cache_control" in b for b in body["system"])
    assert total <= MAX_CACHE_BREAKPOINTS


def test_anthropic_uses_all_breakpoints_on_messages_only_up_to_the_limit():
    runtime = make_runtime()
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    bare = attrs.evolve(
        context,
        active_system_prompt=attrs.evolve(context.active_system_prompt, text="", sections=()),
    )
    body = build_provider_request(runtime, bare, ProviderSpec(api="anthropic", model="m")).body
    assert len(body["system"]) == 1 and "cache_control" not in body["system"][0]
    marked = sum("cache_control" in m["content"][-1] for m in body["messages"])
    assert marked == 3


def _user_texts(request):
    """The text of every user message of a request body, whatever its API."""
    rows = request.body.get("messages") or request.body.get("input") or []
    texts = []
    for row in rows:
        if row.get("role") != "user":
            continue
        content = row.get("content")
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(content or "")
    return texts


@pytest.mark.parametrize("api", list(ProviderApi))
def test_text_provider_sees_image_marks_and_nothing_is_fetched(api):
    fetched = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            fetched.append(url)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    request = request_for(api, image_turn(), runtime, supports_images=False, inline_images=True)
    text = request.body_text()
    assert fetched == []
    assert "img.example.net" not in text
    assert TIMELINE_IMAGES_TEXT not in text
    # The current message's two images, marked once each.
    assert _user_texts(request)[-1].count("[图片]") == 2
    assert request.trace["images"]["sent"] == 0


@pytest.mark.parametrize("api", list(ProviderApi))
def test_the_sidecar_field_never_reaches_a_provider(api):
    runtime = make_runtime()
    turn = example_turn()
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    text = request_for(api, turn, runtime).body_text()
    assert "api_content" not in text and "首次对话" in text


def test_inline_images_are_fetched_once_and_sent_as_base64():
    calls = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            calls.append(url)
            from promptweave import FetchedImage

            return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    turn = attrs.evolve(image_turn(), quoted_message_images=(CURRENT,))
    anthropic = request_for(ProviderApi.ANTHROPIC, turn, runtime, inline_images=True)
    assert sorted(calls) == sorted([CURRENT, TIMELINE])
    source = anthropic.body["messages"][-1]["content"][1]["source"]
    assert source["type"] == "base64" and source["media_type"] == "image/png"
    chat = request_for(ProviderApi.OPENAI_CHAT, turn, runtime, inline_images=True)
    assert chat.body["messages"][-1]["content"][1]["image_url"]["url"] == PNG_DATA_URL
    assert list(chat.stage_durations_ms) == ["request", "request.images"]
    assert all(isinstance(ms, float) and ms >= 0 for ms in chat.stage_durations_ms.values())


@pytest.mark.parametrize("api", list(ProviderApi))
def test_request_records_its_duration(api):
    request = request_for(api, image_turn())
    assert list(request.stage_durations_ms) == ["request"]  # no image fetched: URLs are sent
    assert isinstance(request.stage_durations_ms["request"], float)
    assert request.stage_durations_ms["request"] >= 0
    assert attrs.evolve(request, stage_durations_ms={"request": 1e6}) == request


def test_a_failed_fetch_degrades_to_an_image_mark_and_is_traced():
    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            if url == CURRENT:
                raise ImageFetchError("image is larger than 5242880 bytes")
            from promptweave import FetchedImage

            return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    request = request_for(ProviderApi.OPENAI_CHAT, image_turn(), runtime, inline_images=True)
    parts = request.body["messages"][-1]["content"]
    assert parts[1] == {"type": "text", "text": "[图片]"}
    assert parts[2]["type"] == "image_url"
    failed = request.trace["images"]["failed"]
    assert failed == [
        {"url": CURRENT, "reason": "ImageFetchError: image is larger than 5242880 bytes"}
    ]


def test_timeline_images_already_sent_as_current_images_are_not_repeated():
    turn = attrs.evolve(image_turn(), quoted_message_images=(TIMELINE.upper(),))
    body = request_for(ProviderApi.OPENAI_CHAT, turn).body
    assert TIMELINE_IMAGES_TEXT not in json.dumps(body, ensure_ascii=False)


def test_multimodal_notes_part_follows_the_images():
    runtime = make_runtime()
    turn = image_turn()
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：首次对话]")
    body = request_for(ProviderApi.OPENAI_RESPONSES, turn, runtime).body
    assert body["input"][-1]["content"][-1] == {
        "type": "input_text",
        "text": "[系统备注：首次对话]",
    }


def test_spec_from_config_uses_the_default_model_per_api():
    from promptweave.config import ProviderConfig

    spec = ProviderSpec.from_config(ProviderConfig(), "anthropic")
    assert (spec.api, spec.model) == (ProviderApi.ANTHROPIC, "claude-sonnet-4-5")
    spec = ProviderSpec.from_config(ProviderConfig(model="qwen-plus", supports_images=False))
    assert (spec.api, spec.model, spec.supports_images) == ("openai_chat", "qwen-plus", False)


def _other_speaker(turn, sender_id="30099"):
    return attrs.evolve(turn, message=attrs.evolve(turn.message, sender_id=sender_id))


def test_prompt_cache_key_is_one_per_group_and_one_per_user_in_private():
    turn = example_turn()
    key = prompt_cache_key(turn)
    assert key.startswith("pw-") and len(key) == 19
    assert int(key[3:], 16) >= 0
    # Every member of a group shares the group's cache; the key hides the account numbers.
    assert prompt_cache_key(_other_speaker(turn)) == key
    assert "10001" not in key and "20001" not in key
    assert prompt_cache_key(attrs.evolve(turn, group_id="20002")) != key
    assert prompt_cache_key(attrs.evolve(turn, bot=attrs.evolve(turn.bot, id="10003"))) != key
    private = attrs.evolve(turn, group_id=None)
    assert prompt_cache_key(private) != key
    assert prompt_cache_key(_other_speaker(private)) != prompt_cache_key(private)
    assert prompt_cache_key(private) == prompt_cache_key(attrs.evolve(turn, group_id=None))


@pytest.mark.parametrize("api", ["openai_chat", "openai_responses"])
def test_openai_formats_send_the_group_prompt_cache_key_last(api):
    runtime = make_runtime()
    turn = example_turn()
    first = request_for(api, turn, runtime)
    other = request_for(api, _other_speaker(turn), runtime)
    assert list(first.body)[-1] == "prompt_cache_key"
    assert first.body["prompt_cache_key"] == prompt_cache_key(turn)
    assert other.body["prompt_cache_key"] == first.body["prompt_cache_key"]


def test_anthropic_has_no_prompt_cache_key():
    assert "prompt_cache_key" not in request_for(ProviderApi.ANTHROPIC).body


def test_prompt_cache_key_can_be_switched_off():
    from promptweave.config import ProviderConfig

    spec = ProviderSpec.from_config(ProviderConfig(prompt_cache_key=False))
    runtime = make_runtime()
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    assert "prompt_cache_key" not in build_provider_request(runtime, context, spec).body
    assert ProviderSpec.from_config(ProviderConfig()).prompt_cache_key is True


def test_the_cache_mode_keys_each_speakers_prompt_cache_apart():
    turn = example_turn()
    key = prompt_cache_key(turn, per_speaker=True)
    assert key != prompt_cache_key(turn)
    assert prompt_cache_key(_other_speaker(turn), per_speaker=True) != key
    private = attrs.evolve(turn, group_id=None)
    assert prompt_cache_key(private, per_speaker=True) == prompt_cache_key(private)
    runtime = make_runtime(turn_sections="user")
    context = build_turn_context(runtime, turn, runtime.render(turn))
    assert context.prompt_cache_key == key


def test_anthropic_breakpoints_in_the_cache_mode_go_before_the_turns_part():
    runtime = make_runtime(turn_sections="user")
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    body = build_provider_request(runtime, context, ProviderSpec(api="anthropic", model="m")).body
    (system,) = body["system"]  # the static sections alone
    assert system["cache_control"] == {"type": "ephemeral"}
    said, turn_part = body["messages"][-1]["content"]
    assert said["text"] == context.current_message.content
    assert said["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in turn_part and "【当前时间】" in turn_part["text"]
    before = body["messages"][-2]["content"][-1]
    assert before["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marked) == 2  # with the system block three: a tool round may take the fourth


def test_openai_chat_sends_the_cache_modes_turn_part_after_the_message_text():
    runtime = make_runtime(turn_sections="user")
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    body = build_provider_request(runtime, context, ProviderSpec(api="openai_chat", model="m")).body
    content = body["messages"][-1]["content"]
    assert content == context.current_message.content + "\n\n" + context.current_message.parts[-1]


def test_llama_cpp_timings_give_the_cached_tokens():
    from promptweave.providers.answers import parse_openai_chat

    answer = parse_openai_chat(
        {
            "choices": [{"message": {"content": "好"}}],
            "usage": {"prompt_tokens": 3616, "completion_tokens": 1},
            "timings": {"cache_n": 3615, "prompt_n": 1},
        }
    )
    assert answer.usage is not None and answer.usage.cached_tokens == 3615
