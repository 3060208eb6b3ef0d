"""OneBot v11: outgoing messages as message-segment arrays, the send actions, CQ-code escaping.

Messages are always sent in the array format: a text segment is literal text to the
implementation (NapCat, Lagrange, go-cqhttp), so text that looks like a CQ code (``[CQ:at,qq=all]``)
typed by a user or written by the model reaches the group as those characters, never as a mention
of everyone. :func:`cq_escape` is for whoever needs the string form.
"""

from __future__ import annotations

from typing import Any

import attrs

from promptweave.delivery.outgoing import OutgoingMessage, Segment

__all__ = [
    "ONEBOT_V11",
    "OneBotTransport",
    "cq_escape",
    "cq_unescape",
    "onebot_action",
    "onebot_segment",
    "onebot_segments",
]

#: The platform name of OneBot v11 transports (``Transport.platform``).
ONEBOT_V11 = "onebot.v11"

# The platform-neutral parameter name of a kind, and OneBot's.
_PARAMETERS = {
    "text": ("text", "text"),
    "reply": ("id", "id"),
    "at": ("user_id", "qq"),
    "face": ("id", "id"),
}


def onebot_segment(segment: Segment) -> dict[str, Any]:
    """One segment in the OneBot v11 array format, ``{"type": ..., "data": {...}}``.

    ``text``, ``reply``, ``at`` and ``face`` are mapped (``at``'s ``user_id`` becomes ``qq``);
    any other kind passes through under its own name with its data unchanged.

    :raises ValueError: when a mapped kind lacks its parameter.
    """
    mapping = _PARAMETERS.get(segment.kind)
    if mapping is None:
        return {"type": segment.kind, "data": dict(segment.data)}
    neutral, onebot = mapping
    if neutral not in segment.data:
        raise ValueError(f"a {segment.kind} segment needs data[{neutral!r}], got {segment.data}")
    return {"type": segment.kind, "data": {onebot: segment.data[neutral]}}


def onebot_segments(message: OutgoingMessage) -> list[dict[str, Any]]:
    """The message as a OneBot v11 segment array (empty text segments left out)."""
    return [
        onebot_segment(segment)
        for segment in message.segments
        if not (segment.kind == "text" and not segment.data.get("text"))
    ]


def _platform_id(value: str) -> int | str:
    """OneBot ids are numbers, message ids negative ones too (newer QQ clients send them); a
    non-numeric id (another implementation's) stays text."""
    digits = value[1:] if value.startswith("-") else value
    return int(value) if digits.isascii() and digits.isdigit() else value


def onebot_action(message: OutgoingMessage) -> tuple[str, dict[str, Any]]:
    """The OneBot v11 action that sends ``message`` and its parameters.

    :returns: ``("send_group_msg", {"group_id": ..., "message": [...]})`` for a group, else
        ``("send_private_msg", {"user_id": ..., "message": [...]})``; numeric ids become ints.
    """
    segments = onebot_segments(message)
    if message.group_id is not None:
        return "send_group_msg", {"group_id": _platform_id(message.group_id), "message": segments}
    return "send_private_msg", {"user_id": _platform_id(message.user_id), "message": segments}


def cq_escape(text: str, *, in_param: bool = False) -> str:
    """Escape text for a CQ-code string: ``&`` ``[`` ``]``, and ``,`` inside a parameter value.

    :param in_param: the text is a CQ-code parameter value (``[CQ:share,title=…]``).
    """
    escaped = text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")
    return escaped.replace(",", "&#44;") if in_param else escaped


def cq_unescape(text: str) -> str:
    """Undo :func:`cq_escape` (``&amp;`` last, so ``&amp;#91;`` stays ``&#91;``)."""
    return (
        text.replace("&#44;", ",").replace("&#91;", "[").replace("&#93;", "]").replace("&amp;", "&")
    )


@attrs.frozen
class OneBotTransport:
    """A OneBot v11 connection as a :class:`promptweave.Transport`: wraps anything with an async
    ``call_api(api, **params)``, such as a NoneBot ``Bot`` of nonebot-adapter-onebot.

    :param bot: the connection.
    """

    bot: Any
    platform: str = attrs.field(default=ONEBOT_V11, init=False)

    async def call_api(self, api: str, **params: Any) -> Any:
        """Call the OneBot action ``api``; whatever the bot raises propagates."""
        return await self.bot.call_api(api, **params)
