"""The SQLite retrieval store: component ``retrieval`` of the shared database.

Memories and knowledge chunks are indexed in FTS5 tables with the ``trigram`` tokenizer, over
their terms (``promptweave.text.scoring.index_text``), kept in sync by triggers. A search asks
FTS5 for the best candidates by ``bm25`` within the scope (a range of row ids, so FTS5 never looks
at another scope's rows), matching the query's rarest terms by their document counts (kept in
``memory_terms`` and ``knowledge_terms``), then scores only those candidates
(:func:`promptweave.text.scoring.score_text`). Its cost is bounded whatever the size of the
store: the match leaves out the most common of those terms until the rest occur in at most
:data:`RANKED_MATCHES` texts, and FTS5 ranks at most the newest :data:`RANKED_MATCHES` matches of
the scope.

What is read by scope (expression pairs, strategies, relationship notes, person facts, the rhythm
baseline, topic summaries) is cached per scope and handed out again while the scope's change
counter for that kind of data (``retrieval_versions``, kept by triggers) has not moved, so one
indexed read per call tells whether anything was written since, by this process or another.

Until something is written, a store whose file does not exist reads as empty and creates nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from promptweave.items import LearningType, MemoryKind
from promptweave.store.retrieval import (
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
from promptweave.store.retrieval_cache import ScopeCache
from promptweave.store.retrieval_chunks import chunk_document
from promptweave.store.retrieval_schema import MIGRATIONS, SCOPE_ROWS
from promptweave.store.row_counts import row_counts
from promptweave.store.sqlite import Connection, SQLiteDatabase
from promptweave.text.scoring import (
    MAX_MATCH_TERMS,
    fts_query,
    index_text,
    index_token,
    score_counts,
)

__all__ = ["MIGRATIONS", "SQLiteRetrievalStore"]

T = TypeVar("T")

#: FTS5 hands the scorer this many candidates per wanted hit (at least 50).
CANDIDATES_PER_HIT = 8
#: The most texts a search ranks by ``bm25``: the match terms are chosen so that at most this
#: many texts contain them (by the index's document counts), and of the scope's matches only the
#: newest this many are ranked.
RANKED_MATCHES = 300


def _when(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def _parse_when(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


def _score_indexed(tokens: frozenset[str], indexed: str) -> tuple[float, int]:
    """:func:`score_text` of a query against a text in its index form (:func:`index_text`),
    with the query's distinct terms given as index tokens without their spaces (``桌游#``,
    ``word``): the text's terms are exactly its tokens."""
    found = set(indexed.split())
    matched = len(found.intersection(tokens))
    if not matched:
        return 0.0, 0
    return score_counts(matched, len(tokens), len(found)), matched


@attrs.frozen
class _Search:
    """One full-text index: its FTS5 table, the document counts of its terms, its content table,
    the columns a search reads and the ``bm25`` call ranking it."""

    index: str
    counts: str
    table: str
    columns: str
    bm25: str


_MEMORIES = _Search(
    index="memories_fts",
    counts="memory_terms",
    table="memories",
    columns="t.kind, t.text, t.terms, t.source, t.external_id, t.created_at",
    bm25="bm25(memories_fts)",
)
_KNOWLEDGE = _Search(
    index="knowledge_fts",
    counts="knowledge_terms",
    table="knowledge_chunks",
    columns="t.source, t.chunk_index, t.title, t.text, t.title_terms, t.terms",
    # A term in the title weighs twice a term in the text.
    bm25="bm25(knowledge_fts, 2.0, 1.0)",
)


def _memory_terms(row: sqlite3.Row) -> str:
    return str(row["terms"])


def _chunk_terms(row: sqlite3.Row) -> str:
    return f"{row['title_terms']} {row['terms']}"


def _rank(
    rows: Iterable[sqlite3.Row], indexed: Callable[[sqlite3.Row], str], terms: Sequence[str]
) -> list[tuple[sqlite3.Row, float, int, float]]:
    """Score FTS5 candidates (best ``bm25`` first) against all the query's terms:
    ``(row, score, matched, bm25)``, best first (ties keep the ``bm25`` order)."""
    tokens = frozenset(index_token(term).strip() for term in terms)
    scored = []
    for row in rows:
        score, matched = _score_indexed(tokens, indexed(row))
        if matched:
            scored.append((row, score, matched, round(-row["rank"], 4)))
    scored.sort(key=lambda hit: (-hit[1], -hit[2], -hit[3]))
    return scored


@attrs.define
class SQLiteRetrievalStore:
    """Retrieval data in the shared SQLite database (see :class:`promptweave.store.retrieval.RetrievalStore`).

    :param cache: what was read by scope, with the version it was read at.
    """

    database: SQLiteDatabase
    #: Reads are short and never wait on other I/O, so callers may read on an event loop
    #: (``docs/retrieval.md#caching``).
    blocking_reads: ClassVar[bool] = False

    cache: ScopeCache = attrs.field(factory=ScopeCache, repr=False)
    _ready: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)
    # A scope's number never changes once given, so it is looked up once.
    _scope_ids: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False, repr=False)

    def _open(self, *, create: bool) -> Connection | None:
        """The connection, migrated; ``None`` when reading a database that does not exist."""
        if not self._ready:
            if not create and not self.database.path.exists():
                return None
            with self._lock:
                if not self._ready:
                    self.database.migrate(MIGRATIONS)
                    self._ready = True
        return self.database.connection()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        connection = self._open(create=False)
        if connection is None:
            return []
        return connection.execute(sql, params).fetchall()

    def _scope_id(self, bot_id: str, group_id: str) -> int | None:
        """The scope's number, ``None`` when nothing was ever written in it."""
        found = self._scope_ids.get((bot_id, group_id))
        if found is None:
            rows = self._rows(
                "SELECT id FROM retrieval_scopes WHERE bot_id = ? AND group_id = ?",
                (bot_id, group_id),
            )
            if not rows:
                return None
            found = self._scope_ids[(bot_id, group_id)] = int(rows[0][0])
        return found

    def _version(self, bot_id: str, group_id: str, kinds: Collection[str]) -> int:
        """How many changes the scope's data of ``kinds`` has seen (it only ever grows).

        The connection keeps what it read (``promptweave.store.row_counts``) until another
        connection commits to the file or this store writes (:meth:`write` forgets it all), so
        a scope read on every turn costs no query while nothing changes.
        """
        connection = self._open(create=False)
        if connection is None:
            return 0
        known = row_counts(self.database, "retrieval_versions").current(connection)
        key = (bot_id, group_id, *kinds)
        version: int | None = known.get(key)
        if version is None:
            marks = ", ".join("?" * len(kinds))
            row = connection.execute(
                "SELECT TOTAL(version) FROM retrieval_versions"
                f" WHERE bot_id = ? AND group_id = ? AND kind IN ({marks})",
                key,
            ).fetchone()
            version = known[key] = int(row[0])
        return version

    def version(self, bot_id: str, group_id: str, kinds: Collection[str]) -> int:
        """The change counter of the scope's data of ``kinds`` (any write of it, by any
        process, changes it)."""
        return self._version(bot_id, group_id, kinds) if kinds else 0

    def cached(
        self,
        bot_id: str,
        group_id: str,
        key: Hashable,
        build: Callable[[], T],
        *,
        kinds: Collection[str],
    ) -> T:
        """``build()``, remembered for this scope until its data of ``kinds`` (named like the
        fields of :class:`promptweave.store.retrieval.RetrievalBatch`: ``"expression_pairs"``, ``"strategies"``…)
        changes, whoever writes it. ``build`` should read only that data of this scope."""
        version = self._version(bot_id, group_id, kinds)
        return self.cache.get((bot_id, group_id), key, version, build)

    # -- writing ----------------------------------------------------------------------------

    def _row_ids(self, db: sqlite3.Connection, table: str, bot_id: str, group_id: str) -> int:
        """The next free row id of ``table`` in the scope (its number is given on first use)."""
        db.execute(
            "INSERT OR IGNORE INTO retrieval_scopes (bot_id, group_id) VALUES (?, ?)",
            (bot_id, group_id),
        )
        (scope,) = db.execute(
            "SELECT id FROM retrieval_scopes WHERE bot_id = ? AND group_id = ?",
            (bot_id, group_id),
        ).fetchone()
        low = scope * SCOPE_ROWS
        (last,) = db.execute(
            f"SELECT MAX(id) FROM {table} WHERE id BETWEEN ? AND ?", (low, low + SCOPE_ROWS - 1)
        ).fetchone()
        return int(last or low) + 1

    def _with_ids(self, db: sqlite3.Connection, table: str) -> Callable[[str, str], int]:
        """Row ids for new rows of ``table``: ascending within each scope, in the order asked
        (a row that replaces another keeps the old row's id, and its new one stays unused)."""
        following: dict[tuple[str, str], int] = {}

        def next_id(bot_id: str, group_id: str) -> int:
            scope = (bot_id, group_id)
            if scope not in following:
                following[scope] = self._row_ids(db, table, bot_id, group_id)
            row_id = following[scope]
            if row_id % SCOPE_ROWS == 0:
                raise ValueError(f"scope {scope} holds {SCOPE_ROWS - 1} rows of {table} already")
            following[scope] = row_id + 1
            return row_id

        return next_id

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        self._open(create=True)
        with self.database.transaction() as db:
            # Every write may change versions (the triggers count them): none kept is right.
            row_counts(self.database, "retrieval_versions").current(db).clear()
            memory_id = self._with_ids(db, "memories")
            db.executemany(
                "INSERT INTO memories"
                " (id, bot_id, group_id, kind, text, terms, source, external_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (bot_id, group_id, kind, text) DO UPDATE SET"
                " source = excluded.source, external_id = excluded.external_id,"
                " created_at = excluded.created_at",
                [
                    (memory_id(m.bot_id, m.group_id), m.bot_id, m.group_id, m.kind.value, m.text,
                     index_text(m.text), m.source, m.id, _when(m.created_at))
                    for m in batch.memories
                ],
            )  # fmt: skip
            for document in batch.knowledge:
                db.execute(
                    "DELETE FROM knowledge_chunks WHERE bot_id = ? AND group_id = ? AND source = ?",
                    (document.bot_id, document.group_id, document.source),
                )
                chunk_id = self._with_ids(db, "knowledge_chunks")
                db.executemany(
                    "INSERT INTO knowledge_chunks (id, bot_id, group_id, source, chunk_index,"
                    " title, text, title_terms, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (chunk_id(c.bot_id, c.group_id), c.bot_id, c.group_id, c.source, c.index,
                         c.title, c.text, index_text(c.title), index_text(c.text))
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

    def _match_terms(self, search: _Search, terms: Sequence[str]) -> list[str]:
        """The query's rarest :data:`MAX_MATCH_TERMS` terms the index holds (words count as
        rare), then, while they occur in more than :data:`RANKED_MATCHES` texts together,
        without the most common of them."""
        keys = {term: index_token(term).strip() for term in terms}
        marks = ", ".join("?" * len(keys))
        documents = {
            row[0]: row[1]
            for row in self._rows(
                f"SELECT term, docs FROM {search.counts} WHERE term IN ({marks}) AND docs > 0",
                list(keys.values()),
            )
        }
        frequency = {term: documents.get(key, 0) for term, key in keys.items()}
        words = [term for term in terms if term.isascii()]
        rare = sorted(
            (term for term in terms if not term.isascii() and frequency[term]),
            key=frequency.__getitem__,
        )
        match = [*words, *rare][:MAX_MATCH_TERMS]
        while len(match) > 1 and sum(frequency[term] for term in match) > RANKED_MATCHES:
            # The most common term goes (of equally common ones, the one matched last).
            match.remove(max(reversed(match), key=frequency.__getitem__))
        return match

    def _candidates(
        self,
        search: _Search,
        scope: tuple[str, str],
        terms: Sequence[str],
        limit: int,
    ) -> list[sqlite3.Row]:
        """The scope's best ``bm25`` matches (ties: the older first), at most ``max(50, limit *
        CANDIDATES_PER_HIT)``, among its newest :data:`RANKED_MATCHES` matches."""
        scope_id = self._scope_id(*scope)
        if scope_id is None:
            return []
        match = self._match_terms(search, terms)
        if not match:
            return []
        low = scope_id * SCOPE_ROWS
        index = search.index
        # Rank the matches first and read the texts of the best only.
        return self._rows(
            f"SELECT {search.columns}, best.rank FROM ("
            " SELECT rowid, rank FROM ("
            f"  SELECT rowid, {search.bm25} AS rank FROM {index}"
            f"  WHERE {index} MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT ?"
            " ) ORDER BY rank, rowid LIMIT ?"
            f") AS best JOIN {search.table} AS t ON t.id = best.rowid"
            # The range is the scope's; naming the scope too costs nothing on these few rows.
            " WHERE t.bot_id = ? AND t.group_id = ?"
            " ORDER BY best.rank, best.rowid",
            (fts_query(match), low, low + SCOPE_ROWS - 1, RANKED_MATCHES,
             max(50, limit * CANDIDATES_PER_HIT), *scope),
        )  # fmt: skip

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        rows = self._candidates(_MEMORIES, (bot_id, group_id), terms, limit)
        return [
            Scored(
                record=MemoryRecord(
                    bot_id=bot_id,
                    group_id=group_id,
                    kind=MemoryKind(row["kind"]),
                    text=row["text"],
                    source=row["source"],
                    id=row["external_id"],
                    created_at=_parse_when(row["created_at"]),
                ),
                score=score,
                matched=matched,
                bm25=bm25,
            )
            for row, score, matched, bm25 in _rank(rows, _memory_terms, terms)[:limit]
        ]

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        rows = self._candidates(_KNOWLEDGE, (bot_id, group_id), terms, limit)
        return [
            Scored(
                record=KnowledgeChunk(
                    bot_id=bot_id,
                    group_id=group_id,
                    source=row["source"],
                    title=row["title"],
                    text=row["text"],
                    index=row["chunk_index"],
                ),
                score=score,
                matched=matched,
                bm25=bm25,
            )
            for row, score, matched, bm25 in _rank(rows, _chunk_terms, terms)[:limit]
        ]

    # -- reading by scope -------------------------------------------------------------------

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        return self.cached(
            bot_id,
            group_id,
            ("relationship", user_id),
            lambda: self._read_relationship(bot_id, group_id, user_id),
            kinds=("relationships",),
        )

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        return list(
            self.cached(
                bot_id,
                group_id,
                ("person_facts", user_id, limit),
                lambda: tuple(self._read_person_facts(bot_id, group_id, user_id, limit=limit)),
                kinds=("person_facts",),
            )
        )

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        return list(
            self.cached(
                bot_id,
                group_id,
                ("expression_pairs", limit),
                lambda: tuple(self._read_expression_pairs(bot_id, group_id, limit=limit)),
                kinds=("expression_pairs",),
            )
        )

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        return self.cached(
            bot_id,
            group_id,
            "rhythm_baseline",
            lambda: self._read_rhythm_baseline(bot_id, group_id),
            kinds=("rhythms",),
        )

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        return list(
            self.cached(
                bot_id,
                group_id,
                ("behavior_strategies", limit),
                lambda: tuple(self._read_behavior_strategies(bot_id, group_id, limit=limit)),
                kinds=("strategies",),
            )
        )

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> list[str]:
        return list(
            self.cached(
                bot_id,
                group_id or "",
                ("summaries", user_id, limit),
                lambda: tuple(self._read_list_summaries(bot_id, group_id, user_id, limit)),
                kinds=("summaries",),
            )
        )

    # -- reading by scope, uncached ---------------------------------------------------------

    def _read_relationship(
        self, bot_id: str, group_id: str, user_id: str
    ) -> RelationshipRecord | None:
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

    def _read_person_facts(
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

    def _read_expression_pairs(
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

    def _read_rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
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

    def _read_behavior_strategies(
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

    def _read_list_summaries(
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
