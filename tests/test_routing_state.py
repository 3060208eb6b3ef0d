"""How the runtime builds the routing state of each backend.

What every routing state does, on every backend, is the store contract, ``tests/store_contract.py``.
"""

from __future__ import annotations

from pathlib import Path

from framework import Config
from framework.config import StoreConfig
from framework.store.routing_state import MemoryRoutingState
from framework.store.routing_state_sqlite import SQLiteRoutingState
from framework.store.stores import Stores


def test_stores_build_the_routing_state_of_the_configured_backend(tmp_path: Path) -> None:
    assert isinstance(
        Stores.from_config(Config(store=StoreConfig(backend="memory"))).routing, MemoryRoutingState
    )
    sqlite = Stores.from_config(Config(store=StoreConfig(path="r.sqlite3"), base_dir=tmp_path))
    assert isinstance(sqlite.routing, SQLiteRoutingState)
    assert sqlite.database is not None and sqlite.database.schema_version("routing") == 0
    sqlite.routing.note_phrase("b", "g", "嗯")  # the routing tables appear on first use
    assert sqlite.database is not None and sqlite.database.schema_version("routing") == 1
