"""The provider-neutral form of a request, from which each API's body is written.

Messages become ordered parts (text, image); images are resolved once here: by URL, inline (fetched
through the ``fetch_image`` hook), or as ``[图片]`` for a text provider, a failed fetch or an entry
that is not a valid HTTP(S) URL (which is never fetched nor sent, whoever put it there). Every
message's text is :func:`promptweave.turn_context.sidecar.sent_text` (the content of
:func:`~promptweave.turn_context.sidecar.substitute_api_content`'s copy), so the sidecar field
never reaches a provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from promptweave.messages.images import is_vision_url, vision_image_urls
from promptweave.messages.prompt_message import FetchedImage, PromptMessage
from promptweave.text.rules import IMAGE_MARK
from promptweave.turn_context.context import TurnContext
from promptweave.turn_context.sidecar import sent_text

__all__ = [
    "TIMELINE_IMAGES_TEXT",
    "WireImage",
    "WireMessage",
    "WireSystem",
    "WireText",
    "images_to_send",
    "wire_messages",
    "wire_system",
]

#: The text of the user message that carries the timeline's images (docs/design.md#images).
TIMELINE_IMAGES_TEXT = "以下是刚才群聊里出现的图片，按时间顺序排列，仅作群聊上下文参考："


@attrs.frozen(kw_only=True)
class WireText:
    text: str


@attrs.frozen(kw_only=True)
class WireImage:
    """An image part: by ``url``, or ``inline`` with its bytes."""

    url: str
    inline: FetchedImage | None = None


WirePart = WireText | WireImage


@attrs.frozen(kw_only=True)
class WireMessage:
    """One message as parts.

    :param turn_parts: how many of the last parts are the turn's own context (the current
        message's trailing turn part): a cache breakpoint goes before them, never on them.
    """

    role: str
    parts: tuple[WirePart, ...]
    turn_parts: int = 0

    @property
    def text_only(self) -> bool:
        return all(isinstance(part, WireText) for part in self.parts)

    def joined_text(self) -> str:
        return "\n\n".join(p.text for p in self.parts if isinstance(p, WireText))


@attrs.frozen(kw_only=True)
class WireSystem:
    """The system prompt in two pieces: the cached stable prefix and the per-turn sections.

    Each piece is ``(section_id, text)`` pairs, in order.
    """

    stable: tuple[tuple[str, str], ...]
    turn: tuple[tuple[str, str], ...]

    @staticmethod
    def join(pieces: Sequence[tuple[str, str]]) -> str:
        return "\n\n".join(text for _, text in pieces if text)

    @property
    def text(self) -> str:
        return self.join([*self.stable, *self.turn])


def wire_system(context: TurnContext) -> WireSystem:
    return WireSystem(stable=context.active_system_prompt.sections, turn=context.turn_sections)


def images_to_send(context: TurnContext, supports_images: bool) -> tuple[str, ...]:
    """Every image URL the request will carry, in order; none for a text provider. Only valid
    HTTP(S) URLs (:func:`promptweave.messages.images.is_vision_url`), each once."""
    if not supports_images:
        return ()
    urls: list[str] = []
    for message in context.messages:
        urls.extend(message.images)
    urls.extend(context.timeline_images)
    return tuple(dict.fromkeys(url.strip() for url in urls if is_vision_url(url)))


def _text_with_marks(text: str, count: int) -> str:
    # A text provider sees at least one [图片] per image; rows that already show them get no more.
    missing = count - text.count(IMAGE_MARK)
    if missing <= 0:
        return text
    return f"{text}\n{' '.join(IMAGE_MARK for _ in range(missing))}".strip()


def _image_parts(
    urls: Sequence[str],
    inline: bool,
    fetched: Mapping[str, FetchedImage | None],
) -> list[WirePart]:
    parts: list[WirePart] = []
    for url in urls:
        url = url.strip()
        if not is_vision_url(url):
            parts.append(WireText(text=IMAGE_MARK))
        elif not inline:
            parts.append(WireImage(url=url))
        elif fetched.get(url) is not None:
            parts.append(WireImage(url=url, inline=fetched[url]))
        else:
            parts.append(WireText(text=IMAGE_MARK))
    return parts


def _message(
    message: PromptMessage,
    supports_images: bool,
    inline: bool,
    fetched: Mapping[str, FetchedImage | None],
) -> WireMessage:
    # What substitute_api_content's copy would carry: only the content can differ.
    content = sent_text(message)
    if not supports_images:
        text = _text_with_marks(content, len(message.images))
        parts: list[WirePart] = [WireText(text=t) for t in (text, *message.parts) if t]
        return WireMessage(role=message.role, parts=tuple(parts))
    parts = [WireText(text=content)] if content else []
    parts += _image_parts(message.images, inline, fetched)
    parts += [WireText(text=part) for part in message.parts if part]
    return WireMessage(role=message.role, parts=tuple(parts))


def wire_messages(
    context: TurnContext,
    *,
    supports_images: bool,
    inline: bool,
    fetched: Mapping[str, FetchedImage | None],
    on_timeline: Callable[[int], None] = lambda _count: None,
) -> tuple[WireMessage, ...]:
    """The request's messages: the context's messages, and, for a provider with image support,
    one user message with the timeline's images right before the current user message.

    :param fetched: inline images by URL; a missing or ``None`` entry becomes ``[图片]``.
    :param on_timeline: called with the number of timeline images sent.
    """
    current = context.current_message
    current_urls = {url.lower() for url in current.images} if current is not None else set()
    timeline = [
        u for u in vision_image_urls(context.timeline_images) if u.lower() not in current_urls
    ]
    wired = [_message(m, supports_images, inline, fetched) for m in context.messages]
    if context.turn_part == "part" and current is not None and current.parts:
        index = context.current_turn_user_idx
        wired[index] = attrs.evolve(wired[index], turn_parts=1)
    if supports_images and timeline and context.current_turn_user_idx >= 0:
        parts: list[WirePart] = [WireText(text=TIMELINE_IMAGES_TEXT)]
        parts += _image_parts(timeline, inline, fetched)
        wired.insert(context.current_turn_user_idx, WireMessage(role="user", parts=tuple(parts)))
        on_timeline(len(timeline))
    return tuple(wired)
