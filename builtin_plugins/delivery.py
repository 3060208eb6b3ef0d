"""Built-in plugin ``delivery``: read the model's answer, choose stickers, send over OneBot v11.

All are ``trylast``, so any other plugin's implementation wins:

- ``read_model_answer`` applies the reply contract of section ``reply_shape``
  (:func:`promptweave.read_model_answer_default`) with ``[delivery] sticker``;
- ``choose_sticker`` looks the intent up in ``[delivery] faces``;
- ``send_message`` sends to a ``"onebot.v11"`` transport as a segment array.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from promptweave import hookimpl

# The reply contract and the OneBot segments load with the first answer read or message sent,
# not with the plugins: inspecting a turn never needs them (docs/performance.md).
if TYPE_CHECKING:
    from promptweave import (
        Config,
        ModelAnswer,
        OutgoingMessage,
        ReplyShape,
        Segment,
        SendReceipt,
        Transport,
    )


@hookimpl(trylast=True)
def read_model_answer(
    text: str, shape: ReplyShape, system_prompt: str, config: Config
) -> ModelAnswer:
    from promptweave import read_model_answer_default

    return read_model_answer_default(
        text, shape, system_prompt=system_prompt, sticker_mode=config.delivery.sticker
    )


@hookimpl(trylast=True)
def choose_sticker(intent: str, config: Config) -> Segment | None:
    from promptweave import Segment

    if config.delivery.sticker == "drop":
        return None
    face_id = config.delivery.faces.get(intent.strip())
    return None if face_id is None else Segment.face(face_id)


@hookimpl(trylast=True)
def send_message(message: OutgoingMessage, transport: Transport) -> Awaitable[SendReceipt] | None:
    from promptweave.delivery.onebot import ONEBOT_V11

    if transport.platform != ONEBOT_V11:
        return None
    return _send_onebot(message, transport)


async def _send_onebot(message: OutgoingMessage, transport: Transport) -> SendReceipt:
    from promptweave import SendReceipt
    from promptweave.delivery.onebot import onebot_action

    try:
        action, params = onebot_action(message)
        result = await transport.call_api(action, **params)
    except Exception as error:  # any failure of the platform is a failed receipt, not a crash
        return SendReceipt(ok=False, detail=f"{type(error).__name__}: {error}")
    message_id = _message_id(result)
    if message_id is None:
        return SendReceipt(ok=False, detail=f"the platform returned no message id: {result!r}")
    return SendReceipt(ok=True, message_id=message_id)


def _message_id(result: Any) -> str | None:
    """The ``message_id`` of a OneBot send result: ``{"message_id": 42}`` or a bare ``42``."""
    if isinstance(result, Mapping):
        result = result.get("message_id")
    if isinstance(result, bool) or not isinstance(result, int | str):
        return None
    text = str(result).strip()
    return text or None
