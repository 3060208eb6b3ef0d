"""The store the dashboard tests read: the bundled weekend chat replayed through the live loop
(``promptweave replay --store``), with two hostile messages from a member whose nickname is markup
at its end, one of them addressed to the bot so that its reply echoes the markup too."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from dashboard_support import (
    BOT,
    CHAT,
    CONFIG,
    GROUP,
    HOSTILE_ADDRESSED,
    HOSTILE_NAME,
    HOSTILE_TEXT,
)

from promptweave.cli.main import cli


def _hostile_events(after: int) -> list[dict[str, object]]:
    sender = {"user_id": 36666, "nickname": HOSTILE_NAME, "card": HOSTILE_NAME, "role": "member"}
    common = {
        "post_type": "message",
        "message_type": "group",
        "self_id": int(BOT),
        "sub_type": "normal",
        "user_id": 36666,
        "group_id": int(GROUP),
        "font": 0,
        "sender": sender,
    }
    return [
        {
            **common,
            "time": after + 10,
            "message_id": 777000001,
            "message": [{"type": "text", "data": {"text": HOSTILE_TEXT}}],
            "raw_message": HOSTILE_TEXT,
        },
        {
            **common,
            "time": after + 20,
            "message_id": 777000002,
            "message": [
                {"type": "at", "data": {"qq": BOT}},
                {"type": "text", "data": {"text": " " + HOSTILE_ADDRESSED}},
            ],
            "raw_message": f"[CQ:at,qq={BOT}] {HOSTILE_ADDRESSED}",
        },
    ]


@pytest.fixture(scope="session")
def replayed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replayed store (read it only; :func:`store` gives a copy to write)."""
    folder = tmp_path_factory.mktemp("dashboard")
    lines = CHAT.read_text(encoding="utf-8").splitlines()
    last = max(json.loads(line)["time"] for line in lines if line.strip())
    log = folder / "chat.onebot.jsonl"
    log.write_text(
        "\n".join(
            [*lines, *(json.dumps(event, ensure_ascii=False) for event in _hostile_events(last))]
        )
        + "\n",
        encoding="utf-8",
    )
    path = folder / "store.sqlite3"
    result = CliRunner().invoke(
        cli,
        ["replay", str(log), "--config", str(CONFIG), "--store", str(path), "--no-progress"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def store(replayed_store: Path, tmp_path: Path) -> Path:
    """A copy of the replayed store of this test's own."""
    path = tmp_path / "store.sqlite3"
    # SQLite's own copy: it takes what the write-ahead log still holds too.
    with closing(sqlite3.connect(replayed_store)) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return path
