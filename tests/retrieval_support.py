"""Shared helpers of the retrieval tests (imported by name: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from promptweave import Bot, ChatMessage, Config, Decision, RetrievalQuery, Stores, Turn
from promptweave.decision import SocialAction, TurnAction

NOW = dt.datetime(2026, 11, 28, 20, 41, tzinfo=dt.timezone(dt.timedelta(hours=8)))
BOT = "10001"
GROUP = "20001"
USER = "30017"


def make_turn(
    text: str,
    *,
    bot_id: str = BOT,
    group_id: str | None = GROUP,
    user_id: str = USER,
    **extra: Any,
) -> Turn:
    return Turn(
        bot=Bot(id=bot_id, name="小织", peer_bot_ids=("10002",)),
        group_id=group_id,
        message=ChatMessage(sender_id=user_id, sender_name="青柠汽水", text=text, time=NOW),
        **extra,
    )


def make_query(
    text: str,
    *,
    stores: Stores | None = None,
    config: Config | None = None,
    decision: Decision | None = None,
    allow_persistent_memory: bool | None = None,
    **turn_args: Any,
) -> RetrievalQuery:
    return RetrievalQuery.for_turn(
        make_turn(text, **turn_args),
        decision=decision or Decision(action=TurnAction.REPLY, social_action=SocialAction.ANSWER),
        limits=(config or Config()).retrieval,
        stores=stores or Stores(),
        allow_persistent_memory=allow_persistent_memory,
    )
