"""The Anthropic Messages contrib client, against a mock transport."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from support_turn_context import ENVIRON, example_turn, make_runtime

from promptweave import (
    Config,
    Promptweave,
    ProviderApi,
    SubmitResult,
    asubmit_request,
    build_provider_request,
    build_turn_context,
    submit_request,
)
from promptweave.config import PluginsConfig, ProviderConfig, StoreConfig
from promptweave.contrib.anthropic_messages import (
    ANTHROPIC_VERSION,
    DEFAULT_BASE_URL,
    AnthropicMessagesClient,
    RetryPolicy,
)
from promptweave.plugins.manager import available_contrib_plugins
from promptweave.providers.exchange import ProviderSpec, ToolCall, Usage

REPLY = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "text", "text": "我看看天气。"},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "get_weather",
            "input": {"city": "杭州"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 2048,
        "output_tokens": 25,
    },
}


def _no_sleep(seconds):
    raise AssertionError(f"a test client waited {seconds} s")


def _client(handler, **kwargs):
    return AnthropicMessagesClient(
        base_url="http://claude.internal",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_attempts=1, sleep=_no_sleep),
        **kwargs,
    )


def _request(runtime, api=ProviderApi.ANTHROPIC):
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="claude-x"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_posts_the_exact_body_with_the_anthropic_headers_and_reads_the_reply(mode):
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json=REPLY)

    client = _client(handler, api_key="sk-ant-local")
    runtime = make_runtime(extra_plugins=(client,))
    request = _request(runtime)
    if mode == "sync":
        result = submit_request(runtime, request)
    else:
        result = asyncio.run(asubmit_request(runtime, request))
    assert (result.sent, result.status, result.text) == (True, "ok", "我看看天气。")
    assert result.tool_calls == (
        ToolCall(id="toolu_01", name="get_weather", arguments='{"city":"杭州"}'),
    )
    assert result.usage == Usage(
        prompt_tokens=30 + 2048, output_tokens=25, cached_tokens=2048, cache_creation_tokens=0
    )
    assert result.raw == REPLY
    wire = seen[0]
    assert str(wire.url) == "http://claude.internal/v1/messages"
    assert wire.headers["x-api-key"] == "sk-ant-local"
    assert wire.headers["anthropic-version"] == ANTHROPIC_VERSION == "2023-06-01"
    assert wire.headers["content-type"] == "application/json"
    assert "authorization" not in wire.headers
    assert wire.content == request.body_bytes()


def test_openai_requests_are_left_to_other_plugins():
    runtime = make_runtime(extra_plugins=(_client(lambda r: httpx.Response(500)),))
    request = _request(runtime, ProviderApi.OPENAI_CHAT)
    assert submit_request(runtime, request).status == "offline"
    assert asyncio.run(asubmit_request(runtime, request)).status == "offline"
    refused = _client(lambda r: httpx.Response(500)).submit(request)
    assert (refused.sent, refused.detail) == (
        False,
        "openai_chat is not an Anthropic Messages request",
    )


def test_an_api_error_keeps_the_start_of_its_body():
    error = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    result = _client(lambda r: httpx.Response(401, json=error)).submit(_request(make_runtime()))
    assert (result.sent, result.status) == (True, "error")
    assert result.detail.startswith("HTTP 401: ")
    assert "invalid x-api-key" in result.detail


def test_overloaded_is_retried():
    waits = []
    answers = iter(
        [
            httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}}),
            httpx.Response(200, json=REPLY),
        ]
    )
    client = AnthropicMessagesClient(
        base_url="http://claude.internal",
        transport=httpx.MockTransport(lambda request: next(answers)),
        retry=RetryPolicy(wait=lambda failed: 1.5, sleep=waits.append),
    )
    result = client.submit(_request(make_runtime()))
    assert (result.status, waits) == ("ok", [1.5])


def test_base_url_and_key_from_config_then_environment():
    env = {"ANTHROPIC_BASE_URL": "https://b.example/", "ANTHROPIC_API_KEY": "sk-ant-b"}
    anthropic = Config(provider=ProviderConfig(api="anthropic"))
    client = AnthropicMessagesClient.from_config(anthropic, env)
    assert (client.base_url, client.api_key) == ("https://b.example", "sk-ant-b")
    client = AnthropicMessagesClient.from_config(anthropic, env | {"PROMPTWEAVE_API_KEY": "sk-a"})
    assert client.api_key == "sk-a"
    configured = Config(
        provider=ProviderConfig(
            api="anthropic", base_url="https://c.example", api_key="sk-ant-c", timeout_s=9.0
        )
    )
    client = AnthropicMessagesClient.from_config(configured, env)
    assert (client.base_url, client.api_key, client.timeout_s) == (
        "https://c.example",
        "sk-ant-c",
        9.0,
    )
    assert "sk-ant-c" not in repr(client)
    # [provider] base_url and api_key of an OpenAI configuration are not Anthropic's.
    openai = Config(provider=ProviderConfig(base_url="https://dashscope.example/v1", api_key="k"))
    client = AnthropicMessagesClient.from_config(openai, {})
    assert (client.base_url, client.api_key) == (DEFAULT_BASE_URL, "")


def test_the_anthropic_api_needs_a_key():
    client = AnthropicMessagesClient.from_config(
        Config(provider=ProviderConfig(api="anthropic")), {}
    )
    assert client.base_url == DEFAULT_BASE_URL == "https://api.anthropic.com"
    result = client.submit(_request(make_runtime()))
    assert (result.sent, result.status) == (False, "error")
    assert "no API key" in result.detail and "$ANTHROPIC_API_KEY" in result.detail
    assert asyncio.run(client.asubmit(_request(make_runtime()))).detail == result.detail


def test_enabled_by_name_it_reads_the_config(monkeypatch):
    assert "anthropic_messages" in available_contrib_plugins()
    config = Config(
        store=StoreConfig(backend="memory"),
        plugins=PluginsConfig(contrib=("anthropic_messages",)),
        provider=ProviderConfig(
            api="anthropic", base_url="http://127.0.0.1:9", api_key="sk-ant-t", max_attempts=2
        ),
    )
    runtime = Promptweave.from_config(config, environ=ENVIRON)
    assert {"submit_request", "submit_request_async"} <= set(
        runtime.plugins.hooks_of("anthropic_messages")
    )
    used = []

    def fake_submit(self, request):
        used.append(("sync", self.base_url, self.retry.max_attempts))
        return SubmitResult(sent=True, status="ok", text="好")

    async def fake_asubmit(self, request):
        used.append(("async", self.base_url, self.retry.max_attempts))
        return SubmitResult(sent=True, status="ok", text="好")

    monkeypatch.setattr(AnthropicMessagesClient, "submit", fake_submit)
    monkeypatch.setattr(AnthropicMessagesClient, "asubmit", fake_asubmit)
    request = _request(runtime)
    assert submit_request(runtime, request).text == "好"
    assert asyncio.run(asubmit_request(runtime, request)).text == "好"
    assert used == [("sync", "http://127.0.0.1:9", 2), ("async", "http://127.0.0.1:9", 2)]
    assert submit_request(runtime, _request(runtime, ProviderApi.OPENAI_CHAT)).status == "offline"
