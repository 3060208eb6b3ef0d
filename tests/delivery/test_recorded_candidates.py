"""A recorded group message is a quote candidate from then on (``docs/routing.md``, quoting), and
on SQLite the message and its candidate take one commit (``docs/store.md``)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

import attrs
import pytest

from promptweave import ChatMessage, Promptweave
from promptweave.store.routing_state import MemoryRoutingState, QuoteCandidate
from promptweave.store.sqlite import StoreUnavailableError

BOT = "10001"
GROUP = "20001"
T0 = dt.datetime(2026, 11, 30, 20, 0, tzinfo=dt.UTC)


def _message(number: int, text: str = "下午的会改到三点了", sender: str = "30001") -> ChatMessage:
    return ChatMessage(
        id=f"m{number}", sender_id=sender, text=text, time=T0 + dt.timedelta(seconds=number)
    )


def _ids(runtime: Promptweave) -> list[str]:
    return [c.message_id for c in runtime.stores.routing.candidates(BOT, GROUP)]


@pytest.fixture(params=["memory", "sqlite"])
def runtime(
    request: pytest.FixtureRequest, memory_runtime: Promptweave, sqlite_runtime: Promptweave
) -> Promptweave:
    return memory_runtime if request.param == "memory" else sqlite_runtime


def test_a_recorded_message_is_a_candidate_before_it_is_routed(runtime: Promptweave) -> None:
    for number in range(1, 9):
        assert runtime.recorder.record_message(BOT, GROUP, _message(number))
    # The newest six ([routing] quote_candidates), oldest first, none routed yet.
    assert _ids(runtime) == [f"m{n}" for n in range(3, 9)]


def test_the_bots_own_messages_and_messages_without_text_are_not_candidates(
    runtime: Promptweave,
) -> None:
    runtime.recorder.record_message(BOT, GROUP, _message(1))
    runtime.recorder.record_message(BOT, GROUP, _message(2, sender=BOT))
    runtime.recorder.record_message(BOT, GROUP, _message(3, text="  "))
    assert _ids(runtime) == ["m1"]


def test_a_duplicate_message_is_not_a_candidate_again(runtime: Promptweave) -> None:
    runtime.recorder.record_message(BOT, GROUP, _message(1))
    runtime.recorder.record_message(BOT, GROUP, _message(2))
    assert not runtime.recorder.record_message(BOT, GROUP, _message(1))
    assert _ids(runtime) == ["m1", "m2"]


def test_messages_that_arrive_while_a_turn_waits_push_its_target_out(
    runtime: Promptweave,
) -> None:
    runtime.recorder.record_message(BOT, GROUP, _message(1))
    for number in range(2, 8):  # six newer messages recorded meanwhile
        runtime.recorder.record_message(BOT, GROUP, _message(number))
    assert "m1" not in _ids(runtime)


def test_sqlite_commits_the_message_and_its_candidate_once(sqlite_runtime: Promptweave) -> None:
    database = sqlite_runtime.stores.database
    assert database is not None
    statements: list[str] = []
    database.connection().set_trace_callback(statements.append)
    sqlite_runtime.recorder.record_message(BOT, GROUP, _message(1))
    assert statements.count("COMMIT") == 1
    assert not [s for s in statements if "SAVEPOINT" in s]
    assert any(s.startswith("INSERT OR IGNORE INTO group_messages") for s in statements)
    assert any("routing_candidates" in s for s in statements)


@attrs.define
class _FailingCandidates(MemoryRoutingState):
    error: Exception = attrs.field(kw_only=True)

    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...]:
        raise self.error


@pytest.mark.parametrize(
    "error", [StoreUnavailableError("routing state is down"), RuntimeError("a bug")]
)
def test_a_failing_routing_state_leaves_the_message_recorded(
    runtime: Promptweave, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    # SQLite takes the message back with the candidate and records it again alone; the other
    # backends committed it on its own already.
    runtime.stores.routing = _FailingCandidates(error=error)
    with caplog.at_level(logging.WARNING, logger="promptweave.store"):
        assert runtime.recorder.record_message(BOT, GROUP, _message(1))
    assert "recording a quote candidate of group 20001 failed" in caplog.text
    assert str(error) in caplog.text
    assert runtime.stores.group_log is not None
    recent = runtime.stores.group_log.recent_group_messages(
        BOT, GROUP, until=T0 + dt.timedelta(hours=1), limit=5
    )
    assert [m.id for m in recent] == ["m1"]


def test_a_sqlite_candidate_write_that_fails_is_taken_back_alone(
    sqlite_runtime: Promptweave, caplog: pytest.LogCaptureFixture
) -> None:
    database = sqlite_runtime.stores.database
    assert database is not None
    for number in range(1, 7):
        sqlite_runtime.recorder.record_message(BOT, GROUP, _message(number))
    with database.transaction() as connection:
        # A trigger that makes every candidate write fail, as a full or broken table would.
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON routing_candidates"
            " BEGIN SELECT RAISE(ABORT, 'candidates refused'); END"
        )
    with caplog.at_level(logging.WARNING, logger="promptweave.store"):
        assert sqlite_runtime.recorder.record_message(BOT, GROUP, _message(7))
    assert "candidates refused" in caplog.text
    assert sqlite_runtime.stores.group_log is not None
    recent = sqlite_runtime.stores.group_log.recent_group_messages(
        BOT, GROUP, until=T0 + dt.timedelta(hours=1), limit=10
    )
    assert [m.id for m in recent] == [f"m{n}" for n in range(1, 8)]
    # The failed write took back its delete too: the candidate it would have pushed out is there.
    assert _ids(sqlite_runtime) == [f"m{n}" for n in range(1, 7)]


def test_the_first_message_of_a_new_store_finds_the_routing_tables_made(
    sqlite_runtime: Promptweave,
) -> None:
    database = sqlite_runtime.stores.database
    assert database is not None
    # Made when the store was opened: a first message whose candidate write fails (and takes the
    # whole transaction back) cannot take the tables back with it.
    with database.transaction() as connection:
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON routing_candidates"
            " BEGIN SELECT RAISE(ABORT, 'candidates refused'); END"
        )
    assert sqlite_runtime.recorder.record_message(BOT, GROUP, _message(1))
    with database.transaction() as connection:
        connection.execute("DROP TRIGGER refuse")
    assert sqlite_runtime.recorder.record_message(BOT, GROUP, _message(2))
    assert _ids(sqlite_runtime) == ["m2"]
