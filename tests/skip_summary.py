"""A pytest plugin: skipped tests summarised in one line per reason, and none allowed in CI.

Without a Redis server the Redis tests skip, each for the same reason; pytest's ``-rs`` would list
every one of them. This plugin prints ``96 skipped: PROMPTWEAVE_TEST_REDIS_URL is not set: …``
instead (``-rs`` still gives the full list). With a ``PROMPTWEAVE_REQUIRE_<SERVICE>=1`` variable,
which CI sets for each service it starts (``.ci/run``), a skipped test fails the run: every
service test must have run.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

__all__: list[str] = []

#: ``PROMPTWEAVE_REQUIRE_REDIS=1``, ``PROMPTWEAVE_REQUIRE_LLAMA=1``…: set where the tests of that
#: service must run (CI); any skipped test then fails the run.
_REQUIRE = "PROMPTWEAVE_REQUIRE_"


def _skip_reasons(config: pytest.Config) -> Counter[str]:
    """How many tests were skipped, per reason, as the terminal reporter recorded them."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    return Counter(
        str(report.longrepr[2]).removeprefix("Skipped: ")
        for report in reports
        if isinstance(report.longrepr, tuple)
    )


def _required() -> list[str]:
    """The ``PROMPTWEAVE_REQUIRE_*`` variables set to ``1`` (CI sets one per service)."""
    return sorted(
        name for name, value in os.environ.items() if name.startswith(_REQUIRE) and value == "1"
    )


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reasons = _skip_reasons(config)
    if not {"s", "a", "A"} & set(terminalreporter.reportchars):
        for reason, count in reasons.items():
            terminalreporter.write_line(f"{count} skipped: {reason}", yellow=True)
    required = _required()
    if reasons and required:
        terminalreporter.write_line(
            f"{', '.join(f'{name}=1' for name in required)}: no test may be skipped, and "
            f"{reasons.total()} were",
            red=True,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _required() and _skip_reasons(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
