"""The SQLite group log trims a group from the row count its connection keeps, and counts again
whenever another connection has written (``framework/store/row_counts.py``, ``docs/store.md``)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from pathlib import Path

import attrs

from promptweave import ChatMessage
from promptweave.store.sessions import TRIM_BATCH
from promptweave.store.sessions_schema import SESSION_MIGRATIONS
from promptweave.store.sessions_sqlite import SQLiteGroupLog
from promptweave.store.sqlite import SQLiteDatabase

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
WINDOW = 16


def _message(name: str, seconds: float) -> ChatMessage:
    return ChatMessage(id=name, sender_id="3", text=name, time=T0 + dt.timedelta(seconds=seconds))


def _database(path: Path) -> SQLiteDatabase:
    database = SQLiteDatabase(path)
    database.migrate(SESSION_MIGRATIONS)
    return database


def _stored(database: SQLiteDatabase) -> list[str]:
    rows = database.connection().execute(
        "SELECT message_id FROM group_messages WHERE bot_id = 'b' AND group_id = 'g'"
        " ORDER BY time, seq"
    )
    return [row[0] for row in rows]


def test_writes_of_another_connection_are_counted_before_trimming(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    here = SQLiteGroupLog(_database(path), max_per_group=WINDOW)
    there = SQLiteGroupLog(SQLiteDatabase(path), max_per_group=2 * WINDOW)
    for number in range(WINDOW):
        here.append_group_message("b", "g", _message(f"h{number}", number))
    # Another connection, under a wider window, doubles the group; the count this connection
    # kept is stale now, and dropped.
    for number in range(WINDOW, 2 * WINDOW):
        there.append_group_message("b", "g", _message(f"t{number}", number))
    assert len(_stored(here.database)) == 2 * WINDOW
    assert here.append_group_message("b", "g", _message("last", 100))
    assert _stored(here.database) == [f"t{n}" for n in range(WINDOW + 1, 2 * WINDOW)] + ["last"]


def test_group_logs_over_one_database_share_their_counts(tmp_path: Path) -> None:
    wide = SQLiteGroupLog(_database(tmp_path / "log.sqlite3"), max_per_group=2 * WINDOW)
    for number in range(2 * WINDOW):
        wide.append_group_message("b", "g", _message(f"m{number}", number))
    narrow = attrs.evolve(wide, max_per_group=WINDOW)
    other = SQLiteGroupLog(wide.database, max_per_group=WINDOW)
    assert narrow.append_group_message("b", "g", _message("n1", 100))
    assert other.append_group_message("b", "g", _message("n2", 101))
    assert _stored(wide.database) == [f"m{n}" for n in range(WINDOW + 2, 2 * WINDOW)] + [
        "n1",
        "n2",
    ]
    # The wide window counts on from there: nothing is trimmed under it.
    assert wide.append_group_message("b", "g", _message("n3", 102))
    assert len(_stored(wide.database)) == WINDOW + 1
    # Under the narrow one again, an old message is pushed out at once with the oldest of the rest.
    assert not narrow.append_group_message("b", "g", _message("ancient", -1))
    assert _stored(wide.database)[-3:] == ["n1", "n2", "n3"]
    assert len(_stored(wide.database)) == WINDOW


def test_threads_appending_at_once_keep_the_newest_window(tmp_path: Path) -> None:
    log = SQLiteGroupLog(_database(tmp_path / "log.sqlite3"), max_per_group=WINDOW)
    per_thread = 60

    def append(thread: int) -> None:
        for number in range(per_thread):
            seconds = number * 4 + thread  # the threads' messages interleave in time
            log.append_group_message("b", "g", _message(f"{thread}-{number}", seconds))

    workers = [threading.Thread(target=append, args=(thread,)) for thread in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    newest = sorted(
        (
            (number * 4 + thread, f"{thread}-{number}")
            for thread in range(4)
            for number in range(60)
        ),
    )[-WINDOW:]
    assert _stored(log.database) == [name for _, name in newest]


def test_a_database_collected_while_counts_are_taken_does_not_deadlock(tmp_path: Path) -> None:
    from promptweave.store import row_counts as module

    # The garbage collector may finalize another database object while this thread holds the
    # lock in row_counts; that finalizer (_forget) takes the lock again on the same thread.
    with module._COUNTS_LOCK:
        assert module._COUNTS_LOCK.acquire(timeout=1)
        module._COUNTS_LOCK.release()
    database = SQLiteDatabase(tmp_path / "a.sqlite3")
    assert module.row_counts(database, "group_messages") is module.row_counts(
        database, "group_messages"
    )


def test_a_backlog_is_trimmed_in_batches_and_the_kept_window_follows(tmp_path: Path) -> None:
    wide = SQLiteGroupLog(_database(tmp_path / "log.sqlite3"), max_per_group=TRIM_BATCH + 40)
    for number in range(TRIM_BATCH + 40):
        wide.append_group_message("b", "g", _message(f"m{number}", number))
    # A backlog beyond one batch: the first append trims TRIM_BATCH rows, the second the rest.
    narrow = attrs.evolve(wide, max_per_group=WINDOW)
    assert narrow.append_group_message("b", "g", _message("n0", 1000))
    assert len(_stored(wide.database)) == 40 + 1
    assert narrow.append_group_message("b", "g", _message("n1", 1001))
    expected = [f"m{n}" for n in range(TRIM_BATCH + 40 - WINDOW + 2, TRIM_BATCH + 40)]
    assert _stored(wide.database) == [*expected, "n0", "n1"]
    # The timeline read from the kept rows agrees with the file.
    newest = narrow.recent_group_messages("b", "g", until=T0 + dt.timedelta(days=1), limit=WINDOW)
    assert [message.id for message in newest] == _stored(wide.database)
    # Then one row pushed out per append, and a message older than the window is not kept.
    assert narrow.append_group_message("b", "g", _message("n2", 1002))
    assert not narrow.append_group_message("b", "g", _message("ancient", -5))
    assert _stored(wide.database) == [*expected[1:], "n0", "n1", "n2"]


def _model_after(kept: list[tuple[float, int, str]], row: tuple[float, int, str]) -> list[str]:
    """The retention rule itself: the newest WINDOW rows by (time, order of writing)."""
    kept.append(row)
    kept.sort()
    del kept[: max(0, len(kept) - WINDOW)]
    return [name for _, _, name in kept]


def test_the_oldest_rows_kept_for_trimming_follow_every_kind_of_append(tmp_path: Path) -> None:
    """What each append pushes out is taken from the oldest rows the connection kept: messages
    out of time order, duplicates and another connection's writes must leave the same rows as
    the rule."""
    path = tmp_path / "log.sqlite3"
    here = SQLiteGroupLog(_database(path), max_per_group=WINDOW)
    there = SQLiteGroupLog(SQLiteDatabase(path), max_per_group=WINDOW)
    rng = random.Random(7)
    kept: list[tuple[float, int, str]] = []
    for number in range(600):
        # Mostly in order; now and then a late one, sometimes older than the whole window.
        seconds = number if rng.random() < 0.8 else number - rng.choice((3, 10, WINDOW + 5))
        log = there if rng.random() < 0.1 else here
        name = f"m{number}"
        assert log.append_group_message("b", "g", _message(name, seconds)) == (
            name in _model_after(kept, (seconds, number, name))
        )
        if rng.random() < 0.05:  # a duplicate id changes nothing
            assert not log.append_group_message("b", "g", _message(name, seconds))
        assert _stored(here.database) == [name for _, _, name in kept]


def test_a_full_group_that_keeps_talking_reads_its_oldest_rows_once_a_batch(
    tmp_path: Path,
) -> None:
    log = SQLiteGroupLog(_database(tmp_path / "log.sqlite3"), max_per_group=WINDOW)
    for number in range(WINDOW):
        log.append_group_message("b", "g", _message(f"m{number}", number))
    statements: list[str] = []
    log.database.connection().set_trace_callback(statements.append)
    for number in range(WINDOW, WINDOW + 3 * TRIM_BATCH):
        log.append_group_message("b", "g", _message(f"m{number}", number))
    reads = [s for s in statements if s.startswith("SELECT time, seq FROM group_messages")]
    # The group holds WINDOW rows, fewer than a batch: each read takes them all; then one read
    # per WINDOW messages, not one per message.
    assert len(reads) == 3 * TRIM_BATCH // WINDOW
    assert _stored(log.database) == [
        f"m{n}" for n in range(3 * TRIM_BATCH, WINDOW + 3 * TRIM_BATCH)
    ]
