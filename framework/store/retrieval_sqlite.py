"""The SQLite retrieval store: component ``retrieval`` of the shared database.

Memories and knowledge chunks are indexed in FTS5 tables with the ``trigram`` tokenizer, over
their terms (``framework.retrieval.scoring.index_text``), kept in sync by triggers. A search asks
FTS5 for the best candidates by ``bm25`` within the scope (matching the query's rarest terms, by
the ``fts5vocab`` document counts), then scores them
(:func:`framework.retrieval.scoring.score_text`). Until something is written, a store whose file
does not exist reads as empty and creates nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs

from framework.items import LearningType, MemoryKind
from framework.retrieval.chunking import chunk_document
from framework.retrieval.scoring import (
    MAX_MATCH_TERMS,
    fts_query,
    index_text,
    index_token,
    score_text,
    text_terms,
)
from framework.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeChunk,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RhythmRecord,
    Scored,
)
from framework.store.retrieval_schema import MIGRATIONS
from framework.store.sqlite import SQLiteDatabase

__all__ = ["MIGRATIONS", "SQLiteRetrievalStore"]

T = TypeVar("T")

#: FTS5 hands the scorer this many candidates per wanted hit (at least 50).
CANDIDATES_PER_HIT = 8


def _when(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def _parse_when(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


def _rank(
    rows: Sequence[tuple[T, str, float]], terms: Sequence[str], limit: int
) -> list[Scored[T]]:
    """Score FTS5 candidates ``(record, indexed text, bm25)`` and keep the best ``limit``."""
    scored = []
    for record, text, bm25 in rows:
        score, matched = score_text(terms, text_terms(text))
        if matched:
            scored.append(Scored(record=record, score=score, matched=matched, bm25=round(-bm25, 4)))
    scored.sort(key=lambda hit: (-hit.score, -hit.matched, -(hit.bm25 or 0.0)))
    return scored[:limit]


@attrs.define
class SQLiteRetrievalStore:
    """Retrieval data in the shared SQLite database (see :class:`framework.RetrievalStore`)."""

    database: SQLiteDatabase
    _ready: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def _open(self, *, create: bool) -> sqlite3.Connection | None:
        """The connection, migrated; ``None`` when reading a database that does not exist."""
        if not self._ready:
            if not create and not self.database.path.exists():
                return None
            with self._lock:
                if not self._ready:
                    self.database.migrate(MIGRATIONS)
                    self._ready = True
        return self.database.connection()

    def _match_terms(self, vocabulary: str, terms: Sequence[str]) -> list[str]:
        """The rarest :data:`MAX_MATCH_TERMS` terms the index holds (words, whose frequency the
        trigram vocabulary cannot tell, count as rare)."""
        bigrams = [term for term in terms if not term.isascii()]
        marks = ", ".join("?" * len(bigrams))
        frequency = {
            row["term"][:-1]: row["doc"]
            for row in self._rows(
                f"SELECT term, doc FROM {vocabulary} WHERE term IN ({marks})",
                [index_token(term) for term in bigrams],
            )
        }
        words = [term for term in terms if term.isascii()]
        rare = sorted((term for term in bigrams if term in frequency), key=frequency.__getitem__)
        return [*words, *rare][:MAX_MATCH_TERMS]

    def _rows(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        connection = self._open(create=False)
        if connection is None:
            return []
        return connection.execute(sql, params).fetchall()

    # -- writing ----------------------------------------------------------------------------

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        self._open(create=True)
        with self.database.transaction() as db:
            db.executemany(
                "INSERT INTO memories"
                " (bot_id, group_id, kind, text, terms, source, external_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (bot_id, group_id, kind, text) DO UPDATE SET"
                " source = excluded.source, external_id = excluded.external_id,"
                " created_at = excluded.created_at",
                [
                    (m.bot_id, m.group_id, m.kind.value, m.text, index_text(m.text), m.source,
                     m.id, _when(m.created_at))
                    for m in batch.memories
                ],
            )  # fmt: skip
            for document in batch.knowledge:
                db.execute(
                    "DELETE FROM knowledge_chunks WHERE bot_id = ? AND group_id = ? AND source = ?",
                    (document.bot_id, document.group_id, document.source),
                )
                db.executemany(
                    "INSERT INTO knowledge_chunks (bot_id, group_id, source, chunk_index, title,"
                    " text, title_terms, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (c.bot_id, c.group_id, c.source, c.index, c.title, c.text,
                         index_text(c.title), index_text(c.text))
                        for c in chunk_document(document)
                    ],
                )  # fmt: skip
            db.executemany(
                "INSERT OR REPLACE INTO relationship_notes VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (n.bot_id, n.group_id, n.user_id, json.dumps(n.facts, ensure_ascii=False),
                     json.dumps(n.guidance, ensure_ascii=False), n.affinity)
                    for n in batch.relationships
                ],
            )  # fmt: skip
            db.executemany(
                "INSERT OR IGNORE INTO person_facts (bot_id, group_id, user_id, text)"
                " VALUES (?, ?, ?, ?)",
                [(f.bot_id, f.group_id, f.user_id, f.text) for f in batch.person_facts],
            )
            db.executemany(
                "INSERT OR IGNORE INTO expression_pairs (bot_id, group_id, trigger, reply)"
                " VALUES (?, ?, ?, ?)",
                [(p.bot_id, p.group_id, p.trigger, p.reply) for p in batch.expression_pairs],
            )
            db.executemany(
                "INSERT OR REPLACE INTO rhythm_baselines VALUES (?, ?, ?, ?)",
                [
                    (r.bot_id, r.group_id, r.single_bubble_share, r.median_segment_chars)
                    for r in batch.rhythms
                ],
            )
            db.executemany(
                "INSERT INTO behavior_strategies (bot_id, group_id, learning_type, scene, action,"
                " outcome, support) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (bot_id, group_id, learning_type, scene, action) DO UPDATE SET"
                " outcome = excluded.outcome, support = excluded.support",
                [
                    (s.bot_id, s.group_id, s.learning_type.value, s.scene, s.action, s.outcome,
                     s.support)
                    for s in batch.strategies
                ],
            )  # fmt: skip
            db.executemany(
                "INSERT INTO topic_summaries (bot_id, group_id, user_id, text, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (bot_id, group_id, user_id, text)"
                " DO UPDATE SET created_at = excluded.created_at",
                [
                    (s.bot_id, s.group_id, s.user_id, s.text, _when(s.created_at))
                    for s in batch.summaries
                ],
            )
        return batch.counts()

    # -- searching --------------------------------------------------------------------------

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        match = self._match_terms("memories_vocab", terms)
        if not match:
            return []
        rows = self._rows(
            "SELECT m.kind, m.text, m.terms, m.source, m.external_id, m.created_at,"
            " bm25(memories_fts) AS rank"
            " FROM memories_fts JOIN memories AS m ON m.id = memories_fts.rowid"
            " WHERE memories_fts MATCH ? AND m.bot_id = ? AND m.group_id = ?"
            " ORDER BY rank LIMIT ?",
            (fts_query(match), bot_id, group_id, max(50, limit * CANDIDATES_PER_HIT)),
        )
        candidates = [
            (
                MemoryRecord(
                    bot_id=bot_id,
                    group_id=group_id,
                    kind=MemoryKind(row["kind"]),
                    text=row["text"],
                    source=row["source"],
                    id=row["external_id"],
                    created_at=_parse_when(row["created_at"]),
                ),
                row["terms"],
                row["rank"],
            )
            for row in rows
        ]
        return _rank(candidates, terms, limit)

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        match = self._match_terms("knowledge_vocab", terms)
        if not match:
            return []
        # A term in the title weighs twice a term in the text.
        rows = self._rows(
            "SELECT k.source, k.chunk_index, k.title, k.text, k.title_terms, k.terms,"
            " bm25(knowledge_fts, 2.0, 1.0) AS rank"
            " FROM knowledge_fts JOIN knowledge_chunks AS k ON k.id = knowledge_fts.rowid"
            " WHERE knowledge_fts MATCH ? AND k.bot_id = ? AND k.group_id = ?"
            " ORDER BY rank LIMIT ?",
            (fts_query(match), bot_id, group_id, max(50, limit * CANDIDATES_PER_HIT)),
        )
        candidates = [
            (
                KnowledgeChunk(
                    bot_id=bot_id,
                    group_id=group_id,
                    source=row["source"],
                    title=row["title"],
                    text=row["text"],
                    index=row["chunk_index"],
                ),
                f"{row['title_terms']} {row['terms']}",
                row["rank"],
            )
            for row in rows
        ]
        return _rank(candidates, terms, limit)

    # -- reading by scope -------------------------------------------------------------------

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        rows = self._rows(
            "SELECT facts, guidance, affinity FROM relationship_notes"
            " WHERE bot_id = ? AND group_id = ? AND user_id = ?",
            (bot_id, group_id, user_id),
        )
        if not rows:
            return None
        return RelationshipRecord(
            bot_id=bot_id,
            group_id=group_id,
            user_id=user_id,
            facts=tuple(json.loads(rows[0]["facts"])),
            guidance=tuple(json.loads(rows[0]["guidance"])),
            affinity=rows[0]["affinity"],
        )

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        rows = self._rows(
            "SELECT text FROM person_facts WHERE bot_id = ? AND group_id = ? AND user_id = ?"
            " ORDER BY id LIMIT ?",
            (bot_id, group_id, user_id, limit),
        )
        return [
            PersonFactRecord(bot_id=bot_id, group_id=group_id, user_id=user_id, text=row["text"])
            for row in rows
        ]

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        rows = self._rows(
            "SELECT trigger, reply FROM expression_pairs WHERE bot_id = ? AND group_id = ?"
            " ORDER BY id DESC LIMIT ?",
            (bot_id, group_id, limit),
        )
        return [
            ExpressionPairRecord(
                bot_id=bot_id, group_id=group_id, trigger=row["trigger"], reply=row["reply"]
            )
            for row in rows
        ]

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        rows = self._rows(
            "SELECT single_bubble_share, median_segment_chars FROM rhythm_baselines"
            " WHERE bot_id = ? AND group_id = ?",
            (bot_id, group_id),
        )
        if not rows:
            return None
        return RhythmRecord(
            bot_id=bot_id,
            group_id=group_id,
            single_bubble_share=rows[0]["single_bubble_share"],
            median_segment_chars=rows[0]["median_segment_chars"],
        )

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        rows = self._rows(
            "SELECT learning_type, scene, action, outcome, support FROM behavior_strategies"
            " WHERE bot_id = ? AND group_id = ? ORDER BY support DESC, id DESC LIMIT ?",
            (bot_id, group_id, limit),
        )
        return [
            BehaviorRecord(
                bot_id=bot_id,
                group_id=group_id,
                scene=row["scene"],
                action=row["action"],
                outcome=row["outcome"],
                learning_type=LearningType(row["learning_type"]),
                support=row["support"],
            )
            for row in rows
        ]

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> list[str]:
        rows = self._rows(
            "SELECT text FROM topic_summaries WHERE bot_id = ? AND group_id = ? AND user_id = ?"
            " ORDER BY created_at IS NULL, created_at DESC, id DESC LIMIT ?",
            (bot_id, group_id or "", user_id, limit),
        )
        return [row["text"] for row in rows]

    def counts(self) -> dict[str, int]:
        tables = {
            "memories": "memories",
            "knowledge_chunks": "knowledge_chunks",
            "relationships": "relationship_notes",
            "person_facts": "person_facts",
            "expression_pairs": "expression_pairs",
            "rhythms": "rhythm_baselines",
            "strategies": "behavior_strategies",
            "summaries": "topic_summaries",
        }
        found = {}
        for name, table in tables.items():
            rows = self._rows(f"SELECT COUNT(*) FROM {table}", ())
            found[name] = int(rows[0][0]) if rows else 0
        return found
