"""The retrieval of promptweave before the caches and the bounded search: the reference the tests
compare the current retrieval with.

The seven built-in retrievers as they were (every expression pair and strategy compared on every
turn), and :class:`ReferenceStore`, the SQLite reads as they were (the scope filtered after the
full-text match, nothing cached). The code is the earlier code, unchanged but for its imports.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from rapidfuzz import fuzz, process, utils

from promptweave import (
    BehaviorStrategy,
    ExpressionPair,
    KnowledgeItem,
    MemoryItem,
    PersonFact,
    RelationshipNote,
    RetrievalHit,
    RetrievalQuery,
    RetrievalResult,
    Retriever,
    RhythmBaseline,
    TopicSummary,
    hookimpl,
)
from promptweave.builtin_plugins.retrieval_sections import affinity_label
from promptweave.items import LearningType, MemoryKind
from promptweave.retrieval.policy import (
    KNOWLEDGE_QUESTION_WORDS,
    looks_like_knowledge_question,
    reads_as_event,
)
from promptweave.retrieval.query import SkipReason
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeChunk,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RhythmRecord,
    Scored,
)
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.text.scoring import (
    MAX_MATCH_TERMS,
    fts_query,
    index_token,
    score_text,
    text_terms,
)

T = TypeVar("T")

CANDIDATES_PER_HIT = 8


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


#: Session summaries begin with this mark; the old-topics section shows the text after it.
SUMMARY_MARK = "【此前对话摘要】"
#: The most expression pairs and strategies compared per turn (newest / best supported first).
PROFILE_SCAN = 5000
STRATEGY_SCAN = 500
#: Recent lines that fill in memory when there is no persistent hit (``top_k`` ≤ 8).
EVENT_FILL_SOURCE = "recent_group_line"


def _echo(text: str, query: str) -> bool:
    """A memory that only repeats the message back adds nothing."""
    return len(query) >= 6 and "".join(filter(str.isalnum, text)) == "".join(
        filter(str.isalnum, query)
    )


def retrieve_memory(query: RetrievalQuery) -> RetrievalResult:
    limits = query.limits
    terms = query.terms
    found = query.stores.retrieval.search_memories(
        query.bot_id, query.scope_group, terms, limit=limits.memory_limit * 2
    )
    items: list[MemoryItem] = []
    hits: list[RetrievalHit] = []
    seen: set[str] = set()
    for hit in found:
        record = hit.record
        if hit.score < limits.memory_min_score or record.text in seen:
            continue
        if _echo(record.text, query.text) or len(items) >= limits.memory_limit:
            continue
        seen.add(record.text)
        items.append(
            MemoryItem(
                kind=record.kind,
                text=record.text,
                id=record.id,
                source=record.source or record.kind.value,
                score=hit.score,
            )
        )
        hits.append(
            RetrievalHit(
                text=record.text,
                score=hit.score,
                id=record.id,
                source=record.kind.value,
                details={"bm25": hit.bm25, "matched": hit.matched},
            )
        )
    filled = 0
    if not items and not query.is_private and limits.event_fill:
        for item in _recent_events(query, terms):
            items.append(item)
            hits.append(
                RetrievalHit(text=item.text, score=item.score, id=item.id, source=item.source)
            )
            filled += 1
    return RetrievalResult(
        items=items, hits=hits, details={"terms": len(terms), "event_fill": filled}
    )


def _recent_events(query: RetrievalQuery, terms: tuple[str, ...]) -> list[MemoryItem]:
    """Recent group lines by members that read as events and relate to the message."""
    bots = {query.bot_id, *query.turn.bot.peer_bot_ids}
    found = []
    for message in query.turn.recent_messages:
        if message.sender_id in bots or not reads_as_event(message.text):
            continue
        score, _matched = score_text(terms, text_terms(message.text))
        if score >= query.limits.memory_min_score:
            found.append(
                MemoryItem(
                    kind=MemoryKind.GROUP_MEMORY,
                    text=message.text,
                    id=message.id or "",
                    source=EVENT_FILL_SOURCE,
                    score=score,
                )
            )
    found.sort(key=lambda item: -item.score)
    return found[: query.limits.memory_limit]


def retrieve_knowledge(query: RetrievalQuery) -> RetrievalResult:
    words = (*KNOWLEDGE_QUESTION_WORDS, *query.limits.knowledge_question_words)
    if not looks_like_knowledge_question(query.text, words):
        return RetrievalResult.skip(SkipReason.NOT_A_KNOWLEDGE_QUESTION)
    limits = query.limits
    found = query.stores.retrieval.search_knowledge(
        query.bot_id, query.scope_group, query.terms, limit=limits.knowledge_limit * 2
    )
    kept = [hit for hit in found if hit.score >= limits.knowledge_min_score]
    kept = kept[: limits.knowledge_limit]
    return RetrievalResult(
        items=[
            KnowledgeItem(
                text=hit.record.text,
                title=hit.record.title,
                source=hit.record.source,
                chunk_id=hit.record.chunk_id,
                score=hit.score,
            )
            for hit in kept
        ],
        hits=[
            RetrievalHit(
                text=hit.record.text,
                score=hit.score,
                id=hit.record.chunk_id,
                source=hit.record.title,
                details={"bm25": hit.bm25, "matched": hit.matched},
            )
            for hit in kept
        ],
    )


def retrieve_relationship(query: RetrievalQuery) -> RetrievalResult:
    if query.group_id is None:
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT)
    record = query.stores.retrieval.relationship(query.bot_id, query.group_id, query.user_id)
    if record is None or not (record.facts or record.guidance or record.affinity):
        return RetrievalResult()
    note = RelationshipNote(facts=record.facts, guidance=record.guidance, affinity=record.affinity)
    hit = RetrievalHit(
        text="；".join((*record.facts, *record.guidance)),
        score=record.affinity,
        id=record.user_id,
        details={"affinity": record.affinity, "level": affinity_label(record.affinity)},
    )
    return RetrievalResult(items=[note], hits=[hit])


def retrieve_person_facts(query: RetrievalQuery) -> RetrievalResult:
    if query.group_id is None:
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT)
    records = query.stores.retrieval.person_facts(
        query.bot_id, query.group_id, query.user_id, limit=query.limits.person_facts_limit
    )
    terms = query.terms
    # Every stable preference applies; those touching the message come first.
    facts = [
        PersonFact(text=record.text, score=score_text(terms, text_terms(record.text))[0])
        for record in records
    ]
    facts.sort(key=lambda fact: -fact.score)
    return RetrievalResult(items=facts)


def retrieve_mid_term(query: RetrievalQuery) -> RetrievalResult:
    limits = query.limits
    summaries = query.stores.topic_summaries.list_summaries(
        query.bot_id, query.group_id, query.user_id, limits.mid_term_scan
    )
    terms = query.terms
    scored = []
    for summary in summaries:
        text = summary.strip().removeprefix(SUMMARY_MARK).strip()
        score, _matched = score_text(terms, text_terms(text))
        if text and score >= limits.mid_term_min_score:
            scored.append(TopicSummary(text=text, score=score))
    scored.sort(key=lambda topic: -topic.score)
    return RetrievalResult(
        items=scored[: limits.mid_term_limit], details={"scanned": len(summaries)}
    )


def retrieve_group_expression(query: RetrievalQuery) -> RetrievalResult:
    if query.group_id is None:
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT)
    store = query.stores.retrieval
    pairs = store.expression_pairs(query.bot_id, query.group_id, limit=PROFILE_SCAN)
    matches = process.extract(
        query.text,
        [pair.trigger for pair in pairs],
        scorer=fuzz.WRatio,
        processor=utils.default_process,
        limit=query.limits.expression_pairs,
        score_cutoff=query.limits.expression_min_similarity * 100,
    )
    items: list[ExpressionPair | RhythmBaseline] = []
    hits = []
    for _trigger, similarity, index in matches:
        pair = pairs[index]
        score = round(similarity / 100, 4)
        items.append(ExpressionPair(trigger=pair.trigger, reply=pair.reply, score=score))
        hits.append(RetrievalHit(text=f"触发「{pair.trigger}」时：{pair.reply}", score=score))
    baseline = store.rhythm_baseline(query.bot_id, query.group_id)
    if baseline is not None:
        items.append(
            RhythmBaseline(
                single_bubble_share=baseline.single_bubble_share,
                median_segment_chars=baseline.median_segment_chars,
            )
        )
        hits.append(
            RetrievalHit(
                text="rhythm baseline",
                source="rhythm",
                details={
                    "single_bubble_share": baseline.single_bubble_share,
                    "median_segment_chars": baseline.median_segment_chars,
                },
            )
        )
    return RetrievalResult(items=items, hits=hits, details={"pairs_compared": len(pairs)})


def retrieve_behavior_reference(query: RetrievalQuery) -> RetrievalResult:
    if query.group_id is None:
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT)
    records = query.stores.retrieval.behavior_strategies(
        query.bot_id, query.group_id, limit=STRATEGY_SCAN
    )
    terms = query.terms
    items: list[BehaviorStrategy] = []
    hits = []
    for learning_type in LearningType:
        # Scenes are abstract ("对方表达进展时"): a scene sharing words with the message comes
        # first, then the strategies learned from the most exchanges.
        ranked = sorted(
            (
                (score_text(terms, text_terms(f"{record.scene} {record.action}"))[0], record)
                for record in records
                if record.learning_type is learning_type
            ),
            key=lambda scored: (-scored[0], -scored[1].support),
        )
        for score, record in ranked[: query.limits.strategies]:
            items.append(
                BehaviorStrategy(
                    scene=record.scene,
                    action=record.action,
                    outcome=record.outcome,
                    learning_type=record.learning_type,
                )
            )
            hits.append(
                RetrievalHit(
                    text=f"{record.scene} → {record.action}",
                    score=score,
                    source=record.learning_type.value,
                    details={"support": record.support},
                )
            )
    return RetrievalResult(items=items, hits=hits)


class ReferenceRetrievers:
    """The built-in retrievers as they were, under the same names."""

    @hookimpl
    def register_retrievers(self, register: Callable[[Retriever], None]) -> None:
        for name, retrieve, persistent in (
            ("memory", retrieve_memory, True),
            ("knowledge", retrieve_knowledge, False),
            ("relationship", retrieve_relationship, True),
            ("person_facts", retrieve_person_facts, True),
            ("mid_term", retrieve_mid_term, True),
            ("group_expression", retrieve_group_expression, False),
            ("behavior_reference", retrieve_behavior_reference, False),
        ):
            register(Retriever(name=name, feeds=name, retrieve=retrieve, persistent=persistent))


@attrs.define
class ReferenceStore:
    """The SQLite retrieval reads as they were, over the file of ``database`` (writes go through
    the current store)."""

    database: SQLiteDatabase

    def _rows(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        return self.database.connection().execute(sql, params).fetchall()

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
