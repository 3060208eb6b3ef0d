"""Wording hints (措辞提示): per-turn advice on how to word the reply (``docs/messages.md``).

The ``collect_wording_hints`` hook gives them (:class:`promptweave.WordingHint` records): how to open and how to close, not to repeat the
bot's own recent reply in the same words (「同句重回」), a scene tone for greetings, praise and
agreement. Each hint becomes a user message of its own, just before the current message, so the
character budget counts and trims it like every other message (``docs/design.md``, the
character budget): the oldest message goes first, a hint before the current message.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from promptweave.messages.prompt_message import (
    WORDING_HINT_KINDS,
    WORDING_HINT_SOURCE,
    PromptMessage,
    WordingHint,
)
from promptweave.text.sanitize import sanitize_block

__all__ = [
    "WORDING_HINT_CHARS",
    "WORDING_HINT_KINDS",
    "WORDING_HINT_SOURCE",
    "WordingHint",
    "clean_hints",
    "hint_messages",
]

#: The longest hint text kept (longer text is cut, like a note).
WORDING_HINT_CHARS = 300


def clean_hints(hints: Sequence[WordingHint]) -> tuple[WordingHint, ...]:
    """The hints as they are merged: each text sanitized and cut, blank ones and exact repeats
    left out, in the order given."""
    kept: list[WordingHint] = []
    seen: set[str] = set()
    for hint in hints:
        # Cut before cleaning, so a hint of ten megabytes costs nothing.
        text = sanitize_block(hint.text[: 4 * WORDING_HINT_CHARS], WORDING_HINT_CHARS)
        if not text or text in seen:
            continue
        seen.add(text)
        kept.append(attrs.evolve(hint, text=text))
    return tuple(kept)


def hint_messages(hints: Sequence[WordingHint]) -> list[PromptMessage]:
    """One user message per hint, in order, each with the hint's :attr:`WordingHint.source`."""
    return [PromptMessage(role="user", content=hint.text, source=hint.source) for hint in hints]
