"""The turn log: what the bot decided for each group message, what it sent and what it cost
(``docs/dashboard.md``), in the SQLite store.

One row of ``turn_records`` per routed group message: the decision (action, reason, rule, score
terms), the bubbles delivered with their sends, the usage the provider reported, and for a turn
that rendered a request, the request itself: every section (id, title, plugin, override,
volatility, size) with its text, the messages sent and where the byte-identical prefix ended.

It is kept compactly. A section's text is stored once in ``turn_texts`` under the hash of its
text, so the static sections that every turn repeats cost one row for the whole store; the rest of
a record is JSON compressed with zlib. ``turn_daily`` keeps the counts and token sums per (bot,
group, local day, status, action, reason), updated with each record, so the groups and spend pages
read a few small rows instead of summing a million.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.store.sqlite import Migration, SQLiteDatabase

__all__ = [
    "TURN_LOG_MIGRATIONS",
    "SQLiteTurnLog",
    "TurnLogEntry",
    "pack_record",
    "text_hash",
    "unpack_record",
]

TURN_LOG_MIGRATIONS = (
    Migration(
        component="turn_log",
        version=1,
        sql="""
        CREATE TABLE turn_records (
            seq INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT,
            time REAL NOT NULL,
            day TEXT NOT NULL,
            status TEXT NOT NULL,
            action TEXT,
            reason TEXT NOT NULL DEFAULT '',
            prompt_tokens INTEGER,
            cached_tokens INTEGER,
            output_tokens INTEGER,
            record BLOB NOT NULL
        );
        CREATE INDEX turn_records_message ON turn_records (bot_id, group_id, message_id);
        CREATE INDEX turn_records_window ON turn_records (bot_id, group_id, time, seq);
        CREATE INDEX turn_records_status ON turn_records (bot_id, group_id, status, time, seq);

        CREATE TABLE turn_texts (
            hash TEXT PRIMARY KEY,
            text TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE turn_daily (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            day TEXT NOT NULL,
            status TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            requests INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            cached_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (bot_id, group_id, day, status, action, reason)
        ) WITHOUT ROWID;
        CREATE INDEX turn_daily_day ON turn_daily (day);
        """,
    ),
)


def text_hash(text: str) -> str:
    """The key of a section text in ``turn_texts``: the first 24 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def pack_record(record: Mapping[str, Any]) -> bytes:
    """A record as stored: compact JSON (a value JSON has no form for is written as its
    ``str``), compressed."""
    return zlib.compress(
        json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"),
        6,
    )


def unpack_record(blob: bytes) -> dict[str, Any]:
    """A stored record, decoded (``{}`` for one that does not decode to an object)."""
    try:
        value = json.loads(zlib.decompress(blob).decode("utf-8"))
    except (zlib.error, UnicodeDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


@attrs.frozen(kw_only=True)
class TurnLogEntry:
    """One turn, ready to be written.

    :param day: the message's local date (``YYYY-MM-DD``) in the bot's time zone: the day the
        daily counts put it in.
    :param requested: the turn sent the model a request (counted in ``requests``).
    :param texts: the section texts the record refers to by hash (hash → text).
    :param record: the rest of the turn, JSON-safe (``docs/dashboard.md`` lists its keys).
    """

    bot_id: str
    group_id: str
    message_id: str | None
    time: float
    day: str
    status: str
    action: str | None
    reason: str
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    requested: bool = False
    texts: Mapping[str, str] = attrs.field(factory=dict)
    record: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.define
class SQLiteTurnLog:
    """Writes :class:`TurnLogEntry` rows into tables ``turn_records``, ``turn_texts`` and
    ``turn_daily`` of an already migrated database (:meth:`promptweave.store.stores.Stores.migrate`).
    """

    database: SQLiteDatabase

    def record(self, entries: Iterable[TurnLogEntry]) -> None:
        """Write ``entries`` in one transaction.

        :raises StoreUnavailableError: the file could not be written.
        """
        with self.database.transaction(store_errors=True) as connection:
            for entry in entries:
                if entry.texts:
                    connection.executemany(
                        "INSERT OR IGNORE INTO turn_texts (hash, text) VALUES (?, ?)",
                        list(entry.texts.items()),
                    )
                connection.execute(
                    "INSERT INTO turn_records (bot_id, group_id, message_id, time, day, status,"
                    " action, reason, prompt_tokens, cached_tokens, output_tokens, record)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        entry.bot_id,
                        entry.group_id,
                        entry.message_id,
                        entry.time,
                        entry.day,
                        entry.status,
                        entry.action,
                        entry.reason,
                        entry.prompt_tokens,
                        entry.cached_tokens,
                        entry.output_tokens,
                        pack_record(entry.record),
                    ),
                )
                connection.execute(
                    "INSERT INTO turn_daily (bot_id, group_id, day, status, action, reason,"
                    " turns, requests, prompt_tokens, cached_tokens, output_tokens)"
                    " VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)"
                    " ON CONFLICT (bot_id, group_id, day, status, action, reason) DO UPDATE SET"
                    " turns = turns + 1, requests = requests + excluded.requests,"
                    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
                    " cached_tokens = cached_tokens + excluded.cached_tokens,"
                    " output_tokens = output_tokens + excluded.output_tokens",
                    (
                        entry.bot_id,
                        entry.group_id,
                        entry.day,
                        entry.status,
                        entry.action or "",
                        entry.reason,
                        int(entry.requested),
                        entry.prompt_tokens or 0,
                        entry.cached_tokens or 0,
                        entry.output_tokens or 0,
                    ),
                )

    def texts(self, hashes: Sequence[str]) -> dict[str, str]:
        """The section texts stored under ``hashes``."""
        if not hashes:
            return {}
        marks = ", ".join("?" * len(hashes))
        rows = (
            self.database.connection()
            .execute(f"SELECT hash, text FROM turn_texts WHERE hash IN ({marks})", tuple(hashes))
            .fetchall()
        )
        return {row[0]: row[1] for row in rows}
