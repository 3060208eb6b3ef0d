"""Hostile OneBot payloads at the live loop's door: a group message that names no group, or a
guild message, is rejected (never a private chat, never a traced ``loop_error``)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from loop_support import BOT, T0, RecordingTransport, make_loop

from promptweave.loop.events import IncomingEvent, OutcomeStatus
from promptweave.turn import ChatMessage

STAMP = int(T0.timestamp())


def _payload(**change: Any) -> dict[str, Any]:
    payload = {
        "post_type": "message",
        "message_type": "group",
        "group_id": 20001,
        "user_id": 30017,
        "self_id": int(BOT),
        "time": STAMP,
        "message_id": 7001,
        "message": [
            {"type": "at", "data": {"qq": BOT}},
            {"type": "text", "data": {"text": " 在吗？"}},
        ],
    }
    payload.update(change)
    return {key: value for key, value in payload.items() if value is not _MISSING}


_MISSING = object()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"group_id": ""}, "has no group_id"),
        ({"group_id": "   "}, "has no group_id"),
        ({"group_id": None}, "has no group_id"),
        ({"group_id": _MISSING}, "has no group_id"),
        ({"group_id": "2\ud800"}, "lone surrogate"),
        ({"message_type": "guild", "guild_id": "5", "channel_id": "6"}, "'guild'"),
        ({"message_type": "guild", "group_id": _MISSING}, "'guild'"),
    ],
)
def test_a_group_message_without_a_group_is_rejected_not_a_private_chat(change, problem) -> None:
    loop, model = make_loop(contrib=["onebot"])
    transport = RecordingTransport()
    outcome = asyncio.run(loop.handle_payload("onebot", _payload(**change), BOT, transport))
    assert outcome.status == OutcomeStatus.REJECTED, outcome
    assert outcome.reason != "loop_error" and problem in outcome.reason
    assert outcome.event is None
    assert model.requests == [] and transport.calls == []
    sessions = loop.runtime.stores.sessions
    # nothing was filed as a private chat of the sender
    assert not sessions.user_turns(BOT, None, "30017", until=T0 + dt.timedelta(1), limit=5)  # type: ignore[union-attr]
    loop.runtime.close()


def test_a_well_formed_group_and_private_message_still_pass() -> None:
    loop, _ = make_loop(contrib=["onebot"])
    parse = loop.runtime.plugins.hooks.parse_event
    assert parse("onebot", _payload(), BOT).group_id == "20001"
    private = _payload(message_type="private", group_id=_MISSING)
    assert parse("onebot", private, BOT).group_id is None
    loop.runtime.close()


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"group_id": ""}, "group_id must name the group"),
        ({"group_id": "\t"}, "group_id must name the group"),
        ({"group_id": "2\udfff"}, "lone surrogate"),
        ({"bot_id": " "}, "bot_id must be the receiving bot's account id"),
        ({"bot_id": "1\ud800"}, "lone surrogate"),
    ],
)
def test_an_incoming_event_refuses_a_blank_or_surrogate_id(fields, problem) -> None:
    message = ChatMessage(sender_id="3", text="x", time=T0)
    arguments: dict[str, Any] = {"platform": "p", "bot_id": BOT, "group_id": "20001"}
    with pytest.raises(ValueError, match=problem):
        IncomingEvent(**{**arguments, **fields}, message=message)
