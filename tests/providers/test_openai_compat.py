"""The OpenAI-compatible contrib client, against a mock transport."""

from __future__ import annotations

import asyncio
import json

import httpx
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
from promptweave.contrib.openai_compat import DEFAULT_BASE_URL, OpenAICompatClient, RetryPolicy
from promptweave.providers.exchange import ProviderSpec


def _request(runtime, api=ProviderApi.OPENAI_CHAT):
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="qwen-plus"))


def _no_sleep(seconds):
    raise AssertionError(f"a test client waited {seconds} s")


#: One attempt: these tests are about what a reply gives (retries: test_provider_retries.py).
ONCE = RetryPolicy(max_attempts=1, sleep=_no_sleep)


def _client(handler, **kwargs):
    return OpenAICompatClient(
        base_url="http://llm.internal:8000/v1",
        transport=httpx.MockTransport(handler),
        retry=ONCE,
        **kwargs,
    )


def test_posts_the_exact_body_with_the_key_and_parses_the_reply():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "要的"}}]}
        )

    client = _client(handler, api_key="sk-local")
    runtime = make_runtime(extra_plugins=(client,))
    request = _request(runtime)
    result = submit_request(runtime, request)
    assert (result.sent, result.status, result.text) == (True, "ok", "要的")
    wire = seen[0]
    assert str(wire.url) == "http://llm.internal:8000/v1/chat/completions"
    assert wire.headers["Authorization"] == "Bearer sk-local"
    assert wire.content == request.body_bytes()


def test_responses_reply_text_is_joined_from_output_text_parts():
    def handler(request):
        assert request.url.path == "/v1/responses"
        output = [
            {
                "type": "message",
                "content": [
                    {"type": "output_text", "text": "要"},
                    {"type": "output_text", "text": "的"},
                ],
            }
        ]
        return httpx.Response(200, json={"output": output})

    client = _client(handler)
    runtime = make_runtime(extra_plugins=(client,))
    result = submit_request(runtime, _request(runtime, ProviderApi.OPENAI_RESPONSES))
    assert result.text == "要的"


def test_http_errors_and_bad_replies_become_error_results():
    client = _client(lambda r: httpx.Response(429, text="rate limited"))
    runtime = make_runtime(extra_plugins=(client,))
    result = submit_request(runtime, _request(runtime))
    assert (result.sent, result.status, result.detail) == (True, "error", "HTTP 429: rate limited")
    client = _client(lambda r: httpx.Response(200, text="<html>"))
    assert client.submit(_request(runtime)).detail.startswith("reply is not JSON")

    def refuse(request):
        raise httpx.ConnectError("connection refused")

    refused = _client(refuse).submit(_request(runtime))
    assert (refused.sent, refused.detail) == (False, "ConnectError: connection refused")


def test_no_key_headers_for_a_keyless_local_server():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": None}}]})

    result = _client(handler).submit(_request(make_runtime()))
    assert "Authorization" not in seen[0].headers
    assert (result.status, result.text) == ("ok", None)


def test_anthropic_requests_are_left_to_other_plugins():
    runtime = make_runtime(extra_plugins=(_client(lambda r: httpx.Response(500)),))
    result = submit_request(runtime, _request(runtime, ProviderApi.ANTHROPIC))
    assert result.status == "offline"


def test_config_base_url_and_key_are_for_the_configured_openai_format_only():
    config = Config(
        provider=ProviderConfig(api="anthropic", base_url="https://claude.example", api_key="sk-x")
    )
    client = OpenAICompatClient.from_config(config, {"OPENAI_API_KEY": "sk-openai"})
    assert (client.base_url, client.api_key) == (DEFAULT_BASE_URL, "sk-openai")


def test_base_url_and_key_from_config_then_environment():
    env = {"OPENAI_BASE_URL": "https://b.example/v1/", "OPENAI_API_KEY": "sk-b"}
    client = OpenAICompatClient.from_config(Config(), env)
    assert (client.base_url, client.api_key) == ("https://b.example/v1", "sk-b")
    env |= {"PROMPTWEAVE_BASE_URL": "https://a.example/v1", "PROMPTWEAVE_API_KEY": "sk-a"}
    client = OpenAICompatClient.from_config(Config(), env)
    assert (client.base_url, client.api_key) == ("https://a.example/v1", "sk-a")
    config = Config(provider=ProviderConfig(base_url="https://c.example/v1", api_key="sk-c"))
    client = OpenAICompatClient.from_config(config, env)
    assert (client.base_url, client.api_key) == ("https://c.example/v1", "sk-c")
    assert "sk-c" not in repr(client)


def test_the_official_api_needs_a_key():
    client = OpenAICompatClient.from_config(Config(), {})
    assert client.base_url == DEFAULT_BASE_URL
    result = client.submit(_request(make_runtime()))
    assert (result.sent, result.status) == (False, "error")
    assert "no API key" in result.detail


def test_enabled_by_name_it_reads_the_config(monkeypatch):
    config = Config(
        store=StoreConfig(backend="memory"),
        plugins=PluginsConfig(contrib=("openai_compat",)),
        provider=ProviderConfig(base_url="http://127.0.0.1:9/v1"),
    )
    runtime = Promptweave.from_config(config, environ=ENVIRON)
    assert "submit_request" in runtime.plugins.hooks_of("openai_compat")
    posted = []

    def fake_submit(self, request):
        posted.append((self.base_url, json.loads(request.body_bytes())["model"]))
        return SubmitResult(sent=True, status="ok", text="好")

    monkeypatch.setattr(OpenAICompatClient, "submit", fake_submit)
    result = submit_request(runtime, _request(runtime))
    assert result.text == "好"
    assert posted == [("http://127.0.0.1:9/v1", "qwen-plus")]


def test_the_module_plugin_reuses_one_client_per_endpoint():
    from promptweave.contrib._provider_http import shared_client
    from promptweave.contrib.anthropic_messages import AnthropicMessagesClient

    def shared(base_url: str, attempts: int = 3, kind: type = OpenAICompatClient):
        retry = RetryPolicy(max_attempts=attempts, max_wait_s=20.0)
        return shared_client(kind(base_url=base_url, api_key="k", timeout_s=30.0, retry=retry))

    first = shared("https://llm.example/v1")
    assert isinstance(first, OpenAICompatClient)
    assert shared("https://llm.example/v1") is first
    assert shared("https://other.example/v1") is not first
    assert shared("https://llm.example/v1", attempts=5) is not first
    other_kind = shared("https://llm.example/v1", kind=AnthropicMessagesClient)
    assert isinstance(other_kind, AnthropicMessagesClient)
    assert (first.retry.max_attempts, first.retry.max_wait_s, first.api_key) == (3, 20.0, "k")


def test_the_module_plugin_makes_its_client_once_per_configuration_and_environment(monkeypatch):
    from promptweave import Config
    from promptweave.config import ProviderConfig
    from promptweave.contrib import openai_compat

    made = []
    making = OpenAICompatClient.from_config.__func__

    def from_config(cls, config, environ=None):
        made.append(config)
        return making(cls, config, environ)

    monkeypatch.setattr(OpenAICompatClient, "from_config", classmethod(from_config))
    monkeypatch.delenv("PROMPTWEAVE_BASE_URL", raising=False)
    config = Config(provider=ProviderConfig(base_url="http://127.0.0.1:9/v1"))
    first = openai_compat._configured(config)
    assert openai_compat._configured(config) is first and len(made) == 1
    assert first.base_url == "http://127.0.0.1:9/v1"
    # The environment is read on every call: a change there is the next client's.
    monkeypatch.setenv("PROMPTWEAVE_API_KEY", "sk-changed")
    changed = openai_compat._configured(config)
    assert changed.api_key == "sk-changed" and len(made) == 2
    other = Config(provider=ProviderConfig(base_url="http://127.0.0.1:10/v1"))
    assert openai_compat._configured(other).base_url == "http://127.0.0.1:10/v1"


def test_the_async_path_posts_the_same_bytes_and_parses_the_same_reply():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "要的"}}]}
        )

    client = _client(handler, api_key="sk-local")
    runtime = make_runtime(extra_plugins=(client,))
    request = _request(runtime)
    result = asyncio.run(asubmit_request(runtime, request))
    assert (result.sent, result.status, result.text) == (True, "ok", "要的")
    assert seen[0].content == request.body_bytes()
    assert seen[0].headers["Authorization"] == "Bearer sk-local"
    assert str(seen[0].url) == "http://llm.internal:8000/v1/chat/completions"


def test_enabled_by_name_it_answers_the_async_hook_from_the_config(monkeypatch):
    config = Config(
        store=StoreConfig(backend="memory"),
        plugins=PluginsConfig(contrib=("openai_compat",)),
        provider=ProviderConfig(base_url="http://127.0.0.1:9/v1", max_attempts=4),
    )
    runtime = Promptweave.from_config(config, environ=ENVIRON)
    assert "submit_request_async" in runtime.plugins.hooks_of("openai_compat")
    used = []

    async def fake_asubmit(self, request):
        used.append((self.base_url, self.retry.max_attempts))
        return SubmitResult(sent=True, status="ok", text="好")

    monkeypatch.setattr(OpenAICompatClient, "asubmit", fake_asubmit)
    assert asyncio.run(asubmit_request(runtime, _request(runtime))).text == "好"
    assert used == [("http://127.0.0.1:9/v1", 4)]
    anthropic = _request(runtime, ProviderApi.ANTHROPIC)
    assert asyncio.run(asubmit_request(runtime, anthropic)).status == "offline"
