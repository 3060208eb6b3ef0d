"""What every connection of the embedded SQLite store is opened with (``docs/store.md``,
"Several processes")."""

from __future__ import annotations

from pathlib import Path

from framework.store.sqlite import BUSY_TIMEOUT_MS, WAL_AUTOCHECKPOINT_PAGES, SQLiteDatabase


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
