"""The contrib plugin ``tokenize_endpoint`` (``docs/cost.md``, "Counting tokens"): a model
server's tokenize endpoint counts the tokens, cached, with a traced fallback to the estimate.

A stand-in server on a loopback port speaks both dialects: llama.cpp's ``/tokenize``
(``{"content"}`` in, ``{"tokens"}`` out) and llama-cpp-python's ``/extras/tokenize/count``
(``{"input"}`` in, ``{"count"}`` out). The real llama.cpp server is checked in
``tests/replay/test_local_model_tokens.py``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
import pytest
from loop_support import RecordingTransport, event, make_loop

from promptweave import Config
from promptweave.config import LoopConfig, PluginsConfig, RoutingConfig, TokensConfig
from promptweave.contrib.tokenize_endpoint import TokenizeEndpoint, TokenizeEndpointError
from promptweave.text.tokens import COUNTED, ESTIMATED, estimate_tokens


@attrs.define
class _Server:
    url: str
    asked: list[tuple[str, dict[str, Any]]]
    broken: threading.Event


@pytest.fixture
def server() -> Iterator[_Server]:
    asked: list[tuple[str, dict[str, Any]]] = []
    broken = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # one token a character: easy to check
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append((self.path, body))
            if broken.is_set():
                self.send_response(503)
                self.end_headers()
                return
            if self.path == "/tokenize":
                answer: dict[str, Any] = {"tokens": list(range(len(body["content"])))}
            elif self.path == "/extras/tokenize/count":
                answer = {"count": len(body["input"])}
            else:
                answer = {"detail": "Not Found"}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield _Server(url=f"http://127.0.0.1:{httpd.server_address[1]}", asked=asked, broken=broken)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _endpoint(url: str, **fields: Any) -> TokenizeEndpoint:
    return TokenizeEndpoint(
        url=url,
        timeout_s=fields.pop("timeout_s", 2.0),
        cache_size=fields.pop("cache_size", 16),
        retry_after_s=fields.pop("retry_after_s", 30.0),
        **fields,
    )


def test_both_dialects_are_counted_and_a_text_is_asked_once(server: _Server):
    llama_cpp = _endpoint(f"{server.url}/tokenize")
    python_server = _endpoint(f"{server.url}/extras/tokenize/count")
    assert llama_cpp.count("你好，小织") == 5
    assert python_server.count("hello") == 5
    assert llama_cpp.count("你好，小织") == 5  # from the cache
    assert server.asked == [
        ("/tokenize", {"content": "你好，小织"}),
        ("/extras/tokenize/count", {"input": "hello"}),
    ]


def test_the_cache_keeps_the_newest_texts_up_to_its_size(server: _Server):
    endpoint = _endpoint(f"{server.url}/tokenize", cache_size=2)
    for text in ("一", "二", "三", "一"):
        endpoint.count(text)
    assert endpoint.calls == 4  # 一 had left the cache when 三 came


def test_an_answer_without_a_count_is_an_error_naming_the_endpoint(server: _Server):
    with pytest.raises(TokenizeEndpointError, match="with neither a count nor tokens"):
        _endpoint(f"{server.url}/nowhere").count("你好")


def test_after_a_failure_the_endpoint_rests_then_is_asked_again(server: _Server):
    now = [100.0]
    endpoint = _endpoint(f"{server.url}/tokenize", retry_after_s=30.0, clock=lambda: now[0])
    server.broken.set()
    with pytest.raises(TokenizeEndpointError, match="answered HTTP 503"):
        endpoint.count("你好")
    server.broken.clear()
    with pytest.raises(TokenizeEndpointError, match="not asked for 30 s after a failure"):
        endpoint.count("早上好")
    assert len(server.asked) == 1  # resting: the second text never reached the server
    now[0] += 31
    assert endpoint.count("早上好") == 3


def _loop(url: str) -> Any:
    config = Config(
        routing=RoutingConfig(low_engagement=False),
        loop=LoopConfig(turn_deadline_s=5.0),
        plugins=PluginsConfig(contrib=("tokenize_endpoint",)),
        tokens=TokensConfig(tokenize_url=url, retry_after_s=0.0),
    )
    loop, _model = make_loop("好的", config=config, contrib=["tokenize_endpoint"])
    return loop


def test_a_turn_counts_its_prompt_with_the_endpoint(server: _Server):
    loop = _loop(f"{server.url}/tokenize")
    outcome = asyncio.run(
        loop.handle(event("小织 周末去哪玩", addressed=True), RecordingTransport())
    )
    tokens = outcome.trace["tokens"]
    assert tokens["basis"]["prompt"] == COUNTED and tokens["count_faults"] == []
    # The stand-in counts a token a character: the prompt is the characters of the texts sent.
    assert tokens["prompt_tokens"] > len("小织 周末去哪玩")
    assert {path for path, _ in server.asked} == {"/tokenize"}


def test_a_dead_endpoint_falls_back_to_the_estimate_and_the_trace_says_why():
    loop = _loop("http://127.0.0.1:9/tokenize")  # the discard port: nothing listens
    outcome = asyncio.run(
        loop.handle(event("小织 周末去哪玩", addressed=True), RecordingTransport())
    )
    tokens = outcome.trace["tokens"]
    assert tokens["basis"]["prompt"] == ESTIMATED
    assert any(
        "hook count_tokens of plugin 'tokenize_endpoint' raised: TokenizeEndpointError" in fault
        for fault in tokens["count_faults"]
    )
    assert tokens["prompt_tokens"] > estimate_tokens("小织 周末去哪玩")
