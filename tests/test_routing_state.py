"""The routing state store: the same behaviour in memory, in SQLite and in Redis, scoped by bot and
group."""

from __future__ import annotations

import datetime as dt

import pytest

from framework import ChatMessage, Config, RhythmProfile
from framework.config import StoreConfig
from framework.store.routing_state import MemoryRoutingState, QuoteCandidate
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.sqlite import SQLiteDatabase
from framework.store.stores import Stores

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def state(request, tmp_path):
    if request.param == "memory":
        return MemoryRoutingState()
    if request.param == "redis":
        from contrib.redis_store import RedisRoutingState

        return RedisRoutingState(request.getfixturevalue("redis_namespace"))
    return SQLiteRoutingState(SQLiteDatabase(tmp_path / "routing.sqlite3"))


def _candidate(message_id: str, seconds: int) -> QuoteCandidate:
    return QuoteCandidate(
        message_id=message_id,
        sender_id="3",
        text="x" * 200,
        time=T0 + dt.timedelta(seconds=seconds),
    )


def test_mute_starts_empty_and_records_each_kind(state):
    assert not state.mute("b", "g").disabled
    state.set_disabled("b", "g", True)
    state.start_cooldown("b", "g", T0)
    state.start_silence("b", "g", T0 + dt.timedelta(seconds=5))
    mute = state.mute("b", "g")
    assert mute.disabled
    assert mute.cooldown_until == T0
    assert mute.silence_until == T0 + dt.timedelta(seconds=5)


def test_kept_messages_come_back_once_oldest_first(state):
    for index in range(3):
        message = ChatMessage(
            id=f"m{index}", sender_id="3", text=f"第{index}条", time=T0, images=["https://a/b.png"]
        )
        state.keep_message("b", "g", message, limit=2)
    state.keep_message("b", "g", ChatMessage(id="m2", sender_id="3", text="重复", time=T0), limit=2)
    kept = state.take_kept_messages("b", "g")
    assert [(m.id, m.text) for m in kept] == [("m1", "第1条"), ("m2", "第2条")]
    assert kept[0].images == ("https://a/b.png",)
    assert state.take_kept_messages("b", "g") == ()


def test_candidates_keep_the_newest_and_never_bring_back_an_old_one(state):
    state.record_candidates("b", "g", [_candidate(f"c{i}", i) for i in range(8)], limit=6)
    state.record_candidates("b", "g", [_candidate("c0", 0), _candidate("c1", 1)], limit=6)
    found = state.candidates("b", "g")
    assert [c.message_id for c in found] == ["c2", "c3", "c4", "c5", "c6", "c7"]
    assert len(found[0].text) == 160


def test_quote_time_phrase_replies_and_rhythm(state):
    assert state.last_quote_at("b", "g") is None
    state.note_quote_delivered("b", "g", "c1", T0)
    assert state.last_quote_at("b", "g") == T0
    state.note_phrase("b", "g", "确实")
    assert state.last_phrase("b", "g") == "确实"
    state.note_bot_reply("b", "g", T0)
    state.note_bot_reply("b", "g", T0 + dt.timedelta(seconds=60))
    assert state.bot_replies_since("b", "g", T0 + dt.timedelta(seconds=30)) == 1
    profile = RhythmProfile(bubble_count_p50=2, bubble_count_p90=3, multi_weight=0.7)
    state.set_rhythm("b", "g", profile)
    assert state.rhythm("b", "g") == profile


def test_state_is_scoped_by_bot_and_group(state):
    state.set_disabled("b", "g", True)
    state.note_phrase("b", "g", "确实")
    state.record_candidates("b", "g", [_candidate("c1", 1)], limit=6)
    for bot, group in (("b", "h"), ("other", "g")):
        assert not state.mute(bot, group).disabled
        assert state.last_phrase(bot, group) is None
        assert state.candidates(bot, group) == ()


def test_two_processes_sharing_one_file_see_the_same_state(tmp_path):
    path = tmp_path / "shared.sqlite3"
    first = SQLiteRoutingState(SQLiteDatabase(path))
    second = SQLiteRoutingState(SQLiteDatabase(path))
    first.note_quote_delivered("b", "g", "c1", T0)
    assert second.last_quote_at("b", "g") == T0


def test_stores_build_the_routing_state_of_the_configured_backend(tmp_path):
    assert isinstance(
        Stores.from_config(Config(store=StoreConfig(backend="memory"))).routing, MemoryRoutingState
    )
    sqlite = Stores.from_config(Config(store=StoreConfig(path="r.sqlite3"), base_dir=tmp_path))
    assert isinstance(sqlite.routing, SQLiteRoutingState)
    assert sqlite.database is not None and sqlite.database.schema_version("routing") == 0
    sqlite.routing.note_phrase("b", "g", "嗯")  # the routing tables appear on first use
    assert sqlite.database is not None and sqlite.database.schema_version("routing") == 1
