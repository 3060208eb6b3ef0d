"""The prompt tokens a real llama.cpp server did not evaluate again, in both ``turn_sections``
modes (``docs/replay.md``, "Prefix reuse").

A short slice of the bundled chat (one member's first messages: three requests) is replayed
through the server twice with ``promptweave replay --server-log``, once per mode. llama-cpp-python
reports no cached tokens in its responses, so the figure is read from its log; the replay summary
carries it. Kept short: each prompt is evaluated on the CI machine's CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.replay.server_reuse import ServerLog

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
SPEAKER = 30063
#: The speaker's first messages: three of them get an answer.
SLICE = 12
REQUESTS = 3


def _slice(folder: Path) -> Path:
    lines = CHAT.read_text(encoding="utf-8").splitlines()
    mine = [line for line in lines[1:] if json.loads(line).get("user_id") == SPEAKER]
    chat = folder / "slice.onebot.jsonl"
    chat.write_text("\n".join([lines[0], *mine[:SLICE]]) + "\n", encoding="utf-8")
    return chat


def _config(folder: Path, url: str) -> Path:
    config = folder / "promptweave.toml"
    config.write_text(
        f"""
[bots."10001"]
name = "小织"
aliases = ["织织", "小织子"]

[provider]
api = "openai_chat"
model = "smollm2"
base_url = "{url}"
max_tokens = 8

[budget]
chars = 4000
""",
        encoding="utf-8",
    )
    return config


@pytest.fixture(scope="module")
def replays(
    llama: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], list[tuple[int, int]]]]:
    url, log = llama
    folder = tmp_path_factory.mktemp("server-reuse")
    chat, config = _slice(folder), _config(folder, url)
    found = {}
    for mode in ("system", "user"):
        server = ServerLog(log)
        arguments = [
            "replay",
            str(chat),
            "--config",
            str(config),
            "--model",
            "openai",
            "--turn-sections",
            mode,
            "--server-log",
            str(log),
            "--no-learn",
            "--no-progress",
        ]
        result = CliRunner().invoke(cli, [*arguments, "--format", "jsonl"])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.output.splitlines()[-1])
        found[mode] = (summary, server.hits())
    return found


def test_the_summary_gives_the_tokens_the_server_did_not_evaluate_again(replays) -> None:
    for summary, hits in replays.values():
        assert summary["replies"] + sum(summary["silences"].values()) >= 1
        reuse = summary["server_reuse"]
        # Every request after the first starts like the one before it, so the server logs a
        # prefix-match hit for it; the summary adds up the lines written during the replay.
        assert reuse["calls"] == len(hits) >= REQUESTS - 1
        assert reuse["reused_tokens"] == sum(hit for hit, _ in hits) > 0
        assert reuse["evaluated_tokens"] == sum(rest for _, rest in hits)
        print(
            f"{summary['model_label']}: {reuse['reused_tokens']} prompt tokens not evaluated "
            f"again, {reuse['evaluated_tokens']} evaluated ({reuse['share']:.1%})"
        )


def test_the_cache_mode_leaves_the_server_less_to_evaluate(replays) -> None:
    # The same requests in both modes; the later ones are the last lines of each run.
    later = {mode: hits[-(REQUESTS - 1) :] for mode, (_, hits) in replays.items()}
    evaluated = {mode: sum(rest for _, rest in hits) for mode, hits in later.items()}
    reused = {mode: sum(hit for hit, _ in hits) for mode, hits in later.items()}
    print(f"evaluated again on the later requests: {evaluated}; reused: {reused}")
    assert evaluated["user"] < evaluated["system"]
