"""What "recorded" promises on SQLite: a write whose call returned survives the writer being
killed (``kill -9``) in the middle of its next one, and the file stays consistent.

Writer processes append to one file as fast as they can, printing the id of each record once its
call returned; the test kills each after a number of acknowledgements, in two rounds, then checks
that every acknowledged record is there and that ``PRAGMA integrity_check`` says ``ok``.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from base_support import ROOT

from promptweave import Config, Promptweave
from promptweave.config import StoreConfig
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.testing import TEST_ENVIRON

WRITERS = 4
ROUNDS = 2

WRITER = """
import datetime as dt
import sys
from pathlib import Path

from promptweave import ChatMessage, SessionTurn
from promptweave.store.sessions_sqlite import SESSION_MIGRATIONS, SQLiteGroupLog, SQLiteSessionStore
from promptweave.store.sqlite import SQLiteDatabase

path, writer, synchronous = sys.argv[1:]
database = SQLiteDatabase(Path(path), synchronous=synchronous)
database.migrate(SESSION_MIGRATIONS)
# Windows wide enough to keep every write: what is checked is loss, not retention.
group_log = SQLiteGroupLog(database, max_per_group=10**9)
sessions = SQLiteSessionStore(database)
start = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
print("ready", flush=True)
number = 0
while True:
    number += 1
    key = f"{writer}-{number}"
    time = start + dt.timedelta(seconds=number)
    message = ChatMessage(id=key, sender_id=writer, text="在吗" * 50, time=time)
    group_log.append_group_message("10001", writer, message)
    turn = SessionTurn(
        bot_id="10001", group_id=writer, user_id=writer, role="user", content=key,
        message_id=key, time=time,
    )
    sessions.append_turns([turn], storage_window=10**9)
    print(key, flush=True)
"""


def _acknowledged(process: subprocess.Popen[str], target: int) -> list[str]:
    """Read ``target`` acknowledgements, kill the writer mid-write, and read those it printed
    before it died."""
    assert process.stdout is not None
    keys = []
    while len(keys) < target:
        line = process.stdout.readline()
        assert line, f"writer ended before {target} writes"
        keys.append(line.strip())
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    keys += [line.strip() for line in process.stdout if line.strip()]
    return keys


def test_every_acknowledged_write_survives_kill_9_and_the_file_stays_consistent(
    tmp_path: Path,
) -> None:
    synchronous = "normal"  # the default, whose promise is a process crash
    path = tmp_path / "killed.sqlite3"
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(13)
    acknowledged: list[str] = []
    for round_number in range(ROUNDS):
        writers = [
            subprocess.Popen(
                [sys.executable, str(script), str(path), f"w{round_number}{n}", synchronous],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for n in range(WRITERS)
        ]
        for process in writers:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in writers:
            acknowledged += _acknowledged(process, rng.randint(20, 80))
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        logged = {row[0] for row in connection.execute("SELECT message_id FROM group_messages")}
        turns = {row[0] for row in connection.execute("SELECT content FROM session_turns")}
    finally:
        connection.close()
    assert len(acknowledged) >= ROUNDS * WRITERS * 20
    assert set(acknowledged) <= logged
    assert set(acknowledged) <= turns


@pytest.mark.parametrize("level", ["off", "normal", "full", "extra"])
def test_the_synchronous_level_is_the_configured_one(tmp_path: Path, level: str) -> None:
    config = Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3"), synchronous=level))
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    try:
        assert runtime.stores.database is not None
        found = runtime.stores.database.connection().execute("PRAGMA synchronous").fetchone()[0]
        journal = runtime.stores.database.connection().execute("PRAGMA journal_mode").fetchone()
    finally:
        runtime.close()
    assert found == ["off", "normal", "full", "extra"].index(level)
    assert journal[0] == "wal"


def test_an_unknown_synchronous_level_is_refused(tmp_path: Path) -> None:
    from promptweave import ConfigError

    config = tmp_path / "promptweave.toml"
    config.write_text('[store]\nsynchronous = "sometimes"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"synchronous must be one of 'off', 'normal'"):
        Config.from_file(config)
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteDatabase(tmp_path / "x.sqlite3", synchronous="sometimes")
