"""Errors a new operator meets first: a misspelt key gets a "did you mean", and a contrib plugin
whose extra is not installed names the extra to install (``docs/configuration.md``,
``docs/plugin_loading.md``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.config import Config
from promptweave.errors import ConfigError

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "promptweave.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        Config.from_file(path)
    return raised.value.problems


def test_a_misspelt_key_gets_the_key_it_is_close_to(tmp_path: Path) -> None:
    assert _problems(tmp_path, '[provider]\nmodle = "x"\n') == [
        "extra fields found (modle); did you mean model? @ $.provider"
    ]
    assert _problems(tmp_path, "[budgte]\nchars = 1\n") == [
        "extra fields found (budgte); did you mean budget? @ $"
    ]


def test_each_misspelt_key_of_a_bot_table_gets_its_own_suggestion(tmp_path: Path) -> None:
    assert _problems(tmp_path, '[bots."10001"]\nnmae = "小织"\naliass = []\n') == [
        "extra fields found (aliass, nmae); did you mean aliases for aliass, name for nmae? "
        "@ $.bots['10001']"
    ]


def test_a_key_close_to_nothing_gets_no_guess(tmp_path: Path) -> None:
    assert _problems(tmp_path, "[provider]\nzzzz = 1\n") == [
        "extra fields found (zzzz) @ $.provider"
    ]


def test_the_command_line_shows_the_suggestion_at_the_key(tmp_path: Path) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text("[routing]\nlow_engagment = false\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["sections", "--config", str(path)])
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.endswith(
        "routing: extra fields found (low_engagment); did you mean low_engagement?"
    )


def test_replay_with_openai_but_without_httpx_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As after ``pip install .``: httpx is not installed, so the client plugin cannot import.
    for name in list(sys.modules):
        if name.startswith(("httpx", "promptweave.contrib.openai_compat")) or name.endswith(
            "_provider_http"
        ):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "httpx", None)
    result = CliRunner().invoke(
        cli, ["replay", str(CHAT), "--model", "openai", "--no-progress", "--no-learn"]
    )
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith('Error: importing plugin "openai_compat"')
    assert "ModuleNotFoundError: import of httpx halted" in line
    assert line.endswith("install it with pip install 'promptweave[openai]'")
