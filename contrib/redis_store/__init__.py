"""The conversational and routing state in Redis, for deployments that outgrow one process.

Selected with ``[store] backend = "redis"`` (``docs/store.md``); needs the ``redis`` client
(``pip install 'promptweave[redis]'``). :meth:`promptweave.Stores.from_config` imports this module by
name, so ``framework`` itself never imports Redis.

The group log, sessions, summary archive, bot-reply context, feedback ledger, delivery ledger,
routing state and learned store (items, learner cursors and leases, delivered injections) live in
Redis, under keys scoped by bot and group with a Cluster hash tag (``promptweave:{10001:20001}:
log``), so several bot processes share them and a cluster can shard them. Each store behaves like
its in-memory counterpart (the store contract, ``tests/store_contract.py``, runs on it); a
check-then-write is atomic across processes: a Lua script for duplicate ids and the windows of the
large sorted sets, an optimistic transaction (:meth:`RedisNamespace.transaction`) where a rule of
``promptweave.store`` decides (deliveries, the compaction claim, kept messages, quote candidates).
Retrieval data (memories, knowledge…) stays in the SQLite file
at ``[store] path``, which ``promptweave import`` fills and every process reads.

A ``redis.RedisError`` surfaces as :class:`promptweave.StoreUnavailableError`, so a Redis that
goes away degrades turns exactly like a failing SQLite file.
"""

from __future__ import annotations

import logging

import redis

from promptweave.config import Config
from promptweave.contrib.redis_store._namespace import DEFAULT_PREFIX, RedisNamespace
from promptweave.contrib.redis_store.archive import RedisSummaryStore
from promptweave.contrib.redis_store.deliveries import RedisDeliveryLedger
from promptweave.contrib.redis_store.learned import RedisLearnedStore
from promptweave.contrib.redis_store.replies import RedisBotReplyContext, RedisFeedbackLedger
from promptweave.contrib.redis_store.routing import RedisRoutingState
from promptweave.contrib.redis_store.sessions import RedisGroupLog, RedisSessionStore
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.stores import Stores

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_PREFIX",
    "SOCKET_TIMEOUT_S",
    "RedisBotReplyContext",
    "RedisDeliveryLedger",
    "RedisFeedbackLedger",
    "RedisGroupLog",
    "RedisLearnedStore",
    "RedisNamespace",
    "RedisRoutingState",
    "RedisSessionStore",
    "RedisSummaryStore",
    "connect",
    "redis_stores",
]

log = logging.getLogger("promptweave.store")

#: Seconds to wait for a connection; a Redis that does not answer must not stall a turn for long.
CONNECT_TIMEOUT_S = 2.0
#: Seconds to wait for a reply.
SOCKET_TIMEOUT_S = 5.0


def connect(url: str) -> redis.Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``) with decoded replies.

    The timeouts default to :data:`CONNECT_TIMEOUT_S` and :data:`SOCKET_TIMEOUT_S`; the URL's
    query string overrides them (``redis://host:6379/0?socket_timeout=1``).
    """
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )


def redis_stores(config: Config, namespace: RedisNamespace | None = None) -> Stores:
    """The stores of ``[store] backend = "redis"``.

    The server is asked once (``PING``), as the SQLite backend opens its file: when it does not
    answer, the result has no conversational stores and says why in ``unavailable``, the routing
    state is kept in this process, and turns degrade. Later failures degrade turn by turn and stop
    when the server is back.

    :param namespace: the client and key prefix; by default from ``[store] url`` and ``prefix``
        (a client made here is closed by :meth:`promptweave.Stores.close`, one passed in is not).
    """
    owned = namespace is None
    if namespace is None:
        namespace = RedisNamespace(connect(config.store.url), config.store.prefix)
    database = SQLiteDatabase(
        config.resolve_path(config.store.path), synchronous=config.store.synchronous
    )
    retrieval = SQLiteRetrievalStore(database)
    client = namespace.client
    try:
        client.ping()
    except redis.RedisError as exc:
        log.warning("conversational store unavailable, degrading: %s", exc)
        if owned:
            client.close()
        return Stores(
            database=database,
            retrieval=retrieval,
            unavailable=f"store_unavailable: Redis store {namespace.where}: {exc}",
        )
    session = config.session
    return Stores(
        database=database,
        group_log=RedisGroupLog(namespace),
        sessions=RedisSessionStore(namespace),
        summaries=RedisSummaryStore(namespace),
        bot_replies=RedisBotReplyContext(
            namespace, ttl_s=session.bot_reply_ttl_s, max_entries=session.bot_reply_max_entries
        ),
        feedback=RedisFeedbackLedger(namespace),
        retrieval=retrieval,
        routing=RedisRoutingState(namespace),
        deliveries=RedisDeliveryLedger(namespace),
        learned=RedisLearnedStore(namespace),
        closers=(client.close,) if owned else (),
    )
