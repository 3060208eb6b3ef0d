"""Loading a chat log into the stores: ``promptweave store import FILE.jsonl`` (``docs/store.md``).

Each line is one JSON event, in the order they happened::

    {"event": "message", "bot_id": "10001", "group_id": "20001", "message": {...}}
    {"event": "bot_reply", "bot_id": "10001", "group_id": "20001", "text": "...",
     "message_id": "9309", "time": "2026-11-29T12:13:35+08:00", "answering": "9308"}

``message`` has the fields of a turn file's message. ``answering`` names an earlier ``message``
event by its id; the pair then enters that user's session, and the session is compressed as it
would have been live (the reply's time is the clock).

:func:`read_events` checks the whole file before :func:`record_events` writes anything, so a bad
line leaves the store as it was, and the command creates no store file for it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable
from typing import Any

import attrs

from framework._convert import structure
from framework._fields import Text
from framework.conversation.summary import CompressionStatus
from framework.delivery.writes import record_bot_reply
from framework.errors import TurnFileError
from framework.runtime import Promptweave
from framework.store.sqlite import STORE_ERRORS
from framework.turn import ChatMessage

__all__ = [
    "EventLog",
    "ImportReport",
    "LoggedReply",
    "MessageEvent",
    "ReplyEvent",
    "import_events",
    "read_events",
    "record_events",
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
    bot_id: str = attrs.field(validator=_bot_id)
    group_id: str | None
    message: ChatMessage
    event: str = "message"


@attrs.frozen(kw_only=True)
class ReplyEvent:
    bot_id: str = attrs.field(validator=_bot_id)
    group_id: str | None
    text: Text
    time: dt.datetime = attrs.field(validator=lambda _i, _a, value: _aware(value))
    message_id: str | None = None
    answering: str | None = None
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


def read_events(lines: Iterable[str], *, source: str) -> EventLog:
    """Parse and check every line of ``lines`` (JSON Lines) without touching a store.

    :param source: the file name, for error messages.
    :raises TurnFileError: a line is not a valid event (bad JSON, an unknown ``event``, a missing
        field, an ``answering`` that names no earlier message event).
    """
    seen: dict[tuple[str, str | None, str], ChatMessage] = {}
    events: list[MessageEvent | LoggedReply] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        data = _parse(line, where)
        kind = data.get("event")
        if kind == "message":
            event = structure(data, MessageEvent, where, TurnFileError)
            if event.message.id is not None:
                seen[(event.bot_id, event.group_id, event.message.id)] = event.message
            events.append(event)
        elif kind == "bot_reply":
            reply = structure(data, ReplyEvent, where, TurnFileError)
            answering = None
            if reply.answering is not None:
                answering = seen.get((reply.bot_id, reply.group_id, reply.answering))
                if answering is None:
                    raise TurnFileError(
                        where, [f"answering={reply.answering!r} names no earlier message event"]
                    )
            events.append(LoggedReply(event=reply, answering=answering))
        else:
            raise TurnFileError(where, [f"unknown event {kind!r} (expected message or bot_reply)"])
    return EventLog(source=source, events=tuple(events))


def _record_message(runtime: Promptweave, event: MessageEvent) -> str:
    """Log one message event; the report counter it goes to."""
    group_log = runtime.stores.group_log
    if event.group_id is None or not event.group_id.strip():
        return "skipped"  # a private message enters the session with its reply
    if group_log is None:
        return "failed"
    try:
        added = group_log.append_group_message(event.bot_id, event.group_id, event.message)
    except STORE_ERRORS as exc:
        logger.warning("importing a message of group %s failed: %s", event.group_id, exc)
        return "failed"
    return "messages" if added else "skipped"


def record_events(runtime: Promptweave, log: EventLog, *, compress: bool = True) -> ImportReport:
    """Record the events of ``log`` through ``runtime``, in order.

    :param compress: compress sessions after each reply, as the live runtime would.
    """
    counts = {"messages": 0, "replies": 0, "skipped": 0, "failed": 0, "summaries": 0}
    for event in log.events:
        if isinstance(event, MessageEvent):
            counts[_record_message(runtime, event)] += 1
            continue
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
            counts["failed"] += 1
        else:
            counts["replies" if recorded.added else "skipped"] += 1
        # Compression replays the session as it stood at the reply, stored now or before.
        if recorded.stored and compress and answering is not None:
            result = runtime.compress_session(
                reply.bot_id, reply.group_id, answering.sender_id, now=reply.time
            )
            counts["summaries"] += result.status is CompressionStatus.COMPRESSED
    return ImportReport(**counts)


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
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TurnFileError(where, [f"invalid JSON at column {exc.colno}: {exc.msg}"]) from exc
    if not isinstance(data, dict):
        raise TurnFileError(where, ["each line must be a JSON object"])
    return data
