"""OneBot v11 events as NapCat posts them, and the adapter's own preprocessing of them."""

from __future__ import annotations

import itertools
from typing import Any

from nonebot.adapters.onebot.v11 import Adapter, Bot, MessageEvent
from nonebot.adapters.onebot.v11.bot import _check_at_me, _check_nickname, _check_reply

SELF_ID = 10001
_ids = itertools.count(1000)


def group_message_json(
    *,
    group_id: int,
    segments: list[dict[str, Any]],
    user_id: int = 30017,
    role: str = "member",
    nickname: str = "青柠汽水",
    message_id: int | None = None,
    time: int = 1764417600,
) -> dict[str, Any]:
    """A NapCat ``message.group.normal`` post (message_format array)."""
    return {
        "self_id": SELF_ID,
        "user_id": user_id,
        "time": time,
        "message_id": message_id if message_id is not None else next(_ids),
        "message_seq": 1,
        "real_id": 1,
        "message_type": "group",
        "sender": {"user_id": user_id, "nickname": nickname, "card": "", "role": role},
        "raw_message": "",
        "font": 14,
        "sub_type": "normal",
        "message": segments,
        "message_format": "array",
        "post_type": "message",
        "group_id": group_id,
    }


def at(qq: int | str) -> dict[str, Any]:
    return {"type": "at", "data": {"qq": str(qq)}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": value}}


def reply(message_id: int) -> dict[str, Any]:
    return {"type": "reply", "data": {"id": str(message_id)}}


def parse(data: dict[str, Any]) -> MessageEvent:
    """Parse as the adapter does on receive (``original_message`` is a copy of ``message``)."""
    event = Adapter.json_to_event(data)
    assert isinstance(event, MessageEvent)
    return event


async def preprocess(bot: Bot, event: MessageEvent) -> MessageEvent:
    """What ``Bot.handle_event`` does before dispatch, which nonebug's ``receive_event`` skips:
    it sets ``to_me`` and ``reply`` and strips the leading @bot and the reply segment. A reply
    segment makes it call ``get_msg``: expect that call first."""
    event.message.reduce()
    await _check_reply(bot, event)
    _check_at_me(bot, event)
    _check_nickname(bot, event)
    return event
