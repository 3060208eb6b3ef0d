"""The store contract (``tests/store_contract.py``) on the in-memory, SQLite and Redis backends.

The Redis runs need ``$PROMPTWEAVE_TEST_REDIS_URL`` (see ``tests/conftest.py``). Retrieval data
has two implementations (in memory and SQLite; the Redis backend keeps it in SQLite), and only the
SQLite and Redis backends are shared by several processes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from base_support import redis_config, sqlite_config
from store_contract import (
    StoreBackend,
    StoreClasses,
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

from promptweave import Config, Stores
from promptweave.store.deliveries import MemoryDeliveryLedger
from promptweave.store.deliveries_sqlite import SQLiteDeliveryLedger
from promptweave.store.retrieval import RetrievalStore
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.routing_state import MemoryRoutingState
from promptweave.store.routing_state_sqlite import SQLiteRoutingState
from promptweave.store.sessions_memory import (
    MemoryBotReplyContext,
    MemoryFeedbackLedger,
    MemoryGroupLog,
    MemorySessionStore,
    MemorySummaryStore,
)
from promptweave.store.sessions_sqlite import (
    SESSION_MIGRATIONS,
    SQLiteBotReplyContext,
    SQLiteFeedbackLedger,
    SQLiteGroupLog,
    SQLiteSessionStore,
    SQLiteSummaryStore,
)
from promptweave.store.sqlite import SQLiteDatabase

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


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    if request.param == "memory":
        yield StoreClasses(
            group_log=MemoryGroupLog,
            sessions=MemorySessionStore,
            summaries=MemorySummaryStore,
            bot_replies=MemoryBotReplyContext,
            feedback=MemoryFeedbackLedger,
            routing=MemoryRoutingState,
            deliveries=MemoryDeliveryLedger,
        )
    elif request.param == "redis":
        from promptweave.contrib import redis_store

        yield StoreClasses(
            args=(request.getfixturevalue("redis_namespace"),),
            group_log=redis_store.RedisGroupLog,
            sessions=redis_store.RedisSessionStore,
            summaries=redis_store.RedisSummaryStore,
            bot_replies=redis_store.RedisBotReplyContext,
            feedback=redis_store.RedisFeedbackLedger,
            routing=redis_store.RedisRoutingState,
            deliveries=redis_store.RedisDeliveryLedger,
        )
    else:
        database = SQLiteDatabase(tmp_path / "store.sqlite3")
        database.migrate(SESSION_MIGRATIONS)
        yield StoreClasses(
            args=(database,),
            group_log=SQLiteGroupLog,
            sessions=SQLiteSessionStore,
            summaries=SQLiteSummaryStore,
            bot_replies=SQLiteBotReplyContext,
            feedback=SQLiteFeedbackLedger,
            routing=SQLiteRoutingState,
            deliveries=SQLiteDeliveryLedger,
        )
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
