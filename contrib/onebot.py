"""Contrib plugin ``onebot``: OneBot v11 messages as promptweave :class:`promptweave.ChatMessage`.

Enable it by name (``[plugins] contrib = ["onebot"]``): it implements the ``parse_event`` hook,
which the live loop calls, and ``fetch_message``, which asks a ``"onebot.v11"`` transport for a
quoted message by its id (the ``get_msg`` action: :func:`fetch_quoted_message`); and ``runtime.plugins.hooks.parse_message("onebot", event, bot_id)``
gives the event's message alone. Or use the functions directly::

    from promptweave.contrib.onebot import parse_event, parse_message

A message is a CQ-code string (``[CQ:at,qq=10001] 你好``, with ``&amp; &#91; &#93;`` escaped in
text and also ``&#44;`` in parameter values) or an array of segments (``{"type": "text",
"data": {"text": "你好"}}``). Understood segments: ``text``; ``at`` (a mention of the bot sets
``addressed`` and is left out of the text, others read ``@name``, one ``@`` even when the name
carries its own); ``reply`` (``reply_to``; a blank id or ``0`` is no reply);
``image`` and ``mface`` (their HTTP(S) URL goes to ``images``, or :data:`promptweave.IMAGE_WITHOUT_URL`
when the segment has none, so the message still shows ``[图片]``); ``face`` (``[表情]``). Other segments are kept only in ``raw``, which holds the message as received.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from promptweave import IMAGE_WITHOUT_URL, ChatMessage, IncomingEvent, hookimpl
from promptweave._fields import has_lone_surrogate
from promptweave.messages.images import is_vision_url

if TYPE_CHECKING:
    from promptweave import Transport

__all__ = [
    "OneBotEvent",
    "escape_cq",
    "event_time",
    "fetch_quoted_message",
    "message_from_get_msg",
    "parse_cq_string",
    "parse_event",
    "parse_incoming_event",
    "parse_message",
    "unescape_cq",
]

FACE_TEXT = "[表情]"
MENTION_ALL_TEXT = "@全体成员"

_CQ_CODE = re.compile(r"\[CQ:([A-Za-z0-9_.\-]+)((?:,[^,\[\]]*)*)\]")
_TEXT_ESCAPES = (("&", "&amp;"), ("[", "&#91;"), ("]", "&#93;"))


def escape_cq(text: str, *, in_param: bool = False) -> str:
    """Escape text for a CQ-code string (``,`` too inside a parameter value)."""
    for plain, escaped in _TEXT_ESCAPES:
        text = text.replace(plain, escaped)
    return text.replace(",", "&#44;") if in_param else text


def unescape_cq(text: str) -> str:
    """Undo :func:`escape_cq` (``&amp;`` last, so ``&amp;#91;`` reads ``&#91;``)."""
    for plain, escaped in (*reversed(_TEXT_ESCAPES[1:]), (",", "&#44;"), _TEXT_ESCAPES[0]):
        text = text.replace(escaped, plain)
    return text


def parse_cq_string(message: str) -> list[dict[str, Any]]:
    """Split a CQ-code string into OneBot segments."""
    segments: list[dict[str, Any]] = []
    position = 0
    for match in _CQ_CODE.finditer(message):
        if match.start() > position:
            segments.append(
                {"type": "text", "data": {"text": unescape_cq(message[position : match.start()])}}
            )
        data: dict[str, str] = {}
        for pair in filter(None, match.group(2).split(",")):
            key, _, value = pair.partition("=")
            data[key] = unescape_cq(value)
        segments.append({"type": match.group(1), "data": data})
        position = match.end()
    if position < len(message):
        segments.append({"type": "text", "data": {"text": unescape_cq(message[position:])}})
    return segments


def _segments(message: object) -> list[Mapping[str, Any]]:
    if isinstance(message, str):
        return list(parse_cq_string(message))
    if not isinstance(message, list | tuple):
        raise ValueError(
            f"a OneBot message is a CQ-code string or a segment list, not {type(message).__name__}"
        )
    for index, segment in enumerate(message):
        if not isinstance(segment, Mapping) or not isinstance(segment.get("type"), str):
            raise ValueError(f"OneBot segment {index} has no 'type': {segment!r}")
        data = segment.get("data")
        if data is not None and not isinstance(data, Mapping):
            raise ValueError(f"OneBot segment {index} has 'data' that is not an object: {data!r}")
    return list(message)


def _reply_id(value: object) -> str | None:
    """A reply segment's message id; blank, or ``0`` (Lagrange's "message not found"), is no
    reply."""
    text = "" if value is None else str(value).strip()
    return None if text in ("", "0") else text


def _image_url(data: Mapping[str, Any]) -> str | None:
    for key in ("url", "file"):
        value = str(data.get(key) or "").strip()
        if is_vision_url(value):
            return value
    return None


def parse_message(
    message: str | Sequence[Mapping[str, Any]],
    *,
    bot_id: str,
    sender_id: str,
    time: dt.datetime,
    message_id: str | None = None,
    sender_name: str = "",
) -> ChatMessage:
    """Turn a OneBot v11 message (CQ-code string or segment array) into a :class:`ChatMessage`.

    :param bot_id: the receiving bot; ``at`` segments naming it set ``addressed``.
    :raises ValueError: the message is neither a string nor a list of segments.
    """
    parts: list[str] = []
    images: list[str] = []
    reply_to: str | None = None
    addressed = False
    for segment in _segments(message):
        kind = segment["type"]
        data: Mapping[str, Any] = segment.get("data") or {}
        if kind == "text":
            text = str(data.get("text", ""))
            if parts and parts[-1].startswith("@") and text[:1] not in ("", " "):
                parts.append(" ")  # keep a mention apart from the words after it
            parts.append(text)
        elif kind == "at":
            target = str(data.get("qq", ""))
            if target == bot_id:
                addressed = True
            elif target == "all":
                parts.append(MENTION_ALL_TEXT)
            elif target:
                # Lagrange writes the name with its "@" already (``@小红``): shown once.
                name = str(data.get("name") or "").lstrip("@") or target
                parts.append(f"@{name}")
        elif kind == "reply" and _reply_id(data.get("id")) is not None:
            reply_to = _reply_id(data.get("id"))
        elif kind in ("image", "mface"):
            url = _image_url(data)
            if url is None:
                # A local path or a platform file id is no URL a provider may be given, but the
                # message did carry an image: keep its [图片] mark (docs/design.md#images).
                images.append(IMAGE_WITHOUT_URL)
            elif url not in images:
                images.append(url)
        elif kind == "face":
            parts.append(FACE_TEXT)
    return ChatMessage(
        id=message_id,
        sender_id=sender_id,
        sender_name=sender_name,
        text="".join(parts).strip(),
        time=time,
        raw=message,
        addressed=addressed,
        reply_to=reply_to,
        images=tuple(images),
    )


@attrs.frozen(kw_only=True)
class OneBotEvent:
    """A parsed OneBot v11 message event.

    :param group_id: ``None`` for a private message.
    """

    bot_id: str
    group_id: str | None
    message: ChatMessage


def parse_event(event: Mapping[str, Any], bot_id: str | None = None) -> OneBotEvent:
    """Parse a OneBot v11 ``message`` event (``post_type == "message"``).

    :param bot_id: the receiving bot; the event's ``self_id`` by default.
    :raises ValueError: the event is not a message event or lacks a field.
    """
    if not isinstance(event, Mapping):
        raise ValueError(f"a OneBot event is a JSON object, not {type(event).__name__}")
    if event.get("post_type") not in ("message", "message_sent"):
        raise ValueError(f"not a OneBot message event: post_type={event.get('post_type')!r}")
    missing = [key for key in ("user_id", "message", "time") if key not in event]
    if missing:
        raise ValueError(f"OneBot message event lacks {', '.join(missing)}")
    receiver = bot_id if bot_id is not None else str(event.get("self_id", ""))
    sender = event.get("sender") or {}
    if not isinstance(sender, Mapping):
        raise ValueError(f"OneBot event 'sender' must be an object, not {sender!r}")
    group = _group_id(event)
    message = parse_message(
        event["message"],
        bot_id=receiver,
        sender_id=str(event["user_id"]),
        sender_name=str(sender.get("card") or sender.get("nickname") or ""),
        message_id=str(event["message_id"]) if event.get("message_id") is not None else None,
        time=event_time(event["time"]),
    )
    return OneBotEvent(bot_id=receiver, group_id=group, message=message)


def _group_id(event: Mapping[str, Any]) -> str | None:
    """The group of a message event; ``None`` for a private one.

    :raises ValueError: a group message names no group (no ``group_id``, a blank one, or one
        that is no text), or the message is neither private nor a group's (go-cqhttp's
        ``guild`` channel messages): neither is taken as a private chat.
    """
    kind = event.get("message_type")
    if kind == "private" or (kind is None and "group_id" not in event):
        return None
    if kind not in ("group", None):
        raise ValueError(
            f"OneBot message_type {kind!r} is neither 'group' nor 'private' "
            "(guild and channel messages are not handled)"
        )
    value = event.get("group_id")
    group = "" if value is None or isinstance(value, bool) else str(value)
    if not group.strip():
        raise ValueError(f"OneBot group message has no group_id (got {value!r})")
    if has_lone_surrogate(group):
        raise ValueError(f"OneBot group_id {group!r} holds a lone surrogate, which is not text")
    return group


def event_time(value: object) -> dt.datetime:
    """The UTC time of a OneBot event's ``time`` (Unix seconds, a number or its text).

    :raises ValueError: it is no number, or one the platform's clock cannot hold (too large,
        too small, not finite).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"OneBot event time must be a Unix timestamp, not {value!r}")
    try:
        return dt.datetime.fromtimestamp(float(value), dt.UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise ValueError(f"OneBot event time {value!r} is not a valid Unix timestamp") from exc


@hookimpl(specname="parse_event")
def parse_incoming_event(platform: str, payload: Any, bot_id: str) -> IncomingEvent | None:
    """The live loop's event: the message, its group, the sender's role, and whether it is the
    bot's own message reported back (``message_sent``, or sent from the bot's own account)."""
    if platform != "onebot":
        return None
    if not isinstance(payload, Mapping):
        raise ValueError("the onebot plugin parses OneBot v11 event objects")
    parsed = parse_event(payload, bot_id)
    sender = payload.get("sender")
    role = sender.get("role") if isinstance(sender, Mapping) else None
    own = payload.get("post_type") == "message_sent" or parsed.message.sender_id == parsed.bot_id
    return IncomingEvent(
        platform="onebot",
        bot_id=parsed.bot_id,
        group_id=parsed.group_id,
        message=parsed.message,
        sender_role=str(role or "member"),
        self_sent=own,
    )


#: The platform name of the transports :func:`fetch_quoted_message` speaks to.
ONEBOT_V11 = "onebot.v11"


def _action_id(value: str) -> int | str:
    """A OneBot message id as the action takes it: a number, negative ones too (newer QQ
    clients send them); any other id stays text."""
    digits = value[1:] if value.startswith("-") else value
    return int(value) if digits.isascii() and digits.isdigit() else value


def message_from_get_msg(result: Mapping[str, Any], bot_id: str) -> ChatMessage:
    """The :class:`ChatMessage` of a OneBot v11 ``get_msg`` result (``message_id``, ``time``,
    ``sender``, ``message``), parsed like an incoming message.

    :raises ValueError: the result is not a message (no ``message`` or ``time``).
    """
    if not isinstance(result, Mapping) or "message" not in result or "time" not in result:
        raise ValueError(f"a get_msg result names a message and its time, not {result!r}")
    sender = result.get("sender") or {}
    if not isinstance(sender, Mapping):
        sender = {}
    message_id = result.get("message_id")
    return parse_message(
        result["message"],
        bot_id=bot_id,
        sender_id=str(sender.get("user_id") or result.get("user_id") or ""),
        sender_name=str(sender.get("card") or sender.get("nickname") or ""),
        message_id=None if message_id is None else str(message_id),
        time=event_time(result["time"]),
    )


async def _get_msg(message_id: str, bot_id: str, transport: Transport) -> ChatMessage | None:
    result = await transport.call_api("get_msg", message_id=_action_id(message_id))
    if result is None:
        return None
    return message_from_get_msg(result, bot_id)


@hookimpl(specname="fetch_message")
def fetch_quoted_message(
    message_id: str, bot_id: str, group_id: str | None, transport: Transport
) -> Awaitable[ChatMessage | None] | None:
    """The message ``message_id`` from a ``"onebot.v11"`` transport: the ``get_msg`` action
    (the id as a number, negative ones too), its result parsed like an incoming message;
    whatever the action raises propagates (the live loop traces it)."""
    if transport.platform != ONEBOT_V11:
        return None
    return _get_msg(message_id, bot_id, transport)
