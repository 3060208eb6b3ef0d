"""The stores a runtime uses, built from ``[store]`` in ``promptweave.toml``."""

from __future__ import annotations

import attrs

from framework.config import Config
from framework.store.routing_state import MemoryRoutingState, RoutingState
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.sqlite import SQLiteDatabase

__all__ = ["Stores"]


@attrs.define
class Stores:
    """The runtime's stores.

    :param database: the SQLite database, or ``None`` with the in-memory backend.
    :param routing: per-group routing state (cooldowns, quote candidates, last phrase…).
    """

    database: SQLiteDatabase | None = None
    routing: RoutingState = attrs.field(factory=MemoryRoutingState)

    @classmethod
    def from_config(cls, config: Config) -> Stores:
        """Open (and migrate) the configured backend."""
        if config.store.backend == "memory":
            return cls(database=None)
        database = SQLiteDatabase(config.resolve_path(config.store.path))
        return cls(database=database, routing=SQLiteRoutingState(database))
