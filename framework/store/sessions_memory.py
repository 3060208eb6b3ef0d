"""In-memory implementations of the conversational stores, for tests and single-process bots.

Each store is an object owning its state behind a lock (never a module global), so two runtimes in
one process never share a conversation. Rows are kept sorted by (time, insertion order), like the
SQLite indexes; the bot-reply context is an LRU with a TTL.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import ClassVar, TypeVar

import attrs

from promptweave.store.learned import LoggedMessage
from promptweave.store.session_rows import SessionSummary, SessionTurn, TurnKind
from promptweave.store.sessions import (
    BOT_REPLY_MAX_ENTRIES,
    BOT_REPLY_TEXT_CHARS,
    BOT_REPLY_TTL_S,
    GROUP_LOG_MAX_PER_GROUP,
    bot_reply_entry,
    compaction_due,
    feedback_phrases,
    group_scope,
    newest_phrases,
    summary_row,
)
from promptweave.turn import ChatMessage

__all__ = [
    "MemoryBotReplyContext",
    "MemoryFeedbackLedger",
    "MemoryGroupLog",
    "MemorySessionStore",
    "MemorySummaryStore",
]

T = TypeVar("T")
_Scope = tuple[str, str]
_UserScope = tuple[str, str, str]


def _order(item: tuple[float, int, object]) -> tuple[float, int]:
    return item[0], item[1]


def _window(
    rows: list[tuple[float, int, T]], until: dt.datetime, since: dt.datetime | None, limit: int
) -> list[T]:
    """The newest ``limit`` rows in ``[since, until]`` of a sorted list, oldest first."""
    end = bisect.bisect_right(rows, until.timestamp(), key=lambda row: row[0])
    start = 0 if since is None else bisect.bisect_left(rows, since.timestamp(), key=lambda r: r[0])
    return [row[2] for row in rows[max(start, end - limit) : end]] if limit > 0 else []


@attrs.define
class MemoryGroupLog:
    """:class:`promptweave.store.sessions.GroupLog` in memory.

    :param max_per_group: messages kept per bot and group; the oldest go first, so a long-running
        bot does not grow without bound (default :data:`GROUP_LOG_MAX_PER_GROUP`, as on SQLite).
    """

    max_per_group: int = attrs.field(
        default=GROUP_LOG_MAX_PER_GROUP, validator=attrs.validators.ge(16)
    )
    _rows: dict[_Scope, list[tuple[float, int, ChatMessage]]] = attrs.field(factory=dict)
    _ids: dict[_Scope, set[str]] = attrs.field(factory=dict)
    _counter: itertools.count[int] = attrs.field(factory=itertools.count)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def append_group_message(self, bot_id: str, group_id: str, message: ChatMessage) -> bool:
        scope = (bot_id, group_id)
        with self._lock:
            seen = self._ids.setdefault(scope, set())
            if message.id is not None:
                if message.id in seen:
                    return False
                seen.add(message.id)
            row = (message.time.timestamp(), next(self._counter), message)
            rows = self._rows.setdefault(scope, [])
            bisect.insort(rows, row, key=_order)
            if len(rows) <= self.max_per_group:
                return True
            dropped = rows[: len(rows) - self.max_per_group]
            del rows[: len(rows) - self.max_per_group]
            for _time, _order_key, old in dropped:
                if old.id is not None:
                    seen.discard(old.id)
        # A message older than the whole window was dropped at once: nothing was added.
        return all(entry is not row for entry in dropped)

    def recent_group_messages(
        self, bot_id: str, group_id: str, *, until: dt.datetime, limit: int
    ) -> list[ChatMessage]:
        with self._lock:
            return _window(self._rows.get((bot_id, group_id), []), until, None, limit)

    def find_group_message(self, bot_id: str, group_id: str, message_id: str) -> ChatMessage | None:
        scope = (bot_id, group_id)
        with self._lock:
            if message_id not in self._ids.get(scope, set()):
                return None
            rows = self._rows[scope]
            return next((m for _t, _k, m in reversed(rows) if m.id == message_id), None)

    def messages_after(
        self, bot_id: str, group_id: str, position: int, *, limit: int
    ) -> list[LoggedMessage]:
        """:meth:`promptweave.store.learned.LearningSource.messages_after`: positions are the
        order of appending, from 1."""
        with self._lock:
            rows = self._rows.get((bot_id, group_id), [])
            after = sorted((key + 1, m) for _t, key, m in rows if key + 1 > position)
        return [LoggedMessage(position=key, message=m) for key, m in after[: max(0, limit)]]

    def group_scopes(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(scope for scope, rows in self._rows.items() if rows and scope[1])


@attrs.define
class MemorySessionStore:
    """:class:`promptweave.store.sessions.SessionStore` in memory."""

    _rows: dict[_UserScope, list[tuple[float, int, SessionTurn]]] = attrs.field(factory=dict)
    _compactions: dict[_UserScope, float] = attrs.field(factory=dict)
    _counter: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def append_turns(self, turns: Sequence[SessionTurn], *, storage_window: int) -> int:
        added: set[int] = set()
        touched: set[_UserScope] = set()
        with self._lock:
            for turn in turns:
                scope = (turn.bot_id, turn.group_id, turn.user_id)
                rows = self._rows.setdefault(scope, [])
                if turn.message_id is not None and any(
                    row[2].role == turn.role and row[2].message_id == turn.message_id
                    for row in rows
                ):
                    continue
                key = next(self._counter)
                stored = attrs.evolve(turn, key=key)
                bisect.insort(rows, (turn.time.timestamp(), key, stored), key=_order)
                del rows[: max(0, len(rows) - storage_window)]
                added.add(key)
                touched.add(scope)
            # A row older than the window was deleted at once: it does not count as added.
            return sum(1 for scope in touched for row in self._rows[scope] if row[1] in added)

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
        # The rows as stored, usage or not: nothing to spare.
        with self._lock:
            return _window(self._rows.get((bot_id, group_id, user_id), []), until, since, limit)

    def latest_summary(
        self, bot_id: str, group_id: str, user_id: str, *, until: dt.datetime
    ) -> SessionTurn | None:
        with self._lock:
            rows = self._rows.get((bot_id, group_id, user_id), [])
            found = [row[2] for row in rows if row[2].is_summary and row[0] <= until.timestamp()]
        return found[-1] if found else None

    def group_turns(
        self,
        bot_id: str,
        group_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
    ) -> list[SessionTurn]:
        with self._lock:
            merged = sorted(
                (
                    row
                    for (bot, group, _user), rows in self._rows.items()
                    if bot == bot_id and group == group_id
                    for row in rows
                    if row[2].kind is TurnKind.TURN
                ),
                key=_order,
            )
        return _window(merged, until, since, limit)

    def claim_compaction(
        self, bot_id: str, group_id: str, user_id: str, *, now: dt.datetime, cooldown_s: float
    ) -> bool:
        scope = (bot_id, group_id, user_id)
        with self._lock:
            if not compaction_due(self._compactions.get(scope), now, cooldown_s):
                return False
            self._compactions[scope] = now.timestamp()
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
        doomed = set(remove)
        with self._lock:
            rows = self._rows.get((bot_id, group_id, user_id), [])
            kept = [row for row in rows if row[2].key not in doomed]
            if len(kept) == len(rows):
                return False
            key = next(self._counter)
            stored = attrs.evolve(summary_row(bot_id, group_id, user_id, summary), key=key)
            bisect.insort(kept, (summary.time.timestamp(), key, stored), key=_order)
            self._rows[(bot_id, group_id, user_id)] = kept
        return True


@attrs.define
class MemorySummaryStore:
    """:class:`promptweave.store.sessions.SummaryStore` in memory."""

    #: Listing waits on nothing: old topics read it on the event loop.
    blocking_reads: ClassVar[bool] = False

    _summaries: list[SessionSummary] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def add_summary(self, summary: SessionSummary) -> None:
        with self._lock:
            self._summaries.append(summary)

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str | None, limit: int
    ) -> list[SessionSummary]:
        with self._lock:
            found = [
                summary
                for summary in self._summaries
                if summary.bot_id == bot_id
                and summary.group_id == group_scope(group_id)
                and (user_id is None or summary.user_id == user_id)
            ]
        ordered = sorted(enumerate(found), key=lambda pair: (pair[1].created, pair[0]))
        return [summary for _, summary in reversed(ordered)][:limit]


@attrs.define
class MemoryBotReplyContext:
    """:class:`promptweave.store.sessions.BotReplyContext` as an LRU with a TTL: a hit moves the
    entry to the newest end (without extending its expiry); an insert beyond ``max_entries``
    evicts the least recently used."""

    ttl_s: float = BOT_REPLY_TTL_S
    max_entries: int = BOT_REPLY_MAX_ENTRIES
    text_chars: int = BOT_REPLY_TEXT_CHARS
    _entries: OrderedDict[tuple[str, str, str], tuple[float, str]] = attrs.field(
        factory=OrderedDict
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def remember(
        self, bot_id: str, group_id: str, message_id: str, text: str, *, now: dt.datetime
    ) -> None:
        entry = bot_reply_entry(
            message_id, text, now=now, ttl_s=self.ttl_s, text_chars=self.text_chars
        )
        if entry is None:
            return
        text, expires = entry
        key = (group_id, bot_id, message_id)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (expires, text)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def lookup(
        self, bot_id: str, group_id: str, message_id: str, *, now: dt.datetime
    ) -> str | None:
        key = (group_id, bot_id, message_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, text = entry
            if expires <= now.timestamp():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
        return text


@attrs.define
class MemoryFeedbackLedger:
    """:class:`promptweave.store.sessions.FeedbackLedger` in memory."""

    _phrases: dict[_Scope, list[tuple[str, str]]] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

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
        with self._lock:
            stored = self._phrases.setdefault((bot_id, group_id), [])
            for phrase in feedback_phrases(phrases):
                if (outcome_id, phrase) not in stored:
                    stored.append((outcome_id, phrase))
                    added += 1
        return added

    def undo_outcome(self, bot_id: str, group_id: str, outcome_id: str) -> int:
        with self._lock:
            stored = self._phrases.get((bot_id, group_id), [])
            kept = [entry for entry in stored if entry[0] != outcome_id]
            self._phrases[(bot_id, group_id)] = kept
        return len(stored) - len(kept)

    def blacklisted_phrases(self, bot_id: str, group_id: str) -> tuple[str, ...]:
        with self._lock:
            stored = list(self._phrases.get((bot_id, group_id), []))
        return newest_phrases(phrase for _, phrase in reversed(stored))
