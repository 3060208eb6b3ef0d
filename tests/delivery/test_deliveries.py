"""One delivered bot message is recorded once, however many times and through whichever method
the bot reports it (``note_delivered``, ``record_bot_reply``).

The ledger's own rule, on every backend, is in the store contract (``tests/store_contract.py``).
"""

from __future__ import annotations

import datetime as dt

from base_support import BOT, GROUP, T0, MessageFactory

from promptweave import ChatMessage, Promptweave, Turn
from promptweave.decision import DeliveryStyle
from promptweave.routing.quoting import Delivery
from promptweave.store.deliveries import answered_key, delivered_key

LATER = T0 + dt.timedelta(seconds=5)
EPOCH = T0 - dt.timedelta(days=1)


def test_identities_use_ids_and_fall_back_to_text_and_time() -> None:
    asked = ChatMessage(id="m1", sender_id="u", text="在吗", time=T0)
    assert answered_key(asked) == "id:m1"
    unnamed = ChatMessage(sender_id="u", text="在吗", time=T0)
    assert answered_key(unnamed) != answered_key(ChatMessage(sender_id="v", text="在吗", time=T0))
    assert delivered_key("r1", "在的", T0) == "id:r1"
    assert delivered_key(None, "在的", T0) == delivered_key(None, "在的", T0)
    assert delivered_key(None, "在的", T0) != delivered_key(None, "在的", LATER)
    assert delivered_key(None, "在的", T0) != delivered_key(None, "在呢", T0)


def _turn(message: ChatMessage) -> Turn:
    return Turn(bot=BOT, group_id=GROUP, message=message)


def _plain() -> Delivery:
    return Delivery(style=DeliveryStyle.PLAIN)


def replies(runtime: Promptweave) -> int:
    return runtime.stores.routing.bot_replies_since(BOT.id, GROUP, EPOCH)


def bot_messages(runtime: Promptweave) -> list[ChatMessage]:
    assert runtime.stores.group_log is not None
    logged = runtime.stores.group_log.recent_group_messages(
        BOT.id, GROUP, until=T0 + dt.timedelta(days=1), limit=100
    )
    return [m for m in logged if m.sender_id == BOT.id]


def test_note_delivered_then_record_bot_reply_counts_one_reply(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 在吗", addressed=True)
    runtime.recorder.note_delivered(_turn(asked), _plain(), at=LATER)
    assert runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "在的", message_id="r1", answering=asked, time=LATER
    )
    assert replies(runtime) == 1
    # The reply is still stored in full.
    assert [m.text for m in bot_messages(runtime)] == ["在的"]
    assert runtime.stores.bot_replies is not None
    assert runtime.stores.bot_replies.lookup(BOT.id, GROUP, "r1", now=LATER) == "在的"


def test_record_bot_reply_then_note_delivered_counts_one_reply(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 在吗", addressed=True)
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "在的", message_id="r1", answering=asked, time=LATER
    )
    runtime.recorder.note_delivered(_turn(asked), _plain())
    assert replies(runtime) == 1


def test_each_method_called_twice_counts_one_reply(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 在吗", addressed=True)
    runtime.recorder.note_delivered(_turn(asked), _plain(), at=LATER)
    runtime.recorder.note_delivered(_turn(asked), _plain(), at=LATER + dt.timedelta(seconds=1))
    assert replies(runtime) == 1
    other = message("30017", "@小织 你好", addressed=True, minute=1)
    sent_at = other.time + dt.timedelta(seconds=3)
    for _ in range(2):
        assert runtime.recorder.record_bot_reply(
            BOT.id, GROUP, "你好呀", message_id="r2", answering=other, time=sent_at
        )
    assert replies(runtime) == 2
    assert [m.id for m in bot_messages(runtime)] == ["r2"]


def test_a_reply_without_id_is_known_by_its_text_and_time(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 在吗", addressed=True)
    for _ in range(2):
        runtime.recorder.record_bot_reply(
            BOT.id, GROUP, "在的", message_id=None, answering=asked, time=LATER
        )
    assert replies(runtime) == 1
    assert [m.text for m in bot_messages(runtime)] == ["在的"]
    assert runtime.stores.sessions is not None
    session = runtime.stores.sessions.user_turns(
        BOT.id, GROUP, "30022", until=T0 + dt.timedelta(days=1), limit=10
    )
    assert [(row.role, row.content) for row in session] == [
        ("user", "@小织 在吗"),
        ("assistant", "在的"),
    ]
    # The same text at another time is another message.
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "在的", message_id=None, time=LATER + dt.timedelta(minutes=1)
    )
    assert replies(runtime) == 2


def test_two_bubbles_answering_one_message_are_two_deliveries(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "@小织 推荐个电影", addressed=True)
    runtime.recorder.note_delivered(_turn(asked), _plain(), at=LATER)
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "星际穿越", message_id="r1", answering=asked, time=LATER
    )
    runtime.recorder.record_bot_reply(
        BOT.id, GROUP, "很适合周末看", message_id="r2", answering=asked, time=LATER
    )
    assert replies(runtime) == 2
    assert [m.id for m in bot_messages(runtime)] == ["r1", "r2"]


def test_a_repeated_private_reply_enters_the_session_once(
    runtime: Promptweave, message: MessageFactory
) -> None:
    asked = message("30022", "明天几点集合")
    for _ in range(2):
        runtime.recorder.record_bot_reply(
            BOT.id, None, "八点", message_id=None, answering=asked, time=LATER
        )
    assert runtime.stores.sessions is not None
    session = runtime.stores.sessions.user_turns(
        BOT.id, "", "30022", until=T0 + dt.timedelta(days=1), limit=10
    )
    assert [row.content for row in session] == ["明天几点集合", "八点"]
