"""One test per turn-context hook, and the docs section each hook must have."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from pathlib import Path

import pytest
from base_support import ROOT
from support_turn_context import PNG_BYTES, example_turn, make_runtime

from promptweave import (
    FetchedImage,
    PromptMessage,
    ProviderApi,
    SubmitResult,
    asubmit_request,
    build_provider_request,
    build_turn_context,
    hookimpl,
    submit_request,
)
from promptweave.plugins.manager import DEFAULT_PLUGINS
from promptweave.providers.exchange import ProviderSpec

DOCS = ROOT / "docs" / "plugin_hooks.md"
HOOKS = (
    "collect_turn_notes",
    "compress_turn_messages",
    "fetch_image",
    "submit_request",
    "submit_request_async",
)


def _context(runtime, turn=None):
    turn = turn or example_turn()
    return build_turn_context(runtime, turn, runtime.render(turn))


def test_hook_collect_turn_notes():
    seen = []

    class VoiceChannel:
        @hookimpl
        def collect_turn_notes(self, context):
            seen.append(context.turn.message.sender_id)
            return ["[系统备注：语音频道 桌游-语音（3 人）]", "[系统备注：首次对话]"]

    class Broken:
        @hookimpl
        def collect_turn_notes(self, context):
            raise RuntimeError("directory unavailable")

    runtime = make_runtime(extra_plugins=(VoiceChannel(), Broken()))
    context = _context(runtime)
    assert seen == ["30017"]
    assert context.notes == ("[系统备注：语音频道 桌游-语音（3 人）]", "[系统备注：首次对话]")
    assert context.trace["note_failures"] == [
        {
            "plugin": context.trace["note_failures"][0]["plugin"],
            "error": "RuntimeError: directory unavailable",
        }
    ]
    assert "首次对话" in context.current_message.api_content


def test_hook_compress_turn_messages():
    calls = []

    class KeepLast:
        @hookimpl
        def compress_turn_messages(self, messages, pass_number, protect_first, protect_last):
            calls.append((pass_number, protect_first, protect_last))
            return [
                PromptMessage(role="user", content="【此前对话摘要】桌游局", source="summary"),
                messages[-1],
            ]

    runtime = make_runtime(
        extra_plugins=(KeepLast(),), threshold_tokens=200, protect_first=1, protect_last=1
    )
    context = _context(runtime)
    assert calls[0] == (1, 1, 1)
    assert [m.source for m in context.messages] == ["summary", "current"]
    assert context.current_turn_user_idx == 1


def test_hook_fetch_image():
    urls = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            urls.append((url, limits.max_bytes))
            return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    spec = ProviderSpec(api=ProviderApi.ANTHROPIC, model="m", supports_images=True)
    request = build_provider_request(runtime, _context(runtime), spec)
    assert urls == [("https://img.example.net/cat-1.jpg", 5 * 1024 * 1024)]
    assert request.trace["images"] == {"sent": 1, "timeline": 1, "inline": True, "failed": []}


def test_hook_submit_request():
    class Echo:
        @hookimpl
        def submit_request(self, request, config):
            return SubmitResult(
                sent=True, status="ok", text=f"{request.api.value}:{config.provider.max_tokens}"
            )

    runtime = make_runtime()
    request = build_provider_request(runtime, _context(runtime))
    offline = submit_request(runtime, request)
    assert (offline.sent, offline.status) == (False, "offline")
    assert "openai_compat" in offline.detail
    runtime = make_runtime(extra_plugins=(Echo(),))
    result = submit_request(runtime, build_provider_request(runtime, _context(runtime)))
    assert (result.sent, result.text) == (True, "openai_chat:1024")


def test_a_raising_submit_becomes_an_error_result():
    class Down:
        @hookimpl
        def submit_request(self, request, config):
            raise ConnectionError("provider down")

    runtime = make_runtime(extra_plugins=(Down(),))
    result = submit_request(runtime, build_provider_request(runtime, _context(runtime)))
    assert (result.sent, result.status, result.detail) == (
        False,
        "error",
        "ConnectionError: provider down",
    )


def _asubmit(runtime, api=ProviderApi.OPENAI_CHAT):
    spec = ProviderSpec(api=api, model="m")
    request = build_provider_request(runtime, _context(runtime), spec)
    return asyncio.run(asubmit_request(runtime, request))


class _AsyncEcho:
    """Answers OpenAI Chat Completions requests from a coroutine; leaves the others."""

    def __init__(self):
        self.awaited = []

    async def _send(self, request, config):
        await asyncio.sleep(0)
        self.awaited.append(request.api.value)
        return SubmitResult(sent=True, status="ok", text=f"async:{config.provider.max_tokens}")

    @hookimpl
    def submit_request_async(self, request, config):
        if request.api is not ProviderApi.OPENAI_CHAT:
            return None
        return self._send(request, config)


def test_hook_submit_request_async():
    echo = _AsyncEcho()
    runtime = make_runtime(extra_plugins=(echo,))
    result = _asubmit(runtime)
    assert (result.sent, result.status, result.text) == (True, "ok", "async:1024")
    assert echo.awaited == ["openai_chat"]
    assert isinstance(result.duration_ms, float) and result.duration_ms >= 0
    # A format no async implementation takes goes to the synchronous hook: here the offline
    # default, since no client is enabled.
    offline = _asubmit(runtime, ProviderApi.ANTHROPIC)
    assert (offline.sent, offline.status) == (False, "offline")
    assert echo.awaited == ["openai_chat"]


def test_asubmit_falls_back_to_a_synchronous_client_in_a_worker_thread():
    threads = []

    class SyncOnly:
        @hookimpl
        def submit_request(self, request, config):
            threads.append(threading.current_thread())
            return SubmitResult(sent=True, status="ok", text="sync")

    runtime = make_runtime(extra_plugins=(SyncOnly(),))
    assert _asubmit(runtime).text == "sync"
    assert threads and threads[0] is not threading.main_thread()


def test_an_async_client_is_preferred_to_a_synchronous_one():
    class SyncEcho:
        @hookimpl
        def submit_request(self, request, config):
            return SubmitResult(sent=True, status="ok", text="sync")

    runtime = make_runtime(extra_plugins=(_AsyncEcho(), SyncEcho()))
    assert _asubmit(runtime).text == "async:1024"


class _Failing:
    def __init__(self, where):
        self.where = where

    async def _send(self):
        await asyncio.sleep(0)
        raise ConnectionError("provider down")

    @hookimpl
    def submit_request_async(self, request, config):
        if self.where == "hook":
            raise RuntimeError("bad config")
        if self.where == "type":
            return "要的"
        return self._send()


@pytest.mark.parametrize(
    ("where", "detail"),
    [
        ("hook", "RuntimeError: bad config"),
        ("coroutine", "ConnectionError: provider down"),
        ("type", "submit_request_async returned str, not a SubmitResult"),
    ],
)
def test_a_failing_async_client_gives_a_logged_error_result(where, detail, caplog):
    runtime = make_runtime(extra_plugins=(_Failing(where),))
    with caplog.at_level(logging.ERROR, logger="promptweave"):
        result = _asubmit(runtime)
    assert (result.sent, result.status, result.detail) == (False, "error", detail)
    assert any("submit_request_async" in record.getMessage() for record in caplog.records)


def test_a_result_returned_directly_by_the_async_hook_is_accepted():
    class Immediate:
        @hookimpl
        def submit_request_async(self, request, config):
            return SubmitResult(sent=False, status="error", detail="quota used up")

    result = _asubmit(make_runtime(extra_plugins=(Immediate(),)))
    assert (result.status, result.detail) == ("error", "quota used up")


def test_cancelling_the_caller_cancels_the_request():
    started = []

    class Slow:
        async def _send(self):
            started.append(True)
            await asyncio.sleep(3600)

        @hookimpl
        def submit_request_async(self, request, config):
            return self._send()

    runtime = make_runtime(extra_plugins=(Slow(),))
    request = build_provider_request(runtime, _context(runtime))

    async def cancel_it():
        task = asyncio.create_task(asubmit_request(runtime, request))
        while not started:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())


def test_request_defaults_is_a_builtin_plugin():
    assert "promptweave.builtin_plugins.request_defaults" in DEFAULT_PLUGINS
    runtime = make_runtime()
    assert set(runtime.plugins.hooks_of("request_defaults")) == {
        "compress_turn_messages",
        "fetch_image",
        "submit_request",
    }


def test_turn_context_hooks_have_a_docs_section_and_a_test():
    text = DOCS.read_text(encoding="utf-8")
    headings = set(re.findall(r"^## `(\w+)\(", text, flags=re.MULTILINE))
    source = Path(__file__).read_text(encoding="utf-8")
    for hook in HOOKS:
        assert hook in headings, f"docs/plugin_hooks.md has no section for {hook}"
        assert f"def test_hook_{hook}(" in source


def test_submit_request_records_its_duration(caplog):
    import logging

    class Slow:
        @hookimpl
        def submit_request(self, request, config):
            return SubmitResult(sent=True, status="ok", text="好", duration_ms=-1.0)

    runtime = make_runtime(extra_plugins=(Slow(),))
    with caplog.at_level(logging.DEBUG, logger="promptweave.stages"):
        result = submit_request(runtime, build_provider_request(runtime, _context(runtime)))
    # The duration is measured here, whatever the plugin put in it.
    assert isinstance(result.duration_ms, float) and result.duration_ms >= 0
    assert result == SubmitResult(sent=True, status="ok", text="好")  # not part of equality
    assert any(r.getMessage().startswith("submit_request: ") for r in caplog.records)
