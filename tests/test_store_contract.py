"""The store contract (``tests/store_contract.py``) on the in-memory, SQLite and Redis backends.

The Redis runs need ``$PROMPTWEAVE_TEST_REDIS_URL`` (see ``tests/conftest.py``). Retrieval data
has two implementations (in memory and SQLite; the Redis backend keeps it in SQLite), and only the
SQLite and Redis backends are shared by several processes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from framework import Config, RetrievalStore, Stores
from framework.store.deliveries import DeliveryLedger, MemoryDeliveryLedger
from framework.store.deliveries_sqlite import SQLiteDeliveryLedger
from framework.store.retrieval_memory import InMemoryRetrievalStore
from framework.store.retrieval_sqlite import SQLiteRetrievalStore
from framework.store.routing_state import MemoryRoutingState, RoutingState
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.sessions import (
    BotReplyContext,
    FeedbackLedger,
    GroupLog,
    SessionStore,
    SummaryStore,
)
from framework.store.sessions_memory import (
    MemoryBotReplyContext,
    MemoryFeedbackLedger,
    MemoryGroupLog,
    MemorySessionStore,
    MemorySummaryStore,
)
from framework.store.sessions_sqlite import (
    SESSION_MIGRATIONS,
    SQLiteBotReplyContext,
    SQLiteFeedbackLedger,
    SQLiteGroupLog,
    SQLiteSessionStore,
    SQLiteSummaryStore,
)
from framework.store.sqlite import SQLiteDatabase
from tests.conftest import redis_config, sqlite_config
from tests.store_contract import (
    StoreBackend,
    TestBotReplyContext,
    TestDeliveryLedger,
    TestFeedbackLedger,
    TestGroupLog,
    TestRetrievalStore,
    TestRoutingState,
    TestSessionStore,
    TestSharedStorage,
    TestSummaryStore,
)

# Imported so that pytest collects them here, with the fixtures below.
__all__ = [
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


@attrs.frozen
class MemoryBackend:
    """The in-memory stores; each call builds a store of its own."""

    def group_log(self, **options: Any) -> GroupLog:
        return MemoryGroupLog(**options)

    def sessions(self) -> SessionStore:
        return MemorySessionStore()

    def summaries(self) -> SummaryStore:
        return MemorySummaryStore()

    def bot_replies(self, **options: Any) -> BotReplyContext:
        return MemoryBotReplyContext(**options)

    def feedback(self) -> FeedbackLedger:
        return MemoryFeedbackLedger()

    def routing(self) -> RoutingState:
        return MemoryRoutingState()

    def deliveries(self) -> DeliveryLedger:
        return MemoryDeliveryLedger()


@attrs.frozen
class SQLiteBackend:
    """The SQLite stores over one migrated database file."""

    database: SQLiteDatabase

    def group_log(self, **options: Any) -> GroupLog:
        return SQLiteGroupLog(self.database, **options)

    def sessions(self) -> SessionStore:
        return SQLiteSessionStore(self.database)

    def summaries(self) -> SummaryStore:
        return SQLiteSummaryStore(self.database)

    def bot_replies(self, **options: Any) -> BotReplyContext:
        return SQLiteBotReplyContext(self.database, **options)

    def feedback(self) -> FeedbackLedger:
        return SQLiteFeedbackLedger(self.database)

    def routing(self) -> RoutingState:
        return SQLiteRoutingState(self.database)

    def deliveries(self) -> DeliveryLedger:
        return SQLiteDeliveryLedger(self.database)


@attrs.frozen
class RedisBackend:
    """The Redis stores under the test's own key prefix."""

    namespace: Any

    def group_log(self, **options: Any) -> GroupLog:
        from contrib.redis_store import RedisGroupLog

        return RedisGroupLog(self.namespace, **options)

    def sessions(self) -> SessionStore:
        from contrib.redis_store import RedisSessionStore

        return RedisSessionStore(self.namespace)

    def summaries(self) -> SummaryStore:
        from contrib.redis_store import RedisSummaryStore

        return RedisSummaryStore(self.namespace)

    def bot_replies(self, **options: Any) -> BotReplyContext:
        from contrib.redis_store import RedisBotReplyContext

        return RedisBotReplyContext(self.namespace, **options)

    def feedback(self) -> FeedbackLedger:
        from contrib.redis_store import RedisFeedbackLedger

        return RedisFeedbackLedger(self.namespace)

    def routing(self) -> RoutingState:
        from contrib.redis_store import RedisRoutingState

        return RedisRoutingState(self.namespace)

    def deliveries(self) -> DeliveryLedger:
        from contrib.redis_store import RedisDeliveryLedger

        return RedisDeliveryLedger(self.namespace)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    if request.param == "memory":
        yield MemoryBackend()
    elif request.param == "redis":
        yield RedisBackend(request.getfixturevalue("redis_namespace"))
    else:
        database = SQLiteDatabase(tmp_path / "store.sqlite3")
        database.migrate(SESSION_MIGRATIONS)
        yield SQLiteBackend(database)
        database.close()


@pytest.fixture(params=["memory", "sqlite"])
def retrieval_store(request: pytest.FixtureRequest, tmp_path: Path) -> RetrievalStore:
    if request.param == "memory":
        return InMemoryRetrievalStore()
    return SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "store.sqlite3"))


@pytest.fixture(params=["sqlite", "redis"])
def shared_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Stores]:
    if request.param == "redis":
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        config: Config = redis_config(url, prefix)
    else:
        config = sqlite_config(tmp_path / "shared.sqlite3")
    return functools.partial(Stores.from_config, config)
