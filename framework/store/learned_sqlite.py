"""The learned store in the shared SQLite file (component ``learning``, ``docs/learning.md``).

:class:`SQLiteLearnedStore` keeps what :class:`promptweave.store.learned.LearnedStore` describes
in five tables (schema: ``docs/store.md``). What it keeps and evicts is decided by the rules of
:mod:`promptweave.store.learned` (:func:`~promptweave.store.learned.merge_item`,
:func:`~promptweave.store.learned.eviction_order`), as in memory; every change is one
``BEGIN IMMEDIATE`` transaction that reads the rows it decides on, so several bot processes
sharing the file learn, claim leases and move cursors without losing or doubling anything.
Times are UTC epoch seconds plus the original UTC offset, as in the sessions tables.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import attrs

from promptweave._dates import from_timestamp
from promptweave.store.learned import (
    LEASE_S,
    DeliveredInjection,
    LearnedItem,
    LearnerCursor,
    PutResult,
    beyond_cap,
    merge_item,
)
from promptweave.store.learned_memory import sorted_items
from promptweave.store.sqlite import (
    Connection,
    Migration,
    SQLiteDatabase,
    StoreUnavailableError,
)

__all__ = ["LEARNED_MIGRATIONS", "SQLiteLearnedStore"]

LEARNED_MIGRATIONS = (
    Migration(
        component="learning",
        version=1,
        sql="""
        CREATE TABLE learned_items (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            user_id TEXT NOT NULL DEFAULT '',
            fields TEXT NOT NULL DEFAULT '{}',
            source_message_ids TEXT NOT NULL DEFAULT '[]',
            count INTEGER NOT NULL DEFAULT 1,
            learner TEXT NOT NULL DEFAULT '',
            learned_at REAL NOT NULL,
            learned_offset INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            updated_offset INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (bot_id, group_id, kind, key)
        ) WITHOUT ROWID;

        CREATE TABLE learned_forgotten (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            message_ids TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (bot_id, group_id, kind, key)
        ) WITHOUT ROWID;

        CREATE TABLE learner_cursors (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            learner TEXT NOT NULL,
            position INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT '{}',
            updated_at REAL,
            updated_offset INTEGER NOT NULL DEFAULT 0,
            lease_holder TEXT,
            lease_until REAL,
            PRIMARY KEY (bot_id, group_id, learner)
        ) WITHOUT ROWID;

        CREATE TABLE learned_injections (
            seq INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            text TEXT NOT NULL,
            answering TEXT,
            sources TEXT NOT NULL DEFAULT '[]',
            delivered_at REAL NOT NULL,
            delivered_offset INTEGER NOT NULL DEFAULT 0
        );
        CREATE UNIQUE INDEX learned_injections_message
            ON learned_injections (bot_id, group_id, message_id);
        CREATE INDEX learned_injections_scope ON learned_injections (bot_id, group_id, seq);

        CREATE TABLE learned_versions (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (bot_id, group_id)
        ) WITHOUT ROWID;
        """,
    ),
)

#: The columns :func:`_item` reads, in its order.
_ITEM_COLUMNS = (
    "kind, bot_id, group_id, key, user_id, fields, source_message_ids, count, learner,"
    " learned_at, learned_offset, updated_at, updated_offset"
)


def _stamp(value: dt.datetime) -> tuple[float, int]:
    offset = value.utcoffset() or dt.timedelta(0)
    return value.timestamp(), int(offset.total_seconds())


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _item(row: Sequence[Any]) -> LearnedItem:
    (
        kind,
        bot_id,
        group_id,
        key,
        user_id,
        fields,
        ids,
        count,
        learner,
        learned_at,
        learned_offset,
        updated_at,
        updated_offset,
    ) = row
    return LearnedItem(
        kind=kind,
        bot_id=bot_id,
        group_id=group_id,
        key=key,
        user_id=user_id,
        fields=json.loads(fields),
        source_message_ids=tuple(json.loads(ids)),
        count=count,
        learner=learner,
        learned_at=from_timestamp(learned_at, learned_offset),
        updated_at=from_timestamp(updated_at, updated_offset),
    )


def _item_values(item: LearnedItem) -> tuple[Any, ...]:
    """The values of :data:`_ITEM_COLUMNS` for ``item``."""
    learned_at, learned_offset = _stamp(item.learned_at)
    updated_at, updated_offset = _stamp(item.updated_at or item.learned_at)
    return (
        item.kind,
        item.bot_id,
        item.group_id,
        item.key,
        item.user_id,
        _dumps(dict(item.fields)),
        _dumps(list(item.source_message_ids)),
        item.count,
        item.learner,
        learned_at,
        learned_offset,
        updated_at,
        updated_offset,
    )


def _bump(connection: sqlite3.Connection, scope: tuple[str, str], by: int = 1) -> None:
    connection.execute(
        "INSERT INTO learned_versions (bot_id, group_id, version) VALUES (?, ?, ?)"
        " ON CONFLICT (bot_id, group_id) DO UPDATE SET version = version + excluded.version",
        (*scope, by),
    )


@attrs.define
class SQLiteLearnedStore:
    """:class:`promptweave.store.learned.LearnedStore` in tables ``learned_items``,
    ``learned_forgotten``, ``learner_cursors``, ``learned_injections`` and ``learned_versions``.

    :meth:`promptweave.store.stores.Stores.migrate` creates the tables when the stores open the
    file; a store over a database that has not been through it creates them on first use.
    A lease is a column pair of the learner's cursor row: a row with a lease and no saved
    cursor (``updated_at`` ``NULL``) reads as the default cursor and does not make its scope
    one of :meth:`scopes`, as in memory.
    """

    #: Every read is one indexed query of one scope.
    blocking_reads: ClassVar[bool] = False

    _database: SQLiteDatabase = attrs.field(alias="database")
    _migrated: bool = attrs.field(default=False, init=False)

    @property
    def database(self) -> SQLiteDatabase:
        if not self._migrated:
            self._database.migrate(LEARNED_MIGRATIONS)
            self._migrated = True
        return self._database

    def _write(self) -> AbstractContextManager[Connection]:
        """A write transaction whose SQLite errors become :class:`StoreUnavailableError`."""
        return self.database.transaction(store_errors=True)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        database = self.database
        try:
            return database.connection().execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"cannot read SQLite store {database.path}: {exc}") from exc

    # -- items ---------------------------------------------------------------------------------

    def put_items(
        self, items: Sequence[LearnedItem], *, caps: Mapping[str, int] | None = None
    ) -> PutResult:
        stored: list[LearnedItem] = []
        evicted: list[tuple[str, str]] = []
        evicted_in: set[tuple[tuple[str, str], str, str]] = set()
        unchanged = 0
        if not items:
            return PutResult()
        with self._write() as connection:
            touched: set[tuple[tuple[str, str], str]] = set()
            for item in items:
                scope = (item.bot_id, item.group_id)
                where = (*scope, item.kind, item.key)
                row = connection.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM learned_items"
                    " WHERE bot_id = ? AND group_id = ? AND kind = ? AND key = ?",
                    where,
                ).fetchone()
                gone = connection.execute(
                    "SELECT message_ids FROM learned_forgotten"
                    " WHERE bot_id = ? AND group_id = ? AND kind = ? AND key = ?",
                    where,
                ).fetchone()
                merged = merge_item(
                    None if row is None else _item(row),
                    item,
                    () if gone is None else json.loads(gone[0]),
                )
                if merged is None:
                    unchanged += 1
                    continue
                connection.execute(
                    f"INSERT OR REPLACE INTO learned_items ({_ITEM_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _item_values(merged),
                )
                stored.append(merged)
                touched.add((scope, item.kind))
                _bump(connection, scope)
            for scope, kind in sorted(touched):
                cap = (caps or {}).get(kind)
                if cap is None:
                    continue
                # Counted first: a kind within its cap (the usual case, on every learner run)
                # evicts nothing, and its items are not read and built to find that out.
                count = connection.execute(
                    "SELECT COUNT(*) FROM learned_items"
                    " WHERE bot_id = ? AND group_id = ? AND kind = ?",
                    (*scope, kind),
                ).fetchone()[0]
                if count <= cap:
                    continue
                of_kind = [
                    _item(row)
                    for row in connection.execute(
                        f"SELECT {_ITEM_COLUMNS} FROM learned_items"
                        " WHERE bot_id = ? AND group_id = ? AND kind = ?",
                        (*scope, kind),
                    )
                ]
                for item in beyond_cap(of_kind, cap):
                    connection.execute(
                        "DELETE FROM learned_items"
                        " WHERE bot_id = ? AND group_id = ? AND kind = ? AND key = ?",
                        (*scope, kind, item.key),
                    )
                    evicted.append((kind, item.key))
                    evicted_in.add((scope, kind, item.key))
        return PutResult(
            stored=tuple(
                i for i in stored if ((i.bot_id, i.group_id), i.kind, i.key) not in evicted_in
            ),
            evicted=tuple(evicted),
            unchanged=unchanged,
        )

    def items(
        self,
        bot_id: str,
        group_id: str,
        *,
        kind: str | None = None,
        user_id: str | None = None,
        limit: int = 1000,
    ) -> list[LearnedItem]:
        if limit <= 0:
            return []
        sql = f"SELECT {_ITEM_COLUMNS} FROM learned_items WHERE bot_id = ? AND group_id = ?"
        params: list[Any] = [bot_id, group_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        sql += " ORDER BY count DESC, updated_at DESC, kind, key LIMIT ?"
        params.append(limit)
        # The SQL order is the one of sorted_items; sorting again settles equal REAL times
        # exactly as in memory.
        return sorted_items([_item(row) for row in self._read(sql, params)])

    def item(self, bot_id: str, group_id: str, kind: str, key: str) -> LearnedItem | None:
        rows = self._read(
            f"SELECT {_ITEM_COLUMNS} FROM learned_items"
            " WHERE bot_id = ? AND group_id = ? AND kind = ? AND key = ?",
            (bot_id, group_id, kind, key),
        )
        return _item(rows[0]) if rows else None

    def forget(
        self, bot_id: str, group_id: str, *, kind: str | None = None, key: str | None = None
    ) -> list[LearnedItem]:
        scope = (bot_id, group_id)
        condition = "bot_id = ? AND group_id = ?"
        params: list[Any] = [*scope]
        if kind is not None:
            condition += " AND kind = ?"
            params.append(kind)
        if key is not None:
            condition += " AND key = ?"
            params.append(key)
        with self._write() as connection:
            gone = [
                _item(row)
                for row in connection.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM learned_items WHERE {condition}", params
                )
            ]
            if not gone:
                return []
            connection.execute(f"DELETE FROM learned_items WHERE {condition}", params)
            for item in gone:
                where = (*scope, item.kind, item.key)
                before = connection.execute(
                    "SELECT message_ids FROM learned_forgotten"
                    " WHERE bot_id = ? AND group_id = ? AND kind = ? AND key = ?",
                    where,
                ).fetchone()
                ids = tuple(json.loads(before[0])) if before is not None else ()
                connection.execute(
                    "INSERT OR REPLACE INTO learned_forgotten"
                    " (bot_id, group_id, kind, key, message_ids) VALUES (?, ?, ?, ?, ?)",
                    (*where, _dumps(list(dict.fromkeys(ids + item.source_message_ids)))),
                )
            _bump(connection, scope)
        return sorted_items(gone)

    def forgotten(self, bot_id: str, group_id: str, kind: str) -> dict[str, tuple[str, ...]]:
        rows = self._read(
            "SELECT key, message_ids FROM learned_forgotten"
            " WHERE bot_id = ? AND group_id = ? AND kind = ?",
            (bot_id, group_id, kind),
        )
        return {str(row[0]): tuple(json.loads(row[1])) for row in rows}

    def scopes(self) -> list[tuple[str, str]]:
        rows = self._read(
            "SELECT bot_id, group_id FROM learned_items"
            " UNION SELECT bot_id, group_id FROM learner_cursors WHERE updated_at IS NOT NULL"
            " UNION SELECT bot_id, group_id FROM learned_injections"
        )
        return sorted((str(row[0]), str(row[1])) for row in rows)

    def counts(self) -> dict[str, int]:
        rows = self._read("SELECT kind, COUNT(*) FROM learned_items GROUP BY kind")
        return dict(sorted((str(row[0]), int(row[1])) for row in rows))

    def version(self, bot_id: str, group_id: str) -> int:
        rows = self._read(
            "SELECT version FROM learned_versions WHERE bot_id = ? AND group_id = ?",
            (bot_id, group_id),
        )
        return int(rows[0][0]) if rows else 0

    # -- cursors and leases ----------------------------------------------------------------------

    def cursor(self, learner: str, bot_id: str, group_id: str) -> LearnerCursor:
        rows = self._read(
            "SELECT position, state, updated_at, updated_offset FROM learner_cursors"
            " WHERE bot_id = ? AND group_id = ? AND learner = ? AND updated_at IS NOT NULL",
            (bot_id, group_id, learner),
        )
        if not rows:
            return LearnerCursor()
        position, state, updated_at, offset = rows[0]
        return LearnerCursor(
            position=position,
            state=json.loads(state),
            updated_at=from_timestamp(updated_at, offset),
        )

    def claim(
        self,
        learner: str,
        bot_id: str,
        group_id: str,
        holder: str,
        *,
        now: dt.datetime,
        lease_s: float = LEASE_S,
    ) -> bool:
        key = (bot_id, group_id, learner)
        stamp = now.timestamp()
        with self._write() as connection:
            row = connection.execute(
                "SELECT lease_holder, lease_until FROM learner_cursors"
                " WHERE bot_id = ? AND group_id = ? AND learner = ?",
                key,
            ).fetchone()
            if (
                row is not None
                and row[0] is not None
                and row[0] != holder
                and row[1] is not None
                and row[1] > stamp
            ):
                return False
            connection.execute(
                "INSERT INTO learner_cursors (bot_id, group_id, learner, lease_holder,"
                " lease_until) VALUES (?, ?, ?, ?, ?) ON CONFLICT (bot_id, group_id, learner)"
                " DO UPDATE SET lease_holder = excluded.lease_holder,"
                " lease_until = excluded.lease_until",
                (*key, holder, stamp + lease_s),
            )
        return True

    def advance(
        self,
        learner: str,
        bot_id: str,
        group_id: str,
        holder: str,
        cursor: LearnerCursor,
        *,
        now: dt.datetime,
    ) -> bool:
        key = (bot_id, group_id, learner)
        stamp, offset = _stamp(now)
        state = _dumps(dict(cursor.state))
        with self._write() as connection:
            changed = connection.execute(
                "UPDATE learner_cursors SET position = ?, state = ?, updated_at = ?,"
                " updated_offset = ? WHERE bot_id = ? AND group_id = ? AND learner = ?"
                " AND lease_holder = ? AND lease_until > ?",
                (cursor.position, state, stamp, offset, *key, holder, stamp),
            ).rowcount
        return changed > 0

    def release(self, learner: str, bot_id: str, group_id: str, holder: str) -> None:
        with self._write() as connection:
            connection.execute(
                "UPDATE learner_cursors SET lease_holder = NULL, lease_until = NULL"
                " WHERE bot_id = ? AND group_id = ? AND learner = ? AND lease_holder = ?",
                (bot_id, group_id, learner, holder),
            )

    def reset(self, bot_id: str, group_id: str) -> None:
        with self._write() as connection:
            connection.execute(
                "DELETE FROM learner_cursors WHERE bot_id = ? AND group_id = ?",
                (bot_id, group_id),
            )

    # -- delivered injections --------------------------------------------------------------------

    def remember_injection(self, injection: DeliveredInjection, *, keep: int = 256) -> None:
        scope = (injection.bot_id, injection.group_id)
        stamp, offset = _stamp(injection.delivered_at)
        with self._write() as connection:
            # REPLACE deletes the row of a message remembered before: the new one is the newest.
            connection.execute(
                "INSERT OR REPLACE INTO learned_injections (seq, bot_id, group_id, message_id,"
                " text, answering, sources, delivered_at, delivered_offset) VALUES"
                " ((SELECT COALESCE(MAX(seq), 0) + 1 FROM learned_injections),"
                " ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *scope,
                    injection.message_id,
                    injection.text,
                    injection.answering,
                    _dumps([dict(source) for source in injection.sources]),
                    stamp,
                    offset,
                ),
            )
            connection.execute(
                "DELETE FROM learned_injections WHERE bot_id = ? AND group_id = ? AND seq <="
                " (SELECT seq FROM learned_injections WHERE bot_id = ? AND group_id = ?"
                "  ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (*scope, *scope, max(0, keep)),
            )

    def injection(self, bot_id: str, group_id: str, message_id: str) -> DeliveredInjection | None:
        rows = self._read(
            "SELECT text, answering, sources, delivered_at, delivered_offset"
            " FROM learned_injections WHERE bot_id = ? AND group_id = ? AND message_id = ?",
            (bot_id, group_id, message_id),
        )
        if not rows:
            return None
        text, answering, sources, delivered_at, offset = rows[0]
        return DeliveredInjection(
            bot_id=bot_id,
            group_id=group_id,
            message_id=message_id,
            text=text,
            answering=answering,
            sources=tuple(json.loads(sources)),
            delivered_at=from_timestamp(delivered_at, offset),
        )
