"""The reads of the dashboard (``docs/dashboard.md``) over the SQLite store: every one an indexed
range or seek, so a page costs the same with a thousand messages as with a million.

- groups: a skip-scan of the primary keys of ``turn_daily`` and ``learned_items`` (one seek per
  group), and the day's rows of ``turn_daily``;
- a group's timeline: keyset pages of ``turn_records`` by ``(time, seq)`` on its window index (or
  on its status index, filtered by status), newest first, never ``OFFSET``;
- one turn: its row by ``seq`` and its section texts by hash;
- what was learned: the scope's rows of ``learned_items`` by primary-key prefix, and the messages
  they came from by id (the group log's unique index, then the turn log's);
- spend: ``turn_daily`` from a day on (its ``day`` index), and the learning spend items of each
  scope.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.turn_log_sqlite import unpack_record

__all__ = ["DailyRow", "DashboardReads", "TimelineRow"]


@attrs.frozen(kw_only=True)
class DailyRow:
    """One row of ``turn_daily``: the turns of a (bot, group, day) that ended alike."""

    bot_id: str
    group_id: str
    day: str
    status: str
    action: str
    reason: str
    turns: int
    requests: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int


@attrs.frozen(kw_only=True)
class TimelineRow:
    """One turn of the turn log, its record decoded."""

    seq: int
    bot_id: str
    group_id: str
    message_id: str | None
    time: float
    status: str
    action: str | None
    reason: str
    record: dict[str, Any]


_DAILY_COLUMNS = (
    "bot_id, group_id, day, status, action, reason, turns, requests, prompt_tokens,"
    " cached_tokens, output_tokens"
)
_TIMELINE_COLUMNS = "seq, bot_id, group_id, message_id, time, status, action, reason, record"


def _daily(row: Sequence[Any]) -> DailyRow:
    return DailyRow(
        bot_id=row[0],
        group_id=row[1],
        day=row[2],
        status=row[3],
        action=row[4],
        reason=row[5],
        turns=row[6],
        requests=row[7],
        prompt_tokens=row[8],
        cached_tokens=row[9],
        output_tokens=row[10],
    )


def _timeline(row: Sequence[Any]) -> TimelineRow:
    return TimelineRow(
        seq=row[0],
        bot_id=row[1],
        group_id=row[2],
        message_id=row[3],
        time=row[4],
        status=row[5],
        action=row[6],
        reason=row[7],
        record=unpack_record(row[8]),
    )


@attrs.define
class DashboardReads:
    """The dashboard's queries over one migrated SQLite store."""

    database: SQLiteDatabase

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.database.connection().execute(sql, tuple(params)).fetchall()

    def _skip_scan(self, table: str) -> list[tuple[str, str]]:
        """The distinct (bot, group) leading ``table``'s primary key: one seek each."""
        found: list[tuple[str, str]] = []
        after: tuple[str, str] | None = None
        while True:
            if after is None:
                rows = self._rows(
                    f"SELECT bot_id, group_id FROM {table} ORDER BY bot_id, group_id LIMIT 1"
                )
            else:
                rows = self._rows(
                    f"SELECT bot_id, group_id FROM {table} WHERE (bot_id, group_id) > (?, ?)"
                    " ORDER BY bot_id, group_id LIMIT 1",
                    after,
                )
            if not rows:
                return found
            after = (rows[0][0], rows[0][1])
            found.append(after)

    def scopes(self) -> list[tuple[str, str]]:
        """Every (bot, group) with turns or learned items, sorted (a private chat's ``""``
        group left out)."""
        scopes = set(self._skip_scan("turn_daily")) | set(self._skip_scan("learned_items"))
        return sorted(scope for scope in scopes if scope[1])

    def version(self) -> tuple[int, int]:
        """What changes when a turn is recorded or something learned changes: the newest turn's
        ``seq`` and the sum of the scopes' learned versions (the live pages poll it)."""
        turn = self._rows("SELECT MAX(seq) FROM turn_records")[0][0] or 0
        learned = self._rows("SELECT TOTAL(version) FROM learned_versions")[0][0] or 0
        return int(turn), int(learned)

    # -- counts per day ---------------------------------------------------------------------

    def day(self, bot_id: str, group_id: str, day: str) -> list[DailyRow]:
        """The scope's daily rows of ``day``."""
        return [
            _daily(row)
            for row in self._rows(
                f"SELECT {_DAILY_COLUMNS} FROM turn_daily"
                " WHERE bot_id = ? AND group_id = ? AND day = ?",
                (bot_id, group_id, day),
            )
        ]

    def days(
        self, since: str, *, bot_id: str | None = None, group_id: str | None = None
    ) -> list[DailyRow]:
        """The daily rows from day ``since`` on (of one scope, or every scope)."""
        if bot_id is not None and group_id is not None:
            sql = (
                f"SELECT {_DAILY_COLUMNS} FROM turn_daily"
                " WHERE bot_id = ? AND group_id = ? AND day >= ?"
            )
            params: tuple[Any, ...] = (bot_id, group_id, since)
        else:
            sql = f"SELECT {_DAILY_COLUMNS} FROM turn_daily WHERE day >= ?"
            params = (since,)
        return [_daily(row) for row in self._rows(sql, params)]

    # -- the turn log -----------------------------------------------------------------------

    def timeline(
        self,
        bot_id: str,
        group_id: str,
        *,
        before: tuple[float, int] | None = None,
        after: tuple[float, int] | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[TimelineRow]:
        """A page of the scope's turns, newest first: those before the ``(time, seq)`` key
        ``before`` (the next page), or after ``after`` (what came since, the live update)."""
        where = "bot_id = ? AND group_id = ?"
        params: list[Any] = [bot_id, group_id]
        if status is not None:
            where += " AND status = ?"
            params.append(status)
        if before is not None:
            where += " AND (time, seq) < (?, ?)"
            params += before
        if after is not None:
            where += " AND (time, seq) > (?, ?)"
            params += after
        params.append(limit)
        return [
            _timeline(row)
            for row in self._rows(
                f"SELECT {_TIMELINE_COLUMNS} FROM turn_records WHERE {where}"
                " ORDER BY time DESC, seq DESC LIMIT ?",
                params,
            )
        ]

    def turn(self, seq: int) -> TimelineRow | None:
        """One turn by its ``seq``."""
        rows = self._rows(f"SELECT {_TIMELINE_COLUMNS} FROM turn_records WHERE seq = ?", (seq,))
        return _timeline(rows[0]) if rows else None

    def texts(self, hashes: Sequence[str]) -> dict[str, str]:
        """Section texts by hash."""
        if not hashes:
            return {}
        marks = ", ".join("?" * len(hashes))
        rows = self._rows(f"SELECT hash, text FROM turn_texts WHERE hash IN ({marks})", hashes)
        return {row[0]: row[1] for row in rows}

    # -- what was learned -------------------------------------------------------------------

    def learned_counts(self, bot_id: str, group_id: str) -> tuple[dict[str, int], dict[str, int]]:
        """Items of the scope per kind and per member (``""``: the group's own)."""
        kinds = {
            row[0]: row[1]
            for row in self._rows(
                "SELECT kind, COUNT(*) FROM learned_items WHERE bot_id = ? AND group_id = ?"
                " GROUP BY kind ORDER BY kind",
                (bot_id, group_id),
            )
        }
        members = {
            row[0]: row[1]
            for row in self._rows(
                "SELECT user_id, COUNT(*) FROM learned_items WHERE bot_id = ? AND group_id = ?"
                " GROUP BY user_id ORDER BY COUNT(*) DESC, user_id",
                (bot_id, group_id),
            )
        }
        return kinds, members

    def learned_items(
        self,
        bot_id: str,
        group_id: str,
        *,
        kind: str | None = None,
        user_id: str | None = None,
        exclude_kinds: Sequence[str] = (),
        offset: int = 0,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """A page of the scope's items, most counted first, then the most recently learned:
        each as a dict of its columns, ``fields`` and ``source_message_ids`` decoded."""
        where = "bot_id = ? AND group_id = ?"
        params: list[Any] = [bot_id, group_id]
        if kind is not None:
            where += " AND kind = ?"
            params.append(kind)
        if user_id is not None:
            where += " AND user_id = ?"
            params.append(user_id)
        if exclude_kinds:
            where += f" AND kind NOT IN ({', '.join('?' * len(exclude_kinds))})"
            params += exclude_kinds
        params += (limit, offset)
        rows = self._rows(
            "SELECT kind, key, user_id, fields, source_message_ids, count, learner, learned_at,"
            " updated_at FROM learned_items WHERE "
            + where
            + " ORDER BY count DESC, updated_at DESC, kind, key LIMIT ? OFFSET ?",
            params,
        )
        return [
            {
                "kind": row[0],
                "key": row[1],
                "user_id": row[2],
                "fields": _json(row[3], {}),
                "source_message_ids": _json(row[4], []),
                "count": row[5],
                "learner": row[6],
                "learned_at": row[7],
                "updated_at": row[8],
            }
            for row in rows
        ]

    def messages(
        self, bot_id: str, group_id: str, message_ids: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        """The messages of the scope with these ids: from the group log (the newest messages of
        a group), else from the turn log (every routed message); id → sender, name, text, time."""
        wanted = list(dict.fromkeys(message_ids))
        found: dict[str, dict[str, Any]] = {}
        if not wanted:
            return found
        marks = ", ".join("?" * len(wanted))
        for row in self._rows(
            "SELECT message_id, sender_id, sender_name, text, time FROM group_messages"
            f" WHERE bot_id = ? AND group_id = ? AND message_id IN ({marks})",
            (bot_id, group_id, *wanted),
        ):
            found[row[0]] = {
                "sender_id": row[1],
                "sender_name": row[2],
                "text": row[3],
                "time": row[4],
            }
        missing = [message_id for message_id in wanted if message_id not in found]
        if missing:
            marks = ", ".join("?" * len(missing))
            for row in self._rows(
                f"SELECT message_id, time, record FROM turn_records"
                f" WHERE bot_id = ? AND group_id = ? AND message_id IN ({marks})",
                (bot_id, group_id, *missing),
            ):
                record = unpack_record(row[2])
                found[row[0]] = {
                    "sender_id": record.get("sender_id", ""),
                    "sender_name": record.get("sender_name", ""),
                    "text": record.get("text", ""),
                    "time": row[1],
                }
        return found


def _json(text: str, absent: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return absent
