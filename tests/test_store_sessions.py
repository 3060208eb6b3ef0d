"""The conversational stores behave the same in memory, on SQLite and on Redis."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework import ChatMessage, Config, SessionSummary, SessionTurn, Stores
from framework.store.sessions import (
    GROUP_LOG_MAX_PER_GROUP,
    BotReplyContext,
    FeedbackLedger,
    GroupLog,
    SessionStore,
    SummaryStore,
    TurnKind,
)
from framework.store.sessions_memory import MemoryGroupLog
from framework.store.sessions_sqlite import (
    FEEDBACK_MAX_PHRASES,
    SESSION_MIGRATIONS,
    SQLiteGroupLog,
)
from framework.store.sqlite import SQLiteDatabase
from tests.conftest import T0


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "memory":
        yield Stores.in_memory()
        return
    if request.param == "redis":
        from contrib.redis_store import redis_stores

        yield redis_stores(Config(), request.getfixturevalue("redis_namespace"))
        return
    database = SQLiteDatabase(tmp_path / "store.sqlite3")
    database.migrate(SESSION_MIGRATIONS)
    found = Stores.sqlite(database)
    yield found
    found.close()


def at(minute: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minute)


def turn(user: str, role: str, content: str, minute: float, **fields: object) -> SessionTurn:
    return SessionTurn(
        bot_id="10001",
        group_id="20001",
        user_id=user,
        role=role,
        content=content,
        time=at(minute),
        **fields,
    )


def test_stores_implement_the_interfaces(stores: Stores) -> None:
    assert isinstance(stores.group_log, GroupLog)
    assert isinstance(stores.sessions, SessionStore)
    assert isinstance(stores.summaries, SummaryStore)
    assert isinstance(stores.bot_replies, BotReplyContext)
    assert isinstance(stores.feedback, FeedbackLedger)


def test_group_log_returns_newest_window_oldest_first_up_to_until(stores: Stores) -> None:
    log = stores.group_log
    assert log is not None
    for minute in range(10):
        log.append_group_message(
            "10001",
            "20001",
            ChatMessage(id=str(minute), sender_id="30022", text=f"第{minute}句", time=at(minute)),
        )
    window = log.recent_group_messages("10001", "20001", until=at(7), limit=3)
    assert [m.text for m in window] == ["第5句", "第6句", "第7句"]
    assert window[0].time == at(5)
    assert log.recent_group_messages("10001", "20002", until=at(9), limit=3) == []
    assert log.recent_group_messages("10002", "20001", until=at(9), limit=3) == []


def test_group_log_ignores_a_message_id_already_stored(stores: Stores) -> None:
    log = stores.group_log
    assert log is not None
    first = ChatMessage(id="9306", sender_id="30022", text="中午吃什么", time=at(0))
    assert log.append_group_message("10001", "20001", first) is True
    assert log.append_group_message("10001", "20001", first) is False
    assert len(log.recent_group_messages("10001", "20001", until=at(1), limit=10)) == 1


def test_group_log_keeps_images_reply_and_sender(stores: Stores) -> None:
    log = stores.group_log
    assert log is not None
    sent = ChatMessage(
        id="1",
        sender_id="30017",
        sender_name="青柠汽水",
        text="看这个",
        time=at(0),
        reply_to="0",
        images=("https://img.example/a.jpg",),
        addressed=True,
    )
    log.append_group_message("10001", "20001", sent)
    (stored,) = log.recent_group_messages("10001", "20001", until=at(0), limit=1)
    assert stored == sent


def test_session_window_reads_newest_rows_of_one_user(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    sessions.append_turns(
        [turn("30022", "user", f"问题{i}", i) for i in range(6)]
        + [turn("30017", "user", "别人的话", 2.5)],
        storage_window=200,
    )
    rows = sessions.user_turns("10001", "20001", "30022", until=at(4), limit=3)
    assert [r.content for r in rows] == ["问题2", "问题3", "问题4"]
    assert all(r.key is not None for r in rows)
    since = sessions.user_turns("10001", "20001", "30022", until=at(9), limit=9, since=at(4))
    assert [r.content for r in since] == ["问题4", "问题5"]


def test_session_append_ignores_a_duplicate_message_id(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    row = turn("30022", "user", "你好", 0, message_id="m1")
    assert sessions.append_turns([row], storage_window=200) == 1
    assert sessions.append_turns([row], storage_window=200) == 0
    reply = turn("30022", "assistant", "你好呀", 0.1, message_id="m1")
    assert sessions.append_turns([reply], storage_window=200) == 1


def test_session_keeps_only_the_storage_window(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    sessions.append_turns(
        [turn("30022", "user", f"第{i}句", i) for i in range(8)], storage_window=5
    )
    rows = sessions.user_turns("10001", "20001", "30022", until=at(99), limit=99)
    assert [r.content for r in rows] == [f"第{i}句" for i in range(3, 8)]


def test_session_append_counts_only_rows_still_stored(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    rows = [turn("30022", "user", f"第{i}句", i, message_id=f"m{i}") for i in range(8)]
    assert sessions.append_turns(rows, storage_window=5) == 5
    # The rows the window pushed out come back only to be deleted again: nothing was added.
    assert sessions.append_turns(rows[:3], storage_window=5) == 0
    assert sessions.append_turns([turn("30022", "user", "新的", 9)], storage_window=5) == 1


def test_group_turns_span_users_and_skip_summaries(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    sessions.append_turns(
        [
            turn("30022", "user", "甲", 1),
            turn("30017", "user", "乙", 2),
            turn("30017", "assistant", "回乙", 3),
            turn("30022", "user", "【此前对话摘要】\n摘要", 0, kind=TurnKind.SUMMARY),
        ],
        storage_window=200,
    )
    rows = sessions.group_turns("10001", "20001", until=at(9), limit=8)
    assert [r.content for r in rows] == ["甲", "乙", "回乙"]


def test_summary_replaces_rows_and_is_the_latest_summary(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    sessions.append_turns(
        [turn("30022", "user", f"第{i}句", i) for i in range(6)], storage_window=200
    )
    rows = sessions.user_turns("10001", "20001", "30022", until=at(9), limit=9)
    summary = turn("30022", "user", "【此前对话摘要】\n聊了前四句", 3.9, kind=TurnKind.SUMMARY)
    removed = [r.key for r in rows[:4] if r.key is not None]
    assert sessions.replace_with_summary("10001", "20001", "30022", remove=removed, summary=summary)
    after = sessions.user_turns("10001", "20001", "30022", until=at(9), limit=9)
    assert [r.content for r in after] == ["【此前对话摘要】\n聊了前四句", "第4句", "第5句"]
    assert after[0].is_summary
    latest = sessions.latest_summary("10001", "20001", "30022", until=at(9))
    assert latest is not None and latest.content.endswith("聊了前四句")
    assert not sessions.replace_with_summary(
        "10001", "20001", "30022", remove=removed, summary=summary
    )


def test_compaction_claim_respects_the_cooldown(stores: Stores) -> None:
    sessions = stores.sessions
    assert sessions is not None
    claim = sessions.claim_compaction
    assert claim("10001", "20001", "30022", now=at(0), cooldown_s=600)
    assert not claim("10001", "20001", "30022", now=at(9.9), cooldown_s=600)
    assert claim("10001", "20001", "30017", now=at(9.9), cooldown_s=600)
    assert claim("10001", "20001", "30022", now=at(10), cooldown_s=600)


def test_list_summaries_newest_first_per_user_or_group(stores: Stores) -> None:
    archive = stores.summaries
    assert archive is not None
    for minute, user, text in [(1, "30022", "考研"), (2, "30017", "米线"), (3, "30022", "复试")]:
        archive.add_summary(
            SessionSummary(
                bot_id="10001", group_id="20001", user_id=user, text=text, created=at(minute)
            )
        )
    assert [s.text for s in archive.list_summaries("10001", "20001", "30022", 5)] == [
        "复试",
        "考研",
    ]
    assert [s.text for s in archive.list_summaries("10001", "20001", None, 2)] == ["复试", "米线"]
    assert archive.list_summaries("10001", None, None, 5) == []
    assert archive.list_summaries("10001", "20001", "30022", 5)[0].created == at(3)


def test_bot_reply_context_expires_after_ttl(stores: Stores) -> None:
    context = stores.bot_replies
    assert context is not None
    context.remember("20001", "10001", "9309", "青柠说的那家米线可以试试", now=at(0))
    assert context.lookup("20001", "10001", "9309", now=at(9.9)) == "青柠说的那家米线可以试试"
    assert context.lookup("20001", "10001", "9309", now=at(10)) is None
    assert context.lookup("20002", "10001", "9309", now=at(1)) is None
    assert context.lookup("20001", "10002", "9309", now=at(1)) is None


def test_bot_reply_context_ignores_blank_text_and_id(stores: Stores) -> None:
    context = stores.bot_replies
    assert context is not None
    context.remember("20001", "10001", "", "有字", now=at(0))
    context.remember("20001", "10001", "1", "   ", now=at(0))
    assert context.lookup("20001", "10001", "1", now=at(0)) is None


def test_bot_reply_context_evicts_beyond_max_entries(stores: Stores) -> None:
    context = stores.bot_replies
    assert context is not None
    context.max_entries = 3  # type: ignore[attr-defined]
    for number in range(5):
        context.remember("20001", "10001", str(number), f"第{number}条", now=at(0))
    assert context.lookup("20001", "10001", "1", now=at(1)) is None
    assert context.lookup("20001", "10001", "2", now=at(1)) == "第2条"
    assert context.lookup("20001", "10001", "4", now=at(1)) == "第4条"


def test_bot_reply_context_refreshes_recency_on_lookup(stores: Stores) -> None:
    context = stores.bot_replies
    assert context is not None
    context.max_entries = 2  # type: ignore[attr-defined]
    context.remember("20001", "10001", "a", "甲", now=at(0))
    context.remember("20001", "10001", "b", "乙", now=at(0))
    assert context.lookup("20001", "10001", "a", now=at(1)) == "甲"
    context.remember("20001", "10001", "c", "丙", now=at(1))
    assert context.lookup("20001", "10001", "a", now=at(1)) == "甲"
    assert context.lookup("20001", "10001", "b", now=at(1)) is None
    assert context.lookup("20001", "10001", "c", now=at(1)) == "丙"


def test_bot_reply_context_lookup_refreshes_recency_not_expiry(stores: Stores) -> None:
    context = stores.bot_replies
    assert context is not None
    context.max_entries = 2  # type: ignore[attr-defined]
    context.remember("20001", "10001", "a", "甲", now=at(0))
    context.remember("20001", "10001", "b", "乙", now=at(5))
    assert context.lookup("20001", "10001", "a", now=at(9)) == "甲"
    context.remember("20001", "10001", "c", "丙", now=at(9))
    # "a" was used last, so "b" went; "a" still expires ten minutes after it was written.
    assert context.lookup("20001", "10001", "b", now=at(9)) is None
    assert context.lookup("20001", "10001", "a", now=at(10)) is None
    assert context.lookup("20001", "10001", "c", now=at(10)) == "丙"


def test_feedback_ledger_is_idempotent_per_outcome_and_undoable(stores: Stores) -> None:
    ledger = stores.feedback
    assert ledger is not None
    assert ledger.record_outcome("10001", "20001", "o1", ["下头", "下头", " "], now=at(0)) == 1
    assert ledger.record_outcome("10001", "20001", "o1", ["下头"], now=at(1)) == 0
    ledger.record_outcome("10001", "20001", "o2", ["阴阳怪气"], now=at(2))
    assert ledger.blacklisted_phrases("10001", "20001") == ("阴阳怪气", "下头")
    assert ledger.blacklisted_phrases("10001", "20002") == ()
    assert ledger.undo_outcome("10001", "20001", "o2") == 1
    assert ledger.blacklisted_phrases("10001", "20001") == ("下头",)


def test_feedback_ledger_applies_only_the_newest_phrases(stores: Stores) -> None:
    ledger = stores.feedback
    assert ledger is not None
    for number in range(FEEDBACK_MAX_PHRASES + 5):
        ledger.record_outcome("10001", "20001", f"o{number}", [f"词{number}"], now=at(number))
    phrases = ledger.blacklisted_phrases("10001", "20001")
    assert len(phrases) == FEEDBACK_MAX_PHRASES
    assert phrases[0] == f"词{FEEDBACK_MAX_PHRASES + 4}"


def test_two_memory_stores_share_nothing() -> None:
    first, second = Stores.in_memory(), Stores.in_memory()
    assert first.group_log is not None and second.group_log is not None
    first.group_log.append_group_message(
        "10001", "20001", ChatMessage(id="1", sender_id="1", text="只在第一个", time=at(0))
    )
    assert second.group_log.recent_group_messages("10001", "20001", until=at(1), limit=5) == []


def test_sqlite_migration_is_recorded_and_applied_once(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    assert database.migrate(SESSION_MIGRATIONS) == [("sessions", 1)]
    assert database.migrate(SESSION_MIGRATIONS) == []
    assert database.schema_version("sessions") == 1


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (
            "SELECT * FROM group_messages WHERE bot_id = ? AND group_id = ? AND time <= ?"
            " ORDER BY time DESC, seq DESC LIMIT 9",
            "group_messages_window",
        ),
        (
            "SELECT * FROM group_messages WHERE bot_id = ? AND group_id = ? AND message_id = ?",
            "group_messages_message",
        ),
        (
            "SELECT * FROM session_turns WHERE bot_id = ? AND group_id = ? AND user_id = ?"
            " AND time <= ? AND time >= ? ORDER BY time DESC, seq DESC LIMIT 19",
            "session_turns_user",
        ),
        (
            "SELECT * FROM session_turns WHERE bot_id = ? AND group_id = ? AND kind = 'turn'"
            " AND time <= ? AND time >= ? ORDER BY time DESC, seq DESC LIMIT 9",
            "session_turns_group",
        ),
    ],
)
def test_window_reads_are_index_range_scans(tmp_path: Path, sql: str, index: str) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    database.migrate(SESSION_MIGRATIONS)
    params = [None] * sql.count("?")
    plan = " ".join(
        str(row[3]) for row in database.connection().execute(f"EXPLAIN QUERY PLAN {sql}", params)
    )
    assert f"USING INDEX {index}" in plan
    assert "TEMP B-TREE" not in plan  # no sort over the matching rows


def _numbered(index: int, start: dt.datetime) -> ChatMessage:
    return ChatMessage(
        id=str(index), sender_id="u", text=f"第{index}条", time=start + dt.timedelta(seconds=index)
    )


@pytest.fixture(params=["memory", "sqlite", "redis"])
def bounded_log(request: pytest.FixtureRequest, tmp_path: Path) -> GroupLog:
    """A group log keeping 20 messages per group, on every backend."""
    if request.param == "redis":
        from contrib.redis_store import RedisGroupLog

        return RedisGroupLog(request.getfixturevalue("redis_namespace"), max_per_group=20)
    if request.param == "sqlite":
        database = SQLiteDatabase(tmp_path / "s.sqlite3")
        database.migrate(SESSION_MIGRATIONS)
        return SQLiteGroupLog(database, max_per_group=20)
    return MemoryGroupLog(max_per_group=20)


def test_the_group_log_keeps_a_bounded_window_per_group(bounded_log: GroupLog) -> None:
    log = bounded_log
    start = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    for index in range(50):
        log.append_group_message("b", "g", _numbered(index, start))
    log.append_group_message("b", "other", _numbered(0, start))
    kept = log.recent_group_messages("b", "g", until=start + dt.timedelta(hours=1), limit=100)
    assert [m.id for m in kept] == [str(index) for index in range(30, 50)]
    assert len(log.recent_group_messages("b", "other", until=start, limit=100)) == 1
    # An id that left the window may be recorded again; one inside it is still a duplicate.
    later = start + dt.timedelta(minutes=5)
    assert log.append_group_message(
        "b", "g", ChatMessage(id="3", sender_id="u", text="x", time=later)
    )
    assert not log.append_group_message(
        "b", "g", ChatMessage(id="49", sender_id="u", text="x", time=later)
    )
    # A message older than the whole window is not kept, so it is not reported as added.
    assert not log.append_group_message(
        "b", "g", ChatMessage(id="old", sender_id="u", text="x", time=start)
    )
    kept = log.recent_group_messages("b", "g", until=start + dt.timedelta(hours=1), limit=100)
    assert [m.id for m in kept] == [*(str(index) for index in range(31, 50)), "3"]


def test_both_group_logs_keep_the_shared_bound_by_default(stores: Stores) -> None:
    log = stores.group_log
    assert log is not None
    start = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    for index in range(GROUP_LOG_MAX_PER_GROUP + 5):
        log.append_group_message("b", "g", _numbered(index, start))
    kept = log.recent_group_messages("b", "g", until=start + dt.timedelta(days=1), limit=10_000)
    assert len(kept) == GROUP_LOG_MAX_PER_GROUP
    assert (kept[0].id, kept[-1].id) == ("5", str(GROUP_LOG_MAX_PER_GROUP + 4))


def test_the_group_log_finds_a_kept_message_by_id(bounded_log: GroupLog) -> None:
    log = bounded_log
    start = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    photo = ChatMessage(
        id="-7",  # QQ's newer message ids may be negative
        sender_id="u",
        text="拍到了吗",
        images=("https://img.example/cat-1.jpg",),
        reply_to="3",
        time=start,
    )
    log.append_group_message("b", "g", photo)
    assert log.find_group_message("b", "g", "-7") == photo
    assert log.find_group_message("b", "other", "-7") is None
    assert log.find_group_message("other", "g", "-7") is None
    assert log.find_group_message("b", "g", "404") is None
    # Once pushed out of the bounded window it is gone, as from the timeline.
    for index in range(20):
        log.append_group_message("b", "g", _numbered(index, start + dt.timedelta(minutes=1)))
    assert log.find_group_message("b", "g", "-7") is None
    assert log.find_group_message("b", "g", "19") is not None
