"""The real local model of the end-to-end tests (``docs/replay.md#a-real-local-model``).

``.ci/run`` builds llama.cpp's OpenAI-compatible server, starts it and sets
``PROMPTWEAVE_TEST_LLAMA_URL`` (its ``/v1`` base URL) and ``PROMPTWEAVE_TEST_LLAMA_LOG`` (its log
file) with ``PROMPTWEAVE_REQUIRE_LLAMA=1``, so the tests that use :func:`llama` always run there.
Elsewhere they are skipped, with the reason, unless those are set.

``.ci/run`` builds and starts the server while the earlier tests run, so it also sets
``PROMPTWEAVE_TEST_LLAMA_WAIT_S``: the first test that needs the server waits that long for it
to answer, and fails at once, with the end of the build's log
(``PROMPTWEAVE_TEST_LLAMA_BUILD_LOG``), when the status file (``PROMPTWEAVE_TEST_LLAMA_STATUS``)
says the build or the start failed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from llama_support import wait_for_server


@pytest.fixture(scope="session")
def llama() -> tuple[str, Path]:
    url = os.environ.get("PROMPTWEAVE_TEST_LLAMA_URL", "")
    log = os.environ.get("PROMPTWEAVE_TEST_LLAMA_LOG", "")
    if not url or not log:
        reason = (
            "PROMPTWEAVE_TEST_LLAMA_URL and PROMPTWEAVE_TEST_LLAMA_LOG are not set: these tests "
            "need a llama.cpp server (see docs/replay.md, a real local model)"
        )
        if os.environ.get("PROMPTWEAVE_REQUIRE_LLAMA") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    wait_s = os.environ.get("PROMPTWEAVE_TEST_LLAMA_WAIT_S")
    if wait_s:
        wait_for_server(
            url,
            float(wait_s),
            os.environ.get("PROMPTWEAVE_TEST_LLAMA_STATUS", ""),
            os.environ.get("PROMPTWEAVE_TEST_LLAMA_BUILD_LOG", ""),
        )
    return url, Path(log)
