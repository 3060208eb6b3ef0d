"""The wait for the local model server that ``.ci/run`` builds while the earlier tests run: a
failed build or a server that never answers fails the model tests with the build's log, soon."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest
from llama_support import wait_for_server
from redis_support import closed_port


class _Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *args: object) -> None:
        return None


def test_a_failed_build_fails_at_once_with_the_end_of_its_log(tmp_path: Path) -> None:
    status, build_log = tmp_path / "llama.status", tmp_path / "llama-build.log"
    status.write_text("failed: the build of llama-cpp-python\n", encoding="utf-8")
    build_log.write_text("step 1\nCMake Error: no compiler\n", encoding="utf-8")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_for_server(url, 600, str(status), str(build_log))
    assert time.monotonic() - started < 60  # not the whole wait
    assert "did not start (failed: the build of llama-cpp-python)" in str(failed.value)
    assert "CMake Error: no compiler" in str(failed.value)


def test_a_server_that_never_answers_fails_when_the_wait_is_over(tmp_path: Path) -> None:
    status = tmp_path / "llama.status"
    status.write_text("starting\n", encoding="utf-8")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_for_server(url, 0, str(status), str(tmp_path / "missing.log"))
    assert "did not answer within 0 s (status: starting)" in str(failed.value)
    assert "no log at" in str(failed.value)


def test_a_server_that_answers_ends_the_wait(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        wait_for_server(url, 0, str(tmp_path / "none"), str(tmp_path / "none.log"))
    finally:
        server.shutdown()
        server.server_close()
