"""The stores a runtime uses, built from ``[store]`` in ``promptweave.toml``."""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import attrs

from promptweave.config import Config
from promptweave.errors import ConfigError
from promptweave.store.deliveries import DeliveryLedger, MemoryDeliveryLedger
from promptweave.store.learned import LearnedStore
from promptweave.store.learned_memory import MemoryLearnedStore
from promptweave.store.learned_retrieval import LearnedRetrievalStore
from promptweave.store.retrieval import RetrievalStore, TopicSummarySource
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.routing_state import MemoryRoutingState, RoutingState
from promptweave.store.sessions import (
    BotReplyContext,
    FeedbackLedger,
    GroupLog,
    SessionStore,
    SummaryStore,
)
from promptweave.store.sessions_memory import (
    MemoryBotReplyContext,
    MemoryFeedbackLedger,
    MemoryGroupLog,
    MemorySessionStore,
    MemorySummaryStore,
)
from promptweave.store.sqlite import STORE_ERRORS, SQLiteDatabase

if TYPE_CHECKING:
    from promptweave.store.turn_log_sqlite import SQLiteTurnLog

__all__ = ["STORE_DISABLED", "Stores", "TopicSummaries"]

log = logging.getLogger("promptweave.store")

#: ``Stores.unavailable`` when ``[store] enabled = false``.
STORE_DISABLED = "store_disabled"

#: The module of ``[store] backend = "redis"``, imported by name only when configured.
REDIS_STORE_MODULE = "promptweave.contrib.redis_store"


@attrs.frozen
class TopicSummaries:
    """Old topics (section ``mid_term``): the session summaries the bot wrote itself, newest
    first, then imported ones (``promptweave import topic_summaries``)."""

    sessions: SummaryStore | None
    imported: TopicSummarySource

    @property
    def blocking_reads(self) -> bool:
        """Whether listing may wait on I/O: unless both sources say their reads do not
        (``blocking_reads = False``, as the SQLite and in-memory ones do)."""
        sources = (self.imported,) if self.sessions is None else (self.sessions, self.imported)
        return any(getattr(source, "blocking_reads", True) for source in sources)

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> Sequence[str]:
        texts: list[str] = []
        if self.sessions is not None:
            texts += [
                summary.text
                for summary in self.sessions.list_summaries(bot_id, group_id, user_id, limit)
            ]
        for text in self.imported.list_summaries(bot_id, group_id, user_id, limit):
            if text not in texts:
                texts.append(text)
        return texts[:limit]


def _topic_summaries(stores: Stores) -> TopicSummarySource:
    return TopicSummaries(sessions=stores.summaries, imported=stores.retrieval)


@attrs.define
class Stores:
    """The runtime's stores.

    :param database: the SQLite database, or ``None`` with the in-memory backend; with the Redis
        backend it holds the retrieval data only.
    :param group_log: the newest group messages the bot saw (feeds the group timeline).
    :param sessions: per-user conversation turns and summary rows.
    :param summaries: the archive of written summaries (feeds old-topic recall).
    :param bot_replies: the texts of delivered bot messages (the quoted-bot-text block).
    :param feedback: the negative-feedback phrase ledger.
    :param unavailable: why the conversational stores are missing, when they are.
    :param retrieval: memories, knowledge, relationship notes, person facts, expression pairs,
        rhythm baselines and behavior strategies (``docs/retrieval.md``).
    :param routing: per-group routing state (cooldowns, quote candidates, last phrase…).
    :param topic_summaries: where old topics come from; by default :class:`TopicSummaries`
        over ``summaries`` and ``retrieval``.
    :param closers: called by :meth:`close` (the Redis backend closes its connection pool).
    :param deliveries: the deliveries already reported, so each counts once
        (:mod:`promptweave.store.deliveries`); in this process unless a shared one is given.
    :param learned: what the learners learned, their cursors and leases, and the injections of
        delivered replies (``docs/learning.md``); ``None`` when the store keeps none.
    :param turns: the turn log the dashboard reads (``docs/dashboard.md``); ``None`` when the
        store keeps none (the in-memory and Redis backends).
    """

    database: SQLiteDatabase | None = None
    group_log: GroupLog | None = None
    sessions: SessionStore | None = None
    summaries: SummaryStore | None = None
    bot_replies: BotReplyContext | None = None
    feedback: FeedbackLedger | None = None
    unavailable: str | None = None
    retrieval: RetrievalStore = attrs.field(factory=InMemoryRetrievalStore)
    routing: RoutingState = attrs.field(factory=MemoryRoutingState)
    topic_summaries: TopicSummarySource = attrs.field(
        default=attrs.Factory(_topic_summaries, takes_self=True)
    )
    closers: tuple[Callable[[], None], ...] = ()
    deliveries: DeliveryLedger = attrs.field(factory=MemoryDeliveryLedger)
    learned: LearnedStore | None = None
    turns: SQLiteTurnLog | None = None

    def __attrs_post_init__(self) -> None:
        # The sections read what was learned next to what was imported (docs/learning.md).
        if self.learned is not None and not isinstance(self.retrieval, LearnedRetrievalStore):
            self.retrieval = LearnedRetrievalStore(imported=self.retrieval, learned=self.learned)

    @property
    def imported(self) -> RetrievalStore:
        """The imported retrieval data alone (what ``promptweave import`` writes)."""
        retrieval = self.retrieval
        return retrieval.imported if isinstance(retrieval, LearnedRetrievalStore) else retrieval

    @classmethod
    def from_config(cls, config: Config) -> Stores:
        """Open (and migrate) the configured backend.

        Never raises for a store that cannot be opened: the result then has no conversational
        stores and says why in ``unavailable``.
        """
        if not config.store.enabled:
            return cls(unavailable=STORE_DISABLED)
        if config.store.backend == "memory":
            return cls.in_memory(config)
        if config.store.backend == "redis":
            return _redis_stores(config)
        database = SQLiteDatabase(
            config.resolve_path(config.store.path), synchronous=config.store.synchronous
        )
        try:
            cls.migrate(database)
        except STORE_ERRORS as exc:
            log.warning("conversational store unavailable, degrading: %s", exc)
            return cls(unavailable=f"store_unavailable: {exc}")
        return cls.sqlite(database, config)

    @staticmethod
    def migrate(database: SQLiteDatabase) -> None:
        """Apply the migrations of the conversational SQLite stores: the sessions' tables and the
        routing state's. Done when the file is opened, not on first use: a message's group-log row
        and its quote candidate are written in one transaction (:meth:`transaction`), and a table
        created inside it would go if it rolled back.

        :raises StoreUnavailableError: the file cannot be migrated.
        """
        from promptweave.store.learned_sqlite import LEARNED_MIGRATIONS
        from promptweave.store.routing_state_sqlite import ROUTING_MIGRATIONS
        from promptweave.store.sessions_sqlite import SESSION_MIGRATIONS
        from promptweave.store.turn_log_sqlite import TURN_LOG_MIGRATIONS

        database.migrate(
            (*SESSION_MIGRATIONS, *ROUTING_MIGRATIONS, *LEARNED_MIGRATIONS, *TURN_LOG_MIGRATIONS)
        )

    @classmethod
    def sqlite(cls, database: SQLiteDatabase, config: Config | None = None) -> Stores:
        """The SQLite stores over an already migrated ``database``."""
        # Imported here: a runtime on the in-memory or Redis backend (and ``promptweave render``
        # without a store file) never loads the SQLite backends (``docs/performance.md``).
        from promptweave.store.deliveries_sqlite import SQLiteDeliveryLedger
        from promptweave.store.learned_sqlite import SQLiteLearnedStore
        from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
        from promptweave.store.routing_state_sqlite import SQLiteRoutingState
        from promptweave.store.sessions_sqlite import (
            SQLiteBotReplyContext,
            SQLiteFeedbackLedger,
            SQLiteGroupLog,
            SQLiteSessionStore,
            SQLiteSummaryStore,
        )
        from promptweave.store.turn_log_sqlite import SQLiteTurnLog

        session = (config or Config()).session
        return cls(
            database=database,
            group_log=SQLiteGroupLog(database),
            sessions=SQLiteSessionStore(database),
            summaries=SQLiteSummaryStore(database),
            bot_replies=SQLiteBotReplyContext(
                database, ttl_s=session.bot_reply_ttl_s, max_entries=session.bot_reply_max_entries
            ),
            feedback=SQLiteFeedbackLedger(database),
            retrieval=SQLiteRetrievalStore(database),
            routing=SQLiteRoutingState(database),
            deliveries=SQLiteDeliveryLedger(database),
            learned=SQLiteLearnedStore(database),
            turns=SQLiteTurnLog(database),
        )

    @classmethod
    def in_memory(cls, config: Config | None = None) -> Stores:
        """Fresh in-memory stores, owned by the returned object alone."""
        session = (config or Config()).session
        return cls(
            group_log=MemoryGroupLog(),
            sessions=MemorySessionStore(),
            summaries=MemorySummaryStore(),
            bot_replies=MemoryBotReplyContext(
                ttl_s=session.bot_reply_ttl_s, max_entries=session.bot_reply_max_entries
            ),
            feedback=MemoryFeedbackLedger(),
            learned=MemoryLearnedStore(),
        )

    def transaction(self, *, savepoints: bool = True) -> AbstractContextManager[object]:
        """Commit the writes made inside it together, when they go to one SQLite file.

        With the SQLite backend (the group log in :attr:`database`) this is one write
        transaction of this thread's connection: each store's write inside it is a part of it,
        and all are committed at the end, in one commit instead of one each
        (:meth:`promptweave.store.sqlite.SQLiteDatabase.transaction`). A part is a ``SAVEPOINT``,
        so a failing one takes back its own writes alone; with ``savepoints=False`` the parts
        join it as they are (cheaper), and a part that fails fails the whole, which the caller
        must then let go out of it. With the other backends it does nothing and every write is
        committed on its own (:attr:`commits_together` says which).

        :raises StoreUnavailableError: the SQLite file could not be written or committed.
        """
        database = self.database
        if database is None or not self.commits_together:
            return contextlib.nullcontext()
        return database.transaction(store_errors=True, savepoints=savepoints)

    @property
    def commits_together(self) -> bool:
        """Whether :meth:`transaction` commits the writes made inside it together (the
        conversational stores are in :attr:`database`)."""
        database = self.database
        return database is not None and getattr(self.group_log, "database", None) is database

    def reading(self) -> AbstractContextManager[object]:
        """Make the reads of :attr:`database` inside it one read transaction of this thread's
        connection (:meth:`promptweave.store.sqlite.SQLiteDatabase.reading`): they see the file as
        of one moment and cost less. Without a SQLite database it does nothing."""
        if self.database is None:
            return contextlib.nullcontext()
        return self.database.reading()

    def close(self) -> None:
        """Write the turn log's queue, close this thread's SQLite connection, if any, and run
        the :attr:`closers`."""
        if self.turns is not None:
            self.turns.close()
        if self.database is not None:
            self.database.close()
        for close in self.closers:
            close()


def _redis_stores(config: Config) -> Stores:
    """The Redis stores of :mod:`promptweave.contrib.redis_store`, imported by name (``framework`` never
    imports ``contrib``); a missing ``redis`` client is a configuration error."""
    try:
        module = importlib.import_module(REDIS_STORE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "redis":
            raise
        raise ConfigError(
            config.source,
            [
                "backend 'redis' needs the redis client: pip install 'promptweave[redis]'"
                " @ $.store.backend"
            ],
        ) from exc
    stores: Stores = module.redis_stores(config)
    return stores
