"""Event logs as route cases: what ``promptweave route`` reads besides a route file.

A route file (``docs/routing.md``) has one case per line. An event log (``docs/store.md``) is
recognised by the ``event`` key of its first line: each ``message`` event becomes a case, decided
as the bot would have seen it live, with the group's earlier messages and the bot's earlier
replies of the log as its recent messages and the sender's answered turns as its history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import attrs

from promptweave._convert import read_text
from promptweave.cli.route_batch import CaseState, RouteCase, load_route_file
from promptweave.errors import TurnFileError
from promptweave.replay.chat_log import LoggedReply, MessageEvent, read_events
from promptweave.turn import Bot, ChatMessage, HistoryEntry, Turn

__all__ = ["is_event_log", "load_route_input"]

#: The earlier group messages a case of an event log carries: more than the timeline and the
#: routing's bot-reply window read, so a long log does not make every case carry all of it.
RECENT_WINDOW = 64
#: The answered turns of the sender a case carries as history (the default user window).
HISTORY_WINDOW = 18


def is_event_log(path: Path) -> bool:
    """``True`` when the first line that is not blank (nor a ``#`` comment) is an event."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip() and not line.lstrip().startswith("#"):
                    data = json.loads(line)
                    return isinstance(data, dict) and "event" in data
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        # The route-file reader reports what is wrong with it (a line nested too deep for the
        # JSON parser included).
        return False
    return False


def load_route_input(path: Path, *, bot: Bot) -> list[RouteCase]:
    """The cases of ``path``: a route file, or an event log.

    :param bot: the bot of compact route-file lines that name none; for an event log, the name
        and aliases of the bot of every event (which gives its id).
    :raises promptweave.errors.TurnFileError: a line is invalid, naming the file and the line.
    """
    if not is_event_log(path):
        return load_route_file(path, bot=bot)
    # The whole file is decoded here: a byte that is not UTF-8 past the first line (past the
    # 8 KB the sniffing above read) is the same one-line error as one inside it.
    lines = read_text(path, TurnFileError).split("\n")
    log = read_events(lines, source=str(path))
    numbers = [number for number, line in enumerate(lines, 1) if line.strip()]
    return _cases(zip(numbers, log.events, strict=True), bot)


@attrs.define
class _Group:
    """What the log showed of one bot in one group so far."""

    recent: list[ChatMessage] = attrs.field(factory=list)
    history: dict[str, list[HistoryEntry]] = attrs.field(factory=dict)


def _cases(events: Iterable[tuple[int, MessageEvent | LoggedReply]], bot: Bot) -> list[RouteCase]:
    groups: dict[tuple[str, str | None], _Group] = {}
    cases = []
    for line, item in events:
        if isinstance(item, MessageEvent):
            event = item
            group_id = event.group_id if event.group_id and event.group_id.strip() else None
            seen = groups.setdefault((event.bot_id, group_id), _Group())
            message: ChatMessage = event.message
            turn = Turn(
                bot=attrs.evolve(bot, id=event.bot_id),
                group_id=group_id,
                message=message,
                recent_messages=tuple(seen.recent[-RECENT_WINDOW:]),
                history=tuple(seen.history.get(message.sender_id, [])[-HISTORY_WINDOW:]),
            )
            cases.append(
                RouteCase(
                    line=line,
                    id=message.id or f"line {line}",
                    turn=turn,
                    state=CaseState(),
                    seed=None,
                    expect=None,
                )
            )
            seen.recent.append(message)
            continue
        reply, answering = item.event, item.answering
        group_id = reply.group_id if reply.group_id and reply.group_id.strip() else None
        seen = groups.setdefault((reply.bot_id, group_id), _Group())
        seen.recent.append(
            ChatMessage(
                id=reply.message_id,
                sender_id=reply.bot_id,
                sender_name=bot.name,
                text=reply.text,
                time=reply.time,
                reply_to=answering.id if reply.quoted and answering is not None else None,
            )
        )
        if answering is not None:
            seen.history.setdefault(answering.sender_id, []).extend(
                [
                    HistoryEntry(role="user", content=answering.text),
                    HistoryEntry(role="assistant", content=reply.text),
                ]
            )
    return cases
