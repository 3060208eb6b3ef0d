"""Request bodies for OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Each builder takes the provider-neutral system prompt and messages and returns the exact JSON body
plus the labels that let the prefix report name a section (see :mod:`promptweave.providers.prefix`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from promptweave.providers.prefix import TextLabels
from promptweave.providers.wire import WireImage, WireMessage, WireSystem, WireText

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "anthropic_messages_body",
    "openai_chat_body",
    "openai_responses_body",
]

#: Anthropic accepts at most four ``cache_control`` breakpoints in one request.
MAX_CACHE_BREAKPOINTS = 4
#: Breakpoints at the tail of the messages (the stable system prefix takes one more).
TAIL_BREAKPOINTS = 3
EPHEMERAL = {"type": "ephemeral"}

Body = dict[str, Any]


def _section_pieces(pieces: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Label each section's text; the blank line before a section belongs to that section."""
    labelled: list[tuple[str, str]] = []
    for section_id, text in pieces:
        if not text:
            continue
        label = f"section {section_id}"
        if labelled:
            labelled.append((label, "\n\n"))
        labelled.append((label, text))
    return labelled


def _image_url(part: WireImage) -> str:
    return part.inline.data_url() if part.inline is not None else part.url


def _system_labels(system: WireSystem, path: tuple[str | int, ...]) -> TextLabels:
    return {path: _section_pieces([*system.stable, *system.turn])} if system.text else {}


def openai_chat_body(
    system: WireSystem, messages: Sequence[WireMessage], *, model: str, max_tokens: int
) -> tuple[Body, TextLabels]:
    """``POST /chat/completions``: a system message, then ``text`` / ``image_url`` parts.

    A text-only message is sent as one string (its parts joined by a blank line).
    """
    rendered: list[dict[str, Any]] = []
    if system.text:
        rendered.append({"role": "system", "content": system.text})
    for message in messages:
        if message.text_only or message.role != "user":
            rendered.append({"role": message.role, "content": message.joined_text()})
            continue
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, WireText):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
        rendered.append({"role": message.role, "content": content})
    body: Body = {"model": model, "messages": rendered, "max_tokens": max_tokens}
    return body, _system_labels(system, ("messages", 0, "content"))


def openai_responses_body(
    system: WireSystem, messages: Sequence[WireMessage], *, model: str, max_tokens: int
) -> tuple[Body, TextLabels]:
    """``POST /responses``: ``instructions``, then ``input_text`` / ``input_image`` parts (an
    assistant's earlier replies are ``output_text``)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        if message.role != "user":
            content.append({"type": "output_text", "text": message.joined_text()})
        else:
            for part in message.parts:
                if isinstance(part, WireText):
                    content.append({"type": "input_text", "text": part.text})
                else:
                    content.append(
                        {"type": "input_image", "image_url": _image_url(part), "detail": "auto"}
                    )
        items.append({"role": message.role, "content": content})
    body: Body = {"model": model}
    if system.text:
        body["instructions"] = system.text
    body["input"] = items
    body["max_output_tokens"] = max_tokens
    return body, _system_labels(system, ("instructions",))


def _anthropic_block(part: WireText | WireImage) -> dict[str, Any]:
    if isinstance(part, WireText):
        return {"type": "text", "text": part.text}
    if part.inline is not None:
        source = {
            "type": "base64",
            "media_type": part.inline.media_type,
            "data": part.inline.base64(),
        }
    else:
        source = {"type": "url", "url": part.url}
    return {"type": "image", "source": source}


def anthropic_messages_body(
    system: WireSystem, messages: Sequence[WireMessage], *, model: str, max_tokens: int
) -> tuple[Body, TextLabels]:
    """``POST /v1/messages``: ``system`` as text blocks, ``text`` / ``image`` blocks in messages.

    ``cache_control`` breakpoints go at the end of the stable prefix (the block holding the cached
    static and profile sections) and on the last block of each of the last messages, never more
    than :data:`MAX_CACHE_BREAKPOINTS` in all. When the current message ends with the turn's own
    part (``turn_sections = "user"``), they go before that part instead
    (:func:`_trailing_breakpoints`).
    """
    blocks: list[dict[str, Any]] = []
    labels: dict[tuple[str | int, ...], list[tuple[str, str]]] = {}
    stable_text = WireSystem.join(system.stable)
    turn_text = WireSystem.join(system.turn)
    if stable_text:
        labels[("system", len(blocks), "text")] = _section_pieces(system.stable)
        blocks.append({"type": "text", "text": stable_text, "cache_control": dict(EPHEMERAL)})
    if turn_text:
        labels[("system", len(blocks), "text")] = _section_pieces(system.turn)
        blocks.append({"type": "text", "text": turn_text})
    rendered: list[dict[str, Any]] = []
    turn_block: tuple[int, int] | None = None  # (message, block) where the turn's own part starts
    for message in messages:
        parts = message.parts if message.role == "user" else (WireText(text=message.joined_text()),)
        content = [_anthropic_block(part) for part in parts if not _empty(part)]
        if message.turn_parts and len(content) > message.turn_parts:
            turn_block = (len(rendered), len(content) - message.turn_parts)
        rendered.append({"role": message.role, "content": content})
    if turn_block is not None:
        _trailing_breakpoints(rendered, turn_block)
    else:
        remaining = min(TAIL_BREAKPOINTS, MAX_CACHE_BREAKPOINTS - (1 if stable_text else 0))
        for item in reversed(rendered):
            if remaining == 0:
                break
            if item["content"]:
                item["content"][-1]["cache_control"] = dict(EPHEMERAL)
                remaining -= 1
    body: Body = {"model": model, "max_tokens": max_tokens}
    if blocks:
        body["system"] = blocks
    body["messages"] = rendered
    return body, labels


def _trailing_breakpoints(rendered: list[dict[str, Any]], turn_block: tuple[int, int]) -> None:
    """The breakpoints of a request whose current message ends with the turn's own part (the
    cache mode): on the block before that part, which caches the whole conversation up to the
    current message's own words (the next turn sends them again, without the part), and on the
    message before it (the previous answer). With the stable prefix that makes three, so a tool
    round can still take the fourth."""
    message, block = turn_block
    rendered[message]["content"][block - 1]["cache_control"] = dict(EPHEMERAL)
    for item in reversed(rendered[:message]):
        if item["content"]:
            item["content"][-1]["cache_control"] = dict(EPHEMERAL)
            break


def _empty(part: WireText | WireImage) -> bool:
    # Anthropic refuses empty text blocks.
    return isinstance(part, WireText) and not part.text
