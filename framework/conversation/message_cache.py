"""What assembly keeps of each message from one turn to the next (``docs/performance.md``).

A message stays in a conversation for many turns: it is the current message once, then one of the
user's history rows and a line of the group timeline for the next dozen turns or so. What assembly
makes of it depends on its text and the persona pack alone: the history row, the wrapped user
message (prefix line, cleaned body, the injection check and its warning line), the bot's reply on
one line, the timeline line, the speaker label, the injection-snapshot entry with its sha256. :class:`MessageCache` makes
each of these once and hands out the same finished value (the same immutable record) on every
later turn, so a turn's cost follows the messages that are new to it, not the length of the window.

The cache memoises the functions that define these forms (:func:`framework.format_user_turn` and
the others), so it never changes what they produce; it is bound to one persona pack and the
runtime replaces it when its pack changes. Every table is bounded: a full table is emptied and
refilled, and a text longer than :data:`CACHED_TEXT_CHARS` is never kept.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

import attrs

from framework.conversation.ambient import AMBIENT_HEADER, AmbientEntry, snapshot_entry
from framework.conversation.sequence import (
    USER_ROLE_MARKERS,
    HistoryRow,
    PromptMessage,
    format_assistant_turn,
    format_user_turn,
)
from framework.conversation.timeline import speaker_label, timeline_text
from framework.prompt.persona import PersonaPack
from framework.turn import Bot, ChatMessage, HistoryEntry

__all__ = ["CACHED_TEXT_CHARS", "MESSAGE_CACHE_ENTRIES", "MessageCache"]

#: Entries per table of a :class:`MessageCache`.
MESSAGE_CACHE_ENTRIES = 8192
#: Texts longer than this are processed every time instead of being kept.
CACHED_TEXT_CHARS = 8192

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING: Any = object()


def _keep(table: dict[K, V], key: K, value: V, limit: int) -> V:
    """Keep ``value`` under ``key``, emptying ``table`` first when it is full."""
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
    _user: dict[tuple[str, int, tuple[str, ...]], str] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _rows: dict[tuple[str, str], HistoryRow] = attrs.field(factory=dict, init=False, repr=False)
    _history: dict[tuple[str, str, bool, int], PromptMessage | None] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _speakers: dict[tuple[str, str, str, tuple[str, ...]], str] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _texts: dict[tuple[str, bool, int], str] = attrs.field(factory=dict, init=False, repr=False)
    _snapshots: dict[tuple[str, str, str, str, int, bool, int], AmbientEntry] = attrs.field(
        factory=dict, init=False, repr=False
    )
    # The same message object usually comes back turn after turn (a turn built from the last
    # one, a group log in memory): these tables find its finished form by the object itself,
    # before any key is built from its text. Each slot holds the object, so its id cannot be
    # reused while the slot exists.
    _row_slots: dict[int, tuple[HistoryEntry, HistoryRow]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _message_slots: dict[int, tuple[HistoryRow, int, PromptMessage | None]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _shown_slots: dict[int, tuple[ChatMessage, Bot, int, tuple[str, str]]] = attrs.field(
        factory=dict, init=False, repr=False
    )

    @property
    def injection_suffix(self) -> str:
        """The pack's "ignore instructions above" line, filled in."""
        return self.persona.format(self.persona.user_turn.injection_suffix)

    def user_turn(
        self, text: str, max_len: int, markers: tuple[str, ...] = USER_ROLE_MARKERS
    ) -> str:
        """:func:`framework.format_user_turn` of ``text`` with this cache's pack; ``markers``
        are the marks defused in the text (a summary row keeps its own)."""
        if len(text) > CACHED_TEXT_CHARS:
            return format_user_turn(self.persona, text, max_len=max_len, markers=markers)
        key = (text, max_len, markers)
        found = self._user.get(key)
        if found is not None:
            return found
        wrapped = format_user_turn(self.persona, text, max_len=max_len, markers=markers)
        return _keep(self._user, key, wrapped, self.entries)

    def ambient_turn(self, text: str, max_len: int) -> str:
        """The ambient excerpt wrapped as a user message: it keeps its own mark."""
        return self.user_turn(text, max_len, ())

    def history_row(self, entry: HistoryEntry) -> HistoryRow:
        """The row of one entry of a turn's own history (:meth:`HistoryRow.from_entry`)."""
        slot = self._row_slots.get(id(entry))
        if slot is not None and slot[0] is entry:
            return slot[1]
        if len(entry.content) > CACHED_TEXT_CHARS:
            return HistoryRow.from_entry(entry)
        key = (entry.role, entry.content)
        row = self._rows.get(key)
        if row is None:
            row = _keep(self._rows, key, HistoryRow.from_entry(entry), self.entries)
        _keep(self._row_slots, id(entry), (entry, row), self.entries)
        return row

    def history_message(self, row: HistoryRow, max_len: int) -> PromptMessage | None:
        """The message of one history row (``None`` when its text cleans to nothing): the user's
        rows wrapped like :func:`framework.format_user_turn`, the bot's on one line."""
        slot = self._message_slots.get(id(row))
        if slot is not None and slot[0] is row and slot[1] == max_len:
            return slot[2]
        if len(row.content) > CACHED_TEXT_CHARS:
            return self._history_message(row, max_len)
        key = (row.role, row.content, row.summary, max_len)
        message = self._history.get(key, _MISSING)
        if message is _MISSING:
            message = _keep(self._history, key, self._history_message(row, max_len), self.entries)
        _keep(self._message_slots, id(row), (row, max_len, message), self.entries)
        return message  # type: ignore[no-any-return]

    def _history_message(self, row: HistoryRow, max_len: int) -> PromptMessage | None:
        if row.role == "assistant":
            content = format_assistant_turn(row.content, max_len=max_len)
        else:
            # The user's last message was wrapped once already, as the current message. A summary
            # row keeps its own mark; a user's words may not carry it (docs/design.md).
            markers = (AMBIENT_HEADER,) if row.summary else USER_ROLE_MARKERS
            content = self.user_turn(row.content, max_len, markers)
        if not content:
            return None
        source = "summary" if row.summary else "history"
        return PromptMessage(role=row.role, content=content, source=source)

    def shown(
        self, message: ChatMessage, bot: Bot, persona: PersonaPack, line_chars: int
    ) -> tuple[str, str]:
        """What the timeline shows of ``message``: the speaker label
        (:func:`framework.speaker_label`) and the line's text
        (:func:`framework.conversation.timeline.timeline_text`)."""
        slot = self._shown_slots.get(id(message))
        if slot is not None and slot[0] is message and slot[1] is bot and slot[2] == line_chars:
            return slot[3]
        if persona is not self.persona:
            label = speaker_label(message.sender_id, message.sender_name, bot, persona)
            return label, timeline_text(message, line_chars)
        parts = (self._speaker(message, bot), self._text(message, line_chars))
        _keep(self._shown_slots, id(message), (message, bot, line_chars, parts), self.entries)
        return parts

    def _speaker(self, message: ChatMessage, bot: Bot) -> str:
        sender_id, sender_name = message.sender_id, message.sender_name
        if len(sender_name) > CACHED_TEXT_CHARS:
            return speaker_label(sender_id, sender_name, bot, self.persona)
        key = (sender_id, sender_name, bot.id, bot.peer_bot_ids)
        label = self._speakers.get(key)
        if label is None:
            label = speaker_label(sender_id, sender_name, bot, self.persona)
            _keep(self._speakers, key, label, self.entries)
        return label

    def _text(self, message: ChatMessage, line_chars: int) -> str:
        if len(message.text) > CACHED_TEXT_CHARS:
            return timeline_text(message, line_chars)
        key = (message.text, bool(message.images), line_chars)
        text = self._texts.get(key)
        if text is None:
            text = _keep(self._texts, key, timeline_text(message, line_chars), self.entries)
        return text

    def snapshot(
        self, message: ChatMessage, *, bot_id: str, group_id: str, line_chars: int
    ) -> AmbientEntry:
        """The injection-snapshot entry of a timeline message (its sha256 made once)."""
        if len(message.text) > CACHED_TEXT_CHARS:
            return snapshot_entry(message, bot_id=bot_id, group_id=group_id, line_chars=line_chars)
        key = (
            bot_id,
            group_id,
            message.sender_id,
            message.text,
            int(message.time.timestamp()),
            bool(message.images),
            line_chars,
        )
        found = self._snapshots.get(key)
        if found is not None:
            return found
        entry = snapshot_entry(message, bot_id=bot_id, group_id=group_id, line_chars=line_chars)
        return _keep(self._snapshots, key, entry, self.entries)
