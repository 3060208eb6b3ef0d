"""The message sequence of a turn (``docs/design.md#the-message-sequence``;
``docs/messages.md``).

In order: the ambient excerpt ``【群环境摘录】`` (group chats, when no group timeline is in the
system prompt), the current user's history (the newest turns, a summary row kept at the front), and
the current message last. Every user message carries the persona pack's prefix line, which tells
the model it is not a system instruction; a message that looks like a prompt injection also gets
the pack's "ignore instructions above" line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptweave.config import Config
from promptweave.messages.ambient import AMBIENT_HEADER, AmbientEntry, AmbientExcerpt
from promptweave.messages.images import vision_image_urls
from promptweave.messages.prompt_message import PromptMessage
from promptweave.store.session_rows import SUMMARY_MARK
from promptweave.text.persona import PersonaPack
from promptweave.text.rules import IMAGE_MARK, InjectionDetector
from promptweave.text.sanitize import neutralize_markers, sanitize_block, sanitize_literal
from promptweave.turn import HistoryEntry, Turn

__all__ = [
    "USER_MESSAGE_MAX_CHARS",
    "USER_ROLE_MARKERS",
    "AmbientPart",
    "HistoryRow",
    "MessageSequence",
    "ambient_part",
    "build_message_sequence",
    "current_text",
    "format_assistant_turn",
    "format_user_turn",
    "stepped_window",
    "window_history",
]

USER_MESSAGE_MAX_CHARS = 4000


@attrs.frozen(kw_only=True)
class HistoryRow:
    """One turn of the current user's history, from the store or the turn.

    :param summary: the row is a ``【此前对话摘要】`` summary of older turns.
    :param message_id: the platform's id of the message, when known.
    """

    role: str
    content: str
    summary: bool = False
    message_id: str | None = None

    @classmethod
    def from_entry(cls, entry: HistoryEntry) -> HistoryRow:
        """The row of an entry of a turn's own history: a ``user`` entry that starts with
        ``【此前对话摘要】`` is a summary row."""
        role, content = entry.role, entry.content
        summary = role == "user" and content.startswith(SUMMARY_MARK)
        return cls(role=role, content=content, summary=summary)


@attrs.frozen(kw_only=True)
class MessageSequence:
    """The built sequence, before the budget.

    :param ambient_entries: the snapshot entries of the ambient excerpt, if it was built.
    :param ambient_token: the excerpt message's ``source_token``.
    :param notes: what was decided and why, for the trace.
    """

    messages: tuple[PromptMessage, ...]
    ambient_entries: tuple[AmbientEntry, ...] = ()
    ambient_token: str | None = None
    notes: dict[str, Any] = attrs.field(factory=dict)


@functools.lru_cache(maxsize=16)
def _detector(persona_name: str) -> InjectionDetector:
    return InjectionDetector(persona_name)


#: The markers that open a user-role message the runtime writes: a user typing one inside a
#: message could make one message look like two (the pack's own prefix is always among them).
USER_ROLE_MARKERS = (AMBIENT_HEADER, SUMMARY_MARK)


def format_user_turn(
    persona: PersonaPack,
    text: str,
    *,
    max_len: int = USER_MESSAGE_MAX_CHARS,
    markers: tuple[str, ...] = (),
) -> str:
    """Wrap user text with the pack's prefix line, and the injection line when it looks like an
    injection; ``""`` when the text is empty.

    A copy of the pack's prefix inside ``text``, in any bracket that reads as ``【】``, is defused
    (:func:`promptweave.text.sanitize.neutralize_markers`), so a user cannot fake a second message.

    :param markers: more markers to defuse in ``text`` (:data:`USER_ROLE_MARKERS` for text a
        user wrote whole).
    """
    prefix = persona.format(persona.user_turn.prefix)
    body = neutralize_markers(sanitize_block(text, max_len), (prefix, *markers))
    if not body:
        return ""
    lines = [prefix, body]
    if _detector(persona.persona.name)(body):
        lines.append(persona.format(persona.user_turn.injection_suffix))
    return "\n".join(lines)


def format_assistant_turn(text: str, *, max_len: int = USER_MESSAGE_MAX_CHARS) -> str:
    """The bot's own earlier reply, on one line."""
    return sanitize_literal(text, max_len)


def window_history(rows: Sequence[HistoryRow], limit: int) -> list[HistoryRow]:
    """The newest ``limit`` rows, oldest first; when the newest summary row would slide out of
    that window, it is kept at the front with the newest ``limit - 1`` rows
    (``docs/design.md#the-message-sequence``)."""
    if limit <= 0:
        return []
    window = list(rows[-limit:])
    if any(row.summary for row in window):
        return window
    older = [row for row in rows[: len(rows) - len(window)] if row.summary]
    if not older:
        return window
    return [older[-1], *window[1:]] if limit > 1 else [older[-1]]


def stepped_window(summaries: Sequence[bool], floor: int, step: int) -> tuple[int | None, int]:
    """Which rows a window that moves in steps keeps (the cache mode's history window,
    ``docs/cost.md``, "The layout of a request").

    The rows are counted from an anchor that only a compression moves: the newest summary row,
    else the oldest row. Of the ``n`` rows after it the window keeps all while ``n`` is under
    ``floor + step`` (the summary row counts in ``floor``), then drops them ``step`` at a time, so
    it holds between ``floor`` and ``floor + step - 1`` rows and its first row changes once every
    ``step`` rows, not with every new one.

    :param summaries: for each row, oldest first, whether it is a summary row.
    :returns: the index of the summary row kept at the front (``None``: none) and the index of
        the first other row kept (all after it are kept).
    """
    newest = next((i for i in range(len(summaries) - 1, -1, -1) if summaries[i]), None)
    if newest is None:
        return None, _stepped_start(len(summaries), floor, step)
    after = len(summaries) - newest - 1
    return newest, newest + 1 + _stepped_start(after, max(floor - 1, 0), step)


def _stepped_start(count: int, floor: int, step: int) -> int:
    if count <= floor:
        return 0
    return (count - floor) // max(step, 1) * max(step, 1)


def current_text(turn: Turn) -> str:
    """The text of the current message as the sequence sends it: an image mark in front when it
    carries images, ``@name`` for a bare @-mention."""
    text = turn.message.text.strip()
    if turn.message.images:
        return f"{IMAGE_MARK} {text}".strip()
    if not text and turn.message.addressed:
        # A bare @-mention (adapters strip the mention from the text) is a summons: the model
        # must still see that it was called, or the request has no user message at all.
        return f"@{turn.bot.name}"
    return text


def build_message_sequence(
    persona: PersonaPack,
    config: Config,
    turn: Turn,
    *,
    history: Sequence[HistoryRow],
    timeline_present: bool,
    ambient: Callable[[], tuple[AmbientExcerpt | None, dict[str, Any]]] | None = None,
    degraded: str | None = None,
    include_ambient_excerpt: bool = True,
) -> MessageSequence:
    """Build the sequence of ``turn``.

    :param history: the user's history, already windowed (:func:`window_history`).
    :param timeline_present: the group timeline is in the system prompt (then no excerpt).
    :param ambient: builds the excerpt on demand: ``() -> (excerpt or None, trace notes)``; only
        called when the excerpt belongs in this turn.
    :param degraded: why the session state is unavailable; then only the current message is sent.
    :param include_ambient_excerpt: the turn's memory policy allows the excerpt; a short social
        remark in an exchange the bot is part of has none (``docs/design.md#short-social-turns``),
        but keeps the user's whole bounded history window.
    """
    max_len = config.session.max_content_chars
    wrapped_current = format_user_turn(
        persona, current_text(turn), max_len=max_len, markers=USER_ROLE_MARKERS
    )
    current = (
        [
            PromptMessage(
                role="user",
                content=wrapped_current,
                source="current",
                # Any image shows [图片] in the text; only valid URLs are sent
                # (docs/design.md#images).
                images=vision_image_urls(turn.message.images),
            )
        ]
        if wrapped_current
        else []
    )
    if degraded is not None:
        return MessageSequence(messages=tuple(current), notes={"degraded": degraded})

    notes: dict[str, Any] = {"history_turns": len(history)}
    messages: list[PromptMessage] = []
    part = ambient_part(
        persona,
        config,
        turn,
        timeline_present=timeline_present,
        ambient=ambient,
        include_ambient_excerpt=include_ambient_excerpt,
    )
    notes.update(part.notes)
    if part.message is not None:
        messages.append(part.message)

    for row in history:
        if row.role == "assistant":
            content = format_assistant_turn(row.content, max_len=max_len)
        else:
            # A summary row opens with its own mark; a user's row may hold none.
            markers = (AMBIENT_HEADER,) if row.summary else USER_ROLE_MARKERS
            content = format_user_turn(persona, row.content, max_len=max_len, markers=markers)
        if content:
            source = "summary" if row.summary else "history"
            messages.append(PromptMessage(role=row.role, content=content, source=source))
    messages.extend(current)
    return MessageSequence(
        messages=tuple(messages),
        ambient_entries=part.entries,
        ambient_token=part.token,
        notes=notes,
    )


@attrs.frozen(kw_only=True)
class AmbientPart:
    """The ambient excerpt of a sequence: its message (``None`` when it is not sent), its
    snapshot entries and token, and the trace notes saying why."""

    message: PromptMessage | None = None
    entries: tuple[AmbientEntry, ...] = ()
    token: str | None = None
    notes: dict[str, Any] = attrs.field(factory=dict)


def ambient_part(
    persona: PersonaPack,
    config: Config,
    turn: Turn,
    *,
    timeline_present: bool,
    ambient: Callable[[], tuple[AmbientExcerpt | None, dict[str, Any]]] | None,
    include_ambient_excerpt: bool,
    wrap: Callable[[str, int], str] | None = None,
) -> AmbientPart:
    """The ambient excerpt message when it belongs in this turn (the parameters are those of
    :func:`build_message_sequence`).

    :param wrap: wraps the excerpt as a user message, ``(text, max_len) -> content``;
        :func:`format_user_turn` with ``persona`` by default.
    """
    if turn.is_private:
        return AmbientPart(notes={"ambient": "private_chat"})
    if not config.ambient.enabled:
        return AmbientPart(notes={"ambient": "disabled"})
    if timeline_present:
        return AmbientPart(notes={"ambient": "timeline_present"})
    if not include_ambient_excerpt:
        return AmbientPart(notes={"ambient": "memory_policy"})
    if ambient is None:
        return AmbientPart(notes={"ambient": "no_source"})
    excerpt, notes = ambient()
    notes = dict(notes)
    if excerpt is None:
        notes["ambient"] = "empty"
        return AmbientPart(notes=notes)
    max_len = config.ambient.block_chars
    if wrap is None:
        wrapped = format_user_turn(persona, excerpt.text, max_len=max_len)
    else:
        wrapped = wrap(excerpt.text, max_len)
    if not wrapped:
        notes["ambient"] = "empty"
        return AmbientPart(notes=notes)
    notes["ambient"] = "included"
    return AmbientPart(
        message=PromptMessage(
            role="user", content=wrapped, source="ambient", source_token=excerpt.token
        ),
        entries=excerpt.entries,
        token=excerpt.token,
        notes=notes,
    )
