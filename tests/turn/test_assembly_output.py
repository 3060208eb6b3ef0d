"""Assembly output stays byte-identical: the example turns and a seeded corpus of conversations
render exactly as they did before assembly became incremental, and a runtime that has rendered
other turns renders each turn exactly as a fresh one does."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import attrs
import pytest
from assembly_support import (
    GOLDEN,
    canonical,
    digest,
    example_outputs,
    golden_form,
    make_stream,
    stream_digests,
    streams,
)
from hypothesis import HealthCheck, given, settings, strategies as st

from promptweave import History, HistoryEntry
from promptweave.store.session_rows import SUMMARY_MARK

GOLDEN_DATA = json.loads(GOLDEN.read_text(encoding="utf-8"))
STREAMS = {stream.name: stream for stream in streams()}


@pytest.mark.parametrize("name", sorted(GOLDEN_DATA["examples"]))
def test_example_turn_renders_as_before(name: str) -> None:
    assert golden_form(example_outputs()[name]) == GOLDEN_DATA["examples"][name]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_corpus_conversation_renders_as_before(name: str, tmp_path: Path) -> None:
    found = stream_digests(STREAMS[name], tmp_path)
    expected = GOLDEN_DATA["streams"][name]
    changed = [
        f"turn {number}: {part}"
        for number, (now, before) in enumerate(zip(found, expected, strict=True))
        for part in before
        if now[part] != before[part]
    ]
    assert changed == []


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(min_value=100, max_value=10**6), name=st.sampled_from(sorted(STREAMS)))
def test_a_warm_runtime_renders_each_turn_as_a_fresh_one(seed: int, name: str) -> None:
    stream = make_stream(name, seed, 10)
    with tempfile.TemporaryDirectory() as scratch:
        warm = stream.runtime(Path(scratch))
        for turn, decision in stream.turns:
            cold = stream.runtime(Path(scratch))
            expected = canonical(cold.render(turn, decision=decision, retrieve=False))
            cold.close()
            found = canonical(warm.render(turn, decision=decision, retrieve=False))
            assert digest(found) == digest(expected), [
                part for part in found if found[part] != expected[part]
            ]
        warm.close()


# One step from the last turn's history to this one's, through the History API.
_HISTORY_STEPS = (
    "append",
    "keep",
    "summary",
    "drop",
    "fork",
    "replay",
    "fresh",
    "replace_old",
    "tuple",
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(min_value=100, max_value=10**6),
    name=st.sampled_from(
        ["defaults", "private", "small_budget", "tiny_budget", "short_window", "window_one"]
    ),
)
def test_a_history_grown_by_appends_renders_as_a_tuple_does(seed: int, name: str) -> None:
    # A warm runtime given the History renders what a fresh one given a tuple of its entries
    # renders: appends, drops from the front, summaries entering and leaving, an older history
    # replayed, one appended to an older one, one built afresh.
    rng = random.Random(seed)
    stream = make_stream(name, seed, 12)
    line = History()
    made = [line]
    with tempfile.TemporaryDirectory() as scratch:
        warm = stream.runtime(Path(scratch))
        for number, (turn, decision) in enumerate(stream.turns):
            step = rng.choice(_HISTORY_STEPS)
            # The stream's own entries (the same objects may come again) and now and then a
            # summary row.
            new = turn.history[-rng.randint(1, 3) :]
            if step == "append":
                line = line.appended(*new)
            elif step == "keep":
                line = line.appended(*new, keep=rng.choice((2, 3, 18, 30)))
            elif step == "summary":
                summary = HistoryEntry(role="user", content=f"{SUMMARY_MARK}\n摘要 {number}")
                line = line.appended(summary, *new, keep=rng.choice((None, 4, 20)))
            elif step == "drop":
                line = line.appended(keep=max(0, len(line) - rng.randint(1, 3)))
            elif step == "fork":
                line = rng.choice(made).appended(*new)
            elif step == "replay":
                line = rng.choice(made)
            elif step == "fresh":
                line = History(line)
            elif step == "replace_old" and line:
                # The same window, an older entry replaced by a summary: a line of its own.
                replaced = list(line)
                replaced[rng.randrange(len(replaced))] = HistoryEntry(
                    role="user", content=f"{SUMMARY_MARK}\n换过的摘要 {number}"
                )
                line = History(replaced)
            made.append(line)
            handed = tuple(line) if step == "tuple" else line
            cold = stream.runtime(Path(scratch))
            expected = canonical(
                cold.render(
                    attrs.evolve(turn, history=tuple(line)), decision=decision, retrieve=False
                )
            )
            cold.close()
            found = canonical(
                warm.render(attrs.evolve(turn, history=handed), decision=decision, retrieve=False)
            )
            assert digest(found) == digest(expected), (
                step,
                [part for part in found if found[part] != expected[part]],
            )
        warm.close()
