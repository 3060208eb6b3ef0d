"""Routing state in the shared SQLite file (component ``routing``).

Several bot processes can share one file: every change is one short ``BEGIN IMMEDIATE``
transaction, and every read is indexed by ``(bot_id, group_id)``. Nothing is cached between calls
but each group's quote candidate rows, and its routing row with the times of its bot replies (what
:meth:`SQLiteRoutingState.snapshot` reads), which a connection trusts only while no other
connection has committed to the file (``promptweave.store.row_counts``) and brings up to date or
drops on its own writes: what another process wrote is seen by the next call.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import attrs

from promptweave._dates import from_timestamp
from promptweave.items import RhythmProfile
from promptweave.store.routing_state import (
    REPLY_LOG_MAX,
    GroupMute,
    GroupSnapshot,
    GroupSwitch,
    QuoteCandidate,
    RoutingState,
    candidates_after,
    kept_messages_after,
)
from promptweave.store.row_counts import row_counts
from promptweave.store.row_memo import RowMemo
from promptweave.store.sqlite import Connection, Migration, SQLiteDatabase
from promptweave.turn import ChatMessage

__all__ = ["ROUTING_MIGRATIONS", "SQLiteRoutingState"]

ROUTING_MIGRATIONS = (
    Migration(
        component="routing",
        version=1,
        sql="""
        CREATE TABLE routing_groups (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            disabled INTEGER NOT NULL DEFAULT 0,
            cooldown_until REAL,
            silence_until REAL,
            last_quote_at REAL,
            last_phrase TEXT,
            rhythm TEXT,
            PRIMARY KEY (bot_id, group_id)
        );
        CREATE TABLE routing_kept_messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT,
            payload TEXT NOT NULL
        );
        CREATE INDEX routing_kept_by_group ON routing_kept_messages (bot_id, group_id, seq);
        CREATE TABLE routing_candidates (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            text TEXT NOT NULL,
            time REAL NOT NULL,
            UNIQUE (bot_id, group_id, message_id)
        );
        CREATE INDEX routing_candidates_by_group ON routing_candidates (bot_id, group_id, seq);
        CREATE TABLE routing_bot_replies (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX routing_bot_replies_by_group ON routing_bot_replies (bot_id, group_id, at);
        """,
    ),
    Migration(
        component="routing",
        version=2,
        # Quote candidates' seq without AUTOINCREMENT, as the group log's (sessions version 3):
        # no sqlite_sequence update on each message's insert. Rows keep their seq. Nor the index
        # on (bot_id, group_id, seq): a group's few rows are found through the unique one and
        # sorted, on the rare read of a connection that keeps none, while every message's
        # delete and insert wrote both (4–5 µs of a 28 µs transaction).
        sql="""
        CREATE TABLE routing_candidates_new (
            seq INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            text TEXT NOT NULL,
            time REAL NOT NULL,
            UNIQUE (bot_id, group_id, message_id)
        );
        INSERT INTO routing_candidates_new (seq, bot_id, group_id, message_id, sender_id, text,
            time)
            SELECT seq, bot_id, group_id, message_id, sender_id, text, time
            FROM routing_candidates;
        DROP TABLE routing_candidates;
        ALTER TABLE routing_candidates_new RENAME TO routing_candidates;
        """,
    ),
    Migration(
        component="routing",
        version=3,
        # One B-tree for the quote candidates instead of two: rows clustered by (bot_id,
        # group_id, seq), WITHOUT ROWID, and no unique index on the message id, which the rule
        # (candidates_after) keeps unique within a group anyway, every write being a
        # BEGIN IMMEDIATE transaction that starts from the rows as they are. Each message's
        # delete and insert then write one page of the log instead of two, and a group's rows
        # are read in seq order without a sort. Rows keep their seq.
        sql="""
        CREATE TABLE routing_candidates_new (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            text TEXT NOT NULL,
            time REAL NOT NULL,
            PRIMARY KEY (bot_id, group_id, seq)
        ) WITHOUT ROWID;
        INSERT INTO routing_candidates_new (bot_id, group_id, seq, message_id, sender_id, text,
            time)
            SELECT bot_id, group_id, seq, message_id, sender_id, text, time
            FROM routing_candidates;
        DROP TABLE routing_candidates;
        ALTER TABLE routing_candidates_new RENAME TO routing_candidates;
        """,
    ),
    Migration(
        component="routing",
        version=4,
        # The run-time switch of a group with its author and time (docs/groups.md): a group
        # switched off before keeps its switch, without an author.
        sql="""
        ALTER TABLE routing_groups ADD COLUMN switch TEXT;
        UPDATE routing_groups SET switch = '{"enabled": false, "by": "", "at": null}'
            WHERE disabled = 1;
        """,
    ),
)


def _epoch(value: dt.datetime) -> float:
    return value.timestamp()


def _time(value: float | None) -> dt.datetime | None:
    return None if value is None else from_timestamp(value)


#: One group's row; one row even for a group never written.
_SNAPSHOT_ROW = (
    "SELECT g.switch, g.cooldown_until, g.silence_until, g.last_quote_at, g.last_phrase,"
    " g.rhythm FROM (SELECT 1) LEFT JOIN routing_groups AS g"
    " ON g.bot_id = ?1 AND g.group_id = ?2"
)


@attrs.frozen
class _Kept:
    """What a connection keeps of a group's routing row and reply times (``snapshot``)."""

    mute: GroupMute
    last_quote_at: dt.datetime | None
    last_phrase: str | None
    rhythm: RhythmProfile | None
    #: The times (epoch seconds) of the bot's replies the store keeps.
    replies: tuple[float, ...]


def _count_since(replies: tuple[float, ...], since: float) -> int:
    return sum(1 for at in replies if at >= since)


def _switch(value: str | None) -> GroupSwitch | None:
    return None if value is None else GroupSwitch.from_json(json.loads(value))


def _mute(switch: GroupSwitch | None, cooldown: float | None, silence: float | None) -> GroupMute:
    return GroupMute(
        disabled=switch is not None and not switch.enabled,
        cooldown_until=_time(cooldown),
        silence_until=_time(silence),
        switch=switch,
    )


def _rhythm(value: str | None) -> RhythmProfile | None:
    return None if value is None else RhythmProfile(**json.loads(value))


def _candidate(values: tuple[Any, ...]) -> QuoteCandidate:
    message_id, sender_id, text, at = values
    return QuoteCandidate(
        message_id=message_id,
        sender_id=sender_id,
        text=text,
        time=from_timestamp(at),
    )


def _message_payload(message: ChatMessage) -> str:
    return json.dumps(
        {
            "id": message.id,
            "sender_id": message.sender_id,
            "sender_name": message.sender_name,
            "text": message.text,
            "time": message.time.isoformat(),
            "addressed": message.addressed,
            "reply_to": message.reply_to,
            "images": list(message.images),
            "mentions": list(message.mentions),
        },
        ensure_ascii=False,
    )


def _message(payload: str) -> ChatMessage:
    data: dict[str, Any] = json.loads(payload)
    data["time"] = dt.datetime.fromisoformat(data["time"])
    return ChatMessage(**data)


def _replace_rows(
    connection: sqlite3.Connection,
    table: str,
    columns: tuple[str, ...],
    scope: tuple[str, str],
    rows: Sequence[tuple[Any, ...]],
) -> None:
    """Make ``rows`` (the values of ``columns``) the (bot, group)'s rows of a per-group list in
    ``table``, in order: ``seq`` keeps it."""
    connection.execute(f"DELETE FROM {table} WHERE bot_id = ? AND group_id = ?", scope)
    names = ", ".join(("bot_id", "group_id", *columns))
    marks = ", ".join("?" * (len(scope) + len(columns)))
    connection.executemany(
        f"INSERT INTO {table} ({names}) VALUES ({marks})", [(*scope, *row) for row in rows]
    )


@attrs.define
class SQLiteRoutingState(RoutingState):
    """Routing state in a :class:`promptweave.store.sqlite.SQLiteDatabase`.

    :meth:`promptweave.store.stores.Stores.migrate` creates the tables when the stores open the
    file; a routing state over a database that has not been through it creates them on first
    use.
    """

    _database: SQLiteDatabase = attrs.field(alias="database")
    _migrated: bool = attrs.field(default=False, init=False)
    _built: RowMemo[QuoteCandidate] = attrs.field(
        factory=lambda: RowMemo(_candidate), init=False, repr=False, eq=False
    )

    @property
    def database(self) -> SQLiteDatabase:
        if not self._migrated:
            self._database.migrate(ROUTING_MIGRATIONS)
            self._migrated = True
        return self._database

    def _ensure_group(self, connection: Any, bot_id: str, group_id: str) -> None:
        connection.execute(
            "INSERT OR IGNORE INTO routing_groups (bot_id, group_id) VALUES (?, ?)",
            (bot_id, group_id),
        )

    def _set(self, bot_id: str, group_id: str, column: str, value: Any) -> None:
        with self.database.transaction() as connection:
            self._changed(connection, bot_id, group_id)
            self._ensure_group(connection, bot_id, group_id)
            connection.execute(
                f"UPDATE routing_groups SET {column} = ? WHERE bot_id = ? AND group_id = ?",
                (value, bot_id, group_id),
            )

    def _get(self, bot_id: str, group_id: str, column: str) -> Any:
        row = (
            self.database.connection()
            .execute(
                f"SELECT {column} FROM routing_groups WHERE bot_id = ? AND group_id = ?",
                (bot_id, group_id),
            )
            .fetchone()
        )
        return None if row is None else row[0]

    def snapshot(
        self, bot_id: str, group_id: str, *, replies_since: dt.datetime | None = None
    ) -> GroupSnapshot:
        # What a group's row and reply times hold is kept per connection (promptweave.store.
        # row_counts) until another connection commits or this one writes the group: a group that
        # keeps talking is routed without a query.
        connection = self.database.connection()
        known = row_counts(self.database, "routing_groups").current(connection)
        group = (bot_id, group_id)
        kept: _Kept | None = known.get(group)
        if kept is None:
            kept = known[group] = self._read_group(connection, group)
        return GroupSnapshot(
            mute=kept.mute,
            last_quote_at=kept.last_quote_at,
            last_phrase=kept.last_phrase,
            rhythm=kept.rhythm,
            replies_since=replies_since,
            bot_replies=0
            if replies_since is None
            else _count_since(kept.replies, _epoch(replies_since)),
        )

    @staticmethod
    def _read_group(connection: sqlite3.Connection, group: tuple[str, str]) -> _Kept:
        switch, cooldown, silence, quoted, phrase, rhythm = connection.execute(
            _SNAPSHOT_ROW, group
        ).fetchone()
        replies = connection.execute(
            "SELECT at FROM routing_bot_replies WHERE bot_id = ? AND group_id = ?", group
        ).fetchall()
        return _Kept(
            mute=_mute(_switch(switch), cooldown, silence),
            last_quote_at=_time(quoted),
            last_phrase=None if phrase is None else str(phrase),
            rhythm=_rhythm(rhythm),
            replies=tuple(row[0] for row in replies),
        )

    def _changed(self, connection: Connection, bot_id: str, group_id: str) -> None:
        """Forget what this connection kept of a group it writes (inside the write)."""
        row_counts(self.database, "routing_groups").current(connection).pop(
            (bot_id, group_id), None
        )

    def mute(self, bot_id: str, group_id: str) -> GroupMute:
        row = (
            self.database.connection()
            .execute(
                "SELECT switch, cooldown_until, silence_until FROM routing_groups"
                " WHERE bot_id = ? AND group_id = ?",
                (bot_id, group_id),
            )
            .fetchone()
        )
        if row is None:
            return GroupMute()
        return _mute(_switch(row["switch"]), row["cooldown_until"], row["silence_until"])

    def set_switch(self, bot_id: str, group_id: str, switch: GroupSwitch | None) -> None:
        with self.database.transaction() as connection:
            self._changed(connection, bot_id, group_id)
            self._ensure_group(connection, bot_id, group_id)
            connection.execute(
                "UPDATE routing_groups SET switch = ?, disabled = ?"
                " WHERE bot_id = ? AND group_id = ?",
                (
                    None if switch is None else json.dumps(switch.to_json(), ensure_ascii=False),
                    int(switch is not None and not switch.enabled),
                    bot_id,
                    group_id,
                ),
            )

    def switches(self, bot_id: str | None = None) -> tuple[tuple[str, str, GroupSwitch], ...]:
        rows = (
            self.database.connection()
            .execute(
                "SELECT bot_id, group_id, switch FROM routing_groups"
                " WHERE switch IS NOT NULL AND (?1 IS NULL OR bot_id = ?1)"
                " ORDER BY bot_id, group_id",
                (bot_id,),
            )
            .fetchall()
        )
        return tuple((row[0], row[1], GroupSwitch.from_json(json.loads(row[2]))) for row in rows)

    def start_cooldown(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._set(bot_id, group_id, "cooldown_until", _epoch(until))

    def start_silence(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._set(bot_id, group_id, "silence_until", _epoch(until))

    def keep_message(self, bot_id: str, group_id: str, message: ChatMessage, limit: int) -> None:
        with self.database.transaction() as connection:
            kept = [
                _message(row["payload"]) for row in self._kept_rows(connection, bot_id, group_id)
            ]
            after = kept_messages_after(kept, message, limit)
            if after != kept:
                _replace_rows(
                    connection,
                    "routing_kept_messages",
                    ("message_id", "payload"),
                    (bot_id, group_id),
                    [(m.id, _message_payload(m)) for m in after],
                )

    def take_kept_messages(self, bot_id: str, group_id: str) -> tuple[ChatMessage, ...]:
        # Most turns find nothing kept: look before taking the write lock.
        anything = (
            self.database.connection()
            .execute(
                "SELECT 1 FROM routing_kept_messages WHERE bot_id = ? AND group_id = ? LIMIT 1",
                (bot_id, group_id),
            )
            .fetchone()
        )
        if anything is None:
            return ()
        with self.database.transaction() as connection:
            rows = self._kept_rows(connection, bot_id, group_id)
            connection.execute(
                "DELETE FROM routing_kept_messages WHERE bot_id = ? AND group_id = ?",
                (bot_id, group_id),
            )
        return tuple(_message(row["payload"]) for row in rows)

    @staticmethod
    def _kept_rows(connection: sqlite3.Connection, bot_id: str, group_id: str) -> list[sqlite3.Row]:
        return connection.execute(
            "SELECT payload FROM routing_kept_messages WHERE bot_id = ? AND group_id = ?"
            " ORDER BY seq",
            (bot_id, group_id),
        ).fetchall()

    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...]:
        # The rule (candidates_after) only appends and drops the oldest, so the rows change by
        # deleting the dropped ones and inserting the added ones: in a group that keeps talking,
        # one of each. A call that changes nothing writes nothing. What it returns is what
        # candidates() would read now, so the router reads nothing back. The group's rows as
        # this connection left them are kept (promptweave.store.row_counts), so a group that keeps
        # talking is not read again while no other connection writes.
        memo = row_counts(self.database, "routing_candidates")
        group = (bot_id, group_id)
        # The router feeds the messages the recorder made candidates already (recording and
        # routing both call this): when the kept rows show nothing would change, no write
        # transaction is opened.
        known_rows = memo.current(self.database.connection())
        rows: list[tuple[int, QuoteCandidate]] | None = known_rows.get(group)
        if rows is not None:
            kept = [candidate for _, candidate in rows]
            after = candidates_after(kept, candidates, limit)
            if after == kept:
                return tuple(kept)
        with self.database.transaction() as connection:
            if memo.current(connection) is not known_rows:
                # Another connection committed since the look above: what it kept is gone.
                known_rows, rows = memo.current(connection), None
            if rows is None:
                rows = [
                    (row[0], self._built(row[1:]))
                    for row in connection.execute(
                        "SELECT seq, message_id, sender_id, text, time FROM routing_candidates"
                        " WHERE bot_id = ? AND group_id = ? ORDER BY seq",
                        group,
                    )
                ]
                kept = [candidate for _, candidate in rows]
                after = candidates_after(kept, candidates, limit)
                if after == kept:
                    known_rows[group] = rows
                    return tuple(kept)
            stays = {candidate.message_id for candidate in after}
            dropped = [seq for seq, candidate in rows if candidate.message_id not in stays]
            if dropped:
                marks = ", ".join("?" * len(dropped))
                connection.execute(
                    "DELETE FROM routing_candidates WHERE bot_id = ? AND group_id = ?"
                    f" AND seq IN ({marks})",
                    (*group, *dropped),
                )
            known = {candidate.message_id for candidate in kept}
            left = [(seq, candidate) for seq, candidate in rows if candidate.message_id in stays]
            # A group's seq goes on from its largest (the rows read are all of the group's).
            seq = rows[-1][0] if rows else 0
            for candidate in after:
                if candidate.message_id in known:
                    continue
                values = (candidate.message_id, candidate.sender_id, candidate.text)
                stamp = _epoch(candidate.time)
                seq += 1
                connection.execute(
                    "INSERT INTO routing_candidates (bot_id, group_id, seq, message_id,"
                    " sender_id, text, time) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*group, seq, *values, stamp),
                )
                left.append((seq, self._built((*values, stamp))))
        known_rows[group] = left  # only once the write is committed (or released)
        return tuple(candidate for _, candidate in left)

    def candidates(self, bot_id: str, group_id: str) -> tuple[QuoteCandidate, ...]:
        rows = (
            self.database.connection()
            .execute(
                "SELECT message_id, sender_id, text, time FROM routing_candidates"
                " WHERE bot_id = ? AND group_id = ? ORDER BY seq",
                (bot_id, group_id),
            )
            .fetchall()
        )
        return tuple(self._built(row) for row in rows)

    def last_quote_at(self, bot_id: str, group_id: str) -> dt.datetime | None:
        return _time(self._get(bot_id, group_id, "last_quote_at"))

    def note_quote_delivered(
        self, bot_id: str, group_id: str, message_id: str, at: dt.datetime
    ) -> None:
        self._set(bot_id, group_id, "last_quote_at", _epoch(at))

    def last_phrase(self, bot_id: str, group_id: str) -> str | None:
        value = self._get(bot_id, group_id, "last_phrase")
        return None if value is None else str(value)

    def note_phrase(self, bot_id: str, group_id: str, phrase: str) -> None:
        self._set(bot_id, group_id, "last_phrase", phrase)

    def note_bot_reply(self, bot_id: str, group_id: str, at: dt.datetime) -> None:
        with self.database.transaction() as connection:
            self._changed(connection, bot_id, group_id)
            connection.execute(
                "INSERT INTO routing_bot_replies (bot_id, group_id, at) VALUES (?, ?, ?)",
                (bot_id, group_id, _epoch(at)),
            )
            connection.execute(
                "DELETE FROM routing_bot_replies WHERE bot_id = ? AND group_id = ? AND seq NOT IN"
                " (SELECT seq FROM routing_bot_replies WHERE bot_id = ? AND group_id = ?"
                "  ORDER BY seq DESC LIMIT ?)",
                (bot_id, group_id, bot_id, group_id, REPLY_LOG_MAX),
            )

    def bot_replies_since(self, bot_id: str, group_id: str, since: dt.datetime) -> int:
        row = (
            self.database.connection()
            .execute(
                "SELECT COUNT(*) FROM routing_bot_replies"
                " WHERE bot_id = ? AND group_id = ? AND at >= ?",
                (bot_id, group_id, _epoch(since)),
            )
            .fetchone()
        )
        return int(row[0])

    def rhythm(self, bot_id: str, group_id: str) -> RhythmProfile | None:
        return _rhythm(self._get(bot_id, group_id, "rhythm"))

    def set_rhythm(self, bot_id: str, group_id: str, profile: RhythmProfile) -> None:
        self._set(bot_id, group_id, "rhythm", json.dumps(attrs.asdict(profile)))
