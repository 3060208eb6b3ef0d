"""The SQLite search costs the same whatever the size of the store: the scope is a range of row ids
in the index, the match leaves out common terms beyond ``RANKED_MATCHES`` texts, and FTS5 ranks
at most the newest ``RANKED_MATCHES`` matches of the scope. Databases of schema version 1 move to
the scoped row ids and search as before."""

from __future__ import annotations

import random
import sqlite3

import pytest
from retrieval_expected import SCOPES, expected, random_batch, version_1_case

from promptweave.store import retrieval_sqlite
from promptweave.store.retrieval import KnowledgeDocument, MemoryRecord, RetrievalBatch
from promptweave.store.retrieval_schema import SCOPE_ROWS
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.text.scoring import query_terms


def memory(text, group="g1", bot="b1"):
    return MemoryRecord(bot_id=bot, group_id=group, kind="group_memory", text=text)


@pytest.fixture
def store(tmp_path):
    return SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))


def ids(store, group):
    return [
        row[0]
        for row in store.database.connection().execute(
            "SELECT id FROM memories WHERE group_id = ? ORDER BY id", (group,)
        )
    ]


def test_each_scope_holds_a_range_of_row_ids_in_the_order_written(store):
    store.write(RetrievalBatch(memories=(memory("一", "g1"), memory("二", "g2"), memory("三"))))
    store.write(RetrievalBatch(memories=(memory("四", "g2"), memory("五", "g1"))))
    for group in ("g1", "g2"):
        found = ids(store, group)
        assert len({row_id // SCOPE_ROWS for row_id in found}) == 1
        assert found == sorted(found)
    texts = [
        row[0]
        for row in store.database.connection().execute(
            "SELECT text FROM memories WHERE group_id = 'g1' ORDER BY id"
        )
    ]
    assert texts == ["一", "三", "五"]
    assert ids(store, "g1")[0] // SCOPE_ROWS != ids(store, "g2")[0] // SCOPE_ROWS


def test_the_match_leaves_out_the_most_common_terms_until_the_rest_fit(store, monkeypatch):
    monkeypatch.setattr(retrieval_sqlite, "RANKED_MATCHES", 10)
    store.write(
        RetrievalBatch(
            memories=(
                *(memory(f"桌游{i}号") for i in range(8)),
                *(memory(f"地铁{i}号") for i in range(5)),
                memory("米线店"),
            )
        )
    )
    terms = query_terms("桌游地铁米线")
    match = store._match_terms(retrieval_sqlite._MEMORIES, terms)
    assert set(match) == {"米线", "地铁"}  # 桌游 (in 8 texts) would make 14 > 10
    hits = store.search_memories("b1", "g1", terms, limit=20)
    assert {hit.record.text for hit in hits} == {"米线店", *(f"地铁{i}号" for i in range(5))}


def test_a_word_counts_as_common_as_the_texts_holding_it(store, monkeypatch):
    monkeypatch.setattr(retrieval_sqlite, "RANKED_MATCHES", 10)
    store.write(
        RetrievalBatch(
            memories=tuple(memory(f"steam {'游戏' if i < 3 else '其他'}{i}") for i in range(12))
        )
    )
    assert store._match_terms(retrieval_sqlite._MEMORIES, query_terms("steam 米线")) == ["steam"]
    assert store._match_terms(retrieval_sqlite._MEMORIES, query_terms("steam 游戏")) == ["游戏"]


def test_terms_in_fewer_texts_than_the_limit_all_stay_in_the_match(store):
    store.write(RetrievalBatch(memories=(*(memory(f"桌游号{i}") for i in range(30)),)))
    assert store._match_terms(retrieval_sqlite._MEMORIES, query_terms("桌游号")) == ["桌游", "游号"]


def test_a_term_too_common_alone_ranks_only_the_newest_matches_of_the_scope(store, monkeypatch):
    monkeypatch.setattr(retrieval_sqlite, "RANKED_MATCHES", 5)
    store.write(RetrievalBatch(memories=tuple(memory(f"桌游{i:02d}") for i in range(12))))
    # Later matches in other scopes take nothing from this scope's newest five.
    store.write(
        RetrievalBatch(memories=tuple(memory(f"桌游{i:02d}", group="g2") for i in range(20)))
    )
    hits = store.search_memories("b1", "g1", query_terms("桌游"), limit=20)
    assert sorted(hit.record.text for hit in hits) == [f"桌游{i:02d}" for i in range(7, 12)]


def test_knowledge_is_bounded_the_same_way(store, monkeypatch):
    monkeypatch.setattr(retrieval_sqlite, "RANKED_MATCHES", 3)
    store.write(
        RetrievalBatch(
            knowledge=tuple(
                KnowledgeDocument(bot_id="b1", group_id="g1", source=f"d{i}", text=f"报名流程{i}")
                for i in range(6)
            )
        )
    )
    hits = store.search_knowledge("b1", "g1", query_terms("报名"), limit=10)
    assert sorted(hit.record.source for hit in hits) == ["d3", "d4", "d5"]


def test_a_version_1_database_moves_to_scoped_row_ids_and_searches_as_before(tmp_path):
    # What the store finds after the move is recorded, and was, when recorded, what the earlier
    # code found searching the same database before the move.
    found = version_1_case(tmp_path)
    assert found == expected()["version_1_searches"]
    assert sum(int(row.split()[0]) + int(row.split()[1]) for row in found["found"]) > 300
    path = tmp_path / "version-1.sqlite3"
    store = SQLiteRetrievalStore(SQLiteDatabase(path))
    connection = sqlite3.connect(path)
    for table in ("memories", "knowledge_chunks"):
        scopes = connection.execute(
            f"SELECT COUNT(DISTINCT bot_id || '/' || group_id), COUNT(DISTINCT id / {SCOPE_ROWS}),"
            f" MIN(id) >= {SCOPE_ROWS} FROM {table}"
        ).fetchone()
        assert scopes[0] == scopes[1] and scopes[2] == 1
    for index in ("memories_fts", "knowledge_fts"):
        connection.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
    connection.commit()
    kept = dict(connection.execute("SELECT term, docs FROM memory_terms"))
    assert kept == _vocabulary_counts(connection, "memories_vocab", "memories", "terms")
    # New rows join their scope after the old ones.
    bot, group = SCOPES[0]
    store.write(RetrievalBatch(memories=(memory("新的一条", group=group, bot=bot),)))
    (newest,) = connection.execute(
        "SELECT text FROM memories WHERE bot_id = ? AND group_id = ? ORDER BY id DESC LIMIT 1",
        (bot, group),
    ).fetchone()
    assert newest == "新的一条"


def _vocabulary_counts(connection, vocabulary, table, indexed):
    """Each term's document count the slow way: bigrams from ``fts5vocab``, words by reading
    every row."""
    counts = {
        term: docs
        for term, docs in connection.execute(f"SELECT term, doc FROM {vocabulary}")
        if term.endswith("#") and len(term) == 3
    }
    for (text,) in connection.execute(f"SELECT {indexed} FROM {table}"):
        for token in set(text.split()):
            if token.isascii():
                counts[token] = counts.get(token, 0) + 1
    return counts


def test_the_kept_document_counts_are_those_of_the_index_after_any_writes(tmp_path):
    rng = random.Random(21)
    path = tmp_path / "s.sqlite3"
    store = SQLiteRetrievalStore(SQLiteDatabase(path))
    store.write(random_batch(rng))
    store.write(random_batch(rng))  # same natural keys replaced, documents rewritten
    with sqlite3.connect(path) as connection:  # and plain SQL, bypassing the store
        connection.execute("DELETE FROM memories WHERE id % 3 = 0")
        connection.execute("UPDATE memories SET terms = ' 桌游# ok ' WHERE id % 3 = 1")
        connection.execute("DELETE FROM knowledge_chunks WHERE chunk_index = 0")
    connection = sqlite3.connect(path)
    for counts, vocabulary, table, indexed in (
        ("memory_terms", "memories_vocab", "memories", "terms"),
        ("knowledge_terms", "knowledge_vocab", "knowledge_chunks", "title_terms || ' ' || terms"),
    ):
        kept = dict(connection.execute(f"SELECT term, docs FROM {counts} WHERE docs > 0"))
        assert kept == _vocabulary_counts(connection, vocabulary, table, indexed)
        assert len(kept) > 50
