"""The contrib clients' retries, sync and async, against scripted mock servers: rate limits with
``Retry-After``, server errors, timeouts, broken connections; never another 4xx. The waits are
recorded, never slept."""

from __future__ import annotations

import asyncio
import email.utils
import random

import httpx
import pytest
from support_turn_context import example_turn, make_runtime

from promptweave import (
    Config,
    ConfigError,
    ProviderApi,
    asubmit_request,
    build_provider_request,
    build_turn_context,
)
from promptweave.config import ProviderConfig
from promptweave.contrib._provider_http import Attempt, RetryPolicy, retry_after_s
from promptweave.contrib.anthropic_messages import AnthropicMessagesClient
from promptweave.contrib.openai_compat import OpenAICompatClient
from promptweave.providers.exchange import ProviderSpec, ToolCall, Usage

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CHAT_OK = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "要的"}}],
    "usage": {
        "prompt_tokens": 900,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 768},
    },
}
ANTHROPIC_OK = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "要的"}],
    "usage": {"input_tokens": 12, "cache_read_input_tokens": 888, "output_tokens": 3},
}


class Server:
    """Answers each request with the next scripted step: a response or an exception to raise."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.seen = []

    def __call__(self, request):
        self.seen.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        # A fresh response each time: a client takes over the one it is given.
        return httpx.Response(step.status_code, headers=step.headers, content=step.content)


class Recorder:
    """The waits a policy asked for, from the sync or the async path."""

    def __init__(self):
        self.waits = []

    def sleep(self, seconds):
        self.waits.append(seconds)

    async def async_sleep(self, seconds):
        self.waits.append(seconds)


def policy(recorder, **options):
    defaults = {
        "max_attempts": 3,
        "max_wait_s": 20.0,
        "wait": lambda failed: 0.5 * 2 ** (failed - 1),
        "sleep": recorder.sleep,
        "async_sleep": recorder.async_sleep,
        "clock": lambda: NOW,
    }
    return RetryPolicy(**{**defaults, **options})


FLAVOURS = {
    "openai": (OpenAICompatClient, "http://llm.internal:8000/v1", ProviderApi.OPENAI_CHAT, CHAT_OK),
    "anthropic": (
        AnthropicMessagesClient,
        "http://claude.internal",
        ProviderApi.ANTHROPIC,
        ANTHROPIC_OK,
    ),
}


def _request(api):
    runtime = make_runtime()
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="m"))


@pytest.fixture(params=[(flavour, mode) for flavour in FLAVOURS for mode in ("sync", "async")])
def send(request):
    """``send(server, **policy_options) -> (result, recorder)`` with one client flavour and path."""
    flavour, mode = request.param
    client_class, base_url, api, _ = FLAVOURS[flavour]
    provider_request = _request(api)

    def run(server, **options):
        recorder = Recorder()
        client = client_class(
            base_url=base_url,
            api_key="k",
            retry=policy(recorder, **options),
            transport=httpx.MockTransport(server),
        )
        if mode == "sync":
            return client.submit(provider_request), recorder
        return asyncio.run(client.asubmit(provider_request)), recorder

    run.ok_body = FLAVOURS[flavour][3]
    return run


def test_rate_limit_waits_what_retry_after_asks_then_succeeds(send):
    server = Server(
        httpx.Response(429, headers={"Retry-After": "2"}, text="slow down"),
        httpx.Response(200, json=send.ok_body),
    )
    result, recorder = send(server)
    assert (result.status, result.text, result.sent) == ("ok", "要的", True)
    assert recorder.waits == [2.0]
    assert len(server.seen) == 2
    assert server.seen[0].content == server.seen[1].content


def test_retry_after_as_an_http_date_counts_from_now(send):
    when = email.utils.formatdate(NOW + 7, usegmt=True)
    server = Server(
        httpx.Response(503, headers={"Retry-After": when}), httpx.Response(200, json=send.ok_body)
    )
    result, recorder = send(server)
    assert result.status == "ok"
    assert recorder.waits == [7.0]


def test_retry_after_is_capped_by_the_longest_wait(send):
    server = Server(
        httpx.Response(429, headers={"Retry-After": "120"}), httpx.Response(200, json=send.ok_body)
    )
    result, recorder = send(server, max_wait_s=5.0)
    assert result.status == "ok"
    assert recorder.waits == [5.0]


def test_server_errors_back_off_and_give_up_after_the_last_attempt(send):
    server = Server(httpx.Response(503, text="overloaded"))
    result, recorder = send(server)
    assert (result.sent, result.status) == (True, "error")
    assert result.detail == "HTTP 503: overloaded (after 3 attempts)"
    assert len(server.seen) == 3
    assert recorder.waits == [0.5, 1.0]


def test_timeouts_are_retried_then_reported(send):
    server = Server(httpx.ReadTimeout("read timed out"))
    result, recorder = send(server)
    assert (result.sent, result.status) == (True, "error")
    assert result.detail == "timeout after 3 attempts (ReadTimeout)"
    assert recorder.waits == [0.5, 1.0]


def test_a_timeout_then_an_answer_is_an_answer(send):
    server = Server(
        httpx.ConnectTimeout("connect timed out"), httpx.Response(200, json=send.ok_body)
    )
    result, _ = send(server)
    assert (result.status, result.text) == ("ok", "要的")


def test_refused_connections_were_never_sent(send):
    server = Server(httpx.ConnectError("connection refused"))
    result, recorder = send(server, max_attempts=2)
    assert (result.sent, result.status) == (False, "error")
    assert result.detail == "ConnectError: connection refused (after 2 attempts)"
    assert recorder.waits == [0.5]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_final(send, status):
    body = "密" * 600
    server = Server(httpx.Response(status, text=body), httpx.Response(200, json=send.ok_body))
    result, recorder = send(server)
    assert (result.sent, result.status) == (True, "error")
    assert result.detail == f"HTTP {status}: {'密' * 500}"
    assert len(server.seen) == 1
    assert recorder.waits == []


def test_one_attempt_means_no_retry(send):
    server = Server(httpx.Response(500, text="boom"), httpx.Response(200, json=send.ok_body))
    result, recorder = send(server, max_attempts=1)
    assert result.detail == "HTTP 500: boom"
    assert (len(server.seen), recorder.waits) == (1, [])


def test_the_answer_carries_text_usage_and_raw(send):
    result, _ = send(Server(httpx.Response(200, json=send.ok_body)))
    assert result.raw == send.ok_body
    assert result.usage.cached_tokens in (768, 888)
    assert result.usage.prompt_tokens == 900


def test_default_backoff_doubles_with_jitter_and_is_capped():
    jittered = RetryPolicy(initial_wait_s=1.0, max_wait_s=3.0, rng=random.Random(7))
    waits = [jittered.backoff_s(failed) for failed in (1, 2, 3, 4)]
    for failed, wait in enumerate(waits, 1):
        ceiling = 2.0 ** (failed - 1)
        assert ceiling / 2 <= wait <= ceiling
    # The jitter comes from the policy's random source: the same seed, the same waits.
    again = RetryPolicy(initial_wait_s=1.0, max_wait_s=3.0, rng=random.Random(7))
    assert [again.backoff_s(failed) for failed in (1, 2, 3, 4)] == waits
    assert jittered.wait_s(Attempt(response=httpx.Response(503)), 4) == 3.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Thu, 01 Jan 2026 00:00:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 31 Dec 2025 23:00:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "x"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_milliseconds_and_dates(headers, expected):
    assert retry_after_s(httpx.Headers(headers), NOW) == expected


def test_policy_from_config():
    config = Config(provider=ProviderConfig(max_attempts=5, retry_max_wait_s=2.5))
    configured = RetryPolicy.from_config(config)
    assert (configured.max_attempts, configured.max_wait_s) == (5, 2.5)
    for client_class in (OpenAICompatClient, AnthropicMessagesClient):
        client = client_class.from_config(config, {})
        assert (client.retry.max_attempts, client.retry.max_wait_s) == (5, 2.5)
    default = RetryPolicy.from_config(Config())
    assert (default.max_attempts, default.max_wait_s) == (3, 20.0)


def test_a_client_serves_several_event_loops_in_turn():
    client = OpenAICompatClient(
        base_url="http://llm.internal:8000/v1",
        retry=policy(Recorder()),
        transport=httpx.MockTransport(Server(httpx.Response(200, json=CHAT_OK))),
    )
    request = _request(ProviderApi.OPENAI_CHAT)
    assert asyncio.run(client.asubmit(request)).text == "要的"
    assert asyncio.run(client.asubmit(request)).text == "要的"
    assert client.submit(request).text == "要的"


def test_asubmit_request_reaches_the_async_client_through_the_hook():
    server = Server(
        httpx.Response(429, headers={"retry-after": "1"}),
        httpx.Response(
            200,
            json={
                "choices": [
                    {
                        "message": {
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": "{}"},
                                }
                            ],
                        }
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            },
        ),
    )
    recorder = Recorder()
    client = OpenAICompatClient(
        base_url="http://llm.internal:8000/v1",
        retry=policy(recorder),
        transport=httpx.MockTransport(server),
    )
    runtime = make_runtime(extra_plugins=(client,))
    turn = example_turn()
    request = build_provider_request(
        runtime, build_turn_context(runtime, turn, runtime.render(turn))
    )
    result = asyncio.run(asubmit_request(runtime, request))
    assert result.status == "ok"
    assert result.tool_calls == (ToolCall(id="call_1", name="get_weather", arguments="{}"),)
    assert result.usage == Usage(prompt_tokens=10, output_tokens=5)
    assert recorder.waits == [1.0]
    assert server.seen[-1].content == request.body_bytes()


def test_provider_retry_settings_load_from_toml_and_are_validated(tmp_path):
    path = tmp_path / "promptweave.toml"
    path.write_text(
        "[provider]\nmax_attempts = 4\nretry_max_wait_s = 7.5\nprompt_cache_key = false\n",
        encoding="utf-8",
    )
    provider = Config.from_file(path).provider
    assert (provider.max_attempts, provider.retry_max_wait_s, provider.prompt_cache_key) == (
        4,
        7.5,
        False,
    )
    path.write_text("[provider]\nmax_attempts = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"max_attempts"):
        Config.from_file(path)
    path.write_text("[provider]\nretry_max_wait_s = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"retry_max_wait_s"):
        Config.from_file(path)


MALFORMED = {
    "not JSON": httpx.Response(200, text='{"choices": [{"message": '),
    "not an object": httpx.Response(200, json=["要的"]),
    "no answer": httpx.Response(200, json={"id": "x", "usage": {}}),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_answer_is_retried_like_a_server_error_then_answered(send, kind):
    server = Server(MALFORMED[kind], httpx.Response(200, json=send.ok_body))
    result, recorder = send(server)
    assert (result.status, result.text) == ("ok", "要的")
    assert len(server.seen) == 2
    assert recorder.waits == [0.5]


@pytest.mark.parametrize(
    ("kind", "detail"),
    [
        ("not JSON", "reply is not JSON: "),
        ("not an object", "reply is not a JSON object"),
        ("no answer", "reply has no answer ("),
    ],
)
def test_a_malformed_answer_uses_the_same_budget_of_tries(send, kind, detail):
    server = Server(MALFORMED[kind])
    result, recorder = send(server)
    assert (result.sent, result.status) == (True, "error")
    assert result.detail.startswith(detail) and result.detail.endswith("(after 3 attempts)")
    assert len(server.seen) == 3
    assert recorder.waits == [0.5, 1.0]


def test_a_chat_answer_with_no_choices_is_retried_within_the_budget():
    recorder = Recorder()
    empty = httpx.Response(200, json={"choices": [], "usage": {}})
    server = Server(empty, httpx.Response(503), empty, httpx.Response(200, json=CHAT_OK))
    client = OpenAICompatClient(
        base_url="http://llm.internal:8000/v1",
        api_key="k",
        retry=policy(recorder, max_attempts=3),
        transport=httpx.MockTransport(server),
    )
    result = client.submit(_request(ProviderApi.OPENAI_CHAT))
    assert (result.status, result.detail) == (
        "error",
        "reply has no answer ('choices' empty) (after 3 attempts)",
    )
    assert len(server.seen) == 3


def test_an_anthropic_answer_with_empty_content_is_an_answer_not_a_retry():
    recorder = Recorder()
    server = Server(httpx.Response(200, json={**ANTHROPIC_OK, "content": []}))
    client = AnthropicMessagesClient(
        base_url="http://claude.internal",
        api_key="k",
        retry=policy(recorder),
        transport=httpx.MockTransport(server),
    )
    result = client.submit(_request(ProviderApi.ANTHROPIC))
    assert result.status == "ok" and len(server.seen) == 1
