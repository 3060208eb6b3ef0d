"""A conversation's history window carried from one turn to the next gives the rows a window made
afresh gives, whatever the next turn's history: entries added at the end, gone from the start, a
summary anywhere, an older entry replaced, another window size (``docs/performance.md``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import HistoryEntry, Promptweave
from framework.config import Config, StoreConfig
from framework.conversation.message_cache import (
    TEXT_CHANGES,
    WINDOW_NEW_ENTRIES,
    MessageCache,
    turn_rows,
)
from framework.conversation.sequence import HistoryRow
from framework.store.sessions import SUMMARY_MARK
from framework.testing import TEST_ENVIRON

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
