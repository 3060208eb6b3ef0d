"""The token and money figures of a replay (``docs/cost.md``, "Reading the figures"): each
reply's ``tokens``, the summary's ``spend`` in all, per reply, per group and per 1,000 messages,
the text summary and the report, and ``--compare``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave import Config
from promptweave.cli.main import cli
from promptweave.providers.cost import format_money, price_tokens

REPLAY = ROOT / "examples" / "replay"
CHAT = REPLAY / "weekend_chat.onebot.jsonl"
CHAT_CONFIG = REPLAY / "promptweave.toml"
PRICE = Config.from_file(CHAT_CONFIG).prices["gpt-4o-mini"]


def _run(*args: str) -> str:
    result = CliRunner().invoke(
        cli, ["replay", str(CHAT), "--config", str(CHAT_CONFIG), "--no-progress", *args]
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def replayed() -> list[dict[str, Any]]:
    return [json.loads(line) for line in _run("--format", "jsonl").splitlines()]


def test_every_request_of_the_replay_says_what_it_spent_and_how_that_was_found(replayed):
    *messages, summary = replayed
    spent = [m["tokens"] for m in messages if m["tokens"] is not None]
    assert len(spent) == summary["spend"]["requests"] > 40
    assert all(m["tokens"] is None for m in messages if m["chars"] is None)  # no request, no spend
    for tokens in spent:
        # The offline stand-in reports no usage: every figure is estimated.
        assert set(tokens["basis"].values()) == {"estimated"}
        assert tokens["model"] == "gpt-4o-mini" and tokens["currency"] == "USD"
        assert 0 <= tokens["cached_tokens"] <= tokens["prompt_tokens"]
        # The bundled example's price row caches 1,024 tokens or more, as OpenAI does.
        assert tokens["cached_tokens"] == 0 or tokens["cached_tokens"] >= 1024
        assert tokens["cost"] == pytest.approx(
            price_tokens(
                PRICE,
                prompt=tokens["prompt_tokens"],
                cached=tokens["cached_tokens"],
                output=tokens["output_tokens"],
            )
        )
    assert any(tokens["cached_tokens"] for tokens in spent)


def test_the_summary_sums_the_spend_per_reply_per_group_and_per_thousand_messages(replayed):
    *messages, summary = replayed
    spend = summary["spend"]
    spent = [m["tokens"] for m in messages if m["tokens"] is not None]
    assert spend["prompt_tokens"] == sum(t["prompt_tokens"] for t in spent)
    assert spend["cost"] == pytest.approx(sum(t["cost"] for t in spent))
    assert spend["per_reply"]["cost"] == pytest.approx(spend["cost"] / summary["replies"])
    assert spend["per_1000_messages"]["prompt_tokens"] == pytest.approx(
        spend["prompt_tokens"] * 1000 / summary["messages"]
    )
    groups = spend["groups"]
    assert set(groups) == {"20001", "20002"}
    in_groups = [m for m in messages if m["group_id"] is not None and m["tokens"]]
    assert sum(g["requests"] for g in groups.values()) == len(in_groups)
    for group_id, group in groups.items():
        mine = [m for m in messages if m["group_id"] == group_id]
        assert group["per_1000_messages"]["cost"] == pytest.approx(group["cost"] * 1000 / len(mine))
    assert summary["tokens_basis"] == "estimated"
    # The turns' spend beside learning's: the same figures per group.
    for group in summary["learning"]["groups"]:
        turns = group["turns_spend"]
        assert turns["prompt_tokens"] == groups[group["group_id"]]["prompt_tokens"]


def test_the_text_summary_prints_the_money_of_a_reply_and_of_a_thousand_messages():
    lines = _run().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("spend ("))
    assert lines[head].endswith(
        "at the price of gpt-4o-mini; tokens prompt estimated, cached estimated from the prefix, "
        "output estimated):"
    )
    assert lines[head + 2].startswith("  per reply: prompt ")
    assert lines[head + 2].endswith(" USD")
    assert lines[head + 3].startswith("  per 1,000 messages: prompt ")
    assert any(line.startswith("  group 20001: per reply prompt ") for line in lines)
    assert any(line.startswith("tokens sent per reply (estimated): p50 ") for line in lines)


def test_the_report_shows_the_spend_and_each_requests_tokens(tmp_path):
    report = tmp_path / "report.html"
    _run("--report", str(report))
    page = report.read_text(encoding="utf-8")
    assert "spend per reply" in page and "spend per 1,000 messages" in page
    assert "prompt tokens (estimated)" in page and " USD" in page


def test_compare_replays_both_modes_and_prints_them_side_by_side(replayed):
    *_, system = replayed
    user = json.loads(_run("--turn-sections", "user", "--format", "jsonl").splitlines()[-1])
    lines = _run("--compare").splitlines()
    assert lines[0].endswith("money at the price of gpt-4o-mini ==")
    assert lines[1].split() == ["system", "user"]
    money = next(line for line in lines if line.startswith("money per reply"))
    assert [cell.strip() for cell in money.split("  ")[-2:]] == [
        format_money(system["spend"]["per_reply"]["cost"], "USD"),
        format_money(user["spend"]["per_reply"]["cost"], "USD"),
    ]
    assert len(lines) > 10 and all(len(line) == len(lines[1]) for line in lines[2:])
    jsonl = [json.loads(line) for line in _run("--compare", "--format", "jsonl").splitlines()]
    assert [s["turn_sections"] for s in jsonl] == ["system", "user"]
    assert jsonl[1]["spend"]["cost"] == pytest.approx(user["spend"]["cost"])
    assert jsonl[0]["request_bytes"] < jsonl[1]["request_bytes"]


def test_compare_refuses_the_options_of_one_mode():
    result = CliRunner().invoke(
        cli, ["replay", str(CHAT), "--compare", "--turn-sections", "user", "--store", "x.db"]
    )
    assert result.exit_code == 2
    assert "--compare replays in both modes: drop --turn-sections, --store" in result.output
