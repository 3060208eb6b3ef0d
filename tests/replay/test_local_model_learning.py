"""End to end: the learners ask the real local model (llama.cpp's server with SmolLM2-135M, see
``conftest.py``) through the OpenAI-compatible client, with structured output, in a replay of the
bundled chat (``docs/learning.md``, the learning model).

A model this small answers the schema (the server holds it to a grammar) with text of little
sense; what matters here is the path: every answer is checked before anything is stored, the
budget holds, the spend is what the server reported, and nothing breaks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.config import Config, StoreConfig
from promptweave.learning.budget import SPEND_KIND
from promptweave.store.stores import Stores

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CHAT_CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"
#: What learning may ask of the local model in the whole replay (it takes seconds a call).
CALLS = 6
GROUP_CALLS_PER_HOUR = 2
MODEL_KINDS = ("strategy", "person_fact", "relationship", "group_event")


@pytest.fixture(scope="module")
def replayed(
    llama: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[dict[str, Any]], Path]:
    url, _log = llama
    tmp = tmp_path_factory.mktemp("learning")
    config = tmp / "promptweave.toml"
    config.write_text(
        CHAT_CONFIG.read_text(encoding="utf-8")
        + f"""
[learning.model]
client = "openai_compat"
base_url = "{url}"
model = "smollm2"
structured = "json_object"
max_tokens = 96
timeout_s = 120

[learning.budget]
calls_per_day = {CALLS}
group_calls_per_hour = {GROUP_CALLS_PER_HOUR}

[learning.learners.strategies]
max_tokens = 192
max_exchanges = 2
""",
        encoding="utf-8",
    )
    store = tmp / "learned.sqlite3"
    result = CliRunner().invoke(
        cli,
        [
            "replay", str(CHAT), "--config", str(config), "--seed", "1", "--no-progress",
            "--data", str(tmp / "no-data"), "--store", str(store), "--format", "jsonl",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()], store


def test_the_learners_ask_the_local_model_within_the_budget(
    replayed: tuple[list[dict[str, Any]], Path],
) -> None:
    rows, store = replayed
    learning = rows[-1]["learning"]
    assert learning["model"] == "openai_compat smollm2"
    assert learning["failures"] == []  # the server answered every request it was sent
    calls = learning["model_calls"]
    assert set(calls) <= {"ok", "invalid", "budget"}
    assert calls.get("ok", 0) + calls.get("invalid", 0) >= 1
    assert calls.get("budget", 0) >= 1  # the budget stopped some
    stores = Stores.from_config(Config(store=StoreConfig(path=str(store))))
    try:
        assert stores.learned is not None
        spend = [
            item
            for scope in stores.learned.scopes()
            for item in stores.learned.items(*scope, kind=SPEND_KIND)
        ]
    finally:
        stores.close()
    requests = sum(item.fields["calls"] for item in spend)
    assert 1 <= requests <= CALLS
    per_hour: dict[tuple[str, str], int] = {}
    for item in spend:
        key = (item.group_id, str(item.fields["hour"]))
        per_hour[key] = per_hour.get(key, 0) + int(item.fields["calls"])
    assert max(per_hour.values()) <= GROUP_CALLS_PER_HOUR
    # The tokens are the server's own count.
    assert sum(item.fields["prompt_tokens"] for item in spend) > 0
    assert sum(item.fields["output_tokens"] for item in spend) > 0


def test_only_valid_answers_are_stored(replayed: tuple[list[dict[str, Any]], Path]) -> None:
    rows, _store = replayed
    humans = {row["sender_id"] for row in rows[:-1] if row.get("sender_id") != "10001"}
    for group in rows[-1]["learning"]["groups"]:
        for item in group["items"]:
            if item["kind"] == "strategy":
                assert item["learning_type"] in ("observed", "self_reflection")
                assert 1 <= len(item["scene"]) <= 80 and 1 <= len(item["action"]) <= 120
                assert len(item["outcome"]) <= 80
            elif item["kind"] == "person_fact":
                assert 1 <= len(item["text"]) <= 60 and item["user_id"] in humans
            elif item["kind"] == "relationship":
                assert len(item["facts"]) <= 5 and len(item["guidance"]) <= 5
                assert -1 <= item["affinity"] <= 1 and item["user_id"] in humans
            elif item["kind"] == "group_event":
                assert len(set(item["confirmed_by"])) >= 2
                assert set(item["confirmed_by"]) <= humans
                assert item["text"].startswith(item["date"]) or item["date"] in item["text"]


def test_learned_stats_reads_the_same_spend(replayed: tuple[list[dict[str, Any]], Path]) -> None:
    rows, store = replayed
    spent = sum(group["learning_spend"]["calls"] for group in rows[-1]["learning"]["groups"])
    result = CliRunner().invoke(
        cli,
        ["learned", "stats", "--store", str(store), "--config", str(store.parent / "promptweave.toml"),
         "--now", "2026-12-05T12:00:00+08:00", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    *groups, total = (json.loads(line) for line in result.stdout.splitlines())
    kept = sum(s["calls"] for group in groups for s in group["learning_kept"].values())
    assert kept == spent
    assert total["budget"]["calls_per_day"] == CALLS
