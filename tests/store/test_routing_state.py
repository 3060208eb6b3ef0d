"""How the runtime builds the routing state of each backend.

What every routing state does, on every backend, is the store contract, ``tests/store_contract.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from promptweave import Config
from promptweave.config import StoreConfig
from promptweave.store.routing_state import MemoryRoutingState, QuoteCandidate
from promptweave.store.routing_state_sqlite import ROUTING_MIGRATIONS, SQLiteRoutingState
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.stores import Stores


def test_stores_build_the_routing_state_of_the_configured_backend(tmp_path: Path) -> None:
    assert isinstance(
        Stores.from_config(Config(store=StoreConfig(backend="memory"))).routing, MemoryRoutingState
    )
    sqlite = Stores.from_config(Config(store=StoreConfig(path="r.sqlite3"), base_dir=tmp_path))
    assert isinstance(sqlite.routing, SQLiteRoutingState)
    # Created when the stores open the file, not inside the first message's transaction.
    assert sqlite.database is not None and sqlite.database.schema_version("routing") == 4
    fresh = SQLiteDatabase(tmp_path / "fresh.sqlite3")
    standalone = SQLiteRoutingState(fresh)
    tables = "SELECT name FROM sqlite_master WHERE name = 'routing_groups'"
    assert fresh.connection().execute(tables).fetchone() is None
    standalone.note_phrase("b", "g", "嗯")  # on its own, the tables appear on first use
    assert fresh.schema_version("routing") == 4


def test_version_1_quote_candidates_keep_their_rows_through_every_migration(
    tmp_path: Path,
) -> None:
    database = SQLiteDatabase(tmp_path / "r.sqlite3")
    database.migrate(ROUTING_MIGRATIONS[:1])
    state = SQLiteRoutingState(database)
    state._migrated = True  # the version 1 tables, as an older release left them
    at = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    candidates = [
        QuoteCandidate(
            message_id=f"m{n}", sender_id="3", text=f"第{n}条", time=at + dt.timedelta(seconds=n)
        )
        for n in range(4)
    ]
    kept = state.record_candidates("b", "g", candidates, 3)
    select = (
        "SELECT seq, bot_id, group_id, message_id, sender_id, text, time FROM routing_candidates"
        " ORDER BY seq"
    )
    before = [tuple(row) for row in database.connection().execute(select)]
    assert database.migrate(ROUTING_MIGRATIONS) == [("routing", 2), ("routing", 3), ("routing", 4)]
    assert [tuple(row) for row in database.connection().execute(select)] == before
    table = (
        database.connection()
        .execute("SELECT sql FROM sqlite_master WHERE name = 'routing_candidates'")
        .fetchone()[0]
    )
    assert "AUTOINCREMENT" not in table and "WITHOUT ROWID" in table
    fresh = SQLiteRoutingState(database)
    assert fresh.candidates("b", "g") == kept
    later = QuoteCandidate(message_id="m9", sender_id="3", text="新", time=at + dt.timedelta(1))
    assert fresh.record_candidates("b", "g", [later], 3) == (*kept[1:], later)
    seqs = [row[0] for row in database.connection().execute("SELECT seq FROM routing_candidates")]
    assert seqs == [before[1][0], before[2][0], before[-1][0] + 1]


def test_a_groups_candidates_are_read_in_seq_order_through_the_primary_key(
    tmp_path: Path,
) -> None:
    database = SQLiteDatabase(tmp_path / "r.sqlite3")
    database.migrate(ROUTING_MIGRATIONS)
    plan = (
        database.connection()
        .execute(
            "EXPLAIN QUERY PLAN SELECT seq, message_id, sender_id, text, time FROM routing_candidates"
            " WHERE bot_id = ? AND group_id = ? ORDER BY seq",
            ("b", "g"),
        )
        .fetchall()
    )
    details = " ".join(row["detail"] for row in plan)
    assert "USING PRIMARY KEY (bot_id=? AND group_id=?)" in details
    assert "TEMP B-TREE" not in details  # no sort: the rows are kept in that order
    # Ids that sort otherwise than their rows were written: the order is still seq's.
    at = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    found = [
        QuoteCandidate(message_id=name, sender_id="3", text=name, time=at + dt.timedelta(seconds=n))
        for n, name in enumerate(["m9", "m10", "a", "z"])
    ]
    kept = SQLiteRoutingState(database).record_candidates("b", "g", found, 10)
    assert [c.message_id for c in kept] == ["m9", "m10", "a", "z"]
    assert [c.message_id for c in SQLiteRoutingState(database).candidates("b", "g")] == [
        "m9",
        "m10",
        "a",
        "z",
    ]
