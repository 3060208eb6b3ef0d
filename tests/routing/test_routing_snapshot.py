"""One read of a group per route: the per-route view the rules see, candidates returned by the
write that records them (``docs/routing.md``; the backends' side is in ``tests/store_contract.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from base_support import sqlite_config

from promptweave import Bot, ChatMessage, Promptweave, Turn
from promptweave.routing.group_snapshot import RouteState
from promptweave.store.routing_state import GroupMute, MemoryRoutingState, QuoteCandidate
from promptweave.store.routing_state_sqlite import SQLiteRoutingState
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.turn import SpeakTrigger

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
BOT = Bot(id="10001", name="小织")
GROUP = "20001"


def _candidate(message_id: str, seconds: int) -> QuoteCandidate:
    return QuoteCandidate(
        message_id=message_id,
        sender_id="3",
        text=f"第{seconds}条",
        time=T0 + dt.timedelta(seconds=seconds),
    )


def test_the_builtin_stores_return_the_candidates_they_keep(tmp_path: Path) -> None:
    for state in (MemoryRoutingState(), SQLiteRoutingState(SQLiteDatabase(tmp_path / "r.sqlite3"))):
        kept = state.record_candidates(
            "b", "g", [_candidate(f"c{i}", i) for i in range(3)], limit=2
        )
        assert kept == state.candidates("b", "g")
        assert [c.message_id for c in kept or ()] == ["c1", "c2"]


def test_the_route_view_answers_the_routed_group_from_one_snapshot() -> None:
    store = MemoryRoutingState()
    view = RouteState(store=store, bot_id="b", group_id="g")
    assert view.mute("b", "g") == GroupMute()
    # A change another writer makes during the route is not seen: the route reads its group once.
    store.set_disabled("b", "g", True)
    assert not view.mute("b", "g").disabled
    # Other groups are read from the store.
    store.set_disabled("b", "h", True)
    assert view.mute("b", "h").disabled
    # The next route reads the group again.
    assert RouteState(store=store, bot_id="b", group_id="g").mute("b", "g").disabled


def test_a_change_written_through_the_route_view_is_read_back_in_the_same_route() -> None:
    store = MemoryRoutingState()
    view = RouteState(store=store, bot_id="b", group_id="g")
    assert view.mute("b", "g").silence_until is None
    view.start_silence("b", "g", T0)
    assert view.mute("b", "g").silence_until == T0
    assert view.last_phrase("b", "g") is None
    view.note_phrase("b", "g", "嗯")
    assert view.last_phrase("b", "g") == "嗯"
    assert store.last_phrase("b", "g") == "嗯"


def test_the_route_view_counts_replies_for_another_window_from_the_store() -> None:
    store = MemoryRoutingState()
    store.note_bot_reply("b", "g", T0)
    view = RouteState(store=store, bot_id="b", group_id="g")
    assert view.bot_replies_since("b", "g", T0 + dt.timedelta(seconds=1)) == 0
    assert view.bot_replies_since("b", "g", T0) == 1


@pytest.fixture
def traced_runtime(tmp_path: Path) -> Iterator[tuple[Promptweave, list[str]]]:
    config = sqlite_config(tmp_path / "store.sqlite3")
    # No plugin deadline: routing runs on this thread, whose connection the trace watches.
    config = attrs.evolve(config, plugins=attrs.evolve(config.plugins, turn_deadline_s=0))
    runtime = Promptweave.from_config(config)
    assert runtime.stores.database is not None
    statements: list[str] = []
    runtime.stores.database.connection().set_trace_callback(statements.append)
    yield runtime, statements
    runtime.close()


def _turn(number: int, text: str = "下午的会改到三点了") -> Turn:
    message = ChatMessage(
        id=str(number),
        sender_id="30001",
        text=text,
        time=T0 + dt.timedelta(seconds=number),
    )
    return Turn(bot=BOT, group_id=GROUP, message=message, trigger=SpeakTrigger.AMBIENT)


def test_a_route_reads_the_groups_routing_row_once_and_then_keeps_it(
    traced_runtime: tuple[Promptweave, list[str]],
) -> None:
    runtime, statements = traced_runtime
    runtime.stores.routing.set_disabled(BOT.id, GROUP, False)
    statements.clear()
    runtime.decide(_turn(1))
    # The write above made this connection forget the group: the first route reads it.
    reads = [s for s in statements if "FROM (SELECT 1) LEFT JOIN routing_groups" in s]
    assert len(reads) == 1
    assert len([s for s in statements if "FROM routing_bot_replies" in s]) == 1
    statements.clear()
    decision = runtime.decide(_turn(2))
    assert decision.reason
    # Nothing else wrote: the next route reads neither the row nor the reply times.
    assert not [s for s in statements if "routing_groups" in s or "routing_bot_replies" in s]
    assert not [s for s in statements if "FROM routing_candidates" in s and "SELECT" in s]
    # A write of this connection is seen by the next route.
    runtime.stores.routing.set_disabled(BOT.id, GROUP, True)
    assert runtime.decide(_turn(3)).reason == "group_switched_off"


def test_a_route_reads_the_store_in_one_read_transaction(
    traced_runtime: tuple[Promptweave, list[str]],
) -> None:
    runtime, statements = traced_runtime
    runtime.decide(_turn(1))
    turn = _turn(2)
    runtime.recorder.record_message(BOT.id, GROUP, turn.message)  # as the live loop does first
    statements.clear()
    runtime.decide(turn)
    # The session read and the route: one read transaction, one check of other connections.
    assert statements[0] == "BEGIN"
    assert statements[-1] == "COMMIT"
    assert statements.count("BEGIN") == 1
    assert statements.count("PRAGMA data_version") == 1


def test_a_route_that_may_ask_a_model_holds_no_read_transaction_while_routing(
    tmp_path: Path,
) -> None:
    config = sqlite_config(tmp_path / "store.sqlite3")
    config = attrs.evolve(
        config,
        plugins=attrs.evolve(config.plugins, turn_deadline_s=0),
        routing=attrs.evolve(config.routing, model_decision=True),
    )
    runtime = Promptweave.from_config(config)
    try:
        assert runtime.stores.database is not None
        runtime.decide(_turn(1))
        turn = _turn(2)
        runtime.recorder.record_message(BOT.id, GROUP, turn.message)
        statements: list[str] = []
        runtime.stores.database.connection().set_trace_callback(statements.append)
        runtime.decide(turn)
        # The session read alone is in it: the route's own check of other connections (the
        # group's kept routing row) comes after the read transaction ended.
        ended = statements.index("COMMIT")
        assert statements[0] == "BEGIN"
        assert "PRAGMA data_version" in statements[ended + 1 :]
    finally:
        runtime.close()


def test_routing_the_same_message_again_writes_no_candidate(
    traced_runtime: tuple[Promptweave, list[str]],
) -> None:
    runtime, statements = traced_runtime
    turn = _turn(3)
    first = runtime.decide(turn)
    statements.clear()
    assert runtime.decide(turn).trace() == first.trace()
    writes = [s for s in statements if s.startswith(("INSERT", "DELETE", "UPDATE"))]
    assert not [s for s in writes if "routing_candidates" in s]


def test_a_change_from_another_process_is_seen_by_the_next_route(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    runtime = Promptweave.from_config(sqlite_config(path))
    other = SQLiteRoutingState(SQLiteDatabase(path))
    try:
        assert (
            runtime.decide(_turn(1, "有人知道周末的活动几点开始吗？")).reason
            != "group_switched_off"
        )
        other.set_disabled(BOT.id, GROUP, True)
        assert (
            runtime.decide(_turn(2, "有人知道周末的活动几点开始吗？")).reason
            == "group_switched_off"
        )
        other.set_disabled(BOT.id, GROUP, False)
        assert (
            runtime.decide(_turn(3, "有人知道周末的活动几点开始吗？")).reason
            != "group_switched_off"
        )
    finally:
        runtime.close()
