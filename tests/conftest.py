from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from framework import Turn, load_turn_file

pytest_plugins = ["framework.testing"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"
CST = dt.timezone(dt.timedelta(hours=8))


@pytest.fixture
def rich_turn() -> Turn:
    """The example turn that fills all fifteen sections."""
    return load_turn_file(EXAMPLES / "at_question.json")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's promptweave.toml, entry points or plugin env vars."""
    for name in (
        "PROMPTWEAVE_CONFIG",
        "PROMPTWEAVE_LOAD_PLUGINS",
        "PROMPTWEAVE_DISABLE_PLUGINS",
        "PROMPTWEAVE_TRACE_PLUGINS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.chdir(tmp_path)
