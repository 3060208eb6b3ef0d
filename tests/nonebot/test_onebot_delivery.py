"""Outgoing messages as OneBot v11 segment arrays and send actions; CQ-code escaping."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from promptweave import OutgoingMessage, Segment, Transport
from promptweave.contrib.onebot import parse_cq_string
from promptweave.delivery.onebot import (
    ONEBOT_V11,
    OneBotTransport,
    cq_escape,
    cq_unescape,
    onebot_action,
    onebot_segment,
    onebot_segments,
)


def message(
    *segments: Segment, group_id: str | None = "20001", user_id: str = "30017"
) -> OutgoingMessage:
    return OutgoingMessage(
        bot_id="10001", group_id=group_id, user_id=user_id, segments=segments, bubble_index=0
    )


def test_each_neutral_kind_maps_to_its_onebot_segment() -> None:
    found = onebot_segments(
        message(
            Segment.reply("9309"), Segment.at("30017"), Segment.text(" 好耶"), Segment.face("178")
        )
    )
    assert found == [
        {"type": "reply", "data": {"id": "9309"}},
        {"type": "at", "data": {"qq": "30017"}},
        {"type": "text", "data": {"text": " 好耶"}},
        {"type": "face", "data": {"id": "178"}},
    ]


def test_another_kind_passes_through_under_its_own_name() -> None:
    image = Segment(kind="image", data={"file": "https://img.example/a.png"})
    assert onebot_segment(image) == {"type": "image", "data": {"file": "https://img.example/a.png"}}


def test_a_known_kind_without_its_parameter_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"a at segment needs data\['user_id'\]"):
        onebot_segment(Segment(kind="at", data={"qq": "1"}))


def test_empty_text_segments_are_left_out() -> None:
    assert onebot_segments(message(Segment.at("1"), Segment.text(""))) == [
        {"type": "at", "data": {"qq": "1"}}
    ]


def test_a_group_message_is_send_group_msg_with_a_numeric_group_id() -> None:
    action, params = onebot_action(message(Segment.text("嗯")))
    assert action == "send_group_msg"
    assert params == {"group_id": 20001, "message": [{"type": "text", "data": {"text": "嗯"}}]}


def test_a_private_message_is_send_private_msg_with_a_numeric_user_id() -> None:
    action, params = onebot_action(message(Segment.text("在的"), group_id=None))
    assert (action, params["user_id"]) == ("send_private_msg", 30017)
    assert "group_id" not in params


def test_a_non_numeric_id_is_kept_as_text() -> None:
    _action, params = onebot_action(message(Segment.text("hi"), group_id="guild-7"))
    assert params["group_id"] == "guild-7"


@pytest.mark.parametrize(
    "text", ["[CQ:at,qq=all]", "快看[CQ:at,qq=all] 大家", "&#91;CQ:face,id=1&#93;"]
)
def test_text_that_looks_like_a_cq_code_stays_literal_text(text: str) -> None:
    _action, params = onebot_action(message(Segment.text(text)))
    assert params["message"] == [{"type": "text", "data": {"text": text}}]


def test_a_cq_lookalike_reaches_a_onebot_implementation_as_text_not_as_a_mention() -> None:
    # What nonebot-adapter-onebot builds from the array, and the CQ string an implementation that
    # speaks only strings would receive: both carry the text, neither an @all.
    from nonebot.adapters.onebot.v11 import Message, MessageSegment

    text = "[CQ:at,qq=all] 开会了"
    _action, params = onebot_action(message(Segment.reply("9309"), Segment.text(text)))
    sent = Message([MessageSegment(**segment) for segment in params["message"]])
    assert [segment.type for segment in sent] == ["reply", "text"]
    reparsed = Message(str(sent))
    assert [(s.type, s.data) for s in reparsed] == [
        ("reply", {"id": "9309"}),
        ("text", {"text": text}),
    ]


def test_cq_escape_follows_the_onebot_rules() -> None:
    assert cq_escape("[CQ:at,qq=all]&") == "&#91;CQ:at,qq=all&#93;&amp;"
    assert cq_escape("a,b[c]", in_param=True) == "a&#44;b&#91;c&#93;"


@pytest.mark.parametrize(
    "text", ["[CQ:at,qq=all]", "a,b&c", "&#91;literal&#93;", "&amp;", "]]&[[,,", "纯文本"]
)
def test_cq_unescape_undoes_cq_escape(text: str) -> None:
    assert cq_unescape(cq_escape(text)) == text
    assert cq_unescape(cq_escape(text, in_param=True)) == text


def test_an_escaped_lookalike_parses_back_as_one_text_segment() -> None:
    text = "[CQ:at,qq=all] 开会"
    assert parse_cq_string(cq_escape(text)) == [{"type": "text", "data": {"text": text}}]


class _FakeBot:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_api(self, api: str, **data: Any) -> Any:
        self.calls.append((api, data))
        return {"message_id": 77}


def test_onebot_transport_wraps_a_bot_and_names_its_platform() -> None:
    bot = _FakeBot()
    transport = OneBotTransport(bot)
    assert transport.platform == ONEBOT_V11 == "onebot.v11"
    assert isinstance(transport, Transport)
    result = asyncio.run(transport.call_api("send_group_msg", group_id=1, message=[]))
    assert result == {"message_id": 77}
    assert bot.calls == [("send_group_msg", {"group_id": 1, "message": []})]


def test_a_negative_id_is_a_number_and_a_lone_minus_is_text() -> None:
    from promptweave.delivery.onebot import _platform_id

    assert _platform_id("-2147480001") == -2147480001
    assert _platform_id("-") == "-"
    assert _platform_id("-x1") == "-x1"
