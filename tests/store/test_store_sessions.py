"""What only one conversational store backend does: the in-memory stores' isolation, the SQLite
schema and its index use, and the defaults the runtime builds them with.

What every backend does is the store contract, ``tests/store_contract.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from base_support import T0

from promptweave import ChatMessage, Config, Stores
from promptweave.store.sessions import BOT_REPLY_MAX_ENTRIES, BOT_REPLY_TTL_S
from promptweave.store.sessions_memory import MemoryBotReplyContext
from promptweave.store.sessions_sqlite import SESSION_MIGRATIONS, SQLiteGroupLog
from promptweave.store.sqlite import SQLiteDatabase


def test_the_runtime_builds_the_bot_reply_context_with_the_store_defaults() -> None:
    session = Config().session
    assert (session.bot_reply_ttl_s, session.bot_reply_max_entries) == (
        BOT_REPLY_TTL_S,
        BOT_REPLY_MAX_ENTRIES,
    )
    context = Stores.in_memory(Config()).bot_replies
    assert isinstance(context, MemoryBotReplyContext)
    assert (context.ttl_s, context.max_entries) == (BOT_REPLY_TTL_S, BOT_REPLY_MAX_ENTRIES)


def test_two_memory_stores_share_nothing() -> None:
    first, second = Stores.in_memory(), Stores.in_memory()
    assert first.group_log is not None and second.group_log is not None
    first.group_log.append_group_message(
        "10001", "20001", ChatMessage(id="1", sender_id="1", text="只在第一个", time=T0)
    )
    assert (
        second.group_log.recent_group_messages(
            "10001", "20001", until=T0 + dt.timedelta(minutes=1), limit=5
        )
        == []
    )


def test_sqlite_migration_is_recorded_and_applied_once(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    assert database.migrate(SESSION_MIGRATIONS) == [
        ("sessions", 1),
        ("sessions", 2),
        ("sessions", 3),
    ]
    assert database.migrate(SESSION_MIGRATIONS) == []
    assert database.schema_version("sessions") == 3


def test_a_version_1_store_gains_the_usage_column_and_keeps_its_rows(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    assert database.migrate(SESSION_MIGRATIONS[:1]) == [("sessions", 1)]
    with database.transaction() as connection:
        connection.execute(
            "INSERT INTO session_turns (bot_id, group_id, user_id, role, kind, content, images,"
            " time, utc_offset) VALUES ('10001', '20001', '30022', 'user', 'turn', '早', '[]', 0, 0)"
        )
    assert database.migrate(SESSION_MIGRATIONS) == [("sessions", 2), ("sessions", 3)]
    row = database.connection().execute("SELECT content, usage FROM session_turns").fetchone()
    assert (row["content"], row["usage"]) == ("早", None)


def _schema(database: SQLiteDatabase, table: str) -> list[str]:
    """The table's own statement and its indexes', as SQLite keeps them."""
    rows = database.connection().execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY name",
        (table,),
    )
    return [row[0] for row in rows]


def test_a_version_2_group_log_keeps_its_rows_and_seq_without_autoincrement(
    tmp_path: Path,
) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    assert database.migrate(SESSION_MIGRATIONS[:2]) == [("sessions", 1), ("sessions", 2)]
    assert "AUTOINCREMENT" in _schema(database, "group_messages")[0]
    log = SQLiteGroupLog(database)
    for number in range(5):
        log.append_group_message(
            "10001",
            "20001",
            ChatMessage(
                id=f"m{number}",
                sender_id="30022",
                text=f"第{number}条",
                time=T0 + dt.timedelta(seconds=number),
                images=("https://example.org/a.png",) if number == 2 else (),
            ),
        )
    select = "SELECT * FROM group_messages ORDER BY seq"
    before = [tuple(row) for row in database.connection().execute(select)]
    assert database.migrate(SESSION_MIGRATIONS) == [("sessions", 3)]
    assert [tuple(row) for row in database.connection().execute(select)] == before
    schema = _schema(database, "group_messages")
    assert "AUTOINCREMENT" not in schema[0]
    assert any("group_messages_window" in sql for sql in schema)
    assert any("UNIQUE INDEX group_messages_message" in sql for sql in schema)
    # A new row follows the largest seq, and a repeated message id is still refused.
    fresh = SQLiteGroupLog(database)
    message = ChatMessage(id="m5", sender_id="30022", text="新", time=T0 + dt.timedelta(seconds=9))
    assert fresh.append_group_message("10001", "20001", message)
    assert not fresh.append_group_message("10001", "20001", message)
    seqs = [row[0] for row in database.connection().execute("SELECT seq FROM group_messages")]
    assert seqs == [*(row[0] for row in before), before[-1][0] + 1]
    assert [
        m.id
        for m in fresh.recent_group_messages(
            "10001", "20001", until=T0 + dt.timedelta(minutes=1), limit=9
        )
    ] == ["m0", "m1", "m2", "m3", "m4", "m5"]


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (
            "SELECT * FROM group_messages WHERE bot_id = ? AND group_id = ? AND time <= ?"
            " ORDER BY time DESC, seq DESC LIMIT 9",
            "group_messages_window",
        ),
        (
            "SELECT * FROM group_messages WHERE bot_id = ? AND group_id = ? AND message_id = ?",
            "group_messages_message",
        ),
        (
            "SELECT * FROM session_turns WHERE bot_id = ? AND group_id = ? AND user_id = ?"
            " AND time <= ? AND time >= ? ORDER BY time DESC, seq DESC LIMIT 19",
            "session_turns_user",
        ),
        (
            "SELECT * FROM session_turns WHERE bot_id = ? AND group_id = ? AND kind = 'turn'"
            " AND time <= ? AND time >= ? ORDER BY time DESC, seq DESC LIMIT 9",
            "session_turns_group",
        ),
    ],
)
def test_window_reads_are_index_range_scans(tmp_path: Path, sql: str, index: str) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    database.migrate(SESSION_MIGRATIONS)
    params = [None] * sql.count("?")
    plan = " ".join(
        str(row[3]) for row in database.connection().execute(f"EXPLAIN QUERY PLAN {sql}", params)
    )
    assert f"USING INDEX {index}" in plan
    assert "TEMP B-TREE" not in plan  # no sort over the matching rows
