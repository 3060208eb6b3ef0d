"""The cached, bounded retrieval finds what it found when its expectations were recorded.

``tests/data/retrieval_expected.json`` records what the retrieval gave for the example data and
for randomised stores and turns (``retrieval_expected.py`` builds the inputs and says how the
file was made): the same items, hits and rendered turns, on the SQLite and the in-memory store,
cold and from warm caches. Randomised stores stay below ``RANKED_MATCHES`` texts per term, so the
bounded search has nothing to leave out (what it leaves out beyond is pinned in
``test_retrieval_bounds.py``).
"""

from __future__ import annotations

import random

import pytest
from retrieval_expected import (
    BACKENDS,
    EXAMPLES,
    READS_SEED,
    RENDER_COLUMNS,
    RENDER_SEEDS,
    RETRIEVAL_CONFIGS,
    RETRIEVERS,
    SEARCH_COLUMNS,
    SEARCH_SEEDS,
    digest,
    example_renders,
    example_runtime,
    expected,
    random_batch,
    randomised_case,
    reads_store,
    scope_reads,
    sqlite_search_case,
)

from promptweave import load_turn_file
from promptweave.store.retrieval import MemoryRecord, RetrievalBatch

EXPECTED = expected()
STORE_TURN = EXAMPLES / "turns" / "at_question_store.json"


def test_the_recorded_rows_have_the_columns_named():
    assert EXPECTED["render_columns"] == " ".join(RENDER_COLUMNS)
    assert EXPECTED["search_columns"] == " ".join(SEARCH_COLUMNS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_example_turns_render_byte_for_byte_as_recorded(tmp_path, backend):
    pw = example_runtime(tmp_path, backend)
    for _ in range(2):  # the second time from warm caches
        assert example_renders(pw) == EXPECTED["example_turns"][backend]
    sections = pw.render(load_turn_file(STORE_TURN)).trace["retrieval"]["sections"]
    assert sections["memory"][0]["status"] == "hit"  # the comparison covers real hits
    assert sections["group_expression"][0]["details"]["pairs_compared"] > 0


@pytest.mark.parametrize("config", sorted(RETRIEVAL_CONFIGS))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", RENDER_SEEDS)
def test_randomised_stores_render_byte_for_byte_as_recorded(tmp_path, backend, seed, config):
    found, rendered = randomised_case(tmp_path, config, backend, seed)
    recorded = EXPECTED["randomised_turns"][f"{config}/{backend}/{seed}"]
    assert found["batch"] == recorded["batch"], "the generated store is not the recorded one"
    assert len(found["turns"]) == len(recorded["turns"])
    for number, (row, then_row) in enumerate(zip(found["turns"], recorded["turns"], strict=True)):
        differs = [
            column
            for column, now, then in zip(RENDER_COLUMNS, row.split(), then_row.split(), strict=True)
            if now != then
        ]
        assert not differs, f"turn {number}: {differs} differ from the recording"
    hits: dict[str, int] = {}
    for turn in rendered:
        for traces in turn["trace"]["retrieval"]["sections"].values():
            for trace in traces:
                assert trace.get("reason") not in ("error", "timeout"), trace
                hits[trace["retriever"]] = hits.get(trace["retriever"], 0) + len(trace["hits"])
    assert all(hits.get(name, 0) >= 5 for name in RETRIEVERS), hits


@pytest.mark.parametrize("seed", SEARCH_SEEDS)
def test_sqlite_searches_give_the_recorded_hits_in_the_recorded_order(tmp_path, seed):
    # The kept document counts choose the terms the index's vocabulary chose, and none is left
    # out: these stores stay within the ranked texts.
    found = sqlite_search_case(tmp_path, seed)
    assert found == EXPECTED["sqlite_searches"][str(seed)]
    assert sum(int(row.split()[0]) + int(row.split()[1]) for row in found["found"]) > 1000


def test_the_reads_by_scope_give_what_was_recorded(tmp_path):
    store, batch = reads_store(tmp_path)
    assert batch == EXPECTED["reads_by_scope"]["batch"]
    for _ in range(2):  # read, then read from the cache
        assert scope_reads(store) == EXPECTED["reads_by_scope"]["reads"]


def test_the_recording_is_of_distinct_stores_and_reads():
    """Each seed builds a store of its own, and the reads of different scopes differ: equal
    digests would not be a comparison."""
    seeds = (*RENDER_SEEDS, *SEARCH_SEEDS, READS_SEED)
    assert len({digest(random_batch(random.Random(seed))) for seed in seeds}) == len(seeds)
    reads = EXPECTED["reads_by_scope"]["reads"]
    assert len({read["expression_pairs"] for read in reads.values()}) == len(reads)


def test_the_comparison_sees_differences(tmp_path):
    """The recorded comparison is not vacuous: a store with one more memory renders otherwise."""
    pw = example_runtime(tmp_path, "sqlite")
    pw.stores.retrieval.write(
        RetrievalBatch(
            memories=(
                MemoryRecord(
                    bot_id="10001", group_id="20001", kind="teaching", text="周六桌游局改到格子"
                ),
            )
        )
    )
    renders = example_renders(pw)
    recorded = EXPECTED["example_turns"]["sqlite"]
    assert renders[STORE_TURN.name] != recorded[STORE_TURN.name]
    assert "周六桌游局改到格子" in str(renders[STORE_TURN.name]["retrieval"]["memory"])
