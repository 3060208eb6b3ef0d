"""Loading a chat log into the stores: ``promptweave store import FILE.jsonl`` (``docs/store.md``).

Each line is one JSON event, in the order they happened::

    {"event": "message", "bot_id": "10001", "group_id": "20001", "message": {...}}
    {"event": "bot_reply", "bot_id": "10001", "group_id": "20001", "text": "...",
     "message_id": "9309", "time": "2026-11-29T12:13:35+08:00", "answering": "9308"}

``message`` has the fields of a turn file's message. ``answering`` names an earlier ``message``
event by its id; the pair then enters that user's session, and the session is compressed as it
would have been live (the reply's time is the clock).

:func:`read_events` checks the whole file before :func:`record_events` writes anything, so a bad
line leaves the store as it was, and the command creates no store file for it. Both hold the
whole log; a log of any length goes through :func:`scan_events` (check every line, noting the
message events in an on-disk :class:`MessageIndex`) and :func:`stream_events` (record them),
which read it a line at a time: the memory an import takes does not grow with the file.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from promptweave._convert import parse_json, structure
from promptweave._fields import Text, platform_id
from promptweave.compression.summary import CompressionStatus
from promptweave.delivery.store_writes import record_bot_reply
from promptweave.errors import TurnFileError
from promptweave.runtime import Promptweave
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.turn import ChatMessage

__all__ = [
    "EventLog",
    "ImportReport",
    "LoggedReply",
    "MessageEvent",
    "MessageIndex",
    "ReplyEvent",
    "import_events",
    "read_events",
    "record_events",
    "scan_events",
    "stream_events",
]

logger = logging.getLogger("promptweave.store")


def _aware(value: dt.datetime) -> None:
    if value.tzinfo is None:
        raise ValueError(f"time {value.isoformat()} has no UTC offset")


def _bot_id(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    # A blank id would file the events under no bot at all.
    if not value.strip():
        raise ValueError(f"{attribute.name} must be the bot's account id, not blank")


@attrs.frozen(kw_only=True)
class MessageEvent:
    bot_id: str = attrs.field(validator=[_bot_id, platform_id])
    group_id: str | None = attrs.field(validator=platform_id)
    message: ChatMessage
    event: str = "message"


@attrs.frozen(kw_only=True)
class ReplyEvent:
    bot_id: str = attrs.field(validator=[_bot_id, platform_id])
    group_id: str | None = attrs.field(validator=platform_id)
    text: Text
    time: dt.datetime = attrs.field(validator=lambda _i, _a, value: _aware(value))
    message_id: str | None = attrs.field(default=None, validator=platform_id)
    answering: str | None = attrs.field(default=None, validator=platform_id)
    quoted: bool = False
    event: str = "bot_reply"


@attrs.frozen(kw_only=True)
class ImportReport:
    """What an import did, counting only what was new.

    :param messages: message events that added a row to the group log.
    :param replies: bot_reply events that added a row (the bot's message, or session turns).
    :param skipped: events that added nothing: stored already (an import run twice), or a
        private message (it enters the session with its reply).
    :param failed: events a failing store could not take (logged); ``promptweave store import``
        then exits with code 1.
    :param summaries: sessions compressed during the import.
    """

    messages: int = 0
    replies: int = 0
    skipped: int = 0
    failed: int = 0
    summaries: int = 0


@attrs.frozen(kw_only=True)
class LoggedReply:
    """A bot_reply event with the message it answers looked up."""

    event: ReplyEvent
    answering: ChatMessage | None


@attrs.frozen(kw_only=True)
class EventLog:
    """The events of one file, every line checked, in order; :func:`record_events` stores them."""

    source: str
    events: tuple[MessageEvent | LoggedReply, ...]


_Key = tuple[str, str | None, str]


def _event(
    line: str, where: str, known: Callable[[_Key], ChatMessage | None]
) -> MessageEvent | LoggedReply:
    """One line's event, checked; ``known`` finds the earlier message event a reply answers."""
    data = _parse(line, where)
    kind = data.get("event")
    if kind == "message":
        return structure(data, MessageEvent, where, TurnFileError)
    if kind == "bot_reply":
        reply = structure(data, ReplyEvent, where, TurnFileError)
        answering = None
        if reply.answering is not None:
            answering = known((reply.bot_id, reply.group_id, reply.answering))
            if answering is None:
                raise TurnFileError(
                    where, [f"answering={reply.answering!r} names no earlier message event"]
                )
        return LoggedReply(event=reply, answering=answering)
    raise TurnFileError(where, [f"unknown event {kind!r} (expected message or bot_reply)"])


def _message_key(event: MessageEvent) -> _Key | None:
    message_id = event.message.id
    return None if message_id is None else (event.bot_id, event.group_id, message_id)


def read_events(lines: Iterable[str], *, source: str) -> EventLog:
    """Parse and check every line of ``lines`` (JSON Lines) without touching a store.

    :param source: the file name, for error messages.
    :raises TurnFileError: a line is not a valid event (bad JSON, an unknown ``event``, a missing
        field, an ``answering`` that names no earlier message event).
    """
    seen: dict[_Key, ChatMessage] = {}
    events: list[MessageEvent | LoggedReply] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event = _event(line, f"{source}:{number}", seen.get)
        if isinstance(event, MessageEvent) and (key := _message_key(event)) is not None:
            seen[key] = event.message
        events.append(event)
    return EventLog(source=source, events=tuple(events))


@attrs.define
class MessageIndex:
    """The message events of a log by ``(bot, group, message id)``, kept in a temporary SQLite
    database on disk (deleted when closed), so that a reply can name a message any number of
    lines back without the log being held in memory."""

    _database: sqlite3.Connection = attrs.field(
        factory=lambda: _index_database(), init=False, repr=False
    )

    def add(self, event: MessageEvent) -> None:
        key = _message_key(event)
        if key is None:
            return
        message = json.dumps(
            {
                "sender_id": event.message.sender_id,
                "text": event.message.text,
                "time": event.message.time.isoformat(),
                "id": event.message.id,
                "sender_name": event.message.sender_name,
                "addressed": event.message.addressed,
                "reply_to": event.message.reply_to,
                "images": list(event.message.images),
                "mentions": list(event.message.mentions),
            }
        )
        bot_id, group_id, message_id = key
        self._database.execute(
            "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?)",
            (bot_id, group_id or "", message_id, message),
        )

    def get(self, key: _Key) -> ChatMessage | None:
        bot_id, group_id, message_id = key
        row = self._database.execute(
            "SELECT message FROM messages WHERE bot_id = ? AND group_id = ? AND message_id = ?",
            (bot_id, group_id or "", message_id),
        ).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        return ChatMessage(**{**data, "time": dt.datetime.fromisoformat(data["time"])})

    def close(self) -> None:
        self._database.close()


def _index_database() -> sqlite3.Connection:
    # "" opens a private temporary database that SQLite keeps on disk once it outgrows its
    # cache, and deletes when it is closed.
    database = sqlite3.connect("", check_same_thread=False)
    database.execute(
        "CREATE TABLE messages (bot_id TEXT, group_id TEXT, message_id TEXT, message TEXT,"
        " PRIMARY KEY (bot_id, group_id, message_id))"
    )
    return database


def scan_events(lines: Iterable[str], *, source: str, index: MessageIndex) -> int:
    """Check every line of ``lines`` (JSON Lines), one at a time, without touching a store; the
    message events go to ``index`` for :func:`stream_events`.

    :param source: the file name, for error messages.
    :returns: how many events the lines hold.
    :raises TurnFileError: a line is not a valid event, as :func:`read_events` says.
    """
    count = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event = _event(line, f"{source}:{number}", index.get)
        if isinstance(event, MessageEvent):
            index.add(event)
        count += 1
    return count


def stream_events(
    runtime: Promptweave,
    lines: Iterable[str],
    *,
    source: str,
    index: MessageIndex,
    compress: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Record the events of ``lines``, one at a time, once :func:`scan_events` checked them with
    ``index``.

    :param compress: compress sessions after each reply, as the live runtime would.
    :param progress: called with 1 after each event (a progress bar's ``update``).
    """
    counts = dict.fromkeys(("messages", "replies", "skipped", "failed", "summaries"), 0)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event = _event(line, f"{source}:{number}", index.get)
        for counter in _record(runtime, event, compress):
            counts[counter] += 1
        if progress is not None:
            progress(1)
    return ImportReport(**counts)


def _record_message(runtime: Promptweave, event: MessageEvent) -> str:
    """Log one message event; the report counter it goes to."""
    group_log = runtime.stores.group_log
    if event.group_id is None or not event.group_id.strip():
        return "skipped"  # a private message enters the session with its reply
    if group_log is None:
        return "failed"
    message = event.message
    cap = runtime.config.session.max_content_chars
    if len(message.text) > cap:
        message = attrs.evolve(message, text=message.text[:cap])
    try:
        added = group_log.append_group_message(event.bot_id, event.group_id, message)
    except STORE_ERRORS as exc:
        logger.warning("importing a message of group %s failed: %s", event.group_id, exc)
        return "failed"
    return "messages" if added else "skipped"


def record_events(runtime: Promptweave, log: EventLog, *, compress: bool = True) -> ImportReport:
    """Record the events of ``log`` through ``runtime``, in order.

    :param compress: compress sessions after each reply, as the live runtime would.
    """
    counts = dict.fromkeys(("messages", "replies", "skipped", "failed", "summaries"), 0)
    for event in log.events:
        for counter in _record(runtime, event, compress):
            counts[counter] += 1
    return ImportReport(**counts)


def _record(runtime: Promptweave, event: MessageEvent | LoggedReply, compress: bool) -> list[str]:
    """Record one event; the report counters it adds to."""
    if isinstance(event, MessageEvent):
        return [_record_message(runtime, event)]
    reply, answering = event.event, event.answering
    recorded = record_bot_reply(
        runtime.stores,
        runtime.config,
        reply.bot_id,
        reply.group_id,
        reply.text,
        message_id=reply.message_id,
        answering=answering,
        quote_of=answering.id if reply.quoted and answering is not None else None,
        time=reply.time,
        bot_name=runtime.persona.labels.self_label,
    )
    if not recorded.stored:
        return ["failed"]
    counters = ["replies" if recorded.added else "skipped"]
    # Compression replays the session as it stood at the reply, stored now or before.
    if compress and answering is not None:
        result = runtime.recorder.compress_session(
            reply.bot_id, reply.group_id, answering.sender_id, now=reply.time
        )
        if result.status is CompressionStatus.COMPRESSED:
            counters.append("summaries")
    return counters


def import_events(
    runtime: Promptweave, lines: Iterable[str], *, source: str, compress: bool = True
) -> ImportReport:
    """Check every event of ``lines`` (JSON Lines), then record them through ``runtime``.

    :param source: the file name, for error messages.
    :param compress: compress sessions after each reply, as the live runtime would.
    :raises TurnFileError: a line is not a valid event; nothing is recorded.
    """
    return record_events(runtime, read_events(lines, source=source), compress=compress)


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        data = parse_json(line)
    except json.JSONDecodeError as exc:
        raise TurnFileError(where, [f"invalid JSON at column {exc.colno}: {exc.msg}"]) from exc
    except ValueError as exc:
        raise TurnFileError(where, [f"invalid JSON: {exc}"]) from exc
    if not isinstance(data, dict):
        raise TurnFileError(where, ["each line must be a JSON object"])
    return data
