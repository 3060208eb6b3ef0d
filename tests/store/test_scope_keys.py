"""Scopes that look alike are kept apart on every backend: bot ``1`` in group ``2:3`` is not bot
``1:2`` in group ``3``, and a group named ``private`` is not a private chat.

SQLite keeps each id in a column of its own and Redis percent-encodes each part of a key, so what
they stored before stays valid as it is; the conversation key of the turn-context state encodes
its parts the same way (``tests/turn_context/test_conversation_state.py``).
"""

from __future__ import annotations

import datetime as dt

import pytest
from base_support import T0

from promptweave import Bot, ChatMessage, Turn, build_turn_context
from promptweave.store.deliveries import DeliveryState
from promptweave.turn_context.conversation_state import conversation_key

LOOKALIKES = [
    (("1", "2:3"), ("1:2", "3")),
    (("1", "private"), ("1", None)),
    (("1", "a%3Ab"), ("1", "a:b")),
]


def _said(sender: str, text: str, number: int) -> ChatMessage:
    return ChatMessage(
        id=f"m{number}", sender_id=sender, text=text, time=T0 + dt.timedelta(seconds=number)
    )


@pytest.mark.parametrize(("one", "other"), LOOKALIKES)
def test_lookalike_scopes_share_no_state_on_any_backend(runtime, one, other):
    until = T0 + dt.timedelta(hours=1)
    for number, (bot, group) in enumerate((one, other)):
        asked = _said("30022", f"{bot}/{group}", number)
        runtime.recorder.record_message(bot, group, asked)
        runtime.recorder.record_bot_reply(
            bot, group, f"答{bot}/{group}", message_id="r1", answering=asked, time=asked.time
        )
        if group is not None:
            runtime.stores.routing.note_phrase(bot, group, f"词{bot}/{group}")
    for bot, group in (one, other):
        scope = group or ""
        sessions = runtime.stores.sessions.user_turns(bot, scope, "30022", until=until, limit=10)
        assert [row.content for row in sessions] == [f"{bot}/{group}", f"答{bot}/{group}"]
        if group is not None:
            logged = runtime.stores.group_log.recent_group_messages(
                bot, group, until=until, limit=10
            )
            assert [m.text for m in logged] == [f"{bot}/{group}", f"答{bot}/{group}"]
            assert runtime.stores.routing.last_phrase(bot, group) == f"词{bot}/{group}"
            quoted = runtime.stores.bot_replies.lookup(bot, group, "r1", now=T0)
            assert quoted == f"答{bot}/{group}"
        # One message id delivered in each scope: each is a first delivery.
        state = runtime.stores.deliveries.record_delivery(
            bot, scope, answering=None, message="id:again", now=T0
        )
        assert state is DeliveryState.NEW


@pytest.mark.parametrize(("one", "other"), LOOKALIKES)
def test_lookalike_scopes_keep_their_own_turn_context_state(memory_runtime, one, other):
    turns = [
        Turn(
            bot=Bot(id=bot, name="小织"),
            group_id=group,
            trigger="mention",  # type: ignore[arg-type]
            message=ChatMessage(id="m1", sender_id="30022", text="@小织 在吗", time=T0),
        )
        for bot, group in (one, other)
    ]
    assert conversation_key(turns[0]) != conversation_key(turns[1])
    memory_runtime.conversations.notes.push(conversation_key(turns[0]), "[系统备注：只给第一个]")
    contexts = [
        build_turn_context(memory_runtime, turn, memory_runtime.render(turn, retrieve=False))
        for turn in turns
    ]
    assert contexts[0].notes == ("[系统备注：只给第一个]",) and contexts[1].notes == ()
    assert [c.system_prompt_status for c in contexts] == ["built", "built"]
