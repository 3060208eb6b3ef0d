"""A conversation's history window carried from one turn to the next gives the rows a window made
afresh gives, whatever the next turn's history: entries added at the end, gone from the start, a
summary anywhere, an older entry replaced, another window size (``docs/performance.md``)."""

from __future__ import annotations

import copy
import datetime as dt
import pickle
import random
from collections.abc import Iterator
from typing import ClassVar, SupportsIndex, overload

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from promptweave import Bot, ChatMessage, History, HistoryEntry, Promptweave, Turn
from promptweave.config import Config, StoreConfig
from promptweave.messages.message_cache import (
    TEXT_CHANGES,
    WINDOW_NEW_ENTRIES,
    MessageCache,
    turn_rows,
)
from promptweave.messages.sequence import HistoryRow
from promptweave.store.session_rows import SUMMARY_MARK
from promptweave.testing import TEST_ENVIRON

CONVERSATION = ("10001", "20001", "30001")


@pytest.fixture(scope="module")
def pack() -> object:
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    return runtime.persona


def _entry(number: int, summary: bool = False) -> HistoryEntry:
    if summary:
        return HistoryEntry(role="user", content=f"{SUMMARY_MARK}\n摘要 {number}")
    role = "user" if number % 2 == 0 else "assistant"
    return HistoryEntry(role=role, content=f"第 {number} 句")


def _expected(entries: tuple[HistoryEntry, ...], limit: int) -> tuple[HistoryRow, ...]:
    return turn_rows(entries, limit, HistoryRow.from_entry)


# One step from the last turn's history to this one's.
_STEPS = st.sampled_from(
    ["add", "add_summary", "slide", "same_object", "copy", "replace_old", "cut"]
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=10**6),
    steps=st.lists(
        st.tuples(_STEPS, st.integers(min_value=1, max_value=WINDOW_NEW_ENTRIES + 3)), max_size=25
    ),
    limit=st.integers(min_value=1, max_value=6),
    start=st.integers(min_value=0, max_value=12),
)
def test_a_carried_window_gives_the_rows_of_a_fresh_one(
    pack: object, seed: int, steps: list[tuple[str, int]], limit: int, start: int
) -> None:
    rng = random.Random(seed)
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    number = 0
    history: list[HistoryEntry] = []
    for _ in range(start):
        history.append(_entry(number, summary=rng.random() < 0.15))
        number += 1
    entries = tuple(history)
    for step, count in [("copy", 0), *steps]:
        if step in ("add", "add_summary", "slide"):
            for _ in range(count):
                history.append(_entry(number, summary=step == "add_summary" and rng.random() < 0.5))
                number += 1
            if step == "slide":
                del history[: min(count, len(history))]
            entries = tuple(history)
        elif step == "copy":
            entries = tuple(history)
        elif step == "replace_old" and history:
            # An older entry replaced by another object (a summary, or a plain line).
            index = rng.randrange(len(history))
            history[index] = _entry(10_000 + number, summary=rng.random() < 0.5)
            number += 1
            entries = tuple(history)
        elif step == "cut":
            del history[-min(count, len(history)) :]
            entries = tuple(history)
        window = limit if rng.random() < 0.9 else limit + 1
        rows = cache.window_rows(CONVERSATION, entries, window)
        assert rows == _expected(entries, window)
        # The texts kept with the window are those the timeline is matched against.
        texts = cache.history_texts(rows)
        assert texts is not None
        shown = {(row.role, row.content.strip()) for row in rows if not row.summary}
        for probe in {*((e.role, e.content.strip()) for e in entries), ("user", "不在其中")}:
            assert (probe in texts) == (probe in shown), probe


def test_a_long_history_without_a_summary_is_not_read_again(pack: object) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    history = [_entry(0, summary=True), *(_entry(n) for n in range(1, 2000))]
    assert cache.window_rows(CONVERSATION, tuple(history), 18)[0].summary
    history += [_entry(2000), _entry(2001)]
    rows = cache.window_rows(CONVERSATION, tuple(history), 18)
    assert rows == _expected(tuple(history), 18)
    assert rows[0].summary and rows[0].content.endswith("摘要 0")


def test_conversations_keep_their_own_windows(pack: object) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    first = tuple(_entry(n) for n in range(30))
    second = (_entry(100, summary=True), *(_entry(n) for n in range(200, 230)))
    for _ in range(2):
        assert cache.window_rows(("1", "g", "a"), first, 5) == _expected(first, 5)
        assert cache.window_rows(("1", "g", "b"), second, 5) == _expected(second, 5)


def test_rows_not_made_by_a_window_have_no_kept_texts(pack: object) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    rows = _expected(tuple(_entry(n) for n in range(5)), 3)
    assert cache.history_texts(rows) is None


def test_the_texts_of_a_sliding_window_stay_right_when_counted_afresh(pack: object) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    # Repeated texts, so counts above one come and go as the window slides; more of them than
    # the changes a window carries, so its texts are counted afresh along the way.
    kinds = 2 * TEXT_CHANGES
    history = [HistoryEntry(role="user", content=f"句 {n % 3}") for n in range(5)]
    for number in range(5, 5 + 4 * TEXT_CHANGES):
        text = f"句 {number % 3}" if number % 2 else f"句 {number % kinds}"
        history = [*history[1:], HistoryEntry(role="user", content=text)]
        rows = cache.window_rows(CONVERSATION, tuple(history), 5)
        texts = cache.history_texts(rows)
        assert texts is not None
        for text in range(kinds):
            key = ("user", f"句 {text}")
            assert (key in texts) == any(entry.content == key[1] for entry in history), key


def test_the_messages_kept_with_a_window_are_those_of_its_rows(pack: object) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    long_line = "很长的一句话" * 30
    history = [_entry(0, summary=True), *(_entry(n) for n in range(1, 40))]
    for number in range(40, 60):
        history = [*history, HistoryEntry(role="user", content=f"{long_line}{number}")]
        rows = cache.window_rows(CONVERSATION, tuple(history), 6)
        # Another length (the settings changed) builds them again.
        for max_len in (4000, 64, 4000):
            found = dict(cache.newest_messages(rows, max_len))
            assert list(found) == list(range(len(rows) - 1, -1, -1))
            fresh = MessageCache(persona=pack)  # type: ignore[arg-type]
            assert found == {i: fresh.history_message(row, max_len) for i, row in enumerate(rows)}


# One step from the last turn's history to this one's, through the History API.
_GROWN = st.sampled_from(
    [
        "append",
        "append_keep",
        "append_summary",
        "append_again",
        "drop",
        "fork",
        "replay",
        "fresh",
        "replace_old",
        "tuple",
        "other",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=10**6),
    steps=st.lists(
        st.tuples(_GROWN, st.integers(min_value=0, max_value=WINDOW_NEW_ENTRIES + 3)), max_size=25
    ),
    limit=st.integers(min_value=1, max_value=6),
    start=st.integers(min_value=0, max_value=12),
)
def test_a_history_grown_by_appends_gives_the_rows_of_a_fresh_window(
    pack: object, seed: int, steps: list[tuple[str, int]], limit: int, start: int
) -> None:
    rng = random.Random(seed)
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    numbers = iter(range(10**6))

    def new(count: int, summaries: float = 0.15) -> list[HistoryEntry]:
        return [_entry(next(numbers), summary=rng.random() < summaries) for _ in range(count)]

    current = History(new(start))
    # Another conversation's line, with its own entries.
    other = History(new(start + 2))
    made = [current]
    for step, count in [("fresh", 0), *steps]:
        if step == "append":
            current = current.appended(*new(count))
        elif step in ("append_keep", "append_summary"):
            summaries = 0.5 if step == "append_summary" else 0.15
            keep = rng.randrange(len(current) + count + 2)
            current = current.appended(*new(count, summaries), keep=keep)
        elif step == "append_again":
            # The same entry objects once more: where they stand tells them apart, not identity.
            again = [rng.choice(current) for _ in range(count)] if current else []
            current = current.appended(*again, keep=rng.choice((None, len(current))))
        elif step == "drop":
            current = current.appended(keep=max(0, len(current) - count))
        elif step == "fork":
            # Appended to an earlier history: a line of its own from there.
            current = rng.choice(made).appended(*new(count))
        elif step == "replay":
            current = rng.choice(made)
        elif step == "fresh":
            current = History(current)
        elif step == "replace_old" and current:
            # The same window, an older entry replaced: a History of a line of its own.
            replaced = list(current)
            replaced[rng.randrange(len(replaced))] = new(1, summaries=0.5)[0]
            current = History(replaced)
        elif step == "other":
            other = other.appended(*new(count))
            current = other
        handed: tuple[HistoryEntry, ...] = tuple(current) if step == "tuple" else current
        made.append(current)
        window = limit if rng.random() < 0.9 else limit + 1
        rows = cache.window_rows(CONVERSATION, handed, window)
        assert rows == _expected(tuple(handed), window)
        texts = cache.history_texts(rows)
        assert texts is not None
        shown = {(row.role, row.content.strip()) for row in rows if not row.summary}
        for probe in {*((e.role, e.content.strip()) for e in handed), ("user", "不在其中")}:
            assert (probe in texts) == (probe in shown), probe


class _Watched(History):
    """A History that records how many of its entries are read, one by one or by a slice."""

    read: ClassVar[list[int]] = []

    @overload
    def __getitem__(self, key: SupportsIndex) -> HistoryEntry: ...

    @overload
    def __getitem__(self, key: slice) -> tuple[HistoryEntry, ...]: ...

    def __getitem__(self, key: SupportsIndex | slice) -> HistoryEntry | tuple[HistoryEntry, ...]:
        found = super().__getitem__(key)
        _Watched.read.append(len(found) if isinstance(key, slice) else 1)  # type: ignore[arg-type]
        return found

    def __iter__(self) -> Iterator[HistoryEntry]:
        _Watched.read.append(len(self))
        return super().__iter__()


def _entries_read(cache: MessageCache, history: History, limit: int) -> int:
    _Watched.read.clear()
    rows = cache.window_rows(CONVERSATION, history, limit)
    read = sum(_Watched.read)
    assert rows == _expected(tuple(history), limit)
    return read


@pytest.mark.parametrize("summary_at", [None, 0, 500])
def test_a_history_appended_to_is_not_read_beyond_its_window(
    pack: object, summary_at: int | None
) -> None:
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    entries = [_entry(n, summary=n == summary_at) for n in range(2000)]
    history = _Watched(entries)
    cache.window_rows(CONVERSATION, history, 18)
    for number in range(2000, 2040, 2):
        history = history.appended(_entry(number), _entry(number + 1), keep=2000)
        assert type(history) is _Watched
        # The window, the entries added and the summary found: never the part older than it.
        assert _entries_read(cache, history, 18) <= 3 * 18


def test_a_history_not_appended_to_the_last_one_is_compared(pack: object) -> None:
    # The same entries as a History of another line, or a tuple: the older part is compared
    # (read whole), which is what the test above would catch.
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    history = _Watched(_entry(n) for n in range(2000))
    cache.window_rows(CONVERSATION, history, 18)
    fresh = _Watched(history.appended(_entry(2000), _entry(2001)))
    assert _entries_read(cache, fresh, 18) >= 1900
    cache.window_rows(CONVERSATION, tuple(fresh), 18)
    forked = history.appended(_entry(3000), _entry(3001))
    assert forked.offset_from(fresh) is None
    assert _entries_read(cache, forked, 18) >= 1900


def test_appended_adds_at_the_end_and_keeps_the_newest() -> None:
    first = History(_entry(n) for n in range(5))
    assert first == tuple(_entry(n) for n in range(5))
    assert isinstance(first, tuple)
    grown = first.appended(_entry(5), _entry(6))
    assert grown == (*first, _entry(5), _entry(6))
    assert first == tuple(_entry(n) for n in range(5))
    kept = grown.appended(_entry(7), keep=4)
    assert kept == (_entry(4), _entry(5), _entry(6), _entry(7))
    assert kept.appended(_entry(8), _entry(9), keep=1) == (_entry(9),)
    assert kept.appended(keep=0) == ()
    assert History().appended() == ()
    assert type(kept[1:]) is tuple
    assert type(kept + (_entry(9),)) is tuple  # noqa: RUF005  (what adding gives is the point)
    with pytest.raises(ValueError, match="keep"):
        first.appended(_entry(5), keep=-1)


def test_offset_from_follows_one_line_of_appends() -> None:
    first = History(_entry(n) for n in range(5))
    grown = first.appended(_entry(5), _entry(6), keep=4)
    dropped = grown.appended(keep=2)
    assert grown.offset_from(first) == 3
    assert first.offset_from(grown) == -3
    assert dropped.offset_from(first) == 5
    for later, earlier in ((grown, first), (dropped, first), (dropped, grown)):
        offset = later.offset_from(earlier)
        assert offset is not None
        for index, entry in enumerate(later):
            if 0 <= index + offset < len(earlier):
                assert entry is earlier[index + offset]
    # ``first`` was appended to already: appending to it again starts another line.
    fork = first.appended(_entry(100))
    assert fork.offset_from(first) is None
    assert fork.offset_from(grown) is None
    assert History(first).offset_from(first) is None
    assert copy.copy(grown).offset_from(grown) is None
    assert pickle.loads(pickle.dumps(grown)) == grown
    # The newest of a line, after dropping only, is still its end.
    assert dropped.appended(_entry(7)).offset_from(grown) == 2


def test_a_history_cannot_be_changed() -> None:
    history = History((_entry(0),))
    with pytest.raises(AttributeError):
        history._start = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del history._line


def test_a_turn_keeps_the_history_it_is_given(pack: object) -> None:
    history = History(_entry(n) for n in range(4))
    message = ChatMessage(
        sender_id="30001", text="在吗", time=dt.datetime(2026, 11, 28, 20, 0, tzinfo=dt.UTC)
    )
    turn = Turn(bot=Bot(id="10001", name="小织"), message=message, history=history)
    assert turn.history is history
    assert attrs.evolve(turn, group_id="20001").history is history


def test_an_entry_appended_again_is_told_apart_by_where_it_stands(pack: object) -> None:
    # The window moved on by one entry object it held already: found by identity it looks like
    # nothing was added, but the history dropped its first entry (the summary) too.
    cache = MessageCache(persona=pack)  # type: ignore[arg-type]
    summary, first, last = _entry(0, summary=True), _entry(1), _entry(2)
    history = History((summary, first, last))
    assert cache.window_rows(CONVERSATION, history, 1) == _expected(history, 1)
    again = history.appended(last, keep=3)
    assert again.offset_from(history) == 1
    assert cache.window_rows(CONVERSATION, again, 1) == _expected(again, 1)


def test_a_turn_carrying_a_history_appended_to_reads_only_its_window() -> None:
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    history = _Watched(_entry(n) for n in range(2000))
    read = []
    for number in range(2000, 2020, 2):
        message = ChatMessage(
            id=f"m{number}",
            sender_id="30001",
            text=f"第 {number} 句",
            addressed=True,
            time=dt.datetime(2026, 11, 28, 20, 0, number % 60, tzinfo=dt.UTC),
        )
        turn = Turn(bot=Bot(id="10001", name="小织"), message=message, history=history)
        _Watched.read.clear()
        runtime.render(turn)
        read.append(sum(_Watched.read))
        history = history.appended(_entry(number), _entry(number + 1), keep=2000)
    runtime.close()
    # The first turn reads the history back for a summary; the others, their window and less.
    window = runtime.config.history.user_window
    assert read[0] >= 2000
    assert max(read[1:]) <= 3 * window


def test_a_stepped_window_keeps_between_its_floor_and_floor_plus_step_rows():
    from promptweave.messages.sequence import stepped_window

    floor, step = 18, 8
    starts = []
    for count in range(60):
        summary, start = stepped_window([False] * count, floor, step)
        assert summary is None
        kept = count - start
        assert min(count, floor) <= kept <= floor + step - 1
        starts.append(start)
    # The first row kept changes once every ``step`` rows, never with each new one.
    moves = [count for count in range(1, 60) if starts[count] != starts[count - 1]]
    assert moves == [26, 34, 42, 50, 58]


def test_a_stepped_window_counts_from_the_newest_summary_and_keeps_it_in_front():
    from promptweave.messages.sequence import stepped_window

    rows = [False] * 5 + [True] + [False] * 30
    summary, start = stepped_window(rows, 18, 8)
    assert summary == 5
    # 30 rows after the summary, 17 kept at least beside it: 30 - 17 = 13, by steps of 8.
    assert start == 6 + 8 and 1 + len(rows) - start == 23


def test_turn_rows_with_a_step_keep_the_stepped_window():
    entries = (_entry(0, summary=True), *(_entry(n) for n in range(1, 31)))
    rows = turn_rows(entries, 18, HistoryRow.from_entry, step=8)
    assert rows[0].summary and rows[1].content == "第 9 句" and len(rows) == 23
    assert turn_rows(entries, 18, HistoryRow.from_entry) == _expected(entries, 18)
