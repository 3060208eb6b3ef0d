"""What only one retrieval store does: the SQLite store's full-text index, its schema and its
file; and what the records refuse.

What every retrieval store does is the store contract, ``tests/store_contract.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from promptweave.store import retrieval_sqlite
from promptweave.store.retrieval import MemoryRecord, RelationshipRecord, RetrievalBatch
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.text.scoring import query_terms


def memory(text: str, kind: str = "group_memory", **fields: object) -> MemoryRecord:
    return MemoryRecord(bot_id="b1", group_id="g1", kind=kind, text=text, **fields)


def test_sqlite_hits_carry_their_bm25(tmp_path: Path) -> None:
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "store.sqlite3"))
    store.write(RetrievalBatch(memories=(memory("桌游局在周六"), memory("猫"))))
    (hit,) = store.search_memories("b1", "g1", query_terms("周六桌游局"), limit=5)
    assert hit.bm25 is not None


def test_in_memory_hits_have_no_bm25() -> None:
    store = InMemoryRetrievalStore()
    store.write(RetrievalBatch(memories=(memory("桌游局在周六"), memory("猫"))))
    (hit,) = store.search_memories("b1", "g1", query_terms("周六桌游局"), limit=5)
    assert hit.bm25 is None


def test_a_missing_sqlite_file_reads_as_empty_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite3"
    store = SQLiteRetrievalStore(SQLiteDatabase(path))
    assert store.search_memories("b", "g", ["桌游"], limit=3) == []
    assert store.relationship("b", "g", "u") is None
    assert not path.exists()


def test_the_retrieval_schema_is_a_versioned_component(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "s.sqlite3")
    SQLiteRetrievalStore(database).write(RetrievalBatch())
    assert database.schema_version("retrieval") == len(retrieval_sqlite.MIGRATIONS)


def test_records_refuse_blank_text_and_naive_times() -> None:
    with pytest.raises(ValueError, match="text must not be empty"):
        memory("  ")
    with pytest.raises(ValueError, match="no UTC offset"):
        memory("x", created_at=dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        RelationshipRecord(bot_id="b", group_id="g", user_id="u", affinity=1.5)


def test_sqlite_search_matches_on_the_rarest_query_terms(tmp_path: Path) -> None:
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    common = "周六晚上一起去公园散步看花喝茶聊天拍照"
    store.write(
        RetrievalBatch(
            memories=(
                *(memory(f"{common}（{i}）") for i in range(30)),
                memory("格子桌游吧要提前订位"),
            )
        )
    )
    terms = query_terms(common + "，格子桌游吧")
    assert len(terms) > retrieval_sqlite.MAX_MATCH_TERMS
    found = store._match_terms(retrieval_sqlite._MEMORIES, terms)
    assert len(found) == retrieval_sqlite.MAX_MATCH_TERMS
    assert {"格子", "子桌", "桌游", "游吧"} <= set(found)  # in one document each: the rarest
    texts = [hit.record.text for hit in store.search_memories("b1", "g1", terms, limit=40)]
    assert "格子桌游吧要提前订位" in texts
