"""The store contract: what every store backend must do, as test classes any backend can run.

The classes here are not collected from this module (its name does not start with ``test_``); a
test module imports them, and provides the fixtures they ask for:

``store_backend``
    a :class:`StoreBackend` that builds the backend's conversational stores, routing state and
    delivery ledger (every contract class but the last two);
``retrieval_store``
    a fresh, empty :class:`promptweave.store.retrieval.RetrievalStore` (:class:`TestRetrievalStore`);
``shared_stores``
    a zero-argument callable, picklable so a spawned process can call it, that opens
    :class:`promptweave.Stores` on one shared storage (:class:`TestSharedStorage`, for backends that
    several processes share).

``tests/store/test_store_contract.py`` runs them on the in-memory, SQLite and Redis backends; ``Writing a
store backend`` in ``docs/store.md`` shows how a third-party backend runs them. This module
imports only ``promptweave``, attrs and pytest, so it can be copied into another package's tests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import random
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import pytest

from promptweave import ChatMessage, SessionTurn, Stores
from promptweave.items import RhythmProfile
from promptweave.store.deliveries import DELIVERY_LEDGER_MAX, DeliveryLedger, DeliveryState
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RetrievalStore,
    RhythmRecord,
    SummaryRecord,
)
from promptweave.store.routing_state import (
    CANDIDATE_TEXT_CHARS,
    GroupMute,
    GroupSnapshot,
    GroupSwitch,
    QuoteCandidate,
    RoutingState,
)
from promptweave.store.session_rows import SessionSummary, TurnKind
from promptweave.store.sessions import (
    BOT_REPLY_MAX_ENTRIES,
    BOT_REPLY_TEXT_CHARS,
    BOT_REPLY_TTL_S,
    FEEDBACK_MAX_PHRASES,
    GROUP_LOG_MAX_PER_GROUP,
    BotReplyContext,
    FeedbackLedger,
    GroupLog,
    SessionStore,
    SummaryStore,
)
from promptweave.text.scoring import query_terms

__all__ = [
    "StoreBackend",
    "StoreClasses",
    "TestBotReplyContext",
    "TestDeliveryLedger",
    "TestFeedbackLedger",
    "TestGroupLog",
    "TestRetrievalStore",
    "TestRoutingState",
    "TestSessionStore",
    "TestSharedStorage",
    "TestSummaryStore",
]

CST = dt.timezone(dt.timedelta(hours=8))
T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=CST)
BOT, GROUP = "10001", "20001"


class StoreBackend(Protocol):
    """Builds the stores of one backend for one test.

    Every store starts empty; stores built within one test may share their storage. An option a
    test does not pass (``max_per_group``, ``ttl_s``, ``max_entries``) must be left to the store's
    own default, which the contract checks.
    """

    def group_log(self, **options: Any) -> GroupLog: ...

    def sessions(self) -> SessionStore: ...

    def summaries(self) -> SummaryStore: ...

    def bot_replies(self, **options: Any) -> BotReplyContext: ...

    def feedback(self) -> FeedbackLedger: ...

    def routing(self) -> RoutingState: ...

    def deliveries(self) -> DeliveryLedger: ...


@attrs.frozen(kw_only=True)
class StoreClasses:
    """A :class:`StoreBackend` that builds each store by calling its class (or any factory) with
    ``args`` first (the backend's database, client…), then the options a test passes.

    A backend whose stores share one constructor shape needs nothing more::

        StoreClasses(args=(database,), group_log=MyGroupLog, sessions=MySessionStore, ...)
    """

    args: tuple[Any, ...] = ()
    group_log_class: Callable[..., GroupLog] = attrs.field(alias="group_log")
    sessions_class: Callable[..., SessionStore] = attrs.field(alias="sessions")
    summaries_class: Callable[..., SummaryStore] = attrs.field(alias="summaries")
    bot_replies_class: Callable[..., BotReplyContext] = attrs.field(alias="bot_replies")
    feedback_class: Callable[..., FeedbackLedger] = attrs.field(alias="feedback")
    routing_class: Callable[..., RoutingState] = attrs.field(alias="routing")
    deliveries_class: Callable[..., DeliveryLedger] = attrs.field(alias="deliveries")

    def group_log(self, **options: Any) -> GroupLog:
        return self.group_log_class(*self.args, **options)

    def sessions(self) -> SessionStore:
        return self.sessions_class(*self.args)

    def summaries(self) -> SummaryStore:
        return self.summaries_class(*self.args)

    def bot_replies(self, **options: Any) -> BotReplyContext:
        return self.bot_replies_class(*self.args, **options)

    def feedback(self) -> FeedbackLedger:
        return self.feedback_class(*self.args)

    def routing(self) -> RoutingState:
        return self.routing_class(*self.args)

    def deliveries(self) -> DeliveryLedger:
        return self.deliveries_class(*self.args)


def at(minute: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minute)


def said(number: int, *, text: str | None = None, start: dt.datetime = T0) -> ChatMessage:
    """Message ``number`` of a group, sent ``number`` seconds after ``start``."""
    return ChatMessage(
        id=str(number),
        sender_id="30022",
        text=text or f"第{number}条",
        time=start + dt.timedelta(seconds=number),
    )


def turn(user: str, role: str, content: str, minute: float, **fields: Any) -> SessionTurn:
    return SessionTurn(
        bot_id=BOT,
        group_id=GROUP,
        user_id=user,
        role=role,
        content=content,
        time=at(minute),
        **fields,
    )


# -- the group log -------------------------------------------------------------------------------


class TestGroupLog:
    """:class:`promptweave.store.sessions.GroupLog`: what the group timeline reads."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.group_log(), GroupLog)

    def test_returns_the_newest_window_oldest_first_up_to_until(
        self, store_backend: StoreBackend
    ) -> None:
        log = store_backend.group_log()
        for minute in range(10):
            log.append_group_message(
                BOT,
                GROUP,
                ChatMessage(
                    id=str(minute), sender_id="30022", text=f"第{minute}句", time=at(minute)
                ),
            )
        window = log.recent_group_messages(BOT, GROUP, until=at(7), limit=3)
        assert [m.text for m in window] == ["第5句", "第6句", "第7句"]
        assert window[0].time == at(5)
        assert log.recent_group_messages(BOT, "20002", until=at(9), limit=3) == []
        assert log.recent_group_messages("10002", GROUP, until=at(9), limit=3) == []

    def test_ignores_a_message_id_already_stored(self, store_backend: StoreBackend) -> None:
        log = store_backend.group_log()
        first = ChatMessage(id="9306", sender_id="30022", text="中午吃什么", time=at(0))
        assert log.append_group_message(BOT, GROUP, first) is True
        assert log.append_group_message(BOT, GROUP, first) is False
        assert len(log.recent_group_messages(BOT, GROUP, until=at(1), limit=10)) == 1

    def test_reads_back_the_message_as_it_was_stored(self, store_backend: StoreBackend) -> None:
        log = store_backend.group_log()
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
        log.append_group_message(BOT, GROUP, sent)
        (stored,) = log.recent_group_messages(BOT, GROUP, until=at(0), limit=1)
        assert stored == sent
        assert stored.time.utcoffset() == CST.utcoffset(None)

    def test_keeps_a_bounded_window_per_group(self, store_backend: StoreBackend) -> None:
        log = store_backend.group_log(max_per_group=20)
        for number in range(50):
            log.append_group_message("b", "g", said(number))
        log.append_group_message("b", "other", said(0))
        later = T0 + dt.timedelta(hours=1)
        kept = log.recent_group_messages("b", "g", until=later, limit=100)
        assert [m.id for m in kept] == [str(number) for number in range(30, 50)]
        assert len(log.recent_group_messages("b", "other", until=T0, limit=100)) == 1
        # An id that left the window may be recorded again; one inside it is still a duplicate.
        moved = T0 + dt.timedelta(minutes=5)
        assert log.append_group_message(
            "b", "g", ChatMessage(id="3", sender_id="u", text="x", time=moved)
        )
        assert not log.append_group_message(
            "b", "g", ChatMessage(id="49", sender_id="u", text="x", time=moved)
        )
        # A message older than the whole window is not kept, so it is not reported as added.
        assert not log.append_group_message(
            "b", "g", ChatMessage(id="old", sender_id="u", text="x", time=T0)
        )
        kept = log.recent_group_messages("b", "g", until=later, limit=100)
        assert [m.id for m in kept] == [*(str(number) for number in range(31, 50)), "3"]

    def test_keeps_the_shared_bound_by_default(self, store_backend: StoreBackend) -> None:
        log = store_backend.group_log()
        for number in range(GROUP_LOG_MAX_PER_GROUP + 5):
            log.append_group_message("b", "g", said(number))
        kept = log.recent_group_messages("b", "g", until=T0 + dt.timedelta(days=1), limit=10_000)
        assert len(kept) == GROUP_LOG_MAX_PER_GROUP
        assert (kept[0].id, kept[-1].id) == ("5", str(GROUP_LOG_MAX_PER_GROUP + 4))

    def test_finds_a_kept_message_by_id(self, store_backend: StoreBackend) -> None:
        log = store_backend.group_log(max_per_group=20)
        photo = ChatMessage(
            id="-7",  # QQ's newer message ids may be negative
            sender_id="u",
            text="拍到了吗",
            images=("https://img.example/cat-1.jpg",),
            reply_to="3",
            time=T0,
        )
        log.append_group_message("b", "g", photo)
        assert log.find_group_message("b", "g", "-7") == photo
        assert log.find_group_message("b", "other", "-7") is None
        assert log.find_group_message("other", "g", "-7") is None
        assert log.find_group_message("b", "g", "404") is None
        # Once pushed out of the bounded window it is gone, as from the timeline.
        for number in range(20):
            log.append_group_message("b", "g", said(number, start=T0 + dt.timedelta(minutes=1)))
        assert log.find_group_message("b", "g", "-7") is None
        assert log.find_group_message("b", "g", "19") is not None

    def test_tasks_appending_on_worker_threads_lose_nothing(
        self, store_backend: StoreBackend
    ) -> None:
        log = store_backend.group_log()

        def write(task: int, number: int) -> bool:
            message = ChatMessage(
                id=f"{task}-{number}",
                sender_id=str(task),
                text="收到",
                time=T0 + dt.timedelta(seconds=number),
            )
            return log.append_group_message(BOT, GROUP, message)

        async def writer(task: int) -> int:
            # Each write runs on a worker thread, so the tasks really overlap on the store.
            return sum([await asyncio.to_thread(write, task, number) for number in range(50)])

        async def main() -> list[int]:
            return await asyncio.gather(*(writer(task) for task in range(8)))

        assert asyncio.run(main()) == [50] * 8
        stored = log.recent_group_messages(BOT, GROUP, until=at(60), limit=1000)
        assert len({m.id for m in stored}) == 400


# -- sessions ------------------------------------------------------------------------------------


class TestSessionStore:
    """:class:`promptweave.store.sessions.SessionStore`: per-user turns and their summary rows."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.sessions(), SessionStore)

    def test_window_reads_newest_rows_of_one_user(self, store_backend: StoreBackend) -> None:
        sessions = store_backend.sessions()
        sessions.append_turns(
            [turn("30022", "user", f"问题{i}", i) for i in range(6)]
            + [turn("30017", "user", "别人的话", 2.5)],
            storage_window=200,
        )
        rows = sessions.user_turns(BOT, GROUP, "30022", until=at(4), limit=3)
        assert [r.content for r in rows] == ["问题2", "问题3", "问题4"]
        assert all(r.key is not None for r in rows)
        since = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9, since=at(4))
        assert [r.content for r in since] == ["问题4", "问题5"]

    def test_append_ignores_a_duplicate_message_id_of_the_same_role(
        self, store_backend: StoreBackend
    ) -> None:
        sessions = store_backend.sessions()
        row = turn("30022", "user", "你好", 0, message_id="m1")
        assert sessions.append_turns([row], storage_window=200) == 1
        assert sessions.append_turns([row], storage_window=200) == 0
        reply = turn("30022", "assistant", "你好呀", 0.1, message_id="m1")
        assert sessions.append_turns([reply], storage_window=200) == 1

    def test_an_answers_usage_is_kept_with_it(self, store_backend: StoreBackend) -> None:
        sessions = store_backend.sessions()
        usage = {"prompt_tokens": 1200, "output_tokens": 12, "cached_tokens": 1024}
        sessions.append_turns(
            [
                turn("30022", "user", "周末有活动吗", 0, message_id="m1"),
                attrs.evolve(
                    turn("30022", "assistant", "有桌游局", 1, message_id="r1"), usage=usage
                ),
            ],
            storage_window=200,
        )
        rows = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9)
        assert [(row.role, row.usage) for row in rows] == [("user", None), ("assistant", usage)]
        # A read that uses no usage may get the rows without it, and otherwise the same.
        bare = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9, usage=False)
        assert [attrs.evolve(row, usage=None) for row in bare] == [
            attrs.evolve(row, usage=None) for row in rows
        ]

    def test_keeps_only_the_storage_window(self, store_backend: StoreBackend) -> None:
        sessions = store_backend.sessions()
        sessions.append_turns(
            [turn("30022", "user", f"第{i}句", i) for i in range(8)], storage_window=5
        )
        rows = sessions.user_turns(BOT, GROUP, "30022", until=at(99), limit=99)
        assert [r.content for r in rows] == [f"第{i}句" for i in range(3, 8)]

    def test_append_counts_only_rows_still_stored(self, store_backend: StoreBackend) -> None:
        sessions = store_backend.sessions()
        rows = [turn("30022", "user", f"第{i}句", i, message_id=f"m{i}") for i in range(8)]
        assert sessions.append_turns(rows, storage_window=5) == 5
        # The rows the window pushed out come back only to be deleted again: nothing was added.
        assert sessions.append_turns(rows[:3], storage_window=5) == 0
        assert sessions.append_turns([turn("30022", "user", "新的", 9)], storage_window=5) == 1

    def test_group_turns_span_users_and_skip_summaries(self, store_backend: StoreBackend) -> None:
        sessions = store_backend.sessions()
        sessions.append_turns(
            [
                turn("30022", "user", "甲", 1),
                turn("30017", "user", "乙", 2),
                turn("30017", "assistant", "回乙", 3),
                turn("30022", "user", "【此前对话摘要】\n摘要", 0, kind=TurnKind.SUMMARY),
            ],
            storage_window=200,
        )
        rows = sessions.group_turns(BOT, GROUP, until=at(9), limit=8)
        assert [r.content for r in rows] == ["甲", "乙", "回乙"]

    def test_summary_replaces_rows_and_is_the_latest_summary(
        self, store_backend: StoreBackend
    ) -> None:
        sessions = store_backend.sessions()
        sessions.append_turns(
            [turn("30022", "user", f"第{i}句", i) for i in range(6)], storage_window=200
        )
        rows = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9)
        summary = turn("30022", "user", "【此前对话摘要】\n聊了前四句", 3.9, kind=TurnKind.SUMMARY)
        removed = [r.key for r in rows[:4] if r.key is not None]
        assert sessions.replace_with_summary(BOT, GROUP, "30022", remove=removed, summary=summary)
        after = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9)
        assert [r.content for r in after] == ["【此前对话摘要】\n聊了前四句", "第4句", "第5句"]
        assert after[0].is_summary and after[0].role == "user"
        latest = sessions.latest_summary(BOT, GROUP, "30022", until=at(9))
        assert latest is not None and latest.content.endswith("聊了前四句")
        assert sessions.latest_summary(BOT, GROUP, "30022", until=at(3)) is None
        assert not sessions.replace_with_summary(
            BOT, GROUP, "30022", remove=removed, summary=summary
        )

    def test_a_summary_row_belongs_to_its_session_and_to_no_message(
        self, store_backend: StoreBackend
    ) -> None:
        sessions = store_backend.sessions()
        sessions.append_turns([turn("30022", "user", "第0句", 0)], storage_window=200)
        (row,) = sessions.user_turns(BOT, GROUP, "30022", until=at(9), limit=9)
        assert row.key is not None
        summary = turn(
            "someone-else",
            "assistant",
            "【此前对话摘要】\n聊了一句",
            0.5,
            message_id="s1",
            reply_to="m0",
            images=("https://img.example/a.jpg",),
        )
        assert sessions.replace_with_summary(BOT, GROUP, "30022", remove=[row.key], summary=summary)
        stored = sessions.latest_summary(BOT, GROUP, "30022", until=at(9))
        assert stored is not None
        assert (stored.user_id, stored.role, stored.kind) == ("30022", "user", TurnKind.SUMMARY)
        assert (stored.message_id, stored.reply_to, stored.images) == (None, None, ())
        assert (stored.content, stored.time) == ("【此前对话摘要】\n聊了一句", at(0.5))

    def test_compaction_claim_respects_the_cooldown(self, store_backend: StoreBackend) -> None:
        claim = store_backend.sessions().claim_compaction
        assert claim(BOT, GROUP, "30022", now=at(0), cooldown_s=600)
        assert not claim(BOT, GROUP, "30022", now=at(9.9), cooldown_s=600)
        assert claim(BOT, GROUP, "30017", now=at(9.9), cooldown_s=600)
        assert claim(BOT, GROUP, "30022", now=at(10), cooldown_s=600)


class TestSummaryStore:
    """:class:`promptweave.store.sessions.SummaryStore`: the archive old-topic recall reads."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.summaries(), SummaryStore)

    def test_lists_summaries_newest_first_per_user_or_group(
        self, store_backend: StoreBackend
    ) -> None:
        archive = store_backend.summaries()
        for minute, user, text in [
            (1, "30022", "考研"),
            (2, "30017", "米线"),
            (3, "30022", "复试"),
        ]:
            archive.add_summary(
                SessionSummary(
                    bot_id=BOT, group_id=GROUP, user_id=user, text=text, created=at(minute)
                )
            )
        assert [s.text for s in archive.list_summaries(BOT, GROUP, "30022", 5)] == ["复试", "考研"]
        assert [s.text for s in archive.list_summaries(BOT, GROUP, None, 2)] == ["复试", "米线"]
        assert archive.list_summaries(BOT, None, None, 5) == []
        assert archive.list_summaries(BOT, GROUP, "30022", 5)[0].created == at(3)


# -- the bot-reply context -----------------------------------------------------------------------


class TestBotReplyContext:
    """:class:`promptweave.store.sessions.BotReplyContext`: an LRU with a TTL."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.bot_replies(), BotReplyContext)

    def test_expires_600_seconds_after_it_was_written_by_default(
        self, store_backend: StoreBackend
    ) -> None:
        assert BOT_REPLY_TTL_S == 600
        context = store_backend.bot_replies()
        context.remember(BOT, GROUP, "9309", "青柠说的那家米线可以试试", now=at(0))
        assert context.lookup(BOT, GROUP, "9309", now=at(9.9)) == "青柠说的那家米线可以试试"
        assert context.lookup(BOT, GROUP, "9309", now=at(10)) is None
        assert context.lookup(BOT, "20002", "9309", now=at(1)) is None
        assert context.lookup("10002", GROUP, "9309", now=at(1)) is None

    def test_keeps_512_entries_by_default(self, store_backend: StoreBackend) -> None:
        assert BOT_REPLY_MAX_ENTRIES == 512
        context = store_backend.bot_replies()
        for number in range(BOT_REPLY_MAX_ENTRIES + 1):
            context.remember(BOT, GROUP, str(number), f"第{number}条", now=at(0))
        assert context.lookup(BOT, GROUP, "0", now=at(1)) is None
        assert context.lookup(BOT, GROUP, "1", now=at(1)) == "第1条"

    def test_stores_the_stripped_text_cut_to_its_limit(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies()
        context.remember(BOT, GROUP, "long", "  " + "长" * (BOT_REPLY_TEXT_CHARS + 9), now=at(0))
        assert context.lookup(BOT, GROUP, "long", now=at(0)) == "长" * BOT_REPLY_TEXT_CHARS

    def test_ignores_blank_text_and_id(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies()
        context.remember(BOT, GROUP, "", "有字", now=at(0))
        context.remember(BOT, GROUP, "1", "   ", now=at(0))
        assert context.lookup(BOT, GROUP, "1", now=at(0)) is None
        assert context.lookup(BOT, GROUP, "", now=at(0)) is None

    def test_evicts_the_oldest_beyond_max_entries(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies(max_entries=3)
        for number in range(5):
            context.remember(BOT, GROUP, str(number), f"第{number}条", now=at(0))
        assert context.lookup(BOT, GROUP, "1", now=at(1)) is None
        assert context.lookup(BOT, GROUP, "2", now=at(1)) == "第2条"
        assert context.lookup(BOT, GROUP, "4", now=at(1)) == "第4条"

    def test_a_lookup_refreshes_recency(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies(max_entries=2)
        context.remember(BOT, GROUP, "a", "甲", now=at(0))
        context.remember(BOT, GROUP, "b", "乙", now=at(0))
        assert context.lookup(BOT, GROUP, "a", now=at(1)) == "甲"
        context.remember(BOT, GROUP, "c", "丙", now=at(1))
        assert context.lookup(BOT, GROUP, "a", now=at(1)) == "甲"
        assert context.lookup(BOT, GROUP, "b", now=at(1)) is None
        assert context.lookup(BOT, GROUP, "c", now=at(1)) == "丙"

    def test_a_lookup_refreshes_recency_not_expiry(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies(max_entries=2)
        context.remember(BOT, GROUP, "a", "甲", now=at(0))
        context.remember(BOT, GROUP, "b", "乙", now=at(5))
        assert context.lookup(BOT, GROUP, "a", now=at(9)) == "甲"
        context.remember(BOT, GROUP, "c", "丙", now=at(9))
        # "a" was used last, so "b" went; "a" still expires ten minutes after it was written.
        assert context.lookup(BOT, GROUP, "b", now=at(9)) is None
        assert context.lookup(BOT, GROUP, "a", now=at(10)) is None
        assert context.lookup(BOT, GROUP, "c", now=at(10)) == "丙"

    def test_a_given_ttl_is_kept(self, store_backend: StoreBackend) -> None:
        context = store_backend.bot_replies(ttl_s=60)
        context.remember(BOT, GROUP, "a", "甲", now=at(0))
        assert context.lookup(BOT, GROUP, "a", now=at(0.9)) == "甲"
        assert context.lookup(BOT, GROUP, "a", now=at(1)) is None


# -- the feedback ledger -------------------------------------------------------------------------


class TestFeedbackLedger:
    """:class:`promptweave.store.sessions.FeedbackLedger`: phrases a group rejected."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.feedback(), FeedbackLedger)

    def test_is_idempotent_per_outcome_and_undoable(self, store_backend: StoreBackend) -> None:
        ledger = store_backend.feedback()
        assert ledger.record_outcome(BOT, GROUP, "o1", ["下头", "下头", " "], now=at(0)) == 1
        assert ledger.record_outcome(BOT, GROUP, "o1", ["下头"], now=at(1)) == 0
        ledger.record_outcome(BOT, GROUP, "o2", ["阴阳怪气"], now=at(2))
        assert ledger.blacklisted_phrases(BOT, GROUP) == ("阴阳怪气", "下头")
        assert ledger.blacklisted_phrases(BOT, "20002") == ()
        assert ledger.undo_outcome(BOT, GROUP, "o2") == 1
        assert ledger.blacklisted_phrases(BOT, GROUP) == ("下头",)

    def test_applies_only_the_newest_phrases(self, store_backend: StoreBackend) -> None:
        ledger = store_backend.feedback()
        for number in range(FEEDBACK_MAX_PHRASES + 5):
            ledger.record_outcome(BOT, GROUP, f"o{number}", [f"词{number}"], now=at(number))
        phrases = ledger.blacklisted_phrases(BOT, GROUP)
        assert len(phrases) == FEEDBACK_MAX_PHRASES
        assert phrases[0] == f"词{FEEDBACK_MAX_PHRASES + 4}"


# -- the routing state ---------------------------------------------------------------------------


def _candidate(message_id: str, seconds: int) -> QuoteCandidate:
    return QuoteCandidate(
        message_id=message_id,
        sender_id="3",
        text="x" * 200,
        time=T0 + dt.timedelta(seconds=seconds),
    )


class TestRoutingState:
    """:class:`promptweave.store.routing_state.RoutingState`: small per-group routing state."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.routing(), RoutingState)

    def test_mute_starts_empty_and_records_each_kind(self, store_backend: StoreBackend) -> None:
        state = store_backend.routing()
        assert not state.mute("b", "g").disabled
        state.set_disabled("b", "g", True)
        state.start_cooldown("b", "g", T0)
        state.start_silence("b", "g", T0 + dt.timedelta(seconds=5))
        mute = state.mute("b", "g")
        assert mute.disabled
        assert mute.cooldown_until == T0
        assert mute.silence_until == T0 + dt.timedelta(seconds=5)
        state.set_disabled("b", "g", False)
        assert not state.mute("b", "g").disabled

    def test_a_group_switch_keeps_its_author_and_time_until_reset(
        self, store_backend: StoreBackend
    ) -> None:
        state = store_backend.routing()
        assert state.mute("b", "g").switch is None
        assert state.switches() == ()
        beijing = dt.timezone(dt.timedelta(hours=8))
        off = GroupSwitch(enabled=False, by="chat:30001", at=T0.astimezone(beijing))
        state.set_switch("b", "g", off)
        mute = state.mute("b", "g")
        assert mute.switch == off and mute.disabled
        assert mute.switch.at is not None and mute.switch.at.utcoffset() == dt.timedelta(hours=8)
        assert state.snapshot("b", "g").mute == mute
        on = GroupSwitch(enabled=True, by="cli", at=T0)
        state.set_switch("b", "h", on)
        state.set_switch("a", "g", GroupSwitch(enabled=False))
        assert not state.mute("b", "h").disabled
        assert state.switches() == (
            ("a", "g", GroupSwitch(enabled=False)),
            ("b", "g", off),
            ("b", "h", on),
        )
        assert state.switches("b") == (("b", "g", off), ("b", "h", on))
        state.set_switch("b", "g", None)
        assert state.mute("b", "g") == GroupMute()
        assert state.snapshot("b", "g").mute == GroupMute()
        assert state.switches("b") == (("b", "h", on),)
        # set_disabled is a switch without an author.
        state.set_disabled("c", "g", True)
        assert state.switches("c") == (("c", "g", GroupSwitch(enabled=False)),)

    def test_kept_messages_come_back_once_oldest_first(self, store_backend: StoreBackend) -> None:
        state = store_backend.routing()
        # Fewer messages than the limit: all of them stay.
        few = [ChatMessage(id=f"f{index}", sender_id="3", text="在", time=T0) for index in range(2)]
        for message in few:
            state.keep_message("b", "g", message, limit=3)
        assert state.take_kept_messages("b", "g") == tuple(few)
        for index in range(3):
            message = ChatMessage(
                id=f"m{index}",
                sender_id="3",
                text=f"第{index}条",
                time=T0,
                images=["https://a/b.png"],
            )
            state.keep_message("b", "g", message, limit=2)
        duplicate = ChatMessage(id="m2", sender_id="3", text="重复", time=T0)
        state.keep_message("b", "g", duplicate, limit=2)
        kept = state.take_kept_messages("b", "g")
        assert [(m.id, m.text) for m in kept] == [("m1", "第1条"), ("m2", "第2条")]
        assert kept[0].images == ("https://a/b.png",)
        assert kept[0].time == T0
        assert state.take_kept_messages("b", "g") == ()

    def test_candidates_keep_the_newest_and_never_bring_back_an_old_one(
        self, store_backend: StoreBackend
    ) -> None:
        state = store_backend.routing()
        # Fewer candidates than the limit: all of them stay.
        state.record_candidates("b", "g", [_candidate(f"c{i}", i) for i in range(4)], limit=6)
        assert [c.message_id for c in state.candidates("b", "g")] == ["c0", "c1", "c2", "c3"]
        state.record_candidates("b", "g", [_candidate(f"c{i}", i) for i in range(8)], limit=6)
        state.record_candidates("b", "g", [_candidate("c0", 0), _candidate("c1", 1)], limit=6)
        found = state.candidates("b", "g")
        assert [c.message_id for c in found] == ["c2", "c3", "c4", "c5", "c6", "c7"]
        assert len(found[0].text) == CANDIDATE_TEXT_CHARS
        assert found[0].time == T0 + dt.timedelta(seconds=2)

    def test_quote_time_phrase_replies_and_rhythm(self, store_backend: StoreBackend) -> None:
        state = store_backend.routing()
        assert state.last_quote_at("b", "g") is None
        state.note_quote_delivered("b", "g", "c1", T0)
        assert state.last_quote_at("b", "g") == T0
        assert state.last_phrase("b", "g") is None
        state.note_phrase("b", "g", "确实")
        assert state.last_phrase("b", "g") == "确实"
        state.note_bot_reply("b", "g", T0)
        state.note_bot_reply("b", "g", T0 + dt.timedelta(seconds=60))
        assert state.bot_replies_since("b", "g", T0 + dt.timedelta(seconds=30)) == 1
        assert state.rhythm("b", "g") is None
        profile = RhythmProfile(bubble_count_p50=2, bubble_count_p90=3, multi_weight=0.7)
        state.set_rhythm("b", "g", profile)
        assert state.rhythm("b", "g") == profile

    def test_a_snapshot_holds_what_the_single_reads_give(self, store_backend: StoreBackend) -> None:
        state = store_backend.routing()
        since = T0 + dt.timedelta(seconds=50)
        assert state.snapshot("b", "g") == GroupSnapshot()
        assert state.snapshot("b", "g", replies_since=since) == GroupSnapshot(replies_since=since)
        state.set_disabled("b", "g", True)
        state.start_cooldown("b", "g", T0 + dt.timedelta(seconds=30))
        state.start_silence("b", "g", T0 + dt.timedelta(seconds=60))
        state.note_quote_delivered("b", "g", "c1", T0)
        state.note_phrase("b", "g", "确实")
        state.set_rhythm("b", "g", RhythmProfile(bubble_count_p50=2, multi_weight=0.7))
        for seconds in (0, 100, 200):
            state.note_bot_reply("b", "g", T0 + dt.timedelta(seconds=seconds))
        assert state.snapshot("b", "g", replies_since=since) == GroupSnapshot(
            mute=state.mute("b", "g"),
            last_quote_at=state.last_quote_at("b", "g"),
            last_phrase=state.last_phrase("b", "g"),
            rhythm=state.rhythm("b", "g"),
            replies_since=since,
            bot_replies=state.bot_replies_since("b", "g", since),
        )
        assert state.snapshot("b", "g").bot_replies == 0
        assert state.snapshot("other", "g") == GroupSnapshot()

    def test_recording_candidates_returns_what_a_read_gives_or_none(
        self, store_backend: StoreBackend
    ) -> None:
        state = store_backend.routing()
        batches = (
            [_candidate(f"c{i}", i) for i in range(8)],
            [_candidate("c0", 0), _candidate("c7", 7)],
            [_candidate("c8", 8)],
            [],
        )
        for batch in batches:
            returned = state.record_candidates("b", "g", batch, limit=6)
            assert returned is None or returned == state.candidates("b", "g")
        assert [c.message_id for c in state.candidates("b", "g")] == [f"c{i}" for i in range(3, 9)]

    def test_state_is_scoped_by_bot_and_group(self, store_backend: StoreBackend) -> None:
        state = store_backend.routing()
        state.set_disabled("b", "g", True)
        state.note_phrase("b", "g", "确实")
        state.record_candidates("b", "g", [_candidate("c1", 1)], limit=6)
        for bot, group in (("b", "h"), ("other", "g")):
            assert not state.mute(bot, group).disabled
            assert state.last_phrase(bot, group) is None
            assert state.candidates(bot, group) == ()


# -- the delivery ledger -------------------------------------------------------------------------


class TestDeliveryLedger:
    """:class:`promptweave.store.deliveries.DeliveryLedger`: each delivery is recorded once."""

    def test_implements_the_interface(self, store_backend: StoreBackend) -> None:
        assert isinstance(store_backend.deliveries(), DeliveryLedger)

    def test_a_delivered_message_is_new_once(self, store_backend: StoreBackend) -> None:
        ledger = store_backend.deliveries()

        def report(answering: str | None, message: str | None) -> DeliveryState:
            return ledger.record_delivery("b", "g", answering=answering, message=message, now=T0)

        assert report("id:m1", "id:r1") is DeliveryState.NEW
        assert report("id:m1", "id:r1") is DeliveryState.REPEATED
        assert report(None, "id:r1") is DeliveryState.REPEATED
        # A note of a reply to m1 after the reply was recorded.
        assert report("id:m1", None) is DeliveryState.REPEATED
        # A second bubble answering m1 is another delivered message.
        assert report("id:m1", "id:r2") is DeliveryState.NEW
        # A note first: the first record answering the same message completes it, once.
        assert report("id:m2", None) is DeliveryState.NEW
        assert report("id:m2", None) is DeliveryState.REPEATED
        assert report("id:m2", "id:r3") is DeliveryState.COMPLETED
        assert report("id:m2", "id:r3") is DeliveryState.REPEATED
        assert report("id:m2", "id:r4") is DeliveryState.NEW
        # Scoped by bot and group.
        assert ledger.record_delivery("b", "h", answering=None, message="id:r1", now=T0) is (
            DeliveryState.NEW
        )
        assert ledger.record_delivery("c", "g", answering=None, message="id:r1", now=T0) is (
            DeliveryState.NEW
        )

    def test_a_report_without_either_message_is_refused(self, store_backend: StoreBackend) -> None:
        ledger = store_backend.deliveries()
        with pytest.raises(ValueError, match="answered or the delivered message"):
            ledger.record_delivery("b", "g", answering=None, message=None, now=T0)

    def test_remembers_the_newest_deliveries_per_group(self, store_backend: StoreBackend) -> None:
        ledger = store_backend.deliveries()
        for number in range(DELIVERY_LEDGER_MAX + 1):
            ledger.record_delivery("b", "g", answering=None, message=f"id:{number}", now=T0)
        newest = f"id:{DELIVERY_LEDGER_MAX}"
        assert ledger.record_delivery("b", "g", answering=None, message=newest, now=T0) is (
            DeliveryState.REPEATED
        )
        assert ledger.record_delivery("b", "g", answering=None, message="id:0", now=T0) is (
            DeliveryState.NEW
        )


# -- retrieval -----------------------------------------------------------------------------------


def _memory(text: str, kind: str = "group_memory", **fields: Any) -> MemoryRecord:
    return MemoryRecord(bot_id="b1", group_id="g1", kind=kind, text=text, **fields)


class _ExplodingDocument:
    """A knowledge document whose every field fails to read: a write that breaks halfway."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("disk full")


VOCABULARY = [
    "周六",
    "晚上",
    "桌游",
    "地铁",
    "米线",
    "报表",
    "加班",
    "柠檬",
    "阿瓦",
    "卡坦",
    "生日",
    "蛋糕",
    "订位",
    "格子",
    "咖啡",
    "猫咪",
]


def _sentence(rng: random.Random) -> str:
    return "".join(rng.sample(VOCABULARY, rng.randint(2, 5))) + f"（{rng.randint(0, 10**6)}）"


class TestRetrievalStore:
    """:class:`promptweave.store.retrieval.RetrievalStore`: what the built-in retrievers search."""

    def test_memory_search_ranks_by_score_within_the_scope(
        self, retrieval_store: RetrievalStore
    ) -> None:
        store = retrieval_store
        store.write(
            RetrievalBatch(
                memories=(
                    _memory("青柠汽水说周末可能要加班"),
                    _memory("桌游局一般在周六晚上七点开始", kind="teaching", id="m1"),
                    _memory("今天好冷，出门差点被风吹回去"),
                )
            )
        )
        hits = store.search_memories("b1", "g1", query_terms("周六晚上桌游局还照常吗"), limit=5)
        assert [hit.record.text for hit in hits] == ["桌游局一般在周六晚上七点开始"]
        assert hits[0].record.id == "m1" and hits[0].record.kind == "teaching"
        assert 0 < hits[0].score <= 1 and hits[0].matched == 5

    def test_writing_the_same_memory_twice_keeps_one(self, retrieval_store: RetrievalStore) -> None:
        store = retrieval_store
        store.write(RetrievalBatch(memories=(_memory("桌游局在周六", source="a"),)))
        store.write(RetrievalBatch(memories=(_memory("桌游局在周六", source="b"),)))
        hits = store.search_memories("b1", "g1", query_terms("周六桌游局"), limit=5)
        assert [(h.record.text, h.record.source) for h in hits] == [("桌游局在周六", "b")]
        assert store.counts()["memories"] == 1

    def test_reimporting_a_document_replaces_its_chunks(
        self, retrieval_store: RetrievalStore
    ) -> None:
        store = retrieval_store
        for text in ("# 群规\n\n旧的桌游规则", "# 群规\n\n新的报名流程"):
            document = KnowledgeDocument(bot_id="b1", group_id="g1", source="rules.md", text=text)
            store.write(RetrievalBatch(knowledge=(document,)))
        assert store.search_knowledge("b1", "g1", query_terms("桌游规则"), limit=5) == []
        (hit,) = store.search_knowledge("b1", "g1", query_terms("报名流程"), limit=5)
        assert (hit.record.title, hit.record.text, hit.record.chunk_id) == (
            "群规",
            "新的报名流程",
            "rules.md#0",
        )

    def test_profile_records_are_read_by_scope(self, retrieval_store: RetrievalStore) -> None:
        store = retrieval_store
        scope = {"bot_id": "b1", "group_id": "g1"}
        store.write(
            RetrievalBatch(
                relationships=(
                    RelationshipRecord(**scope, user_id="u1", facts=["常客"], affinity=0.5),
                ),
                person_facts=(
                    PersonFactRecord(**scope, user_id="u1", text="不吃香菜"),
                    PersonFactRecord(**scope, user_id="u1", text="喜欢柠檬茶"),
                ),
                expression_pairs=(
                    ExpressionPairRecord(**scope, trigger="快了", reply="确实可以"),
                    ExpressionPairRecord(**scope, trigger="好冷", reply="多穿点"),
                ),
                rhythms=(RhythmRecord(**scope, single_bubble_share=0.8, median_segment_chars=7),),
                strategies=(
                    BehaviorRecord(**scope, scene="a", action="x", support=1),
                    BehaviorRecord(**scope, scene="b", action="y", support=5),
                ),
            )
        )
        relationship = store.relationship("b1", "g1", "u1")
        assert relationship is not None and relationship.facts == ("常客",)
        assert store.relationship("b1", "g1", "u2") is None
        assert [f.text for f in store.person_facts("b1", "g1", "u1", limit=5)] == [
            "不吃香菜",
            "喜欢柠檬茶",
        ]
        assert [p.trigger for p in store.expression_pairs("b1", "g1", limit=5)] == ["好冷", "快了"]
        rhythm = store.rhythm_baseline("b1", "g1")
        assert rhythm is not None and rhythm.median_segment_chars == 7
        assert [s.scene for s in store.behavior_strategies("b1", "g1", limit=5)] == ["b", "a"]

    def test_summaries_are_listed_newest_first(self, retrieval_store: RetrievalStore) -> None:
        def summary(text: str, day: int | None) -> SummaryRecord:
            created = None if day is None else dt.datetime(2026, 11, day, tzinfo=CST)
            return SummaryRecord(
                bot_id="b1", group_id="g1", user_id="u1", text=text, created_at=created
            )

        retrieval_store.write(
            RetrievalBatch(summaries=(summary("旧", 1), summary("无时间", None), summary("新", 20)))
        )
        assert retrieval_store.list_summaries("b1", "g1", "u1", 5) == ["新", "旧", "无时间"]
        assert retrieval_store.list_summaries("b1", "g1", "u1", 1) == ["新"]
        # The private scope is another scope.
        assert retrieval_store.list_summaries("b1", None, "u1", 5) == []

    def test_a_failing_write_leaves_nothing_behind(self, retrieval_store: RetrievalStore) -> None:
        batch = RetrievalBatch(
            memories=(_memory("桌游局在周六"),),
            knowledge=(_ExplodingDocument(),),  # type: ignore[arg-type]
        )
        with pytest.raises(RuntimeError, match="disk full"):
            retrieval_store.write(batch)
        assert retrieval_store.counts()["memories"] == 0

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_no_search_ever_returns_another_bots_or_groups_data(
        self, retrieval_store: RetrievalStore, seed: int
    ) -> None:
        """Randomized: many bots and groups share one vocabulary; every hit stays in its scope."""
        store = retrieval_store
        rng = random.Random(seed)
        scopes = [(f"b{b}", f"g{g}") for b in range(3) for g in range(4)] + [("b0", "")]
        users = ["u1", "u2"]
        kinds = ["teaching", "group_event", "ip_knowledge", "group_memory"]
        batch = RetrievalBatch(
            memories=tuple(
                MemoryRecord(
                    bot_id=b, group_id=g, kind=rng.choice(kinds), text=f"{b}/{g}:{_sentence(rng)}"
                )
                for b, g in scopes
                for _ in range(30)
            ),
            knowledge=tuple(
                KnowledgeDocument(
                    bot_id=b,
                    group_id=g,
                    source=f"doc{i}",
                    text="\n\n".join(f"{b}/{g}:{_sentence(rng)}" for _ in range(5)),
                )
                for b, g in scopes
                for i in range(2)
            ),
            relationships=tuple(
                RelationshipRecord(bot_id=b, group_id=g, user_id=u, facts=[f"{b}/{g}/{u}"])
                for b, g in scopes
                for u in users
            ),
            person_facts=tuple(
                PersonFactRecord(
                    bot_id=b, group_id=g, user_id=u, text=f"{b}/{g}/{u}:{_sentence(rng)}"
                )
                for b, g in scopes
                for u in users
            ),
            expression_pairs=tuple(
                ExpressionPairRecord(bot_id=b, group_id=g, trigger=_sentence(rng), reply=f"{b}/{g}")
                for b, g in scopes
                for _ in range(5)
            ),
            rhythms=tuple(
                RhythmRecord(
                    bot_id=b,
                    group_id=g,
                    single_bubble_share=rng.random(),
                    median_segment_chars=len(b + g),
                )
                for b, g in scopes
            ),
            strategies=tuple(
                BehaviorRecord(bot_id=b, group_id=g, scene=_sentence(rng), action=f"{b}/{g}")
                for b, g in scopes
                for _ in range(3)
            ),
            summaries=tuple(
                SummaryRecord(bot_id=b, group_id=g, user_id=u, text=f"{b}/{g}/{u}:{_sentence(rng)}")
                for b, g in scopes
                for u in users
            ),
        )
        store.write(batch)
        for _ in range(40):
            bot, group = rng.choice(scopes)
            user = rng.choice(users)
            terms = query_terms(_sentence(rng))
            memories = store.search_memories(bot, group, terms, limit=20)
            chunks = store.search_knowledge(bot, group, terms, limit=20)
            assert memories and chunks  # the shared vocabulary guarantees candidates
            assert all((h.record.bot_id, h.record.group_id) == (bot, group) for h in memories)
            assert all(h.record.text.startswith(f"{bot}/{group}:") for h in memories)
            assert all(h.record.text.startswith(f"{bot}/{group}:") for h in chunks)
            relationship = store.relationship(bot, group, user)
            assert relationship is not None and relationship.facts == (f"{bot}/{group}/{user}",)
            assert all(
                f.text.startswith(f"{bot}/{group}/{user}:")
                for f in store.person_facts(bot, group, user, limit=10)
            )
            pairs = store.expression_pairs(bot, group, limit=50)
            assert {p.reply for p in pairs} == {f"{bot}/{group}"}
            rhythm = store.rhythm_baseline(bot, group)
            assert rhythm is not None and rhythm.median_segment_chars == len(bot + group)
            strategies = store.behavior_strategies(bot, group, limit=50)
            assert {s.action for s in strategies} == {f"{bot}/{group}"}
            summaries = store.list_summaries(bot, group or None, user, 50)
            assert len(summaries) == 1 and summaries[0].startswith(f"{bot}/{group}/{user}:")


# -- storage shared by several processes ---------------------------------------------------------

WRITERS = 4
PER_WRITER = 60


def _race(open_stores: Callable[[], Stores], writer: int, results: Any) -> None:
    # Each process opens the stores on its own, as separate bot processes would. Every process
    # records the same shared messages, turns, claims and deliveries (each must be stored once)
    # and messages and turns of its own (none may be lost).
    stores = open_stores()
    assert stores.group_log is not None and stores.sessions is not None
    shared = claims = new = 0
    for number in range(PER_WRITER):
        shared += stores.group_log.append_group_message(BOT, GROUP, said(number))
        stores.group_log.append_group_message(
            BOT,
            GROUP,
            ChatMessage(id=f"{writer}-{number}", sender_id=str(writer), text="在吗", time=T0),
        )
        for user in ("30022", f"own-{writer}"):
            shared += stores.sessions.append_turns(
                [
                    SessionTurn(
                        bot_id=BOT,
                        group_id=GROUP,
                        user_id=user,
                        role="user",
                        content=f"第{number}句",
                        message_id=str(number),
                        time=said(number).time,
                    )
                ],
                storage_window=10_000,
            )
        claims += stores.sessions.claim_compaction(BOT, GROUP, str(number), now=T0, cooldown_s=600)
        state = stores.deliveries.record_delivery(
            BOT, GROUP, answering=None, message=f"id:{number}", now=T0
        )
        new += state is DeliveryState.NEW
    results.put((shared, claims, new))
    stores.close()


class TestSharedStorage:
    """Stores opened on one storage by several processes behave as one store."""

    def test_two_stores_on_one_storage_see_each_others_writes(
        self, shared_stores: Callable[[], Stores]
    ) -> None:
        first, second = shared_stores(), shared_stores()
        assert first.group_log is not None and second.group_log is not None
        assert first.sessions is not None and second.sessions is not None
        first.group_log.append_group_message(BOT, GROUP, said(1, text="只写进第一个"))
        assert not second.group_log.append_group_message(BOT, GROUP, said(1))
        window = second.group_log.recent_group_messages(BOT, GROUP, until=at(1), limit=5)
        assert [m.text for m in window] == ["只写进第一个"]
        assert first.sessions.claim_compaction(BOT, GROUP, "30022", now=T0, cooldown_s=600)
        assert not second.sessions.claim_compaction(BOT, GROUP, "30022", now=T0, cooldown_s=600)
        first.routing.note_quote_delivered(BOT, GROUP, "9", T0)
        assert second.routing.last_quote_at(BOT, GROUP) == T0
        switch = GroupSwitch(enabled=False, by="chat:30001", at=T0)
        first.routing.set_switch(BOT, GROUP, switch)
        assert second.routing.mute(BOT, GROUP).switch == switch
        assert second.routing.switches(BOT) == ((BOT, GROUP, switch),)
        noted = first.deliveries.record_delivery(
            BOT, GROUP, answering="id:m1", message=None, now=T0
        )
        completed = second.deliveries.record_delivery(
            BOT, GROUP, answering="id:m1", message="id:r1", now=T0
        )
        assert (noted, completed) == (DeliveryState.NEW, DeliveryState.COMPLETED)
        for stores in (first, second):
            stores.close()

    def test_processes_racing_on_one_storage_store_each_write_once(
        self, shared_stores: Callable[[], Stores]
    ) -> None:
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        workers = [
            context.Process(target=_race, args=(shared_stores, writer, results))
            for writer in range(WRITERS)
        ]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=120)
        assert [worker.exitcode for worker in workers] == [0] * WRITERS
        # Shared: one message and one turn per number; own turns: every one of every writer.
        assert sum(shared for shared, _claims, _new in outcomes) == (2 + WRITERS) * PER_WRITER
        assert sum(claims for _shared, claims, _new in outcomes) == PER_WRITER
        assert sum(new for _shared, _claims, new in outcomes) == PER_WRITER
        stores = shared_stores()
        assert stores.group_log is not None and stores.sessions is not None
        until = T0 + dt.timedelta(hours=1)
        log = stores.group_log.recent_group_messages(BOT, GROUP, until=until, limit=1000)
        own = {f"{writer}-{number}" for writer in range(WRITERS) for number in range(PER_WRITER)}
        assert {m.id for m in log} == own | {str(number) for number in range(PER_WRITER)}
        assert len(log) == (1 + WRITERS) * PER_WRITER
        for user in ("30022", *(f"own-{writer}" for writer in range(WRITERS))):
            turns = stores.sessions.user_turns(BOT, GROUP, user, until=until, limit=1000)
            assert [t.message_id for t in turns] == [str(number) for number in range(PER_WRITER)]
        stores.close()
