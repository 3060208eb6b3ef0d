"""Loading a chat log into the stores: ``promptweave store import FILE.jsonl`` (``docs/store.md``).

Each line is one JSON event, in the order they happened::

    {"event": "message", "bot_id": "10001", "group_id": "20001", "message": {...}}
    {"event": "bot_reply", "bot_id": "10001", "group_id": "20001", "text": "...",
     "message_id": "9309", "time": "2026-11-29T12:13:35+08:00", "answering": "9308"}

``message`` has the fields of a turn file's message. ``answering`` names an earlier ``message``
event by its id; the pair then enters that user's session, and the session is compressed as it
would have been live (the reply's time is the clock).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

import attrs

from framework._convert import structure
from framework.errors import TurnFileError
from framework.recording import record_bot_reply
from framework.runtime import Promptweave
from framework.summary import CompressionStatus
from framework.turn import ChatMessage

__all__ = ["ImportReport", "import_events"]


def _aware(value: dt.datetime) -> None:
    if value.tzinfo is None:
        raise ValueError(f"time {value.isoformat()} has no UTC offset")


@attrs.frozen(kw_only=True)
class _MessageEvent:
    bot_id: str
    group_id: str | None
    message: ChatMessage
    event: str = "message"


@attrs.frozen(kw_only=True)
class _ReplyEvent:
    bot_id: str
    group_id: str | None
    text: str
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
    :param skipped: events that added nothing: stored already (an import run twice), a private
        message (it enters the session with its reply), or a store that failed (logged).
    :param summaries: sessions compressed during the import.
    """

    messages: int = 0
    replies: int = 0
    skipped: int = 0
    summaries: int = 0


def import_events(
    runtime: Promptweave, lines: Iterable[str], *, source: str, compress: bool = True
) -> ImportReport:
    """Record every event of ``lines`` (JSON Lines) through ``runtime``.

    :param source: the file name, for error messages.
    :param compress: compress sessions after each reply, as the live runtime would.
    :raises TurnFileError: a line is not a valid event; nothing after it is imported.
    """
    seen: dict[tuple[str, str | None, str], ChatMessage] = {}
    counts = {"messages": 0, "replies": 0, "skipped": 0, "summaries": 0}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        data = _parse(line, where)
        kind = data.get("event")
        if kind == "message":
            event = structure(data, _MessageEvent, where, TurnFileError)
            if event.message.id is not None:
                seen[(event.bot_id, event.group_id, event.message.id)] = event.message
            stored = runtime.record_message(event.bot_id, event.group_id, event.message)
            counts["messages" if stored else "skipped"] += 1
        elif kind == "bot_reply":
            reply = structure(data, _ReplyEvent, where, TurnFileError)
            answering = None
            if reply.answering is not None:
                answering = seen.get((reply.bot_id, reply.group_id, reply.answering))
                if answering is None:
                    raise TurnFileError(
                        where, [f"answering={reply.answering!r} names no earlier message event"]
                    )
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
            counts["replies" if recorded.added else "skipped"] += 1
            # Compression replays the session as it stood at the reply, stored now or before.
            if recorded.stored and compress and answering is not None:
                result = runtime.compress_session(
                    reply.bot_id, reply.group_id, answering.sender_id, now=reply.time
                )
                counts["summaries"] += result.status is CompressionStatus.COMPRESSED
        else:
            raise TurnFileError(where, [f"unknown event {kind!r} (expected message or bot_reply)"])
    return ImportReport(**counts)


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TurnFileError(where, [f"invalid JSON at column {exc.colno}: {exc.msg}"]) from exc
    if not isinstance(data, dict):
        raise TurnFileError(where, ["each line must be a JSON object"])
    return data
