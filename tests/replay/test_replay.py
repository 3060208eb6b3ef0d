"""``promptweave replay``: a recorded chat through the live loop, repeatable, measured."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave import BotLoop, Config, IncomingEvent, Promptweave, Stores, hookimpl
from promptweave.cli.main import cli
from promptweave.config import TurnContextConfig
from promptweave.providers.exchange import ProviderSpec
from promptweave.replay.replayer import (
    ReplayClock,
    ReplayTransport,
    read_chat_log,
    replay_events,
)

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CHAT_CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"
EVENT_LOG = ROOT / "examples" / "logs" / "lunch_chat.jsonl"
MESSAGE_KEYS = {
    "type",
    "index",
    "time",
    "message_id",
    "group_id",
    "sender_id",
    "sender_name",
    "text",
    "images",
    "model_failure",
    "status",
    "action",
    "reason",
    "source",
    "delivery_style",
    "necessity",
    "bubbles",
    "message_ids",
    "quoted_message_id",
    "prefix_reuse",
    "prefix_break",
    "uncached_bytes",
    "new_bytes",
    "request_bytes",
    "chars",
    "wording_hints",
    "usage",
    "tokens",
    "durations_ms",
    "learned",
    "learned_in_prompt",
}


def _replay(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            str(CHAT),
            "--config",
            str(CHAT_CONFIG),
            "--format",
            "jsonl",
            "--no-progress",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def _without_timing(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {key: value for key, value in record.items() if key not in ("durations_ms", "stage_ms")}
        for record in records
    ]


@pytest.fixture(scope="module")
def seeded() -> list[dict[str, Any]]:
    return _replay("--seed", "1")


def test_the_bundled_chat_replays_every_message_with_its_decision(
    seeded: list[dict[str, Any]],
) -> None:
    *messages, summary = seeded
    assert summary["type"] == "summary"
    assert len(messages) == summary["messages"] == 343
    assert all(set(record) == MESSAGE_KEYS for record in messages)
    assert [record["index"] for record in messages] == list(range(len(messages)))
    assert summary["recorded"] == 9  # the bot's own messages in the log
    assert summary["replies"] > 40 and summary["tools"] >= 3 and summary["quotes"] >= 1
    assert summary["silences"]["shut_up"] >= 1 and summary["silences"]["face"] > 10
    assert "not an LLM" in summary["model_label"]
    replied = [r for r in messages if r["status"] == "replied"]
    assert all(bubble.startswith("离线回声：") for r in replied for bubble in r["bubbles"])
    assert all(r["chars"]["system"]["injection_guard"] > 0 for r in replied)
    reuse = summary["prefix_reuse"]
    assert 0 < reuse["min"] <= reuse["median"] <= 1


def test_a_quote_goes_out_as_a_reply_to_the_candidate(seeded: list[dict[str, Any]]) -> None:
    quoted = [r for r in seeded[:-1] if r["quoted_message_id"] is not None]
    assert quoted
    for record in quoted:
        assert record["delivery_style"] == "quote"
        assert record["quoted_message_id"] != record["message_id"]


def test_a_replay_repeats_exactly_with_the_same_seed(seeded: list[dict[str, Any]]) -> None:
    learning = seeded[-1]["learning"]
    assert learning["enabled"] and learning["runs"]["learned"] > 0  # what is learned repeats too
    assert any(record["learned"] for record in seeded[:-1])
    assert _without_timing(_replay("--seed", "1")) == _without_timing(seeded)
    assert _without_timing(_replay("--seed", "2")) != _without_timing(seeded)


async def _no_pause(_seconds: float) -> None:
    return None


def _requests(turn_sections: str) -> dict[str, list[str]]:
    """The system prompts of every request, per conversation, in order."""
    config = Config.from_file(CHAT_CONFIG)
    config = Config(
        plugins=config.plugins,
        bots=config.bots,
        turn_context=TurnContextConfig(turn_sections=turn_sections),
        base_dir=config.base_dir,
    )
    clock = ReplayClock()
    runtime = Promptweave.from_config(
        config, contrib=["onebot", "offline_model"], stores=Stores.in_memory(), clock=clock
    )
    log = read_chat_log(CHAT, runtime)
    loop = BotLoop(runtime=runtime, spec=ProviderSpec.from_config(config.provider), sleep=_no_pause)
    transport = ReplayTransport()
    prompts: dict[str, list[str]] = defaultdict(list)

    async def run() -> None:
        for event in log.events:
            clock.now = event.message.time
            outcome = await loop.handle(event, transport)
            if outcome.request is not None:
                body = outcome.request.body
                prompts[outcome.request.conversation_key].append(body["messages"][0]["content"])

    asyncio.run(run())
    runtime.close()
    return prompts


def test_with_the_turn_part_on_the_user_message_the_system_prompt_never_changes() -> None:
    prompts = _requests("user")
    assert sum(len(seen) for seen in prompts.values()) > 40
    for seen in prompts.values():
        assert len(set(seen)) == 1
    # with the turn part in the system prompt, it changes from turn to turn
    assert any(len(set(seen)) > 1 for seen in _requests("system").values())


def test_the_text_output_shows_each_message_its_decision_and_the_bubbles() -> None:
    result = CliRunner().invoke(cli, ["replay", str(CHAT), "--no-progress", "--seed", "1"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"replaying {CHAT} · 343 messages · model: offline stand-in")
    assert any(line.startswith("retrieval data from ") for line in lines[:3])
    assert "  ← 小织: 离线回声：" in result.output
    assert any(line.startswith("  · pass · face") for line in lines)
    assert "== replay summary · model: offline stand-in (deterministic, not an LLM) ==" in lines


def test_the_stores_event_log_replays_its_bot_replies_as_delivered(tmp_path: Path) -> None:
    store = tmp_path / "kept.sqlite3"
    result = CliRunner().invoke(
        cli, ["replay", str(EVENT_LOG), "--format", "jsonl", "--no-progress", "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    *messages, summary = [json.loads(line) for line in result.output.splitlines()]
    assert summary["recorded"] == sum(1 for r in messages if r["status"] == "recorded") > 0
    assert store.is_file()


def test_a_scratch_replay_leaves_no_store_behind(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["replay", str(EVENT_LOG), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []


def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    good = CHAT.read_text(encoding="utf-8").splitlines()[1]
    log.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["replay", str(log), "--no-progress"])
    assert result.exit_code != 0
    assert f"{log}:2" in result.output and "not JSON" in result.output


class _Observer:
    """Keeps what the observation hooks are told during a replay."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str | None, str | None]] = []
        self.replies: list[tuple[str, str | None, str, str | None, str | None, int]] = []

    @hookimpl
    def observe_message_recorded(self, bot_id, group_id, message):  # type: ignore[no-untyped-def]
        self.messages.append((bot_id, group_id, message.id))

    @hookimpl
    def observe_reply_delivered(  # type: ignore[no-untyped-def]
        self, bot_id, group_id, text, message_id, answering, injection
    ):
        answered = answering.id if answering is not None else None
        self.replies.append((bot_id, group_id, text, message_id, answered, len(injection.sections)))


def _replayed(plugins: list[object]) -> tuple[list[IncomingEvent], list[dict[str, Any]]]:
    """The bundled chat through the live loop, with ``plugins`` added: the events and records."""
    config = Config.from_file(CHAT_CONFIG)
    clock = ReplayClock()
    runtime = Promptweave.from_config(
        config,
        contrib=["onebot", "offline_model"],
        extra_plugins=plugins,
        stores=Stores.in_memory(),
        clock=clock,
        rng=random.Random(1),
    )
    log = read_chat_log(CHAT, runtime)
    loop = BotLoop(runtime=runtime, spec=ProviderSpec.from_config(config.provider), sleep=_no_pause)
    records = asyncio.run(replay_events(loop, clock, log.events))
    runtime.close()  # waits for the observations still queued
    return list(log.events), records


def test_a_replay_is_observed_and_repeats_exactly_with_observers() -> None:
    observer = _Observer()
    events, records = _replayed([observer])

    assert observer.messages == [
        (event.bot_id, event.group_id, event.message.id)
        for event in events
        if not event.self_sent and event.group_id is not None  # private chats have no group log
    ]
    delivered = [
        (event.bot_id, event.group_id, text, message_id, event.message.id)
        for event, record in zip(events, records, strict=True)
        for text, message_id in zip(record["bubbles"], record["message_ids"], strict=True)
    ]
    assert delivered and [reply[:5] for reply in observer.replies] == delivered
    # a reply rendered by the model carries its turn's sections; a phrase carries none
    statuses = [record["status"] for record in records for _bubble in record["bubbles"]]
    assert "replied" in statuses
    assert [sections > 0 for *_, sections in observer.replies] == [
        status == "replied" for status in statuses
    ]
    # observers change nothing the bot does
    _events, without = _replayed([])
    assert _without_timing(records) == _without_timing(without)


def test_the_cache_mode_sends_little_more_than_what_is_new() -> None:
    # docs/cost.md, "The two modes": the bytes of a request that are not a prefix of its
    # conversation's previous one, per byte of what is new in it, and the size of each request.
    replays = {mode: _replay("--turn-sections", mode) for mode in ("system", "user")}
    figures = {mode: records[-1]["uncached_per_new_byte"] for mode, records in replays.items()}
    assert figures["user"]["median"] <= 1.2 and figures["user"]["summed"] <= 1.2
    assert figures["system"]["summed"] > figures["user"]["summed"]
    sizes = {
        mode: {r["index"]: r["request_bytes"] for r in records[:-1] if r["request_bytes"]}
        for mode, records in replays.items()
    }
    assert sizes["user"].keys() == sizes["system"].keys()
    assert all(size <= 1.15 * sizes["system"][index] for index, size in sizes["user"].items())
