"""Built-in plugin ``retrievers``: what feeds sections 4–10 from the retrieval store.

One retriever per section, named like the section (``docs/design.md#retrieval-order`` and
``docs/design.md#persona-and-style``):

- ``memory``: the four memory kinds, searched by relevance; in a group with no persistent hit,
  recent group lines that read as events fill in.
- ``knowledge``: document chunks, only for a message that looks like a knowledge question.
- ``relationship`` and ``person_facts``: what is known of the current speaker in this group.
- ``mid_term``: earlier session summaries recalled by topic (at most 3 above a minimum score).
- ``group_expression``: direct pairs recalled by similarity to the message (at most 2), and the
  group's rhythm baseline.
- ``behavior_reference``: pick-up strategies, observed and self-reflection (at most 3 each).

Those marked persistent (memory, relationship, person facts, old topics) are not called on a
short social turn. Everything reads the scope of the current bot and group only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

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
from promptweave.builtin_plugins.retrieval_indexes import (
    ExpressionIndex,
    StrategyIndex,
    scope_cached,
    terms_of,
)
from promptweave.builtin_plugins.retrieval_sections import affinity_label
from promptweave.items import LearningType, MemoryKind
from promptweave.retrieval.policy import (
    KNOWLEDGE_QUESTION_WORDS,
    looks_like_knowledge_question,
    reads_as_event,
)
from promptweave.retrieval.query import SkipReason
from promptweave.store.retrieval import MemoryRecord
from promptweave.text.scoring import score_text, text_terms

#: Session summaries begin with this mark; the old-topics section shows the text after it.
SUMMARY_MARK = "【此前对话摘要】"
#: The most expression pairs and strategies compared per turn (newest / best supported first).
PROFILE_SCAN = 5000
STRATEGY_SCAN = 500
#: The most of the speaker's own teachings carried with each of their messages.
MEMBER_TEACHINGS = 2
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
    # What the speaker taught the bot goes with their messages: their name always (it is about
    # who is talking), another teaching of theirs when it shares a term (docs/learning.md).
    own: Callable[..., list[MemoryRecord]] | None = getattr(
        query.stores.retrieval, "member_teachings", None
    )
    if own is not None and not query.is_private and query.user_id:
        for record in own(
            query.bot_id, query.scope_group, query.user_id, terms, limit=MEMBER_TEACHINGS
        ):
            seen.add(record.text)
            items.append(
                MemoryItem(
                    kind=record.kind,
                    text=record.text,
                    id=record.id,
                    source=record.source,
                    score=1.0,
                )
            )
            hits.append(
                RetrievalHit(
                    text=record.text,
                    score=1.0,
                    id=record.id,
                    source=record.source,
                    details={"member": query.user_id},
                )
            )
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
        if message.sender_id in bots:
            continue
        event_terms = _event_terms(message.text)
        if event_terms is None:
            continue
        score, _matched = score_text(terms, event_terms)
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


@functools.lru_cache(maxsize=4096)
def _event_terms(text: str) -> frozenset[str] | None:
    """The terms of a group line that reads as an event, ``None`` for one that does not: a line
    stays recent for many turns and is looked at once."""
    return text_terms(text) if reads_as_event(text) else None


@functools.lru_cache(maxsize=64)
def _knowledge_words(configured: tuple[str, ...]) -> tuple[str, ...]:
    return (*KNOWLEDGE_QUESTION_WORDS, *configured)


def retrieve_knowledge(query: RetrievalQuery) -> RetrievalResult:
    words = _knowledge_words(tuple(query.limits.knowledge_question_words))
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
        id=record.id or record.user_id,
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
    scored = [(score_text(terms, terms_of(record.text))[0], record) for record in records]
    scored.sort(key=lambda pair: -pair[0])
    return RetrievalResult(
        items=[PersonFact(text=record.text, score=score) for score, record in scored],
        # The learned facts are named in the trace (and in a reply's injection snapshot).
        hits=[
            RetrievalHit(text=record.text, score=score, id=record.id)
            for score, record in scored
            if record.id
        ],
    )


def retrieve_mid_term(query: RetrievalQuery) -> RetrievalResult:
    limits = query.limits
    summaries = query.stores.topic_summaries.list_summaries(
        query.bot_id, query.group_id, query.user_id, limits.mid_term_scan
    )
    terms = query.terms
    scored = []
    for summary in summaries:
        text = summary.strip().removeprefix(SUMMARY_MARK).strip()
        score, _matched = score_text(terms, terms_of(text))
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
    bot_id, group_id = query.bot_id, query.group_id
    index = scope_cached(
        store,
        bot_id,
        group_id,
        ("group_expression", PROFILE_SCAN),
        lambda: ExpressionIndex.build(store.expression_pairs(bot_id, group_id, limit=PROFILE_SCAN)),
        kinds=("expression_pairs",),
    )
    matches = index.recall(
        query.text,
        limit=query.limits.expression_pairs,
        cutoff=query.limits.expression_min_similarity * 100,
    )
    items: list[ExpressionPair | RhythmBaseline] = []
    hits = []
    for position, similarity in matches:
        pair = index.pairs[position]
        score = round(similarity / 100, 4)
        items.append(ExpressionPair(trigger=pair.trigger, reply=pair.reply, score=score))
        hits.append(
            RetrievalHit(text=f"触发「{pair.trigger}」时：{pair.reply}", score=score, id=pair.id)
        )
    baseline = store.rhythm_baseline(bot_id, group_id)
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
                id=baseline.id,
                source="rhythm",
                details={
                    "single_bubble_share": baseline.single_bubble_share,
                    "median_segment_chars": baseline.median_segment_chars,
                },
            )
        )
    return RetrievalResult(items=items, hits=hits, details={"pairs_compared": len(index.pairs)})


def retrieve_behavior_reference(query: RetrievalQuery) -> RetrievalResult:
    if query.group_id is None:
        return RetrievalResult.skip(SkipReason.PRIVATE_CHAT)
    store = query.stores.retrieval
    bot_id, group_id = query.bot_id, query.group_id
    index = scope_cached(
        store,
        bot_id,
        group_id,
        ("behavior_reference", STRATEGY_SCAN),
        lambda: StrategyIndex.build(
            store.behavior_strategies(bot_id, group_id, limit=STRATEGY_SCAN)
        ),
        kinds=("strategies",),
    )
    items: list[BehaviorStrategy] = []
    hits = []
    for learning_type in LearningType:
        # Scenes are abstract ("对方表达进展时"): a scene sharing words with the message comes
        # first, then the strategies learned from the most exchanges.
        for score, record in index.rank(learning_type, query.terms, query.limits.strategies):
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
                    id=record.id,
                )
            )
    return RetrievalResult(items=items, hits=hits)


def _blocks(query: RetrievalQuery) -> bool:
    """Over memory the retrievers are pure computation, and over the built-in SQLite store every
    read is short and bounded (``blocking_reads = False``: a cached group index checked with one
    indexed read, a full-text search that ranks at most a fixed number of texts): both run on the
    event loop, saving a worker thread hop each. A retrieval store of another kind is read in a
    worker thread on a SQLite or Redis deployment (see ``Retriever.blocking``)."""
    return query.stores.database is not None and getattr(
        query.stores.retrieval, "blocking_reads", True
    )


def _blocks_topics(query: RetrievalQuery) -> bool:
    """Old topics likewise, by their source (the session summaries and the retrieval store's
    topics: a Redis session store is read in a worker thread)."""
    return query.stores.database is not None and getattr(
        query.stores.topic_summaries, "blocking_reads", True
    )


@hookimpl
def register_retrievers(register: Callable[[Retriever], None]) -> None:
    # Persistent: skipped on short social turns (docs/design.md#short-social-turns).
    for name, retrieve, persistent, blocking in (
        ("memory", retrieve_memory, True, _blocks),
        ("knowledge", retrieve_knowledge, False, _blocks),
        ("relationship", retrieve_relationship, True, _blocks),
        ("person_facts", retrieve_person_facts, True, _blocks),
        ("mid_term", retrieve_mid_term, True, _blocks_topics),
        ("group_expression", retrieve_group_expression, False, _blocks),
        ("behavior_reference", retrieve_behavior_reference, False, _blocks),
    ):
        register(
            Retriever(
                name=name,
                feeds=name,
                retrieve=retrieve,
                persistent=persistent,
                blocking=blocking,
            )
        )
