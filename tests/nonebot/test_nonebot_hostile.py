"""Hostile input to the NoneBot plugin: an event the platform's clock cannot hold."""

from __future__ import annotations

import logging

import pytest
from nonebot.adapters.onebot.v11 import Bot
from nonebug import App
from onebot_events import SELF_ID, at, group_message_json, parse, preprocess, text

#: Unix seconds no platform clock holds (``datetime.fromtimestamp`` overflows on it).
TOO_LATE = 10**20


def test_an_event_time_beyond_the_clock_is_a_value_error_like_any_bad_time(app: App) -> None:
    from promptweave.contrib.nonebot import incoming_event

    event = parse(group_message_json(group_id=20001, segments=[text("在吗")], time=TOO_LATE))
    bot = Bot.__new__(Bot)
    object.__setattr__(bot, "self_id", str(SELF_ID))
    with pytest.raises(ValueError, match="not a valid Unix timestamp"):
        incoming_event(bot, event)


async def test_the_matcher_logs_such_an_event_as_not_handled_and_sends_nothing(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    from promptweave.contrib.nonebot import messages

    caplog.set_level(logging.WARNING, logger="promptweave")
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(
            group_message_json(
                group_id=20001, segments=[at(SELF_ID), text(" 在吗？")], time=TOO_LATE
            )
        )
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_pass_rule(messages)
    assert any(
        "not handled" in record.getMessage() and "Unix timestamp" in record.getMessage()
        for record in caplog.records
    )
