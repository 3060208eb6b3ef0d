"""What assembly keeps of each message from one turn to the next (``docs/performance.md``).

A message stays in a conversation for many turns: it is the current message once, then one of the
user's history rows and a line of the group timeline for the next dozen turns or so. What assembly
makes of it depends on its text and the persona pack alone: the history row, the wrapped user
message (prefix line, cleaned body, the injection check and its warning line), the bot's reply on
one line, the timeline line, the speaker label, the injection-snapshot entry with its sha256. :class:`MessageCache` makes
each of these once and hands out the same finished value (the same immutable record) on every
later turn, so a turn's cost follows the messages that are new to it, not the length of the window.
It also keeps each conversation's history window from one turn to the next
(:meth:`MessageCache.window_rows`), so a turn makes rows only of the entries new to it.

The cache memoises the functions that define these forms (:func:`promptweave.messages.sequence.format_user_turn` and
the others), so it never changes what they produce; it is bound to one persona pack and the
runtime replaces it when its pack changes. Every table is bounded: a full table is emptied and
refilled, and a text longer than :data:`CACHED_TEXT_CHARS` is never kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import attrs

from promptweave.messages.ambient import AMBIENT_HEADER, AmbientEntry, snapshot_entry
from promptweave.messages.prompt_message import PromptMessage
from promptweave.messages.sequence import (
    USER_ROLE_MARKERS,
    HistoryRow,
    format_assistant_turn,
    format_user_turn,
    stepped_window,
)
from promptweave.messages.timeline import speaker_label, timeline_text
from promptweave.store.session_rows import SUMMARY_MARK
from promptweave.text.persona import PersonaPack
from promptweave.turn import Bot, ChatMessage, History, HistoryEntry

__all__ = [
    "CACHED_TEXT_CHARS",
    "MESSAGE_CACHE_ENTRIES",
    "NOT_BUILT",
    "TEXT_CHANGES",
    "WINDOW_CONVERSATIONS",
    "WINDOW_NEW_ENTRIES",
    "HistoryTexts",
    "MessageCache",
    "turn_rows",
]

#: Entries per table of a :class:`MessageCache`.
MESSAGE_CACHE_ENTRIES = 8192
#: Texts longer than this are processed every time instead of being kept.
CACHED_TEXT_CHARS = 8192

#: How many changed texts a kept window's :class:`HistoryTexts` carries (at least: an eighth of
#: the window, for long ones) before its texts are counted afresh.
TEXT_CHANGES = 32
#: Conversations whose history window a :class:`MessageCache` keeps (each holds a reference to
#: its last history).
WINDOW_CONVERSATIONS = 1024
#: At most this many entries may have joined a conversation's history since its last turn for the
#: window of that turn to be carried on; with more, the window is made afresh.
WINDOW_NEW_ENTRIES = 16

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING: Any = object()
#: Stands for a message :meth:`MessageCache.row_messages` has not built yet.
NOT_BUILT: Any = _MISSING


def _keep(table: dict[K, V], key: K, value: V, limit: int) -> V:
    """Keep ``value`` under ``key``, emptying ``table`` first when it is full."""
    if len(table) >= limit:
        # Emptying is one atomic call, safe with runtimes shared between threads; the messages
        # still in use come back on their next turn.
        table.clear()
    table[key] = value
    return value


def _is_summary(entry: HistoryEntry) -> bool:
    return entry.role == "user" and entry.content.startswith(SUMMARY_MARK)


def _newest_summary(entries: Sequence[HistoryEntry], start: int, end: int) -> int:
    """The index of the newest summary entry in ``entries[start:end]``, ``-1`` when none."""
    for index in range(end - 1, start - 1, -1):
        if _is_summary(entries[index]):
            return index
    return -1


def _with_summary(
    entries: Sequence[HistoryEntry],
    rows: tuple[HistoryRow, ...],
    found: int,
    limit: int,
    row: Callable[[HistoryEntry], HistoryRow],
) -> tuple[HistoryRow, ...]:
    if found < 0:
        return rows
    summary = row(entries[found])
    return (summary, *rows[1:]) if limit > 1 else (summary,)


def turn_rows(
    entries: Sequence[HistoryEntry],
    limit: int,
    row: Callable[[HistoryEntry], HistoryRow],
    step: int = 1,
) -> tuple[HistoryRow, ...]:
    """:func:`promptweave.messages.sequence.window_history` of a turn's own history, with rows
    made for the window alone: the newest ``limit`` entries and, when they hold no summary, the
    newest older summary in front.

    :param step: above 1, the window moves in steps of that many rows instead
        (:func:`promptweave.messages.sequence.stepped_window`, ``limit`` its floor).
    """
    if limit <= 0:
        return ()
    if step > 1:
        summary, start = stepped_window([_is_summary(e) for e in entries], limit, step)
        kept = [*([entries[summary]] if summary is not None else []), *entries[start:]]
        return tuple(row(entry) for entry in kept)
    rows = tuple(row(entry) for entry in entries[-limit:])
    if len(rows) == len(entries) or any(found.summary for found in rows):
        return rows
    # Read back from the window, so only a history without any summary is read to its start.
    return _with_summary(
        entries, rows, _newest_summary(entries, 0, len(entries) - len(rows)), limit, row
    )


class _Window(NamedTuple):
    """One conversation's history window as its last turn made it (never changed: a new turn
    puts a new one in its place)."""

    entries: tuple[HistoryEntry, ...]
    limit: int
    window: tuple[HistoryEntry, ...]
    rows: tuple[HistoryRow, ...]
    summaries: int  # summary rows among ``rows``
    # The newest summary entry older than the window (-1: none), when it was looked for.
    older: int | None
    result: tuple[HistoryRow, ...]
    # ``[result, its texts, (max_len, the messages of its rows so far)]``, also found by the
    # result itself (``MessageCache._kept_of``); the messages are a list the budget fills in.
    kept: list[Any]


@attrs.frozen
class HistoryTexts:
    """What :func:`promptweave.messages.builder.carried_by_history` matches timeline messages
    against, for history rows without message ids: how many rows (summaries left out) hold each
    ``(role, stripped text)``, one fewer for ``excluded`` (the window's oldest row, when a
    summary took its place).

    The counts are ``base`` plus ``changes``: a turn copies only the changes since ``base`` was
    counted, not a count per row of the window (``base`` is counted again once the changes grow).
    """

    base: Mapping[tuple[str, str], int]
    changes: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    excluded: tuple[str, str] | None = None

    def __contains__(self, key: object) -> bool:
        found: int = self.base.get(key, 0) + self.changes.get(key, 0)  # type: ignore[call-overload]
        return (found - 1 if key == self.excluded else found) > 0


def _text_key(row: HistoryRow) -> tuple[str, str]:
    return row.role, row.content.strip()


def _count_texts(rows: Sequence[HistoryRow]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        if not row.summary:
            key = _text_key(row)
            counts[key] = counts.get(key, 0) + 1
    return counts


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
    _suffix: str | None = attrs.field(default=None, init=False, repr=False)
    # Per conversation (bot, group, user), its history window as its last turn left it.
    _windows: dict[Hashable, _Window] = attrs.field(factory=dict, init=False, repr=False)
    # What is kept with each window handed out, by the rows tuple itself (held, so its id
    # stays): see ``_Window.kept``.
    _kept_of: dict[int, list[Any]] = attrs.field(factory=dict, init=False, repr=False)

    @property
    def injection_suffix(self) -> str:
        """The pack's "ignore instructions above" line, filled in (once: the pack is frozen)."""
        suffix = self._suffix
        if suffix is None:
            suffix = self._suffix = self.persona.format(self.persona.user_turn.injection_suffix)
        return suffix

    def user_turn(
        self, text: str, max_len: int, markers: tuple[str, ...] = USER_ROLE_MARKERS
    ) -> str:
        """:func:`promptweave.messages.sequence.format_user_turn` of ``text`` with this cache's pack; ``markers``
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

    def window_rows(
        self, conversation: Hashable, entries: Sequence[HistoryEntry], limit: int
    ) -> tuple[HistoryRow, ...]:
        """:func:`turn_rows` of a turn's own history, carried on from the conversation's last
        turn: when the history is the last one's with a few entries added at the end (and as
        many gone from the start), only those entries are made into rows, and the older part is
        compared with the last one's (a comparison of references, not a row per entry) instead of
        being read again for a summary. When both are a :class:`promptweave.History` from one line
        of appends, the older part is known to be the last one's without comparing it.

        :param conversation: the conversation the history belongs to (bot, group, user).
        """
        if limit <= 0:
            return ()
        if not isinstance(entries, History):
            entries = tuple(entries)
        slot = self._windows.get(conversation)
        if slot is not None and slot.entries is entries and slot.limit == limit:
            return slot.result
        window = entries[-limit:]
        carried = None if slot is None or slot.limit != limit else self._carry(slot, window)
        if carried is None:
            rows = tuple(self.history_row(entry) for entry in window)
            summaries = sum(found.summary for found in rows)
            texts = HistoryTexts(_count_texts(rows))
            kept = -1
        else:
            rows, summaries, texts, kept = carried
        older: int | None = None
        if len(rows) == len(entries) or summaries:
            result = rows
        else:
            end = len(entries) - len(window)
            older = self._older_summary(slot, entries, end, kept) if slot is not None else None
            if older is None:
                older = _newest_summary(entries, 0, end)
            result = _with_summary(entries, rows, older, limit, self.history_row)
            if result is not rows:
                texts = attrs.evolve(texts, excluded=_text_key(rows[0]))
        # The messages of the rows, built when the budget first reads them: those of the rows
        # both windows hold come along (the oldest row, which a summary may take, excepted).
        messages: list[Any]
        if kept < 0 or slot is None:
            max_len, messages = -1, [_MISSING] * len(result)
        else:
            max_len, before = slot.kept[2]
            messages = [*before[len(slot.window) - kept :], *[_MISSING] * (len(result) - kept)]
            messages[0] = _MISSING
        kept_with = [result, texts, (max_len, messages)]
        _keep(
            self._windows,
            conversation,
            _Window(entries, limit, window, rows, summaries, older, result, kept_with),
            WINDOW_CONVERSATIONS,
        )
        _keep(self._kept_of, id(result), kept_with, WINDOW_CONVERSATIONS)
        return result

    def newest_messages(
        self, rows: Sequence[HistoryRow], max_len: int
    ) -> Iterator[tuple[int, PromptMessage | None]]:
        """``(index, message)`` of each row, from the newest back (:meth:`history_message`); for
        a window :meth:`window_rows` returned, the messages the last turn's window built come
        along instead of being looked up row by row."""
        messages = self.row_messages(rows, max_len)
        for index in range(len(rows) - 1, -1, -1):
            message = messages[index]
            if message is NOT_BUILT:
                message = messages[index] = self.history_message(rows[index], max_len)
            yield index, message

    def row_messages(self, rows: Sequence[HistoryRow], max_len: int) -> list[Any]:
        """The messages of ``rows`` (:meth:`history_message`) as far as they are built: a list
        in the rows' order, :data:`NOT_BUILT` where a message is still to be built. For a window
        :meth:`window_rows` returned, it is the list kept with the window (the messages the last
        turn's window built come along), to be filled in by whoever builds one (the same value
        whoever builds it first: threads sharing the window may both); for any other rows, a new
        list of :data:`NOT_BUILT`."""
        found = self._kept_of.get(id(rows))
        if found is None or found[0] is not rows:
            return [_MISSING] * len(rows)
        built, messages = found[2]
        if built != max_len:
            # Built for another length (the settings changed): made again, replaced whole.
            messages = [_MISSING] * len(rows)
            found[2] = (max_len, messages)
        return messages  # type: ignore[no-any-return]

    def history_texts(self, rows: tuple[HistoryRow, ...]) -> HistoryTexts | None:
        """The texts of ``rows`` for :func:`promptweave.messages.builder.carried_by_history`
        when ``rows`` is a window :meth:`window_rows` returned, kept with it; else ``None``."""
        found = self._kept_of.get(id(rows))
        return found[1] if found is not None and found[0] is rows else None

    def _carry(
        self, slot: _Window, window: tuple[HistoryEntry, ...]
    ) -> tuple[tuple[HistoryRow, ...], int, HistoryTexts, int] | None:
        """The rows of ``window`` from those of the last turn's: ``(rows, summary rows, their
        texts, how many entries of the last window are kept)``, or ``None`` when the window is
        not the last one moved on by a few new entries."""
        before = slot.window
        if not before:
            return None
        newest = before[-1]
        added = None
        for count in range(min(len(window), WINDOW_NEW_ENTRIES + 1)):
            if window[-1 - count] is newest:
                added = count
                break
        if added is None:
            return None
        kept = len(window) - added
        if kept > len(before) or window[:kept] != before[len(before) - kept :]:
            return None
        gone = slot.rows[: len(before) - kept]
        new = tuple([self.history_row(entry) for entry in window[kept:]])
        rows = slot.rows[len(before) - kept :] + new
        # The last turn's changes, copied and changed by the rows that left and came: the last
        # turn's texts stay as they were, and a turn copies no count per row of a long window.
        summaries = slot.summaries
        changes = dict(slot.kept[1].changes)
        for row in gone:
            if row.summary:
                summaries -= 1
            else:
                key = (row.role, row.content.strip())
                changes[key] = changes.get(key, 0) - 1
        for row in new:
            if row.summary:
                summaries += 1
            else:
                key = (row.role, row.content.strip())
                changes[key] = changes.get(key, 0) + 1
        if len(changes) > max(TEXT_CHANGES, len(rows) // 8):
            return rows, summaries, HistoryTexts(_count_texts(rows)), kept
        return rows, summaries, HistoryTexts(slot.kept[1].base, changes), kept

    @staticmethod
    def _older_summary(
        slot: _Window, entries: tuple[HistoryEntry, ...], end: int, kept: int
    ) -> int | None:
        """The newest summary in ``entries[:end]`` (the part older than the window) from what the
        last turn found in its own, or ``None`` when that cannot tell."""
        if slot.older is None or kept < 0:
            return None
        before = slot.entries
        # With nothing else changed, entries[:end] is before[shift:end_before]: the last turn's
        # older part, then the entries that have left its window since.
        end_before = len(before) - kept
        shift = end_before - end
        if shift < 0:
            return None
        # A history grown from the last one by appends is known to hold its older part; any
        # other could differ anywhere.
        proven = (
            isinstance(entries, History)
            and isinstance(before, History)
            and entries.offset_from(before) == shift
        )
        if not proven and entries[:end] != before[shift:end_before]:
            return None
        # The entries that left the window held no summary: the last turn looked for an older
        # one only because its window held none.
        return slot.older - shift if slot.older >= shift else -1

    def history_message(self, row: HistoryRow, max_len: int) -> PromptMessage | None:
        """The message of one history row (``None`` when its text cleans to nothing): the user's
        rows wrapped like :func:`promptweave.messages.sequence.format_user_turn`, the bot's on one line."""
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
        (:func:`promptweave.messages.timeline.speaker_label`) and the line's text
        (:func:`promptweave.messages.timeline.timeline_text`)."""
        slot = self._shown_slots.get(id(message))
        if slot is not None and slot[0] is message and slot[1] is bot and slot[2] == line_chars:
            return slot[3]
        if persona is not self.persona:
            label = speaker_label(message.sender_id, message.sender_name, bot, persona)
            return label, timeline_text(message, line_chars)
        parts = (self._speaker(message, bot), self._text(message, line_chars))
        slots = self._shown_slots
        if len(slots) >= self.entries:
            slots.clear()  # as ``_keep`` does, inlined: four new messages a turn come here
        slots[id(message)] = (message, bot, line_chars, parts)
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
