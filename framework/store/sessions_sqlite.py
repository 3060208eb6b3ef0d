"""The SQLite implementations of the conversational stores (component ``sessions``).

All tables live in the shared :class:`promptweave.store.sqlite.SQLiteDatabase`. Times are stored as
UTC epoch seconds plus the original UTC offset, so they sort correctly and read back as they were
written. Every window read is an index range scan that stops after ``limit`` rows, so its cost does
not grow with the table (``benchmarks/bench_store.py``); the group log's timeline reads are served
from the group's newest rows as the connection last left them, while no other connection has
committed (``promptweave.store.row_counts``). Schema: ``docs/store.md``.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import attrs

from promptweave._dates import from_timestamp
from promptweave.store.learned import LoggedMessage
from promptweave.store.row_counts import row_counts
from promptweave.store.row_memo import RowMemo
from promptweave.store.session_rows import SessionSummary, SessionTurn
from promptweave.store.sessions import (
    BOT_REPLY_MAX_ENTRIES,
    BOT_REPLY_TEXT_CHARS,
    BOT_REPLY_TTL_S,
    FEEDBACK_MAX_PHRASES,
    GROUP_LOG_MAX_PER_GROUP,
    TRIM_BATCH,
    bot_reply_entry,
    compaction_due,
    feedback_phrases,
    group_scope,
    newest_phrases,
    summary_row,
)
from promptweave.store.sessions_schema import SESSION_MIGRATIONS
from promptweave.store.sqlite import Connection, SQLiteDatabase, StoreUnavailableError
from promptweave.turn import ChatMessage

__all__ = [
    "GROUP_WINDOW_KEPT",
    "SESSION_MIGRATIONS",
    "SQLiteBotReplyContext",
    "SQLiteFeedbackLedger",
    "SQLiteGroupLog",
    "SQLiteSessionStore",
    "SQLiteSummaryStore",
]


def _stamp(value: dt.datetime) -> tuple[float, int]:
    offset = value.utcoffset() or dt.timedelta(0)
    return value.timestamp(), int(offset.total_seconds())


def _time(stamp: float, offset: int) -> dt.datetime:
    return from_timestamp(stamp, offset)


#: The statements of :func:`_kept_within` for the group log and for sessions: a row's time, how
#: many rows of its scope are newer (counted up to a window), deleting it.
_GROUP_LOG_SCOPE = (
    "SELECT time FROM group_messages WHERE seq = ?",
    "SELECT COUNT(*) FROM (SELECT 1 FROM group_messages WHERE bot_id = ? AND group_id = ?"
    " AND (time > ? OR (time = ? AND seq > ?)) LIMIT ?)",
    "DELETE FROM group_messages WHERE seq = ?",
)
_SESSION_SCOPE = (
    "SELECT time FROM session_turns WHERE seq = ?",
    "SELECT COUNT(*) FROM (SELECT 1 FROM session_turns WHERE bot_id = ? AND group_id = ?"
    " AND user_id = ? AND (time > ? OR (time = ? AND seq > ?)) LIMIT ?)",
    "DELETE FROM session_turns WHERE seq = ?",
)


def _kept_within(
    connection: sqlite3.Connection,
    statements: tuple[str, str, str],
    scope: tuple[str, ...],
    seq: int | None,
    window: int,
    *,
    whole_excess: bool,
) -> bool:
    """Whether row ``seq`` is still among the newest ``window`` rows of its scope.

    When the trim took the ``whole_excess``, a row still there is inside the window. Otherwise a
    backlog is left for later batches, and a row that landed in it is deleted now: it was older
    than the whole window. Counting stops at ``window`` rows: this costs a window, never the
    backlog.
    """
    find, count_newer, delete = statements
    row = connection.execute(find, (seq,)).fetchone()
    if row is None:
        return False
    if whole_excess:
        return True
    newer = connection.execute(count_newer, (*scope, row[0], row[0], seq, window)).fetchone()
    if int(newer[0]) < window:
        return True
    connection.execute(delete, (seq,))
    return False


def _images(value: str) -> tuple[str, ...]:
    if value == "[]":  # most rows: no need to parse
        return ()
    return tuple(str(url) for url in json.loads(value))


def _read(database: SQLiteDatabase, sql: str, params: Iterable[Any]) -> list[sqlite3.Row]:
    try:
        return database.connection().execute(sql, tuple(params)).fetchall()
    except sqlite3.Error as exc:
        raise StoreUnavailableError(f"cannot read SQLite store {database.path}: {exc}") from exc


def _write(database: SQLiteDatabase) -> AbstractContextManager[Connection]:
    """A write transaction whose SQLite errors become :class:`StoreUnavailableError`."""
    return database.transaction(store_errors=True)


#: The columns :func:`_message` reads, in its order.
_MESSAGE_COLUMNS = (
    "message_id, sender_id, sender_name, text, reply_to, images, addressed, time, utc_offset"
)
#: The Python type SQLite gives back for each of them (``None`` aside), so that a row known from
#: its write is only kept when a read would give the very same values.
_MESSAGE_TYPES = (str, str, str, str, str, str, int, float, int)
#: Where ``time`` is among them.
_TIME = 7

#: How many of a group's newest messages a connection keeps for the timeline reads (``[timeline]``
#: reads at most ``addressed_limit`` + 1, 9 by default); a read of more, or of older ones, goes to
#: the file.
GROUP_WINDOW_KEPT = 16
#: How many rows of the learners' reads are kept built: a few learners' batches (500 messages by
#: default) of a few groups.
LEARNER_ROWS_KEPT = 4096


@attrs.define
class _KeptWindow:
    """A group's newest rows as this connection last left them, oldest first: ``(seq, values)``
    with the values of :data:`_MESSAGE_COLUMNS`; ``whole`` when they are all the group holds."""

    rows: list[tuple[int, tuple[Any, ...]]]
    whole: bool
    #: The message of each row read so far, by the ``id`` of its values (with them, so that a
    #: reused ``id`` is told apart): the rows a group's reads share are not looked up again.
    built: dict[int, tuple[tuple[Any, ...], ChatMessage]] = attrs.field(factory=dict)

    def newest(self, until: float, limit: int) -> list[tuple[Any, ...]] | None:
        """The values of the newest ``limit`` rows at or before ``until``, oldest first; ``None``
        when rows not kept could be among them."""
        end = bisect.bisect_right(self.rows, until, key=lambda row: row[1][_TIME])
        if end < limit and not self.whole:
            return None
        return [values for _, values in self.rows[max(0, end - limit) : end]]

    def messages(
        self, found: list[tuple[Any, ...]], build: Callable[[tuple[Any, ...]], ChatMessage]
    ) -> list[ChatMessage]:
        """The messages of ``found`` (values :meth:`newest` gave), each built once."""
        built = self.built
        if len(built) > 2 * GROUP_WINDOW_KEPT:
            built.clear()  # rows that left the window
        messages = []
        for values in found:
            known = built.get(id(values))
            if known is None or known[0] is not values:
                known = built[id(values)] = (values, build(values))
            messages.append(known[1])
        return messages

    def add(self, seq: int, values: tuple[Any, ...]) -> None:
        """A row just written, placed by ``(time, seq)`` as the window index orders it; the
        oldest goes when more than :data:`GROUP_WINDOW_KEPT` are kept."""
        order = (values[_TIME], seq)
        rows = self.rows
        if rows and order > (rows[-1][1][_TIME], rows[-1][0]):
            # The usual append: the newest message of the group, after every row kept.
            rows.append((seq, values))
            if len(rows) > GROUP_WINDOW_KEPT:
                del rows[0]
                self.whole = False
            return
        index = bisect.bisect_right(rows, order, key=lambda row: (row[1][_TIME], row[0]))
        if index == 0 and not self.whole:
            return  # older than every row kept, and rows older still are not kept
        self.rows.insert(index, (seq, values))
        if len(self.rows) > GROUP_WINDOW_KEPT:
            del self.rows[0]
            self.whole = False

    def discard(self, seqs: Iterable[int]) -> None:
        gone = set(seqs)
        if gone:
            self.rows = [row for row in self.rows if row[0] not in gone]


#: Where :data:`_TURN_COLUMNS` has the row's time.
_TURN_TIME = 10


@attrs.define
class _KeptTurns:
    """A user's newest session rows as this connection last read them, oldest first:
    ``(time, record)``, the record being the values of a row with usage (built afresh on every
    read, see :meth:`SQLiteSessionStore._kept_turn`); ``whole`` when they are all the user has.

    :param limit: how many rows the read that filled it asked for.
    :param bare: the records of the rows with usage as a read without usage gets them (no dict
        to share: built once), by ``seq``.
    """

    limit: int
    rows: list[tuple[float, SessionTurn | tuple[Any, ...]]]
    whole: bool
    bare: dict[int, SessionTurn] = attrs.field(factory=dict)

    def newest(
        self, since: float, until: float, limit: int, usage: bool = True
    ) -> list[SessionTurn] | None:
        """The newest ``limit`` rows with a time in ``[since, until]``, oldest first, as the
        window query gives them (without their usage unless ``usage``); ``None`` when rows not
        kept could be among them."""
        inside = [row for stamp, row in self.rows if since <= stamp <= until]
        if len(inside) < limit and not self.whole:
            return None
        newest = inside[max(0, len(inside) - limit) :]
        if usage:
            return [row if isinstance(row, SessionTurn) else _turn(row) for row in newest]
        return [row if isinstance(row, SessionTurn) else self._bare(row) for row in newest]

    def _bare(self, row: tuple[Any, ...]) -> SessionTurn:
        turn = self.bare.get(row[0])
        if turn is None:
            turn = self.bare[row[0]] = _turn((*row[:-1], None))
        return turn


def _exact(values: tuple[Any, ...]) -> bool:
    """Whether SQLite would give back exactly ``values`` (of :data:`_MESSAGE_COLUMNS`)."""
    for value, kind in zip(values, _MESSAGE_TYPES, strict=True):
        if value is not None and type(value) is not kind:
            return False
    return True


def _logged_message(values: tuple[Any, ...]) -> LoggedMessage:
    """A row of :meth:`SQLiteGroupLog.messages_after` (its ``seq``, then the message's columns)."""
    return LoggedMessage(position=int(values[0]), message=_message(values[1:]))


def _message(values: tuple[Any, ...]) -> ChatMessage:
    message_id, sender_id, sender_name, text, reply_to, images, addressed, stamp, offset = values
    return ChatMessage(
        id=message_id,
        sender_id=sender_id,
        sender_name=sender_name,
        text=text,
        reply_to=reply_to,
        images=_images(images),
        addressed=bool(addressed),
        time=_time(stamp, offset),
    )


#: The columns :func:`_turn` reads, in its order.
_TURN_COLUMNS = (
    "seq, bot_id, group_id, user_id, role, kind, content, message_id, reply_to, images, time,"
    " utc_offset, usage"
)


def _turn(values: tuple[Any, ...]) -> SessionTurn:
    (
        seq,
        bot_id,
        group_id,
        user_id,
        role,
        kind,
        content,
        message_id,
        reply_to,
        images,
        stamp,
        offset,
        usage,
    ) = values
    return SessionTurn(
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        role=role,
        kind=kind,  # SessionTurn's converter makes it a TurnKind
        content=content,
        message_id=message_id,
        reply_to=reply_to,
        images=_images(images),
        time=_time(stamp, offset),
        usage=json.loads(usage) if usage else None,
        key=seq,
    )


@attrs.define
class SQLiteGroupLog:
    """:class:`promptweave.store.sessions.GroupLog` in table ``group_messages``.

    :param max_per_group: messages kept per bot and group; the oldest go first (default
        :data:`GROUP_LOG_MAX_PER_GROUP`, as in memory).
    """

    database: SQLiteDatabase
    max_per_group: int = attrs.field(
        default=GROUP_LOG_MAX_PER_GROUP, validator=attrs.validators.ge(16)
    )
    _messages: RowMemo[ChatMessage] = attrs.field(
        factory=lambda: RowMemo(_message), init=False, repr=False, eq=False
    )
    # The learners' reads (messages_after), apart from the turns' reads, which would push them
    # out: every learner of a group reads the same new rows on the same tick, each on its own
    # thread, and the first one's messages serve the rest.
    _logged: RowMemo[LoggedMessage] = attrs.field(
        factory=lambda: RowMemo(_logged_message, LEARNER_ROWS_KEPT),
        init=False,
        repr=False,
        eq=False,
    )

    def append_group_message(self, bot_id: str, group_id: str, message: ChatMessage) -> bool:
        stamp, offset = _stamp(message.time)
        counts = row_counts(self.database, "group_messages")
        group = (bot_id, group_id)
        values = (
            message.id,
            message.sender_id,
            message.sender_name,
            message.text,
            message.reply_to,
            json.dumps(list(message.images)) if message.images else "[]",
            int(message.addressed),
            stamp,
            offset,
        )
        pushed_out: list[int] = []
        with _write(self.database) as connection:
            known = counts.current(connection)
            cursor = connection.execute(
                "INSERT OR IGNORE INTO group_messages (bot_id, group_id, message_id, sender_id,"
                " sender_name, text, reply_to, images, addressed, time, utc_offset)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (bot_id, group_id, *values),
            )
            if cursor.rowcount == 0:
                return False
            count = known.get(group)
            if count is None:
                count = connection.execute(
                    "SELECT COUNT(*) FROM group_messages WHERE bot_id = ? AND group_id = ?", group
                ).fetchone()[0]
            else:
                count += 1
            # Retention: once a group is full, each append deletes what it pushed out, the oldest
            # rows beyond the window, found from the old end of the window index. The count is
            # known (promptweave.store.row_counts), so the window itself is never walked.
            excess = count - self.max_per_group
            kept = True
            oldest_key = ("oldest", *group)
            oldest: deque[tuple[float, int]] | None = known.get(oldest_key)
            if oldest and (stamp, cursor.lastrowid) < oldest[-1]:
                # The message sorts among the oldest rows kept: they are no longer the oldest.
                del known[oldest_key]
                oldest = None
            if excess > 0:
                # Trimming is incremental: at most TRIM_BATCH rows a write, so a group far over
                # its window (an older database, a smaller window) never holds the store long.
                trimmed = min(excess, TRIM_BATCH)
                if oldest is None or len(oldest) < trimmed:
                    # The oldest TRIM_BATCH rows are read at once and kept (by (time, seq), as
                    # the window index orders them), so a full group that keeps talking finds
                    # what each message pushes out without a read.
                    oldest = known[oldest_key] = deque(
                        (row[0], row[1])
                        for row in connection.execute(
                            "SELECT time, seq FROM group_messages WHERE bot_id = ? AND group_id = ?"
                            " ORDER BY time, seq LIMIT ?",
                            (*group, TRIM_BATCH),
                        )
                    )
                pushed_out = [oldest.popleft()[1] for _ in range(min(trimmed, len(oldest)))]
                if len(pushed_out) == 1:
                    connection.execute("DELETE FROM group_messages WHERE seq = ?", pushed_out)
                else:
                    connection.executemany(
                        "DELETE FROM group_messages WHERE seq = ?", [(seq,) for seq in pushed_out]
                    )
                count -= len(pushed_out)
                if excess <= TRIM_BATCH:
                    # A message older than the whole window is deleted at once: nothing added.
                    kept = cursor.lastrowid not in pushed_out
                else:
                    # A backlog remains: the message counts only if it is within the window.
                    kept = _kept_within(
                        connection,
                        _GROUP_LOG_SCOPE,
                        group,
                        cursor.lastrowid,
                        self.max_per_group,
                        whole_excess=False,
                    )
        # Only once the write is committed.
        known[group] = count
        self._note_in_window(known, group, cursor.lastrowid, values, pushed_out, kept)
        return kept

    @staticmethod
    def _note_in_window(
        known: dict[Any, Any],
        group: tuple[str, str],
        seq: int | None,
        values: tuple[Any, ...],
        pushed_out: list[int],
        kept: bool,
    ) -> None:
        """Bring the group's kept window (if any) to what the append left in the file."""
        key = ("window", *group)
        window: _KeptWindow | None = known.get(key)
        if window is None:
            return
        if seq is None or not _exact(values) or (not kept and seq not in pushed_out):
            # A value SQLite would give back otherwise, or a backlog trimmed by a walk: read the
            # window again rather than guess.
            del known[key]
            return
        window.add(seq, values)
        if pushed_out:
            window.discard(pushed_out)

    def recent_group_messages(
        self, bot_id: str, group_id: str, *, until: dt.datetime, limit: int
    ) -> list[ChatMessage]:
        if 0 < limit <= GROUP_WINDOW_KEPT:
            window = self._kept_window(bot_id, group_id)
            found = window.newest(until.timestamp(), limit)
            if found is not None:
                return window.messages(found, self._messages)
        rows = _read(
            self.database,
            f"SELECT {_MESSAGE_COLUMNS} FROM group_messages"
            " WHERE bot_id = ? AND group_id = ? AND time <= ?"
            " ORDER BY time DESC, seq DESC LIMIT ?",
            (bot_id, group_id, until.timestamp(), limit),
        )
        return [self._messages(row) for row in reversed(rows)]

    def _kept_window(self, bot_id: str, group_id: str) -> _KeptWindow:
        """The group's newest rows as this connection last left them, read when it keeps none it
        can trust."""
        try:
            connection = self.database.connection()
            known = row_counts(self.database, "group_messages").current(connection)
            key = ("window", bot_id, group_id)
            window: _KeptWindow | None = known.get(key)
            if window is None:
                rows = connection.execute(
                    f"SELECT seq, {_MESSAGE_COLUMNS} FROM group_messages"
                    " WHERE bot_id = ? AND group_id = ? ORDER BY time DESC, seq DESC LIMIT ?",
                    (bot_id, group_id, GROUP_WINDOW_KEPT),
                ).fetchall()
                window = known[key] = _KeptWindow(
                    rows=[(row[0], tuple(row[1:])) for row in reversed(rows)],
                    whole=len(rows) < GROUP_WINDOW_KEPT,
                )
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"cannot read SQLite store {self.database.path}: {exc}"
            ) from exc
        return window

    def find_group_message(self, bot_id: str, group_id: str, message_id: str) -> ChatMessage | None:
        rows = _read(
            self.database,
            f"SELECT {_MESSAGE_COLUMNS} FROM group_messages"
            " WHERE bot_id = ? AND group_id = ? AND message_id = ?",
            (bot_id, group_id, message_id),
        )
        return self._messages(rows[0]) if rows else None

    def messages_after(
        self, bot_id: str, group_id: str, position: int, *, limit: int
    ) -> list[LoggedMessage]:
        """:meth:`promptweave.store.learned.LearningSource.messages_after`: a message's position
        is its ``seq``, which grows with every append (a new row gets one more than the
        largest). The group keeps at most ``max_per_group`` rows, so its rows are found through
        the window index and sorted, with no index of their own to keep up on every append."""
        if limit <= 0:
            return []
        rows = _read(
            self.database,
            f"SELECT seq, {_MESSAGE_COLUMNS} FROM group_messages"
            " WHERE bot_id = ? AND group_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (bot_id, group_id, position, limit),
        )
        return [self._logged(row) for row in rows]

    def group_scopes(self) -> list[tuple[str, str]]:
        """:meth:`promptweave.store.learned.LearningSource.group_scopes`."""
        rows = _read(
            self.database,
            "SELECT DISTINCT bot_id, group_id FROM group_messages WHERE group_id != ''",
            (),
        )
        return sorted((str(row[0]), str(row[1])) for row in rows)


@attrs.define
class SQLiteSessionStore:
    """:class:`promptweave.store.sessions.SessionStore` in tables ``session_turns`` and
    ``session_compactions``."""

    database: SQLiteDatabase
    _turns: RowMemo[SessionTurn] = attrs.field(
        factory=lambda: RowMemo(_turn), init=False, repr=False, eq=False
    )

    def _kept_turn(self, row: Sequence[Any]) -> SessionTurn | tuple[Any, ...]:
        """What a kept window holds of a row: its record, or the values of a row with usage,
        whose record (holding a dict) each read builds afresh."""
        return tuple(row) if row[-1] else self._turns(row)

    def _turn_of(self, row: Sequence[Any]) -> SessionTurn:
        # A row with usage holds a dict: built afresh, so that no two reads share one.
        return _turn(tuple(row)) if row[-1] else self._turns(row)

    def append_turns(self, turns: Sequence[SessionTurn], *, storage_window: int) -> int:
        added: list[tuple[int, tuple[str, str, str]]] = []
        scopes: set[tuple[str, str, str]] = set()
        with _write(self.database) as connection:
            _forget_turns(self.database, connection)
            for turn in turns:
                cursor = _insert_turn(connection, turn)
                scope = (turn.bot_id, turn.group_id, turn.user_id)
                if cursor.rowcount > 0 and cursor.lastrowid is not None:
                    added.append((cursor.lastrowid, scope))
                scopes.add(scope)
            trimmed: dict[tuple[str, str, str], int] = {}
            for scope in scopes:
                trimmed[scope] = connection.execute(
                    "DELETE FROM session_turns WHERE seq IN (SELECT seq FROM session_turns"
                    " WHERE bot_id = ? AND group_id = ? AND user_id = ?"
                    " ORDER BY time DESC, seq DESC LIMIT ? OFFSET ?)",
                    (*scope, TRIM_BATCH, storage_window),
                ).rowcount
            if not any(trimmed.values()):
                return len(added)
            # A row older than the window was deleted at once (or fell into a backlog left for
            # later batches): it does not count as added.
            return sum(
                _kept_within(
                    connection,
                    _SESSION_SCOPE,
                    scope,
                    seq,
                    storage_window,
                    whole_excess=trimmed[scope] < TRIM_BATCH,
                )
                for seq, scope in added
            )

    def user_turns(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
        usage: bool = True,
    ) -> list[SessionTurn]:
        # Every message routed reads its sender's window, and a user's rows change only when
        # the bot answers them: the connection keeps each user's newest rows
        # (promptweave.store.row_counts) until another connection commits or this store writes
        # session rows, and reads the file only for a window they cannot answer.
        scope = (bot_id, group_id, user_id)
        try:
            connection = self.database.connection()
            known = row_counts(self.database, "session_turns").current(connection)
            key = ("user", *scope)
            kept: _KeptTurns | None = known.get(key)
            if kept is None or kept.limit < limit:
                rows = connection.execute(
                    f"SELECT {_TURN_COLUMNS} FROM session_turns"
                    " WHERE bot_id = ? AND group_id = ? AND user_id = ?"
                    " ORDER BY time DESC, seq DESC LIMIT ?",
                    (*scope, limit),
                ).fetchall()
                kept = known[key] = _KeptTurns(
                    limit=limit,
                    rows=[(row[_TURN_TIME], self._kept_turn(row)) for row in reversed(rows)],
                    whole=len(rows) < limit,
                )
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"cannot read SQLite store {self.database.path}: {exc}"
            ) from exc
        found = kept.newest(_since(since), until.timestamp(), limit, usage)
        if found is None:
            return self._window("user_id = ?", scope, until, since, limit)
        return found

    def latest_summary(
        self, bot_id: str, group_id: str, user_id: str, *, until: dt.datetime
    ) -> SessionTurn | None:
        rows = _read(
            self.database,
            f"SELECT {_TURN_COLUMNS} FROM session_turns"
            " WHERE bot_id = ? AND group_id = ? AND user_id = ?"
            " AND kind = 'summary' AND time <= ? ORDER BY time DESC LIMIT 1",
            (bot_id, group_id, user_id, until.timestamp()),
        )
        return self._turn_of(rows[0]) if rows else None

    def group_turns(
        self,
        bot_id: str,
        group_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
    ) -> list[SessionTurn]:
        return self._window("kind = 'turn'", (bot_id, group_id), until, since, limit)

    def _window(
        self,
        condition: str,
        scope: tuple[str, ...],
        until: dt.datetime,
        since: dt.datetime | None,
        limit: int,
    ) -> list[SessionTurn]:
        """The newest ``limit`` rows of ``(bot_id, group_id, *condition)`` in ``[since, until]``,
        oldest first: a backward range scan of index ``session_turns_user`` or
        ``session_turns_group``."""
        rows = _read(
            self.database,
            f"SELECT {_TURN_COLUMNS} FROM session_turns"
            f" WHERE bot_id = ? AND group_id = ? AND {condition}"
            " AND time <= ? AND time >= ? ORDER BY time DESC, seq DESC LIMIT ?",
            (*scope, until.timestamp(), _since(since), limit),
        )
        return [self._turn_of(row) for row in reversed(rows)]

    def claim_compaction(
        self, bot_id: str, group_id: str, user_id: str, *, now: dt.datetime, cooldown_s: float
    ) -> bool:
        stamp = now.timestamp()
        with _write(self.database) as connection:
            row = connection.execute(
                "SELECT started FROM session_compactions"
                " WHERE bot_id = ? AND group_id = ? AND user_id = ?",
                (bot_id, group_id, user_id),
            ).fetchone()
            if row is not None and not compaction_due(row["started"], now, cooldown_s):
                return False
            connection.execute(
                "INSERT INTO session_compactions (bot_id, group_id, user_id, started)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (bot_id, group_id, user_id)"
                " DO UPDATE SET started = excluded.started",
                (bot_id, group_id, user_id, stamp),
            )
        return True

    def replace_with_summary(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        remove: Sequence[int],
        summary: SessionTurn,
    ) -> bool:
        with _write(self.database) as connection:
            _forget_turns(self.database, connection)
            removed = 0
            for key in remove:
                removed += connection.execute(
                    "DELETE FROM session_turns WHERE seq = ? AND bot_id = ? AND group_id = ?"
                    " AND user_id = ?",
                    (key, bot_id, group_id, user_id),
                ).rowcount
            if removed == 0:
                return False
            _insert_turn(connection, summary_row(bot_id, group_id, user_id, summary))
        return True


def _forget_turns(database: SQLiteDatabase, connection: Connection) -> None:
    """Drop the users' windows the connection kept: it writes session rows (inside the write,
    so a read after it reads them again)."""
    row_counts(database, "session_turns").current(connection).clear()


def _insert_turn(connection: sqlite3.Connection, turn: SessionTurn) -> sqlite3.Cursor:
    """Insert one session row; one with the (scope, role, message id) of a stored row is
    ignored (``cursor.rowcount`` is then 0)."""
    stamp, offset = _stamp(turn.time)
    return connection.execute(
        "INSERT OR IGNORE INTO session_turns (bot_id, group_id, user_id, role, kind,"
        " content, message_id, reply_to, images, time, utc_offset, usage)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            turn.bot_id,
            turn.group_id,
            turn.user_id,
            turn.role,
            turn.kind.value,
            turn.content,
            turn.message_id,
            turn.reply_to,
            json.dumps(list(turn.images)),
            stamp,
            offset,
            None if turn.usage is None else json.dumps(dict(turn.usage)),
        ),
    )


def _since(since: dt.datetime | None) -> float:
    return since.timestamp() if since is not None else float("-inf")


@attrs.define
class SQLiteSummaryStore:
    """:class:`promptweave.store.sessions.SummaryStore` in table ``session_summaries``."""

    #: Listing is one indexed read with a limit: old topics read it on the event loop.
    blocking_reads: ClassVar[bool] = False

    database: SQLiteDatabase

    def add_summary(self, summary: SessionSummary) -> None:
        stamp, offset = _stamp(summary.created)
        with _write(self.database) as connection:
            connection.execute(
                "INSERT INTO session_summaries (bot_id, group_id, user_id, text, created,"
                " utc_offset, turns_covered) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    summary.bot_id,
                    summary.group_id,
                    summary.user_id,
                    summary.text,
                    stamp,
                    offset,
                    summary.turns_covered,
                ),
            )

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str | None, limit: int
    ) -> list[SessionSummary]:
        if user_id is None:
            sql = (
                "SELECT * FROM session_summaries WHERE bot_id = ? AND group_id = ?"
                " ORDER BY created DESC, id DESC LIMIT ?"
            )
            params: tuple[Any, ...] = (bot_id, group_scope(group_id), limit)
        else:
            sql = (
                "SELECT * FROM session_summaries WHERE bot_id = ? AND group_id = ?"
                " AND user_id = ? ORDER BY created DESC, id DESC LIMIT ?"
            )
            params = (bot_id, group_scope(group_id), user_id, limit)
        return [
            SessionSummary(
                bot_id=row["bot_id"],
                group_id=row["group_id"],
                user_id=row["user_id"],
                text=row["text"],
                created=_time(row["created"], row["utc_offset"]),
                turns_covered=row["turns_covered"],
            )
            for row in _read(self.database, sql, params)
        ]


@attrs.define
class SQLiteBotReplyContext:
    """:class:`promptweave.store.sessions.BotReplyContext` as table ``bot_reply_context``, an LRU
    with a TTL like :class:`promptweave.store.sessions_memory.MemoryBotReplyContext`: rows carry
    their expiry, and ``seq`` orders them by use (a write, or a lookup that finds the row, gives it
    the highest ``seq`` without extending its expiry); beyond ``max_entries`` the least recently
    used are deleted.

    :param refresh_on_lookup: ``False`` for a reader that must leave the file as it is
        (``promptweave render``): a hit then does not change the order of use.
    """

    database: SQLiteDatabase
    ttl_s: float = BOT_REPLY_TTL_S
    max_entries: int = BOT_REPLY_MAX_ENTRIES
    text_chars: int = BOT_REPLY_TEXT_CHARS
    refresh_on_lookup: bool = True

    def remember(
        self, bot_id: str, group_id: str, message_id: str, text: str, *, now: dt.datetime
    ) -> None:
        entry = bot_reply_entry(
            message_id, text, now=now, ttl_s=self.ttl_s, text_chars=self.text_chars
        )
        if entry is None:
            return
        text, expires = entry
        with _write(self.database) as connection:
            connection.execute(
                "DELETE FROM bot_reply_context WHERE expires <= ?", (now.timestamp(),)
            )
            connection.execute(
                "INSERT OR REPLACE INTO bot_reply_context (group_id, bot_id, message_id, text,"
                " expires) VALUES (?, ?, ?, ?, ?)",
                (group_id, bot_id, message_id, text, expires),
            )
            connection.execute(
                "DELETE FROM bot_reply_context WHERE seq <= (SELECT seq FROM bot_reply_context"
                " ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (self.max_entries,),
            )

    def lookup(
        self, bot_id: str, group_id: str, message_id: str, *, now: dt.datetime
    ) -> str | None:
        rows = _read(
            self.database,
            "SELECT seq, text FROM bot_reply_context WHERE group_id = ? AND bot_id = ?"
            " AND message_id = ? AND expires > ?",
            (group_id, bot_id, message_id, now.timestamp()),
        )
        if not rows:
            return None
        if self.refresh_on_lookup:
            # A hit makes the row the most recently used (seq is the recency order); a miss, the
            # common case, takes no write lock.
            with _write(self.database) as connection:
                connection.execute(
                    "UPDATE bot_reply_context SET seq = (SELECT MAX(seq) + 1 FROM bot_reply_context)"
                    " WHERE seq = ? AND seq < (SELECT MAX(seq) FROM bot_reply_context)",
                    (rows[0]["seq"],),
                )
        return str(rows[0]["text"])


@attrs.define
class SQLiteFeedbackLedger:
    """:class:`promptweave.store.sessions.FeedbackLedger` in table ``feedback_phrases``."""

    database: SQLiteDatabase

    def record_outcome(
        self,
        bot_id: str,
        group_id: str,
        outcome_id: str,
        phrases: Sequence[str],
        *,
        now: dt.datetime,
    ) -> int:
        added = 0
        with _write(self.database) as connection:
            for phrase in feedback_phrases(phrases):
                added += connection.execute(
                    "INSERT OR IGNORE INTO feedback_phrases (bot_id, group_id, outcome_id,"
                    " phrase, created) VALUES (?, ?, ?, ?, ?)",
                    (bot_id, group_id, outcome_id, phrase, now.timestamp()),
                ).rowcount
        return added

    def undo_outcome(self, bot_id: str, group_id: str, outcome_id: str) -> int:
        with _write(self.database) as connection:
            return connection.execute(
                "DELETE FROM feedback_phrases WHERE bot_id = ? AND group_id = ? AND outcome_id = ?",
                (bot_id, group_id, outcome_id),
            ).rowcount

    def blacklisted_phrases(self, bot_id: str, group_id: str) -> tuple[str, ...]:
        rows = _read(
            self.database,
            "SELECT phrase FROM feedback_phrases WHERE bot_id = ? AND group_id = ?"
            " ORDER BY seq DESC LIMIT ?",
            (bot_id, group_id, FEEDBACK_MAX_PHRASES * 4),
        )
        return newest_phrases(str(row["phrase"]) for row in rows)
