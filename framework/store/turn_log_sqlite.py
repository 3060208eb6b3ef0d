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
import logging
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.store.sqlite import STORE_ERRORS, Migration, SQLiteDatabase

__all__ = [
    "TURN_LOG_MIGRATIONS",
    "SQLiteTurnLog",
    "TurnLogEntry",
    "pack_record",
    "text_hash",
    "unpack_record",
]

log = logging.getLogger("promptweave.store")

#: How long a turn waits in :meth:`SQLiteTurnLog.add`'s queue at most before it is written.
FLUSH_S = 0.5
#: A queue this long is written at once.
FLUSH_BATCH = 256
#: The most turns waiting; beyond it the oldest are dropped (a store that cannot keep up, or
#: cannot be written), and the drop is logged.
MAX_PENDING = 20_000

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


#: The compressor's window (2**14 bytes) and memory level: the output decompresses like any zlib
#: stream and is as small as with zlib's defaults for a record of a few kilobytes, but setting up
#: the compressor takes a tenth of the time (zlib's default state is large enough that each
#: compression maps and unmaps fresh memory), which for a silent turn's short record was most of
#: what writing it cost.
PACK_WBITS, PACK_MEMLEVEL = 14, 6


def pack_record(record: Mapping[str, Any]) -> bytes:
    """A record as stored: compact JSON (a value JSON has no form for is written as its
    ``str``), compressed as a zlib stream (:func:`zlib.decompress` reads it)."""
    data = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    packer = zlib.compressobj(6, zlib.DEFLATED, PACK_WBITS, PACK_MEMLEVEL)
    return packer.compress(data.encode("utf-8")) + packer.flush()


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

    The live loop hands each turn to :meth:`add`, which only queues it: a thread of the turn log
    packs and writes the queue in one transaction every :data:`FLUSH_S` seconds (or at once past
    :data:`FLUSH_BATCH` turns), so a turn pays neither the packing nor a commit of its own.
    :meth:`close` (from :meth:`promptweave.store.stores.Stores.close`) writes what is left.
    """

    database: SQLiteDatabase
    flush_s: float = FLUSH_S
    _pending: list[TurnLogEntry] = attrs.field(factory=list, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _wake: threading.Event = attrs.field(factory=threading.Event, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _dropped: int = attrs.field(default=0, init=False)

    def add(self, entry: TurnLogEntry) -> None:
        """Queue ``entry`` to be written within :attr:`flush_s` seconds. It never raises."""
        with self._lock:
            self._pending.append(entry)
            if len(self._pending) > MAX_PENDING:
                del self._pending[0]
                self._dropped += 1
            if self._thread is None or not self._thread.is_alive():
                self._start()
            if len(self._pending) >= FLUSH_BATCH:
                self._wake.set()

    def flush(self) -> None:
        """Write what is queued, on the caller's thread.

        :raises StoreUnavailableError: the file could not be written (what was queued is lost).
        """
        with self._lock:
            entries, self._pending = self._pending, []
            dropped, self._dropped = self._dropped, 0
        if dropped:
            log.warning("turn log: %d turns dropped, the store did not keep up", dropped)
        if entries:
            self.record(entries)

    def close(self) -> None:
        """Stop the writing thread and write what is left; a failure is logged."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._stopping = False
        try:
            self.flush()
        except STORE_ERRORS as exc:
            log.warning("turn log: the last turns were not written: %s", exc)

    def _start(self) -> None:
        self._stopping = False
        self._wake.clear()
        thread = threading.Thread(target=self._run, name="promptweave-turn-log", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:
            log.warning("turn log: no thread to write it (%s); written at close", exc)
            return
        self._thread = thread

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.flush()
            except STORE_ERRORS as exc:
                log.warning("turn log: turns not written: %s", exc)

    def record(self, entries: Iterable[TurnLogEntry]) -> None:
        """Write ``entries`` in one transaction: their records, their section texts not yet
        kept, and their daily counts summed per row of ``turn_daily`` (one update a row).

        :raises StoreUnavailableError: the file could not be written.
        """
        texts: dict[str, str] = {}
        rows = []
        daily: dict[tuple[str, str, str, str, str, str], list[int]] = {}
        for entry in entries:
            texts.update(entry.texts)
            rows.append(
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
                )
            )
            key = (
                entry.bot_id,
                entry.group_id,
                entry.day,
                entry.status,
                entry.action or "",
                entry.reason,
            )
            sums = daily.setdefault(key, [0, 0, 0, 0, 0])
            sums[0] += 1
            sums[1] += int(entry.requested)
            sums[2] += entry.prompt_tokens or 0
            sums[3] += entry.cached_tokens or 0
            sums[4] += entry.output_tokens or 0
        with self.database.transaction(store_errors=True) as connection:
            if texts:
                connection.executemany(
                    "INSERT OR IGNORE INTO turn_texts (hash, text) VALUES (?, ?)",
                    list(texts.items()),
                )
            connection.executemany(
                "INSERT INTO turn_records (bot_id, group_id, message_id, time, day, status,"
                " action, reason, prompt_tokens, cached_tokens, output_tokens, record)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            connection.executemany(
                "INSERT INTO turn_daily (bot_id, group_id, day, status, action, reason,"
                " turns, requests, prompt_tokens, cached_tokens, output_tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (bot_id, group_id, day, status, action, reason) DO UPDATE SET"
                " turns = turns + excluded.turns, requests = requests + excluded.requests,"
                " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
                " cached_tokens = cached_tokens + excluded.cached_tokens,"
                " output_tokens = output_tokens + excluded.output_tokens",
                [(*key, *sums) for key, sums in daily.items()],
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
