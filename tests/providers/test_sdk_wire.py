"""The produced bodies go through the official SDKs unchanged: the bytes on the wire are checked,
and the tool offers and rounds fit the SDKs' request types."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
from types import ModuleType

import anthropic
import anthropic.types
import attrs
import openai
import openai.types.chat
import openai.types.responses
import pydantic
from support_turn_context import PNG_BYTES, example_turn, make_runtime

from promptweave import (
    FetchedImage,
    ProviderApi,
    build_provider_request,
    build_turn_context,
    hookimpl,
)
from promptweave.providers.exchange import ProviderSpec, ToolCall, ToolSpec
from promptweave.providers.tools import with_tool_round, with_tools
from promptweave.turn_context.conversation_state import conversation_key


def _http_module(sdk: str) -> ModuleType:
    """The HTTP library the installed SDK is built on (``httpx``, or ``httpx2`` in newer ones)."""
    requirements = importlib.metadata.requires(sdk) or []
    names = {re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower() for line in requirements}
    return importlib.import_module("httpx2" if "httpx2" in names else "httpx")


class _Inline:
    @hookimpl
    def fetch_image(self, url, limits):
        return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)


def _request(api: ProviderApi):
    runtime = make_runtime(extra_plugins=(_Inline(),))
    turn = example_turn()
    turn = attrs.evolve(
        turn, message=attrs.evolve(turn.message, images=("https://img.example.net/board.jpg",))
    )
    runtime.conversations.notes.push(conversation_key(turn), "[系统备注：语音频道已切换]")
    context = build_turn_context(runtime, turn, runtime.render(turn), memory_context="她不喝咖啡")
    spec = ProviderSpec(api=api, model="test-model", supports_images=True, inline_images=True)
    return build_provider_request(runtime, context, spec)


def _capture(http: ModuleType, reply: dict):
    seen = []

    def handler(request):
        seen.append(request)
        return http.Response(200, json=reply)

    return seen, http.Client(transport=http.MockTransport(handler))


CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "test-model",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "要的，周六人多"},
            "finish_reason": "stop",
        }
    ],
}


def test_openai_sdk_sends_the_chat_body_byte_for_byte():
    request = _request(ProviderApi.OPENAI_CHAT)
    seen, client = _capture(_http_module("openai"), CHAT_REPLY)
    sdk = openai.OpenAI(
        api_key="sk-test", base_url="https://llm.example.net/v1", http_client=client
    )
    reply = sdk.chat.completions.create(**request.body)
    assert reply.choices[0].message.content == "要的，周六人多"
    wire = seen[0]
    assert str(wire.url) == "https://llm.example.net/v1" + request.path
    assert wire.content == request.body_bytes()
    assert b"api_content" not in wire.content
    assert "语音频道已切换".encode() in wire.content


def test_openai_sdk_sends_the_responses_body_unchanged():
    request = _request(ProviderApi.OPENAI_RESPONSES)
    reply = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "test-model",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "要的", "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }
    seen, client = _capture(_http_module("openai"), reply)
    sdk = openai.OpenAI(
        api_key="sk-test", base_url="https://llm.example.net/v1", http_client=client
    )
    response = sdk.responses.create(**request.body)
    assert response.output_text == "要的"
    wire = seen[0]
    assert str(wire.url).endswith("/responses")
    # The SDK writes the same values; it orders top-level keys its own way (input first).
    sent = json.loads(wire.content)
    assert sent == request.body
    assert b"api_content" not in wire.content
    assert sent["input"][-1]["content"][1]["image_url"].startswith("data:image/png;base64,")


def test_anthropic_sdk_sends_the_messages_body_unchanged():
    request = _request(ProviderApi.ANTHROPIC)
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [{"type": "text", "text": "要的"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    seen, client = _capture(_http_module("anthropic"), reply)
    sdk = anthropic.Anthropic(
        api_key="sk-ant-test", base_url="https://claude.example.net", http_client=client
    )
    message = sdk.messages.create(**request.body)
    assert message.content[0].text == "要的"
    wire = seen[0]
    assert str(wire.url) == "https://claude.example.net" + request.path
    sent = json.loads(wire.content)
    assert sent == request.body
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    image = sent["messages"][-1]["content"][1]
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert b"api_content" not in wire.content


# -- tools: an offer and a round of calls and results, through the SDKs and their param types ----

WEATHER = ToolSpec(
    name="get_weather",
    description="查询一个城市现在的天气",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
CALL = ToolCall(id="call_1", name="get_weather", arguments='{"city":"杭州"}')


def _tool_round(api: ProviderApi):
    offered = with_tools(_request(api), [WEATHER])
    return with_tool_round(
        offered, [WEATHER], [CALL], [(CALL, "小雨，12°C")], assistant_text="查一下"
    )


def _drain(value) -> None:
    """Consume what pydantic validates lazily (the SDKs' ``Iterable`` fields), so that an item
    that does not fit its type fails here."""
    if isinstance(value, dict):
        for item in value.values():
            _drain(item)
    elif not isinstance(value, str | bytes) and hasattr(value, "__iter__"):
        for item in value:
            _drain(item)


def _validate(param_type, value) -> None:
    # The adapter must outlive the draining: its lazy iterators refer to its schema.
    adapter = pydantic.TypeAdapter(param_type)
    _drain(adapter.validate_python(value))


def test_openai_sdk_sends_the_chat_tool_round_unchanged():
    request = _tool_round(ProviderApi.OPENAI_CHAT)
    for tool in request.body["tools"]:
        _validate(openai.types.chat.ChatCompletionToolParam, tool)
    for message in request.body["messages"]:
        _validate(openai.types.chat.ChatCompletionMessageParam, message)
    seen, client = _capture(_http_module("openai"), CHAT_REPLY)
    sdk = openai.OpenAI(
        api_key="sk-test", base_url="https://llm.example.net/v1", http_client=client
    )
    sdk.chat.completions.create(**request.body)
    # The SDK writes its keys in its own order (tools last); the values are ours, unchanged.
    assert json.loads(seen[0].content) == request.body


def test_openai_sdk_sends_the_responses_tool_round_unchanged():
    request = _tool_round(ProviderApi.OPENAI_RESPONSES)
    for tool in request.body["tools"]:
        _validate(openai.types.responses.FunctionToolParam, tool)
    for item in request.body["input"][-2:]:
        _validate(openai.types.responses.ResponseInputItemParam, item)
    reply = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "test-model",
        "status": "completed",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    seen, client = _capture(_http_module("openai"), reply)
    sdk = openai.OpenAI(
        api_key="sk-test", base_url="https://llm.example.net/v1", http_client=client
    )
    sdk.responses.create(**request.body)
    assert json.loads(seen[0].content) == request.body


def test_anthropic_sdk_sends_the_messages_tool_round_unchanged():
    request = _tool_round(ProviderApi.ANTHROPIC)
    for tool in request.body["tools"]:
        _validate(anthropic.types.ToolParam, tool)
    for message in request.body["messages"]:
        _validate(anthropic.types.MessageParam, message)
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [{"type": "text", "text": "杭州在下小雨"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    seen, client = _capture(_http_module("anthropic"), reply)
    sdk = anthropic.Anthropic(
        api_key="sk-ant-test", base_url="https://claude.example.net", http_client=client
    )
    message = sdk.messages.create(**request.body)
    assert message.content[0].text == "杭州在下小雨"
    sent = json.loads(seen[0].content)
    assert sent == request.body
    assert [block["type"] for block in sent["messages"][-2]["content"]] == ["text", "tool_use"]
