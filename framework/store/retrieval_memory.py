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
from typing import Any, ClassVar, TypeVar

import attrs

from framework.retrieval.chunking import chunk_document
from framework.retrieval.scoring import score_text, text_terms
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
    SummaryRecord,
)
from framework.store.retrieval_cache import ScopeCache

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


def _put(table: dict[tuple[str, ...], Any], value: Any, *key: str) -> None:
    # A replaced record keeps its place, as an upsert keeps its row id in the SQLite store.
    table[key] = value


def _search(
    candidates: Sequence[tuple[T, frozenset[str]]], terms: Sequence[str], limit: int
) -> list[Scored[T]]:
    scored = []
    for position, (record, record_terms) in enumerate(candidates):
        score, matched = score_text(terms, record_terms)
        if matched:
            scored.append((score, matched, position, record))
    scored.sort(key=lambda row: (-row[0], -row[1], -row[2]))
    return [Scored(record=r, score=s, matched=m) for s, m, _p, r in scored[:limit]]


def _touched(batch: RetrievalBatch) -> set[tuple[str, str, str]]:
    """The ``(bot_id, group_id, kind)`` a batch writes, kinds named like its fields."""
    return {
        (record.bot_id, record.group_id, field.name)
        for field in attrs.fields(RetrievalBatch)
        for record in getattr(batch, field.name)
    }


@attrs.define
class InMemoryRetrievalStore:
    """Retrieval data held in this process (see :class:`framework.RetrievalStore`).

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
        (named like the fields of :class:`framework.RetrievalBatch`)."""
        versions = self._versions
        version = sum(versions.get((bot_id, group_id, kind), 0) for kind in kinds)
        return self.cache.get((bot_id, group_id), key, version, build)

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        with self._lock:
            # Copy the tables (not the records): a failure below leaves the old state in place.
            state = _State(
                **{f.name: dict(getattr(self._state, f.name)) for f in attrs.fields(_State)}
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

    def _scope(self, table: dict[tuple[str, ...], T], *scope: str) -> list[T]:
        return [value for key, value in table.items() if key[: len(scope)] == scope]

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        return _search(self._scope(self._state.memories, bot_id, group_id), terms, limit)

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        chunks = [c for doc in self._scope(self._state.chunks, bot_id, group_id) for c in doc]
        return _search(chunks, terms, limit)

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        return self._state.relationships.get((bot_id, group_id, user_id))

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        return self._scope(self._state.person_facts, bot_id, group_id, user_id)[:limit]

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        return self._scope(self._state.expression_pairs, bot_id, group_id)[::-1][:limit]

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        return self._state.rhythms.get((bot_id, group_id))

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        found = self._scope(self._state.strategies, bot_id, group_id)[::-1]
        return sorted(found, key=lambda strategy: -strategy.support)[:limit]

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> list[str]:
        found = self._scope(self._state.summaries, bot_id, group_id or "", user_id)[::-1]
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
