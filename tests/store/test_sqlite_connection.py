"""What every connection of the embedded SQLite store is opened with (``docs/store.md``,
"Several processes")."""

from __future__ import annotations

import gc
import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from promptweave.store import sqlite
from promptweave.store.sqlite import BUSY_TIMEOUT_MS, WAL_AUTOCHECKPOINT_PAGES, SQLiteDatabase


def test_a_connection_writes_ahead_and_checkpoints_a_large_log_without_syncing_commits(
    tmp_path: Path,
) -> None:
    connection = SQLiteDatabase(tmp_path / "s.sqlite3").connection()

    def pragma(name: str) -> object:
        return connection.execute(f"PRAGMA {name}").fetchone()[0]

    assert pragma("journal_mode") == "wal"
    assert pragma("synchronous") == 1  # NORMAL: a checkpoint syncs, a commit does not
    assert pragma("wal_autocheckpoint") == WAL_AUTOCHECKPOINT_PAGES == 10_000
    assert pragma("busy_timeout") == BUSY_TIMEOUT_MS


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sqlite-checkpoint checkpointed.sqlite3"]


def _commit_rows(database: SQLiteDatabase, count: int) -> None:
    for _ in range(count):
        with database.transaction() as connection:
            connection.execute("INSERT INTO t (payload) VALUES (randomblob(3000))")


def test_a_thread_of_its_own_checkpoints_the_log_every_so_many_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY_COMMITS", 20)
    # The automatic checkpoint would copy the pages itself: out of the way.
    monkeypatch.setattr(sqlite, "WAL_AUTOCHECKPOINT_PAGES", 100_000)
    path = tmp_path / "checkpointed.sqlite3"
    database = SQLiteDatabase(path)
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")
    before = path.stat().st_size
    _commit_rows(database, 18)
    # Nothing is copied into the database file before a checkpoint: the rows are in the log.
    assert path.stat().st_size == before
    assert not _checkpoint_threads()
    _commit_rows(database, 1)  # the 20th commit, counting the table's
    deadline = time.monotonic() + 30
    while path.stat().st_size == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.stat().st_size > before + 18 * 3000
    assert [t.daemon for t in _checkpoint_threads()] == [True]
    # Closing stops it; more commits start it again.
    database.close()
    assert not _checkpoint_threads()
    _commit_rows(database, 20)
    assert len(_checkpoint_threads()) == 1
    # A database object collected stops its thread too.
    del database, connection
    gc.collect()
    assert not _checkpoint_threads()


def test_a_failing_checkpoint_is_logged_and_the_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY_COMMITS", 5)
    path = tmp_path / "s.sqlite3"
    database = SQLiteDatabase(path)
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")
    locked = False

    def refuse(*_args: object, **_kwargs: object) -> sqlite3.Connection:
        nonlocal locked
        locked = True
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite.sqlite3, "connect", refuse)
    with caplog.at_level(logging.WARNING, logger="promptweave.store"):
        _commit_rows(database, 4)
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.01)
    assert locked
    assert "cannot open" in caplog.text and "to checkpoint it" in caplog.text
    _commit_rows(database, 1)
    assert database.connection().execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5
    database.close()


def test_the_checkpoint_thread_opens_the_file_the_database_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative path means the working directory of the moment the database object is made;
    # the thread, started later, neither follows a change of directory nor creates a file.
    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY_COMMITS", 3)
    monkeypatch.setattr(sqlite, "WAL_AUTOCHECKPOINT_PAGES", 100_000)
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    database = SQLiteDatabase("checkpointed.sqlite3")
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")
    before = (tmp_path / "here" / "checkpointed.sqlite3").stat().st_size
    monkeypatch.chdir(tmp_path / "elsewhere")
    _commit_rows(database, 2)
    deadline = time.monotonic() + 30
    path = tmp_path / "here" / "checkpointed.sqlite3"
    while path.stat().st_size == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.stat().st_size > before
    database.close()
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_checkpoint_thread_that_cannot_start_costs_the_commit_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY_COMMITS", 3)
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")

    def refuse(_thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with caplog.at_level(logging.WARNING, logger="promptweave.store"):
        _commit_rows(database, 5)  # the third commit asks for a checkpoint, the others go on
    assert "cannot start a thread to checkpoint" in caplog.text
    assert database.connection().execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5
    database.close()


def _other_thread_connection(
    database: SQLiteDatabase, end_read: threading.Event, done: threading.Event
) -> threading.Thread:
    """A thread that opens its own connection and reads in a read transaction until
    ``end_read`` is set, then holds the connection open, outside any transaction, until ``done``
    is set."""
    opened, ended = threading.Event(), threading.Event()

    def hold() -> None:
        connection = database.connection()
        connection.execute("BEGIN")
        connection.execute("SELECT COUNT(*) FROM t").fetchone()
        opened.set()
        end_read.wait(30)
        connection.execute("COMMIT")
        ended.set()
        done.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert opened.wait(30)
    thread.ended = ended  # type: ignore[attr-defined]
    return thread


def test_closing_leaves_the_whole_store_in_the_file_while_another_connection_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "WAL_AUTOCHECKPOINT_PAGES", 100_000)
    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY_COMMITS", 100_000)
    path = tmp_path / "closed.sqlite3"
    database = SQLiteDatabase(path)
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")
    _commit_rows(database, 40)
    end_read, done = threading.Event(), threading.Event()
    other = _other_thread_connection(database, end_read, done)
    end_read.set()  # the other thread's read ends; its connection stays open
    assert other.ended.wait(30)  # type: ignore[attr-defined]
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 40 * 3000  # the rows are in the log before the close
    database.close()
    assert wal.stat().st_size == 0
    copy = tmp_path / "copy.sqlite3"
    copy.write_bytes(path.read_bytes())  # the file alone, without its log
    with sqlite3.connect(copy) as reader:
        assert reader.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 40
    done.set()
    other.join(30)


def test_a_reader_of_another_thread_does_not_hold_the_close_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite, "WAL_AUTOCHECKPOINT_PAGES", 100_000)
    path = tmp_path / "read.sqlite3"
    database = SQLiteDatabase(path)
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (payload BLOB)")
    end_read, done = threading.Event(), threading.Event()
    other = _other_thread_connection(database, end_read, done)  # reads the file before the rows
    _commit_rows(database, 5)
    started = time.monotonic()
    assert database.checkpoint_all() is False  # the reader still needs the log
    # without waiting for the reader: the busy timeout is 10 s
    assert time.monotonic() - started < BUSY_TIMEOUT_MS / 1000 / 2
    database.close()
    assert database.connection().execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5
    assert database.connection().execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    end_read.set()
    done.set()
    other.join(30)
