"""The in-memory retrieval store: the same interface and scoring as the SQLite one, in dicts.

For tests and single-process bots that load their data at start-up. A write builds the new state
aside and swaps it in under a lock, so a failing batch leaves nothing behind, then counts the
change in each scope and kind of data it touched, which is what :meth:`InMemoryRetrievalStore.cached`
checks.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import attrs

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
    SummaryRecord,
)
from promptweave.store.retrieval_cache import ScopeCache
from promptweave.store.retrieval_chunks import chunk_document
from promptweave.text.scoring import score_text, text_terms

__all__ = ["InMemoryRetrievalStore"]

T = TypeVar("T")


@attrs.define
class _State:
    """Records keyed by their natural key; dicts keep insertion order (oldest first)."""

    memories: dict[tuple[str, ...], tuple[MemoryRecord, frozenset[str]]] = attrs.Factory(dict)
    chunks: dict[tuple[str, ...], list[tuple[KnowledgeChunk, frozenset[str]]]] = attrs.Factory(dict)
    relationships: dict[tuple[str, ...], RelationshipRecord] = attrs.Factory(dict)
    person_facts: dict[tuple[str, ...], PersonFactRecord] = attrs.Factory(dict)
    expression_pairs: dict[tuple[str, ...], ExpressionPairRecord] = attrs.Factory(dict)
    rhythms: dict[tuple[str, ...], RhythmRecord] = attrs.Factory(dict)
    strategies: dict[tuple[str, ...], BehaviorRecord] = attrs.Factory(dict)
    summaries: dict[tuple[str, ...], SummaryRecord] = attrs.Factory(dict)
    # What reads derive from the tables (rows by scope, term indexes), built on the first read
    # that needs it. A write builds a new state, so nothing here outlives the data it came from.
    derived: dict[Hashable, Any] = attrs.field(factory=dict, init=False)

    def scoped(self, table: str, scope: tuple[str, ...]) -> tuple[Any, ...]:
        """The values of ``table`` whose key starts with ``scope``, oldest first: the table is
        grouped by scope once, so a read costs a lookup, not a scan of every scope's rows."""
        width = len(scope)
        groups: dict[tuple[str, ...], tuple[Any, ...]] | None = self.derived.get((table, width))
        if groups is None:
            grouped: dict[tuple[str, ...], list[Any]] = {}
            for key, value in getattr(self, table).items():
                grouped.setdefault(key[:width], []).append(value)
            groups = {found: tuple(values) for found, values in grouped.items()}
            self.derived[(table, width)] = groups
        return groups.get(scope, ())

    def index(self, table: str, scope: tuple[str, ...]) -> _TermIndex[Any]:
        """The scope's searchable rows of ``table`` with the rows holding each term."""
        key = (table, "index", scope)
        found: _TermIndex[Any] | None = self.derived.get(key)
        if found is None:
            rows = self.scoped(table, scope)
            if table == "chunks":  # one list of chunks per document
                rows = tuple(chunk for document in rows for chunk in document)
            found = self.derived[key] = _TermIndex.build(rows)
        return found


@attrs.frozen
class _TermIndex(Generic[T]):
    """Rows with their terms, and the positions of the rows holding each term: a search scores
    only the rows sharing a term with the query, the others could not match."""

    rows: tuple[tuple[T, frozenset[str]], ...]
    holding: dict[str, list[int]]

    @classmethod
    def build(cls, rows: tuple[tuple[T, frozenset[str]], ...]) -> _TermIndex[T]:
        holding: dict[str, list[int]] = {}
        for position, (_record, terms) in enumerate(rows):
            for term in terms:
                holding.setdefault(term, []).append(position)
        return cls(rows=rows, holding=holding)

    def search(self, terms: Sequence[str], limit: int) -> list[Scored[T]]:
        """The ``limit`` best rows sharing a term with ``terms``: by score, then by matched
        terms, then newest first."""
        if not self.rows:
            return []
        sharing: set[int] = set()
        holding = self.holding
        for term in terms:
            found = holding.get(term)
            if found:
                sharing.update(found)
        rows = self.rows
        scored = []
        for position in sharing:
            record, record_terms = rows[position]
            score, matched = score_text(terms, record_terms)
            scored.append((score, matched, position, record))
        scored.sort(key=lambda row: (-row[0], -row[1], -row[2]))
        return [Scored(record=r, score=s, matched=m) for s, m, _p, r in scored[:limit]]


def _put(table: dict[tuple[str, ...], Any], value: Any, *key: str) -> None:
    # A replaced record keeps its place, as an upsert keeps its row id in the SQLite store.
    table[key] = value


def _touched(batch: RetrievalBatch) -> set[tuple[str, str, str]]:
    """The ``(bot_id, group_id, kind)`` a batch writes, kinds named like its fields."""
    return {
        (record.bot_id, record.group_id, field.name)
        for field in attrs.fields(RetrievalBatch)
        for record in getattr(batch, field.name)
    }


@attrs.define
class InMemoryRetrievalStore:
    """Retrieval data held in this process (see :class:`promptweave.store.retrieval.RetrievalStore`).

    :param cache: what was derived by scope (:meth:`cached`), with the version it was built at.
    """

    #: Reads are short and never wait on other I/O, so callers may read on an event loop
    #: (``docs/retrieval.md#caching``).
    blocking_reads: ClassVar[bool] = False

    cache: ScopeCache = attrs.field(factory=ScopeCache, repr=False)
    _state: _State = attrs.field(factory=_State, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)
    # Writes per (bot_id, group_id, kind); updated after the state they describe.
    _versions: dict[tuple[str, str, str], int] = attrs.field(factory=dict, init=False, repr=False)

    def version(self, bot_id: str, group_id: str, kinds: Collection[str]) -> int:
        """The number of writes of the scope's data of ``kinds``."""
        return sum(self._versions.get((bot_id, group_id, kind), 0) for kind in kinds)

    def cached(
        self,
        bot_id: str,
        group_id: str,
        key: Hashable,
        build: Callable[[], T],
        *,
        kinds: Collection[str],
    ) -> T:
        """``build()``, remembered for this scope until a write touches its data of ``kinds``
        (named like the fields of :class:`promptweave.store.retrieval.RetrievalBatch`)."""
        versions = self._versions
        version = sum(versions.get((bot_id, group_id, kind), 0) for kind in kinds)
        return self.cache.get((bot_id, group_id), key, version, build)

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        with self._lock:
            # Copy the tables (not the records): a failure below leaves the old state in place.
            state = _State(
                **{
                    f.name: dict(getattr(self._state, f.name))
                    for f in attrs.fields(_State)
                    if f.init
                }
            )
            for m in batch.memories:
                _put(state.memories, (m, text_terms(m.text)), m.bot_id, m.group_id, m.kind, m.text)
            for document in batch.knowledge:
                chunks = chunk_document(document)
                state.chunks[(document.bot_id, document.group_id, document.source)] = [
                    (chunk, text_terms(f"{chunk.title}\n{chunk.text}")) for chunk in chunks
                ]
            for n in batch.relationships:
                _put(state.relationships, n, n.bot_id, n.group_id, n.user_id)
            for f in batch.person_facts:
                _put(state.person_facts, f, f.bot_id, f.group_id, f.user_id, f.text)
            for p in batch.expression_pairs:
                _put(state.expression_pairs, p, p.bot_id, p.group_id, p.trigger, p.reply)
            for r in batch.rhythms:
                _put(state.rhythms, r, r.bot_id, r.group_id)
            for s in batch.strategies:
                _put(state.strategies, s, s.bot_id, s.group_id, s.learning_type, s.scene, s.action)
            for t in batch.summaries:
                _put(state.summaries, t, t.bot_id, t.group_id, t.user_id, t.text)
            self._state = state
            versions = dict(self._versions)
            for touched in _touched(batch):
                versions[touched] = versions.get(touched, 0) + 1
            self._versions = versions
        return batch.counts()

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        return self._state.index("memories", (bot_id, group_id)).search(terms, limit)

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        return self._state.index("chunks", (bot_id, group_id)).search(terms, limit)

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        return self._state.relationships.get((bot_id, group_id, user_id))

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        return list(self._state.scoped("person_facts", (bot_id, group_id, user_id))[:limit])

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        return list(self._state.scoped("expression_pairs", (bot_id, group_id))[::-1][:limit])

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        return self._state.rhythms.get((bot_id, group_id))

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        found = self._state.scoped("strategies", (bot_id, group_id))[::-1]
        return sorted(found, key=lambda strategy: -strategy.support)[:limit]

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> list[str]:
        found = list(self._state.scoped("summaries", (bot_id, group_id or "", user_id))[::-1])
        found.sort(key=_by_time, reverse=True)
        return [summary.text for summary in found[:limit]]

    def counts(self) -> dict[str, int]:
        state = self._state
        return {
            "memories": len(state.memories),
            "knowledge_chunks": sum(len(chunks) for chunks in state.chunks.values()),
            "relationships": len(state.relationships),
            "person_facts": len(state.person_facts),
            "expression_pairs": len(state.expression_pairs),
            "rhythms": len(state.rhythms),
            "strategies": len(state.strategies),
            "summaries": len(state.summaries),
        }


def _by_time(summary: SummaryRecord) -> dt.datetime:
    return summary.created_at or _OLDEST


_OLDEST = dt.datetime.min.replace(tzinfo=dt.UTC)
