"""The contrib plugin ``onebot``: OneBot v11 messages as ChatMessage."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from promptweave import (
    IMAGE_WITHOUT_URL,
    ChatMessage,
    Config,
    IncomingEvent,
    Promptweave,
    Stores,
    hookimpl,
)
from promptweave.contrib.onebot import (
    escape_cq,
    parse_cq_string,
    parse_event,
    parse_message,
    unescape_cq,
)
from promptweave.errors import PluginImportError
from promptweave.messages.images import is_vision_url

TIME = dt.datetime(2026, 11, 29, 4, 15, 48, tzinfo=dt.UTC)


def parse(message: object) -> object:
    return parse_message(message, bot_id="10001", sender_id="30022", time=TIME)  # type: ignore[arg-type]


def test_cq_string_with_reply_at_and_escaped_text() -> None:
    found = parse("[CQ:reply,id=9309][CQ:at,qq=10001] 哪一家&#91;笑&#93;？A&amp;B")
    assert found.text == "哪一家[笑]？A&B"
    assert found.reply_to == "9309"
    assert found.addressed is True
    assert found.raw == "[CQ:reply,id=9309][CQ:at,qq=10001] 哪一家&#91;笑&#93;？A&amp;B"


def test_cq_parameter_values_unescape_commas() -> None:
    segments = parse_cq_string("[CQ:image,file=a.jpg,url=https://img.example/a.jpg?w=1&#44;h=2]")
    assert segments == [
        {"type": "image", "data": {"file": "a.jpg", "url": "https://img.example/a.jpg?w=1,h=2"}}
    ]


def test_escape_round_trips() -> None:
    text = "a,[b]&#91;&"
    assert unescape_cq(escape_cq(text, in_param=True)) == text
    assert escape_cq("[x]&") == "&#91;x&#93;&amp;"


def test_segment_array_with_every_supported_type() -> None:
    found = parse(
        [
            {"type": "reply", "data": {"id": 9309}},
            {"type": "at", "data": {"qq": "30017", "name": "青柠汽水"}},
            {"type": "text", "data": {"text": "你看"}},
            {"type": "face", "data": {"id": "178"}},
            {"type": "image", "data": {"file": "abc.image", "url": "https://img.example/a.jpg"}},
            {
                "type": "mface",
                "data": {"url": "https://img.example/sticker.gif", "summary": "[摸摸头]"},
            },
            {"type": "at", "data": {"qq": "all"}},
            {"type": "record", "data": {"file": "voice.amr"}},
        ]
    )
    assert found.text == "@青柠汽水 你看[表情]@全体成员"
    assert found.images == ("https://img.example/a.jpg", "https://img.example/sticker.gif")
    assert found.reply_to == "9309"
    assert found.addressed is False


def test_at_someone_else_by_id_reads_at_id() -> None:
    assert parse("[CQ:at,qq=30017] 你好").text == "@30017 你好"


def test_image_without_http_url_is_not_a_vision_input() -> None:
    found = parse("[CQ:image,file=local.image]")
    assert found.images == (IMAGE_WITHOUT_URL,)
    assert not is_vision_url(found.images[0])


def test_bad_message_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="CQ-code string or a segment list"):
        parse(42)
    with pytest.raises(ValueError, match="segment 0 has no 'type'"):
        parse([{"data": {}}])


def test_group_event_becomes_message_with_group_and_sender_card() -> None:
    event = {
        "post_type": "message",
        "message_type": "group",
        "time": 1795925748,
        "self_id": 10001,
        "group_id": 20001,
        "user_id": 30022,
        "message_id": 9311,
        "message": "[CQ:at,qq=10001] 在吗",
        "sender": {"user_id": 30022, "nickname": "amon", "card": "阿蒙"},
    }
    parsed = parse_event(event)
    assert (parsed.bot_id, parsed.group_id) == ("10001", "20001")
    message = parsed.message
    assert (message.id, message.sender_id, message.sender_name) == ("9311", "30022", "阿蒙")
    assert message.text == "在吗" and message.addressed
    assert message.time == dt.datetime.fromtimestamp(1795925748, dt.UTC)


def test_private_event_has_no_group() -> None:
    event = {
        "post_type": "message",
        "message_type": "private",
        "time": 1,
        "user_id": 3,
        "message": "hi",
        "self_id": 1,
    }
    assert parse_event(event).group_id is None


def test_non_message_event_is_refused() -> None:
    with pytest.raises(ValueError, match="post_type='notice'"):
        parse_event({"post_type": "notice"})


GROUP_EVENT = {
    "post_type": "message",
    "message_type": "group",
    "group_id": 1,
    "time": 0,
    "user_id": 5,
    "message": [{"type": "text", "data": {"text": "早"}}],
}


def test_parse_message_gives_the_message_of_the_parse_event_hook() -> None:
    runtime = Promptweave.from_config(Config(), contrib=["onebot"], stores=Stores.in_memory())
    assert runtime.plugins.hooks.parse_message("onebot", GROUP_EVENT, "10001").text == "早"
    with pytest.raises(ValueError, match="no plugin parses messages of platform 'telegram'"):
        runtime.plugins.hooks.parse_message("telegram", {}, "10001")


class _OldParser:
    """A plugin written against the deprecated ``parse_incoming`` hook."""

    @hookimpl
    def parse_incoming(self, platform: str, payload: Any, bot_id: str) -> ChatMessage | None:
        if platform != "old":
            return None
        return ChatMessage(sender_id="5", text=payload["text"], time=dt.datetime.now(dt.UTC))


def test_hook_parse_incoming() -> None:
    """The old name still works for one release, warned about when the plugin is registered."""
    with pytest.warns(DeprecationWarning, match="parse_incoming hook is deprecated"):
        runtime = Promptweave.from_config(
            Config(), contrib=["onebot"], extra_plugins=[_OldParser()], stores=Stores.in_memory()
        )
    hooks = runtime.plugins.hooks
    assert hooks.parse_message("old", {"text": "早"}, "10001").text == "早"
    # parse_event answers first: the one hook both names are now.
    assert hooks.parse_message("onebot", GROUP_EVENT, "10001").text == "早"


def test_a_plugin_of_parse_event_alone_is_not_warned(recwarn) -> None:
    Promptweave.from_config(Config(), contrib=["onebot"], stores=Stores.in_memory())
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_onebot_is_off_unless_enabled() -> None:
    runtime = Promptweave.from_config(Config(), stores=Stores.in_memory())
    with pytest.raises(ValueError, match="onebot"):
        runtime.plugins.hooks.parse_message("onebot", {}, "10001")
    assert "onebot" not in runtime.plugins.infos
    with pytest.raises(PluginImportError):
        Promptweave.from_config(Config(), contrib=["one_bot"])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"time": None}, "Unix timestamp"),
        ({"time": 1e20}, "not a valid Unix timestamp"),
        ({"time": "soon"}, "not a valid Unix timestamp"),
        ({"message": [{"type": "text", "data": "hi"}]}, "'data' that is not an object"),
        ({"message": 42}, "CQ-code string or a segment list"),
    ],
)
def test_malformed_events_raise_value_errors_that_say_why(change, problem):
    event = {
        "post_type": "message",
        "message_type": "group",
        "group_id": 20001,
        "user_id": 30017,
        "self_id": 10001,
        "time": 1764400000,
        "message": "你好",
        **change,
    }
    with pytest.raises(ValueError, match=problem):
        parse_event(event)


def test_hook_parse_event() -> None:
    runtime = Promptweave.from_config(Config(), contrib=["onebot"], stores=Stores.in_memory())
    event = {
        "post_type": "message",
        "message_type": "group",
        "group_id": 20001,
        "self_id": 10001,
        "time": 0,
        "user_id": 5,
        "message_id": 77,
        "sender": {"user_id": 5, "nickname": "阿蒙", "role": "admin"},
        "message": [
            {"type": "at", "data": {"qq": "10001"}},
            {"type": "text", "data": {"text": "早"}},
        ],
    }
    parsed = runtime.plugins.pm.hook.parse_event(platform="onebot", payload=event, bot_id="10001")
    assert isinstance(parsed, IncomingEvent)
    assert (parsed.group_id, parsed.sender_role, parsed.self_sent) == ("20001", "admin", False)
    assert parsed.message.addressed and parsed.message.text == "早"
    own = {**event, "post_type": "message_sent", "user_id": 10001}
    assert runtime.plugins.pm.hook.parse_event(
        platform="onebot", payload=own, bot_id="10001"
    ).self_sent
    private = {**event, "message_type": "private", "sender": {"user_id": 5}}
    parsed = runtime.plugins.pm.hook.parse_event(platform="onebot", payload=private, bot_id="10001")
    assert parsed.group_id is None and parsed.sender_role == "member"
    with pytest.raises(ValueError, match="'sender' must be an object"):
        runtime.plugins.pm.hook.parse_event(
            platform="onebot", payload={**event, "sender": "x"}, bot_id="10001"
        )
    assert runtime.plugins.pm.hook.parse_event(platform="matrix", payload={}, bot_id="1") is None


@pytest.mark.parametrize(
    "message",
    [
        "[CQ:reply,id=-2147480001][CQ:at,qq=10001] 这是什么猫",
        [
            {"type": "reply", "data": {"id": "-2147480001"}},
            {"type": "at", "data": {"qq": "10001"}},
            {"type": "text", "data": {"text": " 这是什么猫"}},
        ],
        [
            {"type": "reply", "data": {"id": -2147480001}},
            {"type": "text", "data": {"text": "这是什么猫"}},
        ],
    ],
)
def test_negative_message_ids_of_newer_qq_are_ids_like_any_other(message: object) -> None:
    event = {
        "post_type": "message",
        "message_type": "group",
        "time": 1795925748,
        "self_id": 10001,
        "group_id": 20001,
        "user_id": 30022,
        "message_id": -2147480002,
        "message": message,
        "sender": {"user_id": 30022, "nickname": "amon"},
    }
    parsed = parse_event(event).message
    assert (parsed.id, parsed.reply_to, parsed.text) == ("-2147480002", "-2147480001", "这是什么猫")
    runtime = Promptweave.from_config(Config(), contrib=["onebot"], stores=Stores.in_memory())
    incoming = runtime.plugins.hooks.parse_event("onebot", event, "10001")
    assert isinstance(incoming, IncomingEvent)
    assert incoming.message.reply_to == "-2147480001"
    runtime.close()


@pytest.mark.parametrize("name", ["@小红", "@@小红", "小红"])
def test_an_at_whose_name_carries_its_own_at_sign_is_shown_once(name: str) -> None:
    message = parse(
        [
            {"type": "at", "data": {"qq": "30099", "name": name}},
            {"type": "text", "data": {"text": "你好"}},
        ]
    )
    assert message.text == "@小红 你好"  # type: ignore[attr-defined]


def test_an_at_named_only_at_signs_reads_its_id() -> None:
    message = parse([{"type": "at", "data": {"qq": "30099", "name": "@"}}])
    assert message.text == "@30099"  # type: ignore[attr-defined]


@pytest.mark.parametrize("reply_id", ["0", 0, "", " "])
def test_a_reply_id_of_zero_or_blank_is_no_reply(reply_id: object) -> None:
    message = parse(
        [{"type": "reply", "data": {"id": reply_id}}, {"type": "text", "data": {"text": "嗯"}}]
    )
    assert message.reply_to is None  # type: ignore[attr-defined]
    assert parse(f"[CQ:reply,id={reply_id}]嗯").reply_to is None  # type: ignore[attr-defined]
    assert parse([{"type": "reply", "data": {"id": "-7"}}]).reply_to == "-7"  # type: ignore[attr-defined]
