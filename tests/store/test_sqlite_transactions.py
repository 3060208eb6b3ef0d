"""Transactions inside transactions, and read transactions, of the embedded SQLite store
(``docs/store.md``, "One commit for a message")."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptweave.store.row_counts import row_counts
from promptweave.store.sqlite import SQLiteDatabase, StoreUnavailableError


@pytest.fixture
def database(tmp_path: Path) -> SQLiteDatabase:
    database = SQLiteDatabase(tmp_path / "t.sqlite3")
    with database.transaction() as connection:
        connection.execute("CREATE TABLE t (value TEXT)")
    return database


def _values(database: SQLiteDatabase) -> list[str]:
    other = SQLiteDatabase(database.path).connection()  # what another process sees
    return [row[0] for row in other.execute("SELECT value FROM t ORDER BY rowid")]


def _commits(database: SQLiteDatabase) -> list[str]:
    statements: list[str] = []
    database.connection().set_trace_callback(statements.append)
    return statements


def test_a_transaction_inside_another_is_committed_with_it(database: SQLiteDatabase) -> None:
    statements = _commits(database)
    with database.transaction() as outer:
        outer.execute("INSERT INTO t VALUES ('a')")
        with database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('b')")
        # Released, not committed: another connection sees nothing yet.
        assert _values(database) == []
    assert _values(database) == ["a", "b"]
    assert statements.count("COMMIT") == 1
    assert statements.count("BEGIN IMMEDIATE") == 1


def test_a_failing_inner_transaction_takes_back_its_own_writes_alone(
    database: SQLiteDatabase,
) -> None:
    with database.transaction() as outer:
        outer.execute("INSERT INTO t VALUES ('kept')")
        with pytest.raises(ValueError), database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('taken back')")
            raise ValueError("the inner write failed")
        outer.execute("INSERT INTO t VALUES ('after')")
    assert _values(database) == ["kept", "after"]


def test_an_inner_sqlite_error_becomes_a_store_error_when_asked(database: SQLiteDatabase) -> None:
    with database.transaction() as outer:
        outer.execute("INSERT INTO t VALUES ('kept')")
        with (
            pytest.raises(StoreUnavailableError, match="no such table"),
            database.transaction(store_errors=True) as inner,
        ):
            inner.execute("INSERT INTO missing VALUES (1)")
    assert _values(database) == ["kept"]


def test_what_a_store_kept_is_dropped_when_the_outer_transaction_rolls_back(
    database: SQLiteDatabase,
) -> None:
    counts = row_counts(database, "t")
    with pytest.raises(RuntimeError), database.transaction() as outer:
        with database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('a')")
        # The inner write is over: a store keeps what it wrote...
        counts.current(outer)["group"] = 1
        raise RuntimeError("...but the outer transaction fails")
    assert _values(database) == []
    # ...and the rollback makes the connection forget it.
    assert "group" not in counts.current(database.connection())


def test_data_version_is_read_once_per_write_transaction(database: SQLiteDatabase) -> None:
    statements = _commits(database)
    with database.transaction() as connection:
        first = connection.data_version()
        assert connection.data_version() == first
    assert statements.count("PRAGMA data_version") == 1
    connection = database.connection()
    connection.data_version()
    connection.data_version()
    # Outside a transaction every read asks again: another connection may have committed.
    assert statements.count("PRAGMA data_version") == 3


def test_reads_inside_reading_see_one_moment(database: SQLiteDatabase) -> None:
    other = SQLiteDatabase(database.path)
    connection = database.connection()
    with database.reading():
        before = connection.data_version()
        assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
        with other.transaction() as writer:
            writer.execute("INSERT INTO t VALUES ('meanwhile')")
        assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
        assert connection.data_version() == before
    assert not connection.in_transaction
    assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
    assert connection.data_version() != before


def test_a_write_inside_reading_starts_from_the_newest_data(database: SQLiteDatabase) -> None:
    other = SQLiteDatabase(database.path)
    connection = database.connection()
    with database.reading():
        assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
        with other.transaction() as writer:
            writer.execute("INSERT INTO t VALUES ('first')")
        # The read transaction would make this write fail (its snapshot is stale); the write
        # ends it and goes through, on top of the other connection's row.
        with database.transaction() as mine:
            assert mine.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
            mine.execute("INSERT INTO t VALUES ('second')")
        assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2
    assert not connection.in_transaction
    assert _values(database) == ["first", "second"]


def test_reading_inside_a_write_transaction_changes_nothing(database: SQLiteDatabase) -> None:
    with database.transaction() as connection:
        connection.execute("INSERT INTO t VALUES ('a')")
        with database.reading():
            assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
        assert connection.in_transaction  # still the write transaction
    assert _values(database) == ["a"]


def test_reading_a_file_that_cannot_be_opened_leaves_the_error_to_the_reads(
    tmp_path: Path,
) -> None:
    database = SQLiteDatabase(tmp_path / "missing" / "t.sqlite3")
    # No error from reading() itself: a read transaction is only a saving.
    with database.reading(), pytest.raises(StoreUnavailableError, match="cannot open"):
        database.connection()


def test_parts_of_a_transaction_without_savepoints_join_it_as_they_are(
    database: SQLiteDatabase,
) -> None:
    statements = _commits(database)
    with database.transaction(savepoints=False) as outer:
        outer.execute("INSERT INTO t VALUES ('a')")
        with database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('b')")
    assert _values(database) == ["a", "b"]
    assert not [s for s in statements if "SAVEPOINT" in s or "RELEASE" in s]
    assert statements.count("COMMIT") == 1


def test_a_failing_part_without_savepoints_fails_the_whole_transaction(
    database: SQLiteDatabase,
) -> None:
    counts = row_counts(database, "t")
    with pytest.raises(ValueError), database.transaction(savepoints=False) as outer:
        outer.execute("INSERT INTO t VALUES ('a')")
        counts.current(outer)["group"] = 1
        with database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('b')")
            raise ValueError("the part failed")
    assert _values(database) == []
    assert "group" not in counts.current(database.connection())
    # The next transaction of the connection has savepoints again.
    with database.transaction() as outer:
        outer.execute("INSERT INTO t VALUES ('c')")
        with pytest.raises(ValueError), database.transaction() as inner:
            inner.execute("INSERT INTO t VALUES ('d')")
            raise ValueError("this part alone")
    assert _values(database) == ["c"]
