"""The records of the delivery stage: what the model answered, what goes out, what came back.

The reply contract (:func:`promptweave.read_model_answer_default`) reads the model's text into a
:class:`ModelAnswer`; :func:`promptweave.delivery.plan.plan_delivery` turns it into a :class:`DeliveryPlan` of
platform-neutral :class:`OutgoingMessage` records; a ``send_message`` hook sends each one through a
:class:`Transport` and answers with a :class:`SendReceipt` (``docs/delivery.md``). A delivered reply
is observed with a :class:`ReplyInjection`, the sources that went into it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from promptweave._fields import str_tuple
from promptweave.decision import DeliveryStyle

__all__ = [
    "DeliveryPlan",
    "InjectedSource",
    "ModelAnswer",
    "OutgoingMessage",
    "ReplyInjection",
    "Segment",
    "SendReceipt",
    "Transport",
    "text_hash",
]


def _bubbles(values: tuple[str, ...]) -> tuple[str, ...]:
    bubbles = str_tuple(values)
    for index, bubble in enumerate(bubbles, 1):
        if not isinstance(bubble, str) or not bubble.strip():
            raise ValueError(f"bubble {index} must be non-blank text, not {bubble!r}")
    return bubbles


@attrs.frozen(kw_only=True)
class ModelAnswer:
    """The model's answer, read by the reply contract: the bubbles to send, or silence.

    :param bubbles: the text bubbles, in order; empty when ``silent``.
    :param sticker: the sticker intent of the answer's final ``[表情：…]`` line (``"笑"``), or
        ``None``.
    :param silent: send nothing.
    :param reason: why it is silent: ``pass`` (the model said ``PASS``), ``empty`` (nothing was
        left to send) or ``leak`` (the answer repeated the prompt); ``""`` when not silent.
    :param removed: what reading removed or changed, for the trace: ``markdown``, ``code_fence``,
        ``json_wrapper``, ``stage_direction``, ``preamble`` (an announcing first line), ``label``
        (a ``回复：`` prefix), ``sticker_line``, ``sticker_dropped``,
        ``merged:5->3``, ``cut:bubble 2``, ``leak:…`` (what matched).
    """

    bubbles: tuple[str, ...] = attrs.field(converter=_bubbles)
    sticker: str | None = None
    silent: bool = False
    reason: str = ""
    removed: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)

    def __attrs_post_init__(self) -> None:
        if self.silent and (self.bubbles or self.sticker is not None):
            raise ValueError("a silent answer has no bubbles and no sticker")

    @classmethod
    def silence(cls, reason: str, removed: tuple[str, ...] = ()) -> ModelAnswer:
        """A silent answer: ``reason`` is ``pass``, ``empty`` or ``leak``."""
        return cls(bubbles=(), silent=True, reason=reason, removed=removed)

    @property
    def text(self) -> str:
        """The bubbles, one a line."""
        return "\n".join(self.bubbles)


def _segment_data(value: Mapping[str, Any]) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"segment data must be a mapping, not {type(value).__name__}")
    data: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or isinstance(item, bool) or not isinstance(item, str | int):
            raise ValueError(f"segment data maps names to text or numbers, not {key!r}: {item!r}")
        data[key] = str(item)
    return data


@attrs.frozen(kw_only=True)
class Segment:
    """One platform-neutral part of an outgoing message.

    The kinds every platform adapter understands: ``text`` (``{"text": ...}``), ``reply``
    (``{"id": message id}``, quoting a message), ``at`` (``{"user_id": ...}``, a mention) and
    ``face`` (``{"id": face id}``, a platform face). An adapter passes any other kind through
    under its own name, so a plugin can send, say, an ``image`` its platform knows.

    :param kind: the segment's kind.
    :param data: its parameters; numbers become text.
    """

    kind: str
    # Excluded from the hash: a dict is unhashable, and equal segments still hash alike.
    data: Mapping[str, str] = attrs.field(factory=dict, converter=_segment_data, hash=False)

    @classmethod
    def text(cls, text: str) -> Segment:
        """Plain text, sent literally (never read as markup)."""
        return cls(kind="text", data={"text": text})

    @classmethod
    def reply(cls, message_id: str) -> Segment:
        """Quote the message ``message_id``."""
        return cls(kind="reply", data={"id": message_id})

    @classmethod
    def at(cls, user_id: str) -> Segment:
        """Mention the user ``user_id``."""
        return cls(kind="at", data={"user_id": user_id})

    @classmethod
    def face(cls, face_id: str) -> Segment:
        """The platform face ``face_id``."""
        return cls(kind="face", data={"id": face_id})


def _segments(values: Iterable[Segment]) -> tuple[Segment, ...]:
    segments = tuple(values)
    for segment in segments:
        if not isinstance(segment, Segment):
            raise TypeError(f"a message holds Segment records, not {segment!r}")
    return segments


@attrs.frozen(kw_only=True)
class OutgoingMessage:
    """One message to send: a text bubble (with its quote or mention) or a sticker.

    :param group_id: the group; ``None`` sends a private message to ``user_id``.
    :param user_id: the user the turn answers.
    :param bubble_index: 0 for the first message of the turn, counting every message.
    :param pause_s: wait this long before sending it (0 for the first).
    """

    bot_id: str
    group_id: str | None
    user_id: str
    segments: tuple[Segment, ...] = attrs.field(converter=_segments)
    bubble_index: int = attrs.field(validator=attrs.validators.ge(0))
    pause_s: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))

    @property
    def text(self) -> str:
        """The message's text segments joined: what a reader of the chat sees as text."""
        return "".join(s.data.get("text", "") for s in self.segments if s.kind == "text")


def _messages(values: Iterable[OutgoingMessage]) -> tuple[OutgoingMessage, ...]:
    return tuple(values)


def _trace(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@attrs.frozen(kw_only=True)
class DeliveryPlan:
    """Every message of one turn's answer, in order, and why it looks as it does.

    :param messages: what to send; empty when the answer is silent.
    :param style: the delivery style actually used (a quote whose target is no longer a
        candidate goes out plain).
    :param quoted_message_id: the message the first bubble quotes, or ``None``.
    :param trace: the decisions made (``style``, ``quote_dropped``, ``sticker``, ``pauses``,
        ``answer``…), for the turn's trace.
    """

    bot_id: str
    group_id: str | None
    user_id: str
    messages: tuple[OutgoingMessage, ...] = attrs.field(converter=_messages)
    style: DeliveryStyle = attrs.field(converter=DeliveryStyle)
    quoted_message_id: str | None = None
    trace: Mapping[str, Any] = attrs.field(factory=dict, converter=_trace, hash=False)

    @property
    def is_empty(self) -> bool:
        """Nothing goes out."""
        return not self.messages


@attrs.frozen(kw_only=True)
class SendReceipt:
    """What sending one message gave.

    :param ok: the platform accepted it.
    :param message_id: the id the platform gave it (record it so a later quote of it can be
        found); ``None`` when unknown or not sent.
    :param detail: why it failed, or what the platform said.
    """

    ok: bool
    message_id: str | None = None
    detail: str = ""


@runtime_checkable
class Transport(Protocol):
    """Where messages go: a platform connection that can call the platform's API.

    A NoneBot ``Bot`` has exactly this ``call_api``; wrap it to give the platform its name
    (:class:`promptweave.delivery.onebot.OneBotTransport` does for OneBot v11).
    """

    @property
    def platform(self) -> str:
        """The platform's name, for example ``"onebot.v11"``; ``send_message``
        implementations answer only for the platforms they speak."""

    async def call_api(self, api: str, **params: Any) -> Any:
        """Call the platform action ``api`` with ``params`` and return its result."""


def text_hash(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), in hex: how a :class:`InjectedSource` names its text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class InjectedSource:
    """One source that went into a rendered turn.

    :param section: the id of the section it went into.
    :param retriever: the retriever that found it; ``""`` for a section's own text.
    :param id: the item's stable id, when it has one (a memory's, a knowledge chunk's).
    :param text_hash: :func:`text_hash` of its text: the section's rendered text, or the item's.
    :param preview: the item's text as injected, at most 120 characters (``""`` for a section).
    """

    section: str
    retriever: str = ""
    id: str = ""
    text_hash: str
    preview: str = ""


@attrs.frozen(kw_only=True)
class ReplyInjection:
    """What was injected into a delivered reply: the sources of the turn it was rendered in.

    A low-engagement phrase, which no turn was rendered for, has none.

    :param sections: each section that went into the system prompt, in order, with the hash of
        its text.
    :param retrieved: the items each retriever found for the turn, in registration order (what
        the retriever reported for the trace: at most 50 of one retriever).
    :param ambient: the group turns the messages carried (the ambient excerpt's, or the
        timeline's when it stood in for it), with their ids (``ambient:…``) and previews.
    :param self_aliases: the names the bot was told it goes by.
    """

    sections: tuple[InjectedSource, ...] = ()
    retrieved: tuple[InjectedSource, ...] = ()
    ambient: tuple[InjectedSource, ...] = ()
    self_aliases: tuple[str, ...] = ()
