"""Waiting for the local model server of the end-to-end tests (``tests/replay/conftest.py``),
which ``.ci/run`` builds and starts while the earlier tests run."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

__all__ = ["wait_for_server"]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: str, lines: int = 30) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path!r})"
    return "\n".join(text.splitlines()[-lines:])


def wait_for_server(url: str, wait_s: float, status: str, build_log: str) -> None:
    """Wait until the server at ``url`` answers ``/models``; fail with the build's log when its
    status file says it failed, or when ``wait_s`` passed."""
    deadline = time.monotonic() + wait_s
    while not _answers(url):
        said = Path(status).read_text(encoding="utf-8").strip() if Path(status).is_file() else ""
        if said.startswith("failed"):
            pytest.fail(f"the local model server did not start ({said}):\n{_tail(build_log)}")
        if time.monotonic() > deadline:
            pytest.fail(
                f"the local model server at {url} did not answer within {wait_s:.0f} s "
                f"(status: {said or 'building'}):\n{_tail(build_log)}"
            )
        time.sleep(1)
