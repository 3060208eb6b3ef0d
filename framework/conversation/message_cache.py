"""What assembly keeps of each message from one turn to the next (``docs/performance.md``).

A message stays in a conversation for many turns: it is the current message once, then one of the
user's history rows and a line of the group timeline for the next dozen turns or so. What assembly
makes of it depends on its text and the persona pack alone: the wrapped user message (prefix line,
cleaned body, the injection check and its warning line), the bot's reply on one line, the timeline
line, the speaker label, the injection-snapshot entry with its sha256. :class:`MessageCache` makes
each of these once and hands out the same finished value (the same immutable record) on every
later turn, so a turn's cost follows the messages that are new to it, not the length of the window.

The cache memoises the functions that define these forms (:func:`framework.format_user_turn` and
the others), so it never changes what they produce; it is bound to one persona pack and the
runtime replaces it when its pack changes. Every table is bounded: a full table is emptied and
refilled, and a text longer than :data:`CACHED_TEXT_CHARS` is never kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import attrs

from framework.conversation.ambient import AmbientEntry, snapshot_entry
from framework.conversation.sequence import (
    HistoryRow,
    PromptMessage,
    format_assistant_turn,
    format_user_turn,
)
from framework.conversation.timeline import speaker_label, timeline_line
from framework.prompt.persona import PersonaPack
from framework.turn import Bot, ChatMessage

__all__ = ["CACHED_TEXT_CHARS", "MESSAGE_CACHE_ENTRIES", "MessageCache"]

#: Entries per table of a :class:`MessageCache`.
MESSAGE_CACHE_ENTRIES = 8192
#: Texts longer than this are processed every time instead of being kept.
CACHED_TEXT_CHARS = 8192

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _remembered(table: dict[K, V], key: K, make: Callable[[], V], limit: int) -> V:
    """The value of ``key`` in ``table``, made and kept on a miss (the table emptied when full)."""
    try:
        return table[key]
    except KeyError:
        pass
    value = make()
    if len(table) >= limit:
        # Emptying is one atomic call, safe with runtimes shared between threads; the messages
        # still in use come back on their next turn.
        table.clear()
    table[key] = value
    return value


@attrs.define
class MessageCache:
    """The finished forms of messages, for one persona pack.

    :param persona: the pack every kept form was made with.
    :param entries: the bound of each table.
    """

    persona: PersonaPack
    entries: int = MESSAGE_CACHE_ENTRIES
    _user: dict[tuple[str, int], str] = attrs.field(factory=dict, init=False, repr=False)
    _history: dict[tuple[str, str, bool, int], PromptMessage | None] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _speakers: dict[tuple[str, str, str, tuple[str, ...]], str] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _lines: dict[tuple[str, bool, str, str, int], str] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _snapshots: dict[tuple[str, str, str, str, int, bool, int], AmbientEntry] = attrs.field(
        factory=dict, init=False, repr=False
    )

    def user_turn(self, text: str, max_len: int) -> str:
        """:func:`framework.format_user_turn` of ``text`` with this cache's pack."""
        if len(text) > CACHED_TEXT_CHARS:
            return format_user_turn(self.persona, text, max_len=max_len)
        return _remembered(
            self._user,
            (text, max_len),
            lambda: format_user_turn(self.persona, text, max_len=max_len),
            self.entries,
        )

    def history_message(self, row: HistoryRow, max_len: int) -> PromptMessage | None:
        """The message of one history row (``None`` when its text cleans to nothing): the user's
        rows wrapped like :func:`framework.format_user_turn`, the bot's on one line."""
        if len(row.content) > CACHED_TEXT_CHARS:
            return _history_message(self.persona, row, max_len)
        return _remembered(
            self._history,
            (row.role, row.content, row.summary, max_len),
            lambda: _history_message(self.persona, row, max_len),
            self.entries,
        )

    def speaker(self, sender_id: str, sender_name: str, bot: Bot, persona: PersonaPack) -> str:
        """:func:`framework.speaker_label`, kept per speaker and bot."""
        if persona is not self.persona or len(sender_name) > CACHED_TEXT_CHARS:
            return speaker_label(sender_id, sender_name, bot, persona)
        return _remembered(
            self._speakers,
            (sender_id, sender_name, bot.id, bot.peer_bot_ids),
            lambda: speaker_label(sender_id, sender_name, bot, persona),
            self.entries,
        )

    def line(self, message: ChatMessage, speaker: str, tail: str, line_chars: int) -> str:
        """The timeline line of ``message`` (:func:`framework.conversation.timeline.timeline_line`)."""
        if len(message.text) > CACHED_TEXT_CHARS:
            return timeline_line(message, speaker, tail, line_chars)
        return _remembered(
            self._lines,
            (message.text, bool(message.images), speaker, tail, line_chars),
            lambda: timeline_line(message, speaker, tail, line_chars),
            self.entries,
        )

    def snapshot(
        self, message: ChatMessage, *, bot_id: str, group_id: str, line_chars: int
    ) -> AmbientEntry:
        """The injection-snapshot entry of a timeline message (its sha256 made once)."""
        if len(message.text) > CACHED_TEXT_CHARS:
            return snapshot_entry(message, bot_id=bot_id, group_id=group_id, line_chars=line_chars)
        return _remembered(
            self._snapshots,
            (
                bot_id,
                group_id,
                message.sender_id,
                message.text,
                int(message.time.timestamp()),
                bool(message.images),
                line_chars,
            ),
            lambda: snapshot_entry(
                message, bot_id=bot_id, group_id=group_id, line_chars=line_chars
            ),
            self.entries,
        )


def _history_message(persona: PersonaPack, row: HistoryRow, max_len: int) -> PromptMessage | None:
    if row.role == "assistant":
        content = format_assistant_turn(row.content, max_len=max_len)
    else:
        content = format_user_turn(persona, row.content, max_len=max_len)
    if not content:
        return None
    return PromptMessage(
        role=row.role, content=content, source="summary" if row.summary else "history"
    )
