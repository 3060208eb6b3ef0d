"""Where a turn's quoted images come from, in order: the turn's own, the quoted message the
event carried, the recent messages, the group log; each source asked is traced
(``docs/messages.md``, the quoted images)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
from base_support import BOT, GROUP, T0

from promptweave import ChatMessage, Promptweave, Stores, Turn
from promptweave.contrib.onebot import parse_message

ASKER = "30022"
FROM_TURN = "https://img.example.net/turn.jpg"
FROM_EVENT = "https://img.example.net/event.jpg"
FROM_STORE = "https://img.example.net/store.jpg"


def _runtime() -> Promptweave:
    return Promptweave.from_config(stores=Stores.in_memory())


def _photo(message_id: str, url: str, minutes_ago: int = 5) -> ChatMessage:
    return ChatMessage(
        id=message_id,
        sender_id="30017",
        text="拍到了",
        time=T0 - dt.timedelta(minutes=minutes_ago),
        images=(url,),
    )


def _asking(reply_to: str, **turn: Any) -> Turn:
    current = ChatMessage(
        id="7001", sender_id=ASKER, text="这是什么猫", time=T0, addressed=True, reply_to=reply_to
    )
    return Turn(bot=BOT, group_id=GROUP, message=current, **turn)


def _quoted(runtime: Promptweave, turn: Turn) -> tuple[Any, Any, list[str]]:
    trace = runtime.render(turn).trace
    messages = trace["messages"]
    return (
        messages["sources"].get("quoted_message_images"),
        messages.get("quoted_lookup"),
        trace["vision"]["current"],
    )


def test_the_turns_own_quoted_images_win() -> None:
    turn = _asking(
        "6001", quoted_message_images=(FROM_TURN,), quoted_message=_photo("6001", FROM_EVENT)
    )
    assert _quoted(_runtime(), turn) == ("turn", None, [FROM_TURN])


def test_the_events_quoted_message_comes_before_the_store() -> None:
    runtime = _runtime()
    runtime.recorder.record_message(BOT.id, GROUP, _photo("6001", FROM_STORE))
    turn = _asking("6001", quoted_message=_photo("6001", FROM_EVENT))
    assert _quoted(runtime, turn) == (
        "event",
        [{"source": "event", "result": "found"}],
        [FROM_EVENT],
    )


def test_an_event_quoting_another_message_is_passed_over() -> None:
    runtime = _runtime()
    runtime.recorder.record_message(BOT.id, GROUP, _photo("6001", FROM_STORE))
    turn = _asking("6001", quoted_message=_photo("6999", FROM_EVENT))
    assert _quoted(runtime, turn) == (
        "recent_messages",
        [
            {"source": "event", "result": "other_message"},
            {"source": "recent_messages", "result": "found"},
        ],
        [FROM_STORE],
    )


def test_an_events_quoted_message_without_an_image_ends_the_lookup() -> None:
    runtime = _runtime()
    runtime.recorder.record_message(BOT.id, GROUP, _photo("6001", FROM_STORE))
    plain = attrs.evolve(_photo("6001", FROM_EVENT), images=())
    assert _quoted(runtime, _asking("6001", quoted_message=plain)) == (
        "event",
        [{"source": "event", "result": "no_images"}],
        [],
    )


def test_a_message_out_of_the_timeline_is_found_in_the_group_log_by_its_negative_id() -> None:
    runtime = _runtime()
    chatter = [
        ChatMessage(
            id=str(8000 + n),
            sender_id="30031",
            text=f"闲聊{n}",
            time=T0 - dt.timedelta(minutes=30 - n),
        )
        for n in range(25)
    ]
    runtime.recorder.record_message(BOT.id, GROUP, _photo("-1234567", FROM_STORE, minutes_ago=60))
    for said in chatter:
        runtime.recorder.record_message(BOT.id, GROUP, said)
    assert _quoted(runtime, _asking("-1234567")) == (
        "group_log",
        [
            {"source": "recent_messages", "result": "missing"},
            {"source": "group_log", "result": "found"},
        ],
        [FROM_STORE],
    )


def test_no_source_having_the_message_reads_none() -> None:
    assert _quoted(_runtime(), _asking("6404")) == (
        "none",
        [
            {"source": "recent_messages", "result": "missing"},
            {"source": "group_log", "result": "missing"},
        ],
        [],
    )


def test_a_cq_reply_with_a_negative_id_is_the_reply_to() -> None:
    parsed = parse_message(
        "[CQ:reply,id=-2147480001][CQ:at,qq=10001] 这是什么猫",
        bot_id=BOT.id,
        sender_id=ASKER,
        time=T0,
        message_id="-2147480002",
    )
    assert (parsed.id, parsed.reply_to, parsed.addressed) == ("-2147480002", "-2147480001", True)
    runtime = _runtime()
    runtime.recorder.record_message(BOT.id, GROUP, _photo("-2147480001", FROM_STORE))
    turn = Turn(bot=BOT, group_id=GROUP, message=parsed)
    assert _quoted(runtime, turn)[0] == "recent_messages"
    # the raw form alone names it too
    bare = attrs.evolve(parsed, reply_to=None)
    assert _quoted(runtime, Turn(bot=BOT, group_id=GROUP, message=bare))[2] == [FROM_STORE]
