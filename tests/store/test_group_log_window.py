"""The SQLite group log serves timeline reads from the group's newest rows as its connection last
left them: it brings them up to date on its own appends and reads them again whenever another
connection has committed (``framework/store/sessions_sqlite.py``, ``framework/store/row_counts.py``)."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from promptweave import ChatMessage
from promptweave.store import sessions_sqlite
from promptweave.store.sessions_schema import SESSION_MIGRATIONS
from promptweave.store.sessions_sqlite import GROUP_WINDOW_KEPT, SQLiteGroupLog
from promptweave.store.sqlite import SQLiteDatabase

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
EAST = dt.timezone(dt.timedelta(hours=8))


def _message(name: str | None, seconds: float, **fields: object) -> ChatMessage:
    return ChatMessage(
        id=name,
        sender_id="3",
        text=f"text {name}",
        time=T0 + dt.timedelta(seconds=seconds),
        **fields,  # type: ignore[arg-type]
    )


def _database(path: Path) -> SQLiteDatabase:
    database = SQLiteDatabase(path)
    database.migrate(SESSION_MIGRATIONS)
    return database


def _stored(path: Path, group: str, until: dt.datetime, limit: int) -> list[ChatMessage]:
    """The window as the SQL query alone gives it, on a connection of its own."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT message_id, sender_id, sender_name, text, reply_to, images, addressed, time,"
            " utc_offset FROM group_messages WHERE bot_id = 'b' AND group_id = ? AND time <= ?"
            " ORDER BY time DESC, seq DESC LIMIT ?",
            (group, until.timestamp(), limit),
        ).fetchall()
    finally:
        connection.close()
    return [sessions_sqlite._message(tuple(row)) for row in reversed(rows)]


def test_messages_appended_by_another_connection_are_read(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    here = SQLiteGroupLog(_database(path))
    there = SQLiteGroupLog(SQLiteDatabase(path))
    end = T0 + dt.timedelta(days=1)
    here.append_group_message("b", "g", _message("h1", 1))
    assert [m.id for m in here.recent_group_messages("b", "g", until=end, limit=4)] == ["h1"]
    there.append_group_message("b", "g", _message("t2", 2))
    there.append_group_message("b", "g", _message("t0", 0))
    assert [m.id for m in here.recent_group_messages("b", "g", until=end, limit=4)] == [
        "t0",
        "h1",
        "t2",
    ]


@pytest.mark.parametrize("kept", [GROUP_WINDOW_KEPT, 40])
def test_appends_through_the_same_connection_keep_the_window_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    # Two logs over one database object share the connection of a thread (its PRAGMA
    # data_version does not move for its own commits), and a window small enough to trim; kept
    # past that window, the rows the trimming deletes are among those kept.
    monkeypatch.setattr(sessions_sqlite, "GROUP_WINDOW_KEPT", kept)
    path = tmp_path / "log.sqlite3"
    database = _database(path)
    logs = [SQLiteGroupLog(database, max_per_group=16), SQLiteGroupLog(database, max_per_group=20)]
    rng = random.Random(5)
    for number in range(400):
        log = rng.choice(logs)
        group = rng.choice(("g", "h"))
        seconds = number - rng.choice((0, 0, 0, 1, 3, 30))  # now and then late, or at once
        name = None if rng.random() < 0.05 else f"m{rng.randrange(number + 1)}"  # repeats
        fields: dict[str, object] = {}
        if rng.random() < 0.2:
            fields["images"] = (f"https://example.org/{number}.png",)
        if rng.random() < 0.2:
            fields["reply_to"] = f"m{rng.randrange(number + 1)}"
        if rng.random() < 0.2:
            fields["addressed"] = True
        message = _message(name, seconds, **fields)
        if rng.random() < 0.3:
            message = ChatMessage(
                id=name, sender_id="4", text="东八区", time=message.time.astimezone(EAST)
            )
        log.append_group_message("b", group, message)
        until = T0 + dt.timedelta(seconds=number - rng.choice((0, 0, 2, 10)))
        limit = rng.choice((1, 5, 9, 16, kept, kept + 4))
        reader = rng.choice(logs)
        assert reader.recent_group_messages("b", group, until=until, limit=limit) == _stored(
            path, group, until, limit
        ), number


def test_a_message_older_than_the_kept_window_is_found_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    log = SQLiteGroupLog(_database(path))
    for number in range(GROUP_WINDOW_KEPT + 8):
        log.append_group_message("b", "g", _message(f"m{number}", number * 10))
    end = T0 + dt.timedelta(days=1)
    assert len(log.recent_group_messages("b", "g", until=end, limit=4)) == 4
    # Older than every kept row: not kept, but read from the file when asked for.
    log.append_group_message("b", "g", _message("early", 5))
    before = T0 + dt.timedelta(seconds=25)
    assert [m.id for m in log.recent_group_messages("b", "g", until=before, limit=4)] == [
        "m0",
        "early",
        "m1",
        "m2",
    ]
    assert log.recent_group_messages("b", "g", until=end, limit=9) == _stored(path, "g", end, 9)


def test_a_value_the_file_gives_back_otherwise_is_read_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    log = SQLiteGroupLog(_database(path))
    end = T0 + dt.timedelta(days=1)
    log.append_group_message("b", "g", _message("m1", 1))
    log.recent_group_messages("b", "g", until=end, limit=4)  # the window, kept
    # A sender id given as a number is stored as text (the column's affinity).
    odd = ChatMessage(id="m2", sender_id=42, text="数字", time=T0 + dt.timedelta(seconds=2))  # type: ignore[arg-type]
    log.append_group_message("b", "g", odd)
    found = log.recent_group_messages("b", "g", until=end, limit=4)
    assert [m.sender_id for m in found] == ["3", "42"]
    assert found == _stored(path, "g", end, 4)


def test_limits_past_the_kept_window_read_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.sqlite3"
    log = SQLiteGroupLog(_database(path))
    for number in range(40):
        log.append_group_message("b", "g", _message(f"m{number}", number))
    end = T0 + dt.timedelta(days=1)
    log.recent_group_messages("b", "g", until=end, limit=4)
    reads: list[str] = []
    log.database.connection().set_trace_callback(reads.append)
    assert log.recent_group_messages("b", "g", until=end, limit=4) == _stored(path, "g", end, 4)
    assert not [s for s in reads if s.startswith("SELECT")]
    assert log.recent_group_messages("b", "g", until=end, limit=30) == _stored(path, "g", end, 30)
    assert [s for s in reads if s.startswith("SELECT")]
    assert log.recent_group_messages("b", "g", until=end, limit=0) == []


def test_threads_appending_at_once_read_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    log = SQLiteGroupLog(_database(path), max_per_group=16)
    end = T0 + dt.timedelta(days=1)
    failures: list[str] = []

    def append(thread: int) -> None:
        for number in range(50):
            log.append_group_message("b", "g", _message(f"{thread}-{number}", number * 4 + thread))
            found = log.recent_group_messages("b", "g", until=end, limit=9)
            times = [(m.time, m.id) for m in found]
            if times != sorted(times) or len(found) != min(9, len({m.id for m in found})):
                failures.append(f"{thread}-{number}")

    workers = [threading.Thread(target=append, args=(thread,)) for thread in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures
    assert log.recent_group_messages("b", "g", until=end, limit=9) == _stored(path, "g", end, 9)


def test_learners_reading_the_same_rows_share_their_messages_until_a_row_changes(
    tmp_path: Path,
) -> None:
    database = _database(tmp_path / "log.sqlite3")
    log = SQLiteGroupLog(database)
    for number in range(5):
        log.append_group_message("b", "g", _message(f"m{number}", number))
    first = log.messages_after("b", "g", 0, limit=10)
    # Another learner, on another thread, reads the same batch: the same objects.
    found: list[object] = []
    reader = threading.Thread(
        target=lambda: found.extend(log.messages_after("b", "g", 0, limit=10))
    )
    reader.start()
    reader.join()
    assert [a is b for a, b in zip(first, found, strict=True)] == [True] * 5
    assert [m.message for m in first] == [_message(f"m{n}", n) for n in range(5)]
    # A row changed in the file (another process) is read as it now is.
    with closing(sqlite3.connect(tmp_path / "log.sqlite3")) as other:
        other.execute("UPDATE group_messages SET text = 'edited' WHERE message_id = 'm2'")
        other.commit()
    again = log.messages_after("b", "g", 0, limit=10)
    assert [m.message.text for m in again] == ["text m0", "text m1", "edited", "text m3", "text m4"]
    assert again[0] is first[0] and again[2] is not first[2]
    database.close()
