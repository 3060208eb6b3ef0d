"""Per-group control in a replay: the reasons reach the records, the summary and the report
(``docs/groups.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli

EVENT_LOG = ROOT / "examples" / "logs" / "lunch_chat.jsonl"


def _replay(tmp_path: Path, config: str, *args: str) -> list[dict[str, Any]]:
    path = tmp_path / "promptweave.toml"
    path.write_text(config, encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            str(EVENT_LOG),
            "--config",
            str(path),
            "--format",
            "jsonl",
            "--no-progress",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_quiet_hours_name_every_silence_they_cause_in_the_summary_and_the_report(
    tmp_path: Path,
) -> None:
    config = (
        '[bots."10001"]\nname = "小织"\n'
        '[bots."10001".groups."20001"]\nquiet_hours = ["12:00-13:00"]\nquiet_allow = "none"\n'
    )
    report = tmp_path / "report.html"
    records = _replay(tmp_path, config, "--report", str(report))
    messages = [r for r in records if r["type"] == "message" and r["status"] != "recorded"]
    assert messages and all(r["reason"] == "quiet_hours" for r in messages)
    assert all(r["bubbles"] == [] for r in messages)
    summary = records[-1]
    assert summary["type"] == "summary"
    assert summary["silences"] == {"quiet_hours": len(messages)}
    assert summary["replies"] == 0
    assert "quiet_hours" in report.read_text(encoding="utf-8")


def test_a_group_switched_off_in_the_store_stays_off_in_a_replay_into_it(tmp_path: Path) -> None:
    store = tmp_path / "bot.sqlite3"
    runner = CliRunner()
    result = runner.invoke(
        cli, ["groups", "off", "--bot", "10001", "--group", "20001", "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    records = _replay(tmp_path, '[bots."10001"]\nname = "小织"\n', "--store", str(store))
    summary = records[-1]
    assert summary["replies"] == 0
    assert set(summary["silences"]) == {"group_switched_off"}
