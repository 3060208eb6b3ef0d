"""The SQLite routing state keeps each group's quote candidate rows as its connection left them,
and reads them again whenever another connection has written (``framework/store/row_counts.py``,
``framework/store/routing_state_sqlite.py``)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from pathlib import Path

import pytest

from promptweave.store import row_counts
from promptweave.store.routing_state import QuoteCandidate
from promptweave.store.routing_state_sqlite import SQLiteRoutingState
from promptweave.store.sqlite import SQLiteDatabase

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
LIMIT = 4


def _candidate(name: str, seconds: float, *, current: bool = False) -> QuoteCandidate:
    return QuoteCandidate(
        message_id=name,
        sender_id="3",
        text=f"text of {name}",
        time=T0 + dt.timedelta(seconds=seconds),
        is_current=current,
    )


def _stored(path: Path, group: str = "g") -> tuple[QuoteCandidate, ...]:
    """The group's candidates as a connection that has kept nothing reads them."""
    return SQLiteRoutingState(SQLiteDatabase(path)).candidates("b", group)


def test_candidates_written_by_another_connection_are_read_again(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    here = SQLiteRoutingState(SQLiteDatabase(path))
    there = SQLiteRoutingState(SQLiteDatabase(path))
    here.record_candidates("b", "g", [_candidate("h1", 1), _candidate("h2", 2)], LIMIT)
    there.record_candidates("b", "g", [_candidate("t3", 3), _candidate("t4", 4)], LIMIT)
    # What this connection kept is stale now: the two of the other connection are among the
    # candidates, and the oldest goes for the new one.
    after = here.record_candidates("b", "g", [_candidate("h5", 5, current=True)], LIMIT)
    assert [c.message_id for c in after] == ["h2", "t3", "t4", "h5"]
    assert after == _stored(path)
    # The other connection's rows are stale as well: it reads again before deleting the oldest.
    after = there.record_candidates("b", "g", [_candidate("t6", 6)], LIMIT)
    assert [c.message_id for c in after] == ["t3", "t4", "h5", "t6"]
    assert after == _stored(path)


def test_a_call_that_changes_nothing_returns_the_rows_kept(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    state = SQLiteRoutingState(SQLiteDatabase(path))
    first = state.record_candidates("b", "g", [_candidate("m1", 1), _candidate("m2", 2)], LIMIT)
    again = state.record_candidates("b", "g", [_candidate("m1", 1), _candidate("m2", 2)], LIMIT)
    assert again == first == _stored(path)
    # A candidate older than the newest kept is not added, and nothing is written.
    assert state.record_candidates("b", "g", [_candidate("old", 0)], LIMIT) == first


def test_routing_states_over_one_database_share_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    database = SQLiteDatabase(path)
    one, two = SQLiteRoutingState(database), SQLiteRoutingState(database)
    for number in range(10):
        state = one if number % 3 else two
        after = state.record_candidates("b", "g", [_candidate(f"m{number}", number)], LIMIT)
        assert after == _stored(path)
        assert [c.message_id for c in after] == [
            f"m{n}" for n in range(max(0, number - LIMIT + 1), number + 1)
        ]


def test_groups_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    state = SQLiteRoutingState(SQLiteDatabase(path))
    for number in range(6):
        for group in ("g", "h"):
            state.record_candidates("b", group, [_candidate(f"{group}{number}", number)], LIMIT)
    assert [c.message_id for c in _stored(path, "g")] == ["g2", "g3", "g4", "g5"]
    assert [c.message_id for c in _stored(path, "h")] == ["h2", "h3", "h4", "h5"]
    assert state.record_candidates("b", "h", [], LIMIT) == _stored(path, "h")


def test_connections_writing_in_turn_always_return_what_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    states = [SQLiteRoutingState(SQLiteDatabase(path)) for _ in range(3)]
    rng = random.Random(7)
    for number in range(60):
        state = rng.choice(states)
        group = rng.choice(("g", "h"))
        found = [
            _candidate(f"m{n}", n, current=n == number)
            for n in range(number - rng.randrange(3), number + 1)
            if n >= 0
        ]
        after = state.record_candidates("b", group, found, LIMIT)
        assert after == _stored(path, group)


def test_threads_recording_at_once_keep_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    state = SQLiteRoutingState(SQLiteDatabase(path))
    state.record_candidates("b", "g", [], LIMIT)  # the tables, created once
    per_thread = 40
    results: list[bool] = []

    def record(thread: int) -> None:
        for number in range(per_thread):
            seconds = number * 4 + thread
            after = state.record_candidates(
                "b", "g", [_candidate(f"{thread}-{number}", seconds)], LIMIT
            )
            results.append(len(after) <= LIMIT and len({c.message_id for c in after}) == len(after))

    workers = [threading.Thread(target=record, args=(thread,)) for thread in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(results) and len(results) == 4 * per_thread
    # Each thread's connection went on from the rows as they were: no candidate was lost or
    # doubled, and the group holds the newest of those accepted.
    final = state.record_candidates("b", "g", [], LIMIT)
    assert final == _stored(path)
    assert len(final) == LIMIT
    times = [c.time for c in final]
    assert times == sorted(times)


def test_a_connection_keeps_a_bounded_number_of_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(row_counts, "KEPT_GROUPS_MAX", 4)
    path = tmp_path / "routing.sqlite3"
    database = SQLiteDatabase(path)
    state = SQLiteRoutingState(database)
    for number in range(30):
        group = f"g{number % 10}"
        after = state.record_candidates("b", group, [_candidate(f"m{number}", number)], LIMIT)
        assert after == _stored(path, group)
        kept = row_counts.row_counts(database, "routing_candidates").current(database.connection())
        assert len(kept) <= 4
