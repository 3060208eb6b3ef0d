"""The message sequence of a turn: the user's history, then the current message.

Every user message carries the persona pack's prefix line, which tells the model it is not a system
instruction (seed 004, messages 序列).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from framework.persona import PersonaPack
from framework.sanitize import BLOCK_MAX_CHARS, sanitize_block, sanitize_literal
from framework.turn import HistoryEntry

__all__ = ["PromptMessage", "build_messages", "format_user_turn", "trim_to_budget"]

USER_MESSAGE_MAX_CHARS = 4000


@attrs.frozen(kw_only=True)
class PromptMessage:
    """One message of the request.

    :param role: ``user`` or ``assistant``.
    :param content: the text sent to the provider.
    :param source: what it was built from: ``history``, ``current``, or a plugin's label.
    :param images: image URLs the message carries, for providers that accept images.
    :param api_content: the API-only sidecar: the exact text sent in place of ``content`` (clean
        content plus per-turn context, see ``docs/turn_context.md``). It never reaches a provider
        as a field; request builders substitute it.
    :param parts: durable text parts sent after the content and images (notes of a multimodal
        turn); unlike the sidecar they are part of the message and persisted with it.
    """

    role: str
    content: str
    source: str = "history"
    images: tuple[str, ...] = ()
    api_content: str | None = None
    parts: tuple[str, ...] = ()


def format_user_turn(
    persona: PersonaPack, text: str, *, max_len: int = USER_MESSAGE_MAX_CHARS
) -> str:
    """Wrap user text with the pack's prefix line; ``""`` when the text is empty."""
    body = sanitize_block(text, max_len)
    if not body:
        return ""
    return f"{persona.format(persona.user_turn.prefix)}\n{body}"


def build_messages(
    persona: PersonaPack,
    history: Sequence[HistoryEntry],
    current_text: str,
    *,
    user_window: int,
) -> list[PromptMessage]:
    """The newest ``user_window`` history entries, oldest first, then the current message."""
    messages: list[PromptMessage] = []
    for entry in list(history)[-user_window:]:
        if entry.role == "assistant":
            content = sanitize_literal(entry.content, USER_MESSAGE_MAX_CHARS)
        else:
            content = format_user_turn(persona, entry.content)
        if content:
            messages.append(PromptMessage(role=entry.role, content=content))
    current = format_user_turn(persona, current_text)
    if current:
        messages.append(PromptMessage(role="user", content=current, source="current"))
    return messages


def trim_to_budget(
    messages: list[PromptMessage], system_prompt: str, budget_chars: int
) -> tuple[list[PromptMessage], int]:
    """Drop the oldest messages until system prompt plus messages fit ``budget_chars``.

    The current (last) message is never dropped; if it alone is over budget, it is cut to fit
    (at least 64 characters). The system prompt is never trimmed.

    :returns: the kept messages and how many were dropped.
    """
    if budget_chars <= 0 or not messages:
        return list(messages), 0
    system_chars = len(system_prompt.strip())
    kept = list(messages)
    total = system_chars + sum(len(m.content) for m in kept)
    dropped = 0
    while len(kept) > 1 and total > budget_chars:
        total -= len(kept.pop(0).content)
        dropped += 1
    if total > budget_chars:
        room = max(64, min(BLOCK_MAX_CHARS, budget_chars - system_chars))
        last = kept[-1]
        kept[-1] = attrs.evolve(last, content=last.content[:room])
    return kept, dropped
