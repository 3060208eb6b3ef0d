"""Reading a llama.cpp server's log for the prompt tokens it did not evaluate again
(``promptweave replay --server-log``; ``docs/replay.md``, "Prefix reuse")."""

from __future__ import annotations

from pathlib import Path

from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.replay.server_reuse import ServerLog, prefix_hits, server_reuse

LINE = "Llama.generate: {} prefix-match hit, remaining {} prompt tokens to eval\n"
EVENT_LOG = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"


def test_each_prefix_match_line_is_read_in_order():
    text = "INFO: started\n" + LINE.format(3615, 1) + "llama_perf...\n" + LINE.format(20, 7)
    assert prefix_hits(text) == [(3615, 1), (20, 7)]
    assert server_reuse(prefix_hits(text)) == {
        "calls": 2,
        "reused_tokens": 3635,
        "evaluated_tokens": 8,
        "share": round(3635 / 3643, 4),
    }
    assert server_reuse([]) is None


def test_only_the_lines_written_after_the_start_count(tmp_path: Path):
    log = tmp_path / "llama.log"
    log.write_text(LINE.format(900, 100), encoding="utf-8")
    server = ServerLog(log)
    assert server.hits() == []
    with log.open("a", encoding="utf-8") as handle:
        handle.write(LINE.format(50, 5))
    assert server.hits() == [(50, 5)]
    assert ServerLog(tmp_path / "missing.log").hits() == []


def test_a_replay_with_a_server_log_says_what_it_found(tmp_path: Path):
    log = tmp_path / "llama.log"
    log.write_text(LINE.format(900, 100), encoding="utf-8")  # before the replay: not counted
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(EVENT_LOG.read_text(encoding="utf-8").splitlines()[:20]) + "\n")
    result = CliRunner().invoke(
        cli, ["replay", str(chat), "--server-log", str(log), "--no-learn", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    # The offline stand-in answered: the server wrote nothing, and the summary says so.
    assert "server log: no prefix-match line" in result.output
