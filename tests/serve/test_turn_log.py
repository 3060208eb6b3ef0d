"""The turn log the live loop writes (``docs/dashboard.md``, "The turn log")."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

import pytest
from dashboard_support import BOT, GROUP

from promptweave.config import Config, StoreConfig
from promptweave.loop.events import IncomingEvent, OutcomeStatus, TurnOutcome
from promptweave.loop.live import BotLoop
from promptweave.loop.turn_log import record_turn, turn_log_entry
from promptweave.replay.replayer import ReplayTransport
from promptweave.runtime import Promptweave
from promptweave.store.sqlite import SQLiteDatabase, StoreUnavailableError
from promptweave.store.stores import Stores
from promptweave.store.turn_log_sqlite import (
    SQLiteTurnLog,
    TurnLogEntry,
    pack_record,
    unpack_record,
)
from promptweave.turn import ChatMessage

AT = dt.datetime(2026, 12, 4, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=8)))


def _outcome(group_id: str | None) -> TurnOutcome:
    event = IncomingEvent(
        platform="onebot",
        bot_id=BOT,
        group_id=group_id,
        message=ChatMessage(sender_id="30001", text="在吗", time=AT, id="m1"),
    )
    return TurnOutcome(event=event, status=OutcomeStatus.DROPPED, reason="queue_full")


def test_a_private_chat_and_a_turn_without_event_are_not_logged() -> None:
    assert turn_log_entry(_outcome(None), None, timezone="Asia/Shanghai") is None
    rejected = TurnOutcome(event=None, status=OutcomeStatus.REJECTED, reason="bad payload")
    assert turn_log_entry(rejected, None, timezone="Asia/Shanghai") is None


def test_the_day_is_the_bot_time_zone_s() -> None:
    shanghai = turn_log_entry(_outcome(GROUP), None, timezone="Asia/Shanghai")
    tokyo = turn_log_entry(_outcome(GROUP), None, timezone="Asia/Tokyo")
    assert shanghai is not None and tokyo is not None
    assert (shanghai.day, tokyo.day) == ("2026-12-04", "2026-12-05")
    assert shanghai.record["reason"] == "queue_full"
    assert shanghai.requested is False


def _log(tmp_path: Path) -> SQLiteTurnLog:
    database = SQLiteDatabase(tmp_path / "store.sqlite3")
    Stores.migrate(database)
    return SQLiteTurnLog(database, flush_s=0.05)


def _logged(path: Path) -> int:
    with closing(sqlite3.connect(path)) as connection:
        count: int = connection.execute("SELECT COUNT(*) FROM turn_records").fetchone()[0]
    return count


def test_a_queued_turn_is_written_by_the_log_s_thread(tmp_path: Path) -> None:
    log = _log(tmp_path)
    record_turn(log, _outcome(GROUP), None, timezone="Asia/Shanghai")
    deadline = time.monotonic() + 30
    while _logged(tmp_path / "store.sqlite3") == 0:
        assert time.monotonic() < deadline, "the turn log's thread wrote nothing"
        time.sleep(0.02)
    log.close()
    assert _logged(tmp_path / "store.sqlite3") == 1


def test_close_writes_what_is_queued(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.flush_s = 3600  # the thread would not write before close
    for _ in range(3):
        record_turn(log, _outcome(GROUP), None, timezone="Asia/Shanghai")
    log.close()
    assert _logged(tmp_path / "store.sqlite3") == 3


def test_a_store_that_cannot_be_written_is_logged_and_the_turn_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = _log(tmp_path)
    log.flush_s = 3600

    def failing(self: SQLiteTurnLog, entries: Iterable[TurnLogEntry]) -> None:
        raise StoreUnavailableError("disk full")

    monkeypatch.setattr(SQLiteTurnLog, "record", failing)
    record_turn(log, _outcome(GROUP), None, timezone="Asia/Shanghai")
    with caplog.at_level(logging.WARNING, logger="promptweave.store"):
        log.close()
    assert "the last turns were not written: disk full" in caplog.text


def test_daily_counts_add_up_per_day_status_and_reason(tmp_path: Path) -> None:
    log = _log(tmp_path)
    entry = turn_log_entry(_outcome(GROUP), None, timezone="Asia/Shanghai")
    assert entry is not None
    log.record([entry, entry])
    log.record([entry])
    with closing(sqlite3.connect(tmp_path / "store.sqlite3")) as connection:
        rows = connection.execute(
            "SELECT day, status, reason, turns, requests FROM turn_daily"
        ).fetchall()
        logged = connection.execute("SELECT COUNT(*) FROM turn_records").fetchone()[0]
    assert rows == [("2026-12-04", "dropped", "queue_full", 3, 0)]
    assert logged == 3


def test_a_record_round_trips_and_a_damaged_one_reads_empty() -> None:
    record = {"text": "<b>你好</b>", "terms": [{"name": "mention", "points": 35}]}
    assert unpack_record(pack_record(record)) == record
    assert unpack_record(b"not zlib") == {}


def test_each_section_text_is_stored_once_however_many_turns_carry_it(
    replayed_store: Path,
) -> None:
    with closing(sqlite3.connect(replayed_store)) as connection:
        blobs = [row[0] for row in connection.execute("SELECT record FROM turn_records")]
        stored = connection.execute("SELECT COUNT(*), SUM(length(text)) FROM turn_texts").fetchone()
    carried = [
        (section["text"], section["chars"])
        for record in map(unpack_record, blobs)
        for section in record.get("sections", [])
        if section.get("text")
    ]
    assert stored[0] == len({digest for digest, _ in carried})
    # The static sections repeat on every answered turn: far fewer characters are kept than sent.
    assert stored[1] < sum(chars for _, chars in carried) / 2


def test_a_turn_the_loop_s_own_fault_ended_is_in_the_turn_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config(store=StoreConfig(backend="sqlite", path=str(tmp_path / "store.sqlite3")))
    runtime = Promptweave.from_config(config)

    def broken(self: BotLoop, event: IncomingEvent, record_ms: float, faults: object) -> None:
        raise RuntimeError("a bug in routing")

    monkeypatch.setattr(BotLoop, "_route", broken)

    async def run() -> TurnOutcome:
        loop = BotLoop(runtime, learn=False)
        outcome = await loop.handle(_outcome(GROUP).event, ReplayTransport())  # type: ignore[arg-type]
        await loop.aclose()
        return outcome

    outcome = asyncio.run(run())
    runtime.stores.close()
    assert (outcome.status, outcome.reason) == ("failed", "loop_error")
    with closing(sqlite3.connect(tmp_path / "store.sqlite3")) as connection:
        status, reason, blob = connection.execute(
            "SELECT status, reason, record FROM turn_records"
        ).fetchone()
    assert (status, reason) == ("failed", "loop_error")
    assert unpack_record(blob)["error"] == "RuntimeError: a bug in routing"
