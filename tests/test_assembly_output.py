"""Assembly output stays byte-identical: the example turns and a seeded corpus of conversations
render exactly as they did before assembly became incremental, and a runtime that has rendered
other turns renders each turn exactly as a fresh one does."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
