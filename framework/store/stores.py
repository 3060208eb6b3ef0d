"""The stores a runtime uses, built from ``[store]`` in ``promptweave.toml``."""

from __future__ import annotations

import attrs

from framework.config import Config
from framework.store.retrieval import RetrievalStore, TopicSummarySource
from framework.store.retrieval_memory import InMemoryRetrievalStore
from framework.store.retrieval_sqlite import SQLiteRetrievalStore
from framework.store.routing_state import MemoryRoutingState, RoutingState
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.sqlite import SQLiteDatabase

__all__ = ["Stores"]


@attrs.define
class Stores:
    """The runtime's stores.

    :param database: the SQLite database, or ``None`` with the in-memory backend.
    :param retrieval: memories, knowledge, relationship notes, person facts, expression pairs,
        rhythm baselines and behavior strategies (``docs/retrieval.md``).
    :param topic_summaries: where old topics (section ``mid_term``) come from; by default the
        retrieval store's ``topic_summaries`` table. Plug a session store in here to recall the
        summaries it writes.
    :param routing: per-group routing state (cooldowns, quote candidates, last phrase…).
    """

    database: SQLiteDatabase | None = None
    retrieval: RetrievalStore = attrs.field(factory=InMemoryRetrievalStore)
    topic_summaries: TopicSummarySource = attrs.field(
        default=attrs.Factory(lambda self: self.retrieval, takes_self=True)
    )
    routing: RoutingState = attrs.field(factory=MemoryRoutingState)

    @classmethod
    def from_config(cls, config: Config) -> Stores:
        """Open the configured backend (SQLite files are created and migrated on first write)."""
        if config.store.backend == "memory":
            return cls(database=None)
        database = SQLiteDatabase(config.resolve_path(config.store.path))
        return cls(
            database=database,
            retrieval=SQLiteRetrievalStore(database),
            routing=SQLiteRoutingState(database),
        )
