"""The SQLite routing state keeps each group's quote candidate rows, and what a snapshot reads of
the group, as its connection left them, and reads them again whenever another connection has
written or it wrote them itself (``framework/store/row_counts.py``,
``framework/store/routing_state_sqlite.py``)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from pathlib import Path

import pytest

from framework.items import RhythmProfile
from framework.store import row_counts
from framework.store.routing_state import GroupMute, GroupSnapshot, QuoteCandidate, RoutingState
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.sqlite import SQLiteDatabase

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


# -- the group's values and reply times (snapshot) -------------------------------------------


def _single_reads(state: RoutingState, since: dt.datetime | None) -> GroupSnapshot:
    """The snapshot as the single-value reads give it (none of which keeps anything)."""
    return GroupSnapshot(
        mute=state.mute("b", "g"),
        last_quote_at=state.last_quote_at("b", "g"),
        last_phrase=state.last_phrase("b", "g"),
        rhythm=state.rhythm("b", "g"),
        replies_since=since,
        bot_replies=0 if since is None else state.bot_replies_since("b", "g", since),
    )


def test_a_change_by_another_connection_is_seen_by_the_next_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    here = SQLiteRoutingState(SQLiteDatabase(path))
    there = SQLiteRoutingState(SQLiteDatabase(path))
    since = T0 - dt.timedelta(seconds=60)
    assert here.snapshot("b", "g", replies_since=since) == GroupSnapshot(replies_since=since)
    there.set_disabled("b", "g", True)
    there.note_bot_reply("b", "g", T0)
    found = here.snapshot("b", "g", replies_since=since)
    assert found.mute.disabled and found.bot_replies == 1
    there.start_cooldown("b", "g", T0 + dt.timedelta(seconds=30))
    assert here.snapshot("b", "g").mute == GroupMute(
        disabled=True, cooldown_until=T0 + dt.timedelta(seconds=30)
    )


def test_a_change_through_the_same_connection_is_seen_by_the_next_snapshot(
    tmp_path: Path,
) -> None:
    # Two states over one database object share a connection per thread: PRAGMA data_version
    # does not move for its own commits, so each write drops what the snapshot kept.
    database = SQLiteDatabase(tmp_path / "routing.sqlite3")
    reader, writer = SQLiteRoutingState(database), SQLiteRoutingState(database)
    since = T0 - dt.timedelta(seconds=60)
    steps = [
        lambda: writer.set_disabled("b", "g", True),
        lambda: writer.start_silence("b", "g", T0 + dt.timedelta(seconds=5)),
        lambda: writer.start_cooldown("b", "g", T0 + dt.timedelta(seconds=9)),
        lambda: writer.note_quote_delivered("b", "g", "m1", T0),
        lambda: writer.note_phrase("b", "g", "哈哈"),
        lambda: writer.set_rhythm("b", "g", RhythmProfile(bubble_count_p50=2.0)),
        lambda: writer.note_bot_reply("b", "g", T0),
        lambda: writer.note_bot_reply("b", "g", T0 + dt.timedelta(seconds=1)),
        lambda: writer.set_disabled("b", "g", False),
    ]
    for step in steps:
        reader.snapshot("b", "g", replies_since=since)  # kept
        step()
        assert reader.snapshot("b", "g", replies_since=since) == _single_reads(writer, since)
    assert reader.snapshot("b", "g", replies_since=since).bot_replies == 2


def test_the_reply_count_from_the_kept_times_is_the_stored_count(tmp_path: Path) -> None:
    state = SQLiteRoutingState(SQLiteDatabase(tmp_path / "routing.sqlite3"))
    for seconds in (0, 10, 10, 25.5, 40):
        state.note_bot_reply("b", "g", T0 + dt.timedelta(seconds=seconds))
    state.snapshot("b", "g")  # the times, kept
    for seconds in (-1, 0, 0.001, 9.999, 10, 10.5, 25.5, 26, 40, 41):
        since = T0 + dt.timedelta(seconds=seconds)
        found = state.snapshot("b", "g", replies_since=since)
        assert found.bot_replies == state.bot_replies_since("b", "g", since), seconds
        assert found.replies_since == since


def test_snapshots_follow_writes_of_connections_in_turn(tmp_path: Path) -> None:
    path = tmp_path / "routing.sqlite3"
    database = SQLiteDatabase(path)
    states = [SQLiteRoutingState(database), SQLiteRoutingState(database)] + [
        SQLiteRoutingState(SQLiteDatabase(path)) for _ in range(2)
    ]
    rng = random.Random(11)
    for number in range(80):
        writer = rng.choice(states)
        at = T0 + dt.timedelta(seconds=number)
        step = rng.randrange(5)
        if step == 0:
            writer.set_disabled("b", "g", rng.random() < 0.5)
        elif step == 1:
            writer.start_cooldown("b", "g", at + dt.timedelta(seconds=3))
        elif step == 2:
            writer.note_bot_reply("b", "g", at)
        elif step == 3:
            writer.note_phrase("b", "g", f"p{number}")
        else:
            writer.record_candidates("b", "g", [_candidate(f"m{number}", number)], 4)
        since = at - dt.timedelta(seconds=rng.randrange(20))
        fresh = SQLiteRoutingState(SQLiteDatabase(path))
        for state in states:
            assert state.snapshot("b", "g", replies_since=since) == _single_reads(fresh, since)


def test_a_write_in_another_thread_is_seen_by_the_next_snapshot(tmp_path: Path) -> None:
    state = SQLiteRoutingState(SQLiteDatabase(tmp_path / "routing.sqlite3"))
    assert not state.snapshot("b", "g").mute.disabled
    writer = threading.Thread(target=state.set_disabled, args=("b", "g", True))
    writer.start()
    writer.join()
    assert state.snapshot("b", "g").mute.disabled


def test_a_connection_keeps_a_bounded_number_of_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(row_counts, "KEPT_GROUPS_MAX", 4)
    database = SQLiteDatabase(tmp_path / "routing.sqlite3")
    state = SQLiteRoutingState(database)
    for number in range(10):
        state.note_phrase("b", f"g{number}", f"p{number}")
    for _ in range(2):
        for number in range(10):
            assert state.snapshot("b", f"g{number}").last_phrase == f"p{number}"
            kept = row_counts.row_counts(database, "routing_groups").current(database.connection())
            assert len(kept) <= 4
