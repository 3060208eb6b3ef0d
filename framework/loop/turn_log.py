"""What the live loop writes to the turn log for each group message it routed
(:mod:`promptweave.store.turn_log_sqlite`, ``docs/dashboard.md``).

:func:`turn_log_entry` turns a finished turn into one compact entry: the message as it came in,
the decision with its score terms, the sends and bubbles, the usage, the stage durations, and for
a turn that built a provider request, the sections (their texts by hash), the messages of the
request body without its system prompt (the sections are that prompt), and where the prefix
shared with the conversation's previous request ended. Writing never fails a turn: a store that
cannot be written is logged and the turn goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from promptweave.loop.events import TurnOutcome
from promptweave.prompt.rendered import RenderedSection
from promptweave.providers.exchange import ProviderRequest
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.turn_log_sqlite import SQLiteTurnLog, TurnLogEntry, text_hash

__all__ = ["record_turn", "turn_log_entry"]

log = logging.getLogger("promptweave.loop")

#: The trace keys copied into a record as they are (what the timeline says about a turn's end).
_TRACE_KEYS = ("submit", "deadline", "error", "tools_stopped", "quoted", "answer", "plan")


def _zone(name: str) -> dt.tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC


def _sections(sections: Sequence[RenderedSection]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    rows: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    for section in sections:
        row: dict[str, Any] = {
            "id": section.id,
            "title": section.title,
            "plugin": section.plugin,
            "volatility": section.volatility,
            "status": section.status,
            "chars": len(section.text),
        }
        if section.override:
            row["override"] = section.override
        if section.error:
            row["error"] = section.error
        if section.text:
            digest = text_hash(section.text)
            texts[digest] = section.text
            row["text"] = digest
        rows.append(row)
    return rows, texts


def _content(value: Any) -> tuple[str, int]:
    """A wire message's text and its image count (content parts of any of the three formats)."""
    if isinstance(value, str):
        return value, 0
    texts: list[str] = []
    images = 0
    if isinstance(value, Sequence):
        for part in value:
            if not isinstance(part, Mapping):
                continue
            kind = str(part.get("type", ""))
            if "image" in kind:
                images += 1
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind:
                texts.append(f"[{kind}]")
    return "\n".join(texts), images


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request body's messages, numbered as the prefix report numbers them; a system message
    (the sections, shown apart) keeps its place but not its text."""
    listed = body.get("messages", body.get("input"))
    found: list[dict[str, Any]] = []
    if not isinstance(listed, Sequence) or isinstance(listed, str):
        return found
    for index, item in enumerate(listed):
        if not isinstance(item, Mapping):
            continue
        role = str(item.get("role") or item.get("type", "?"))
        if role in ("system", "developer"):
            found.append({"index": index, "role": role, "system": True})
            continue
        text, images = _content(item.get("content", item.get("output", "")))
        row: dict[str, Any] = {"index": index, "role": role, "text": text}
        if images:
            row["images"] = images
        found.append(row)
    return found


def _request(request: ProviderRequest) -> dict[str, Any]:
    prefix = request.prefix
    return {
        "api": request.api.value,
        "model": request.body.get("model"),
        "bytes": len(request.body_bytes()),
        "prefix": None if prefix is None else prefix.to_json(),
        "messages": _messages(request.body),
    }


def turn_log_entry(
    outcome: TurnOutcome,
    sections: Sequence[RenderedSection] | None,
    *,
    timezone: str,
    trigger: str | None = None,
) -> TurnLogEntry | None:
    """The turn log's entry for ``outcome``; ``None`` for a private chat or a turn without an
    event (the turn log is per group).

    :param sections: the turn's rendered sections, when it was rendered.
    :param timezone: the bot's time zone: the local day the daily counts put the turn in.
    :param trigger: how the message addressed the bot (``mention``, ``alias``, ``ambient``…).
    """
    event = outcome.event
    if event is None or event.group_id is None:
        return None
    message = event.message
    decision = outcome.decision
    record: dict[str, Any] = {
        "sender_id": message.sender_id,
        "sender_name": message.sender_name,
        "text": message.text,
        "addressed": message.addressed,
        "reply_to": message.reply_to,
        "images": len(message.images),
        "trigger": trigger,
        "status": outcome.status,
        "reason": outcome.reason,
        "bubbles": list(outcome.bubbles),
        "message_ids": list(outcome.message_ids),
        "sends": list(outcome.trace.get("sends", ())),
        "durations_ms": dict(outcome.stage_durations_ms),
    }
    if decision is not None:
        record["decision"] = decision.trace()
        record["stage"] = decision.stage
        record["necessity"] = None if decision.necessity is None else decision.necessity.to_json()
        record["notes"] = list(decision.notes)
        if decision.low_engagement_phrase:
            record["phrase"] = decision.low_engagement_phrase
    for key in _TRACE_KEYS:
        if key in outcome.trace:
            record[key] = outcome.trace[key]
    texts: dict[str, str] = {}
    if sections is not None and isinstance(outcome.request, ProviderRequest):
        record["sections"], texts = _sections(sections)
        record["request"] = _request(outcome.request)
        record["chars"] = outcome.trace.get("chars")
    usage = outcome.usage
    if usage is not None:
        record["usage"] = {k: v for k, v in attrs.asdict(usage).items() if v is not None}
    return TurnLogEntry(
        bot_id=event.bot_id,
        group_id=event.group_id,
        message_id=message.id,
        time=message.time.timestamp(),
        day=message.time.astimezone(_zone(timezone)).date().isoformat(),
        status=outcome.status,
        action=None if decision is None else decision.action.value,
        reason=outcome.reason,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        cached_tokens=getattr(usage, "cached_tokens", None),
        output_tokens=getattr(usage, "output_tokens", None),
        requested=outcome.request is not None,
        texts=texts,
        record=record,
    )


def record_turn(
    turns: SQLiteTurnLog | None,
    outcome: TurnOutcome,
    sections: Sequence[RenderedSection] | None,
    *,
    timezone: str,
    trigger: str | None = None,
) -> None:
    """Queue ``outcome`` for the turn log ``turns`` (nothing when the store keeps none); its
    thread writes it. A store that cannot be written is logged; the turn is not affected."""
    if turns is None:
        return
    try:
        entry = turn_log_entry(outcome, sections, timezone=timezone, trigger=trigger)
        if entry is not None:
            turns.add(entry)
    except STORE_ERRORS as exc:
        log.warning("turn of message %s not written to the turn log: %s", _id(outcome), exc)
    except Exception:  # the log is a record of the turn, never a reason for it to fail
        log.exception("turn of message %s not written to the turn log", _id(outcome))


def _id(outcome: TurnOutcome) -> str | None:
    return None if outcome.event is None else outcome.event.message.id
