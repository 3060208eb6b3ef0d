"""Real headless Chromium against a live dashboard: the server in a thread of the test process
(uvicorn on a free loopback port) and a Chrome DevTools Protocol session on one page, with
synchronous calls (``websockets.sync``)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from report_support import start_devtools
from websockets.sync.client import ClientConnection, connect

#: How long a wait for the page may take before the test fails (a bound, not a measurement).
WAIT_S = 60.0


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on a free port of 127.0.0.1 in a thread; its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        assert thread.is_alive(), "the dashboard's server stopped"
        assert time.monotonic() < deadline, "the dashboard's server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)


class Page:
    """A DevTools session on Chromium's first tab."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.events: list[dict[str, Any]] = []
        self._next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=WAIT_S))
            if "method" in message:
                self.events.append(message)
            elif message.get("id") == self._next_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    def evaluate(self, expression: str) -> Any:
        answer = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in answer, answer
        return answer["result"].get("value")

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until its document and script are loaded."""
        self.call("Page.navigate", url=url)
        self.wait_until(
            "document.readyState === 'complete' && location.href === " + json.dumps(url)
        )

    def wait_until(self, expression: str) -> Any:
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + WAIT_S
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            assert time.monotonic() < deadline, f"never true: {expression}"
            time.sleep(0.05)

    def problems(self) -> list[Any]:
        """Uncaught exceptions and console errors seen so far."""
        return [
            event["params"]
            for event in self.events
            if event["method"] == "Runtime.exceptionThrown"
            or (
                event["method"] == "Runtime.consoleAPICalled"
                and event["params"]["type"] in ("error", "assert")
            )
        ]


@contextmanager
def browser_page(profile: Path) -> Iterator[Page]:
    """Headless Chromium under DevTools, its first tab."""
    process, port = start_devtools(profile, timeout=WAIT_S)
    try:
        deadline = time.monotonic() + WAIT_S
        targets: list[dict[str, Any]] = []
        while not targets:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                targets = [t for t in json.load(answer) if t["type"] == "page"]
            if not targets:
                assert time.monotonic() < deadline, "no page target"
                time.sleep(0.05)
        with connect(targets[0]["webSocketDebuggerUrl"], max_size=None) as socket:
            page = Page(socket)
            for domain in ("Runtime", "Page"):
                page.call(f"{domain}.enable")
            yield page
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
