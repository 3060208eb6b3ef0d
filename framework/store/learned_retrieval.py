"""What the sections read: the imported retrieval data and what the bot learned, as one
:class:`promptweave.store.retrieval.RetrievalStore` (``docs/learning.md``, where learned items go).

- Expression pairs: the learned ones (most counted first) before the imported ones. Each learned
  pair has the id ``learned:expression_pair:<key>``, an imported one without an id of its own
  ``imported:expression_pair:<key>``; the retrieval trace and the injection snapshot of a reply
  show it, so negative feedback can score it.
- The rhythm baseline: an imported one when the operator imported one, else the learned one.
- Memories: the learned teachings (``【用户明确教导】``) and confirmed group events
  (``【已确认群事件】``), scored against the query with the same term scoring as the imported
  memories, merged with them by score.
- Behaviour strategies: the learned ones (both learning types, most supported first) before the
  imported ones, each with the id ``learned:strategy:<key>``.
- Person facts: a member's learned facts (newest first) before the imported ones, the same text
  once.
- The relationship note: an imported one when the operator imported one for the member, else the
  learned one (its facts, guidance and affinity).
- Negative feedback: a learned item, an imported expression pair or memory (by its id), whose
  feedback score (:func:`feedback_scores`) fell to :data:`FEEDBACK_DROP_SCORE` or below is not
  read again.

Everything else is the imported store's. What is derived of a scope is cached until either
side's data of the scope changes (:meth:`LearnedRetrievalStore.cached`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from promptweave.items import LearningType, MemoryKind
from promptweave.store.learned import LearnedItem, LearnedStore, item_key
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeChunk,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RetrievalStore,
    RhythmRecord,
    Scored,
)
from promptweave.store.retrieval_cache import ScopeCache
from promptweave.text.scoring import score_text, text_terms

__all__ = [
    "FEEDBACK_DROP_SCORE",
    "FEEDBACK_HALF_LIFE_S",
    "LEARNED_ID_PREFIX",
    "LearnedRetrievalStore",
    "feedback_scores",
    "imported_pair_id",
    "learned_id",
]

#: Feedback scores halve every 30 days (``docs/learning.md``, negative feedback).
FEEDBACK_HALF_LIFE_S = 30 * 24 * 3600.0
#: A learned source whose feedback score is at or below this is not injected again.
FEEDBACK_DROP_SCORE = -3.0
#: The start of the id of every learned item a section shows.
LEARNED_ID_PREFIX = "learned:"
#: The most learned items of one kind read for a scope.
LEARNED_READ = 1000

T = TypeVar("T")

#: The source type negative feedback scores each learned kind under.
_SCORED_AS = {
    "expression_pair": "expression",
    "teaching": "memory",
    "group_event": "memory",
    "strategy": "strategy",
}
#: The learned kinds the memory section reads, with the memory block each goes to.
_MEMORY_KINDS = {"teaching": MemoryKind.TEACHING, "group_event": MemoryKind.GROUP_EVENT}


def learned_id(item: LearnedItem) -> str:
    """The id a section shows for a learned item: ``learned:<kind>:<key>``."""
    return f"{LEARNED_ID_PREFIX}{item.kind}:{item.key}"


def imported_pair_id(pair: ExpressionPairRecord) -> str:
    """The id an imported expression pair is shown (and scored) by:
    ``imported:expression_pair:<key of its trigger and reply>``."""
    return f"imported:expression_pair:{item_key(pair.trigger, pair.reply)}"


def feedback_scores(
    outcomes: Iterable[LearnedItem], now: dt.datetime, half_life_s: float = FEEDBACK_HALF_LIFE_S
) -> dict[tuple[str, str], float]:
    """The score of every source the ``feedback`` items scored, by (type, id): the sum of their
    deltas, each halved per ``half_life_s`` since its outcome was learned (an outcome in the
    future of ``now`` counts in full)."""
    scores: dict[tuple[str, str], float] = {}
    for outcome in outcomes:
        age = max(0.0, (now - outcome.learned_at).total_seconds())
        weight = math.pow(0.5, age / half_life_s)
        for entry in outcome.fields.get("scores", ()):
            if not isinstance(entry, Mapping):
                continue
            key = (str(entry.get("type", "")), str(entry.get("id", "")))
            delta = entry.get("delta", 0)
            if isinstance(delta, int | float) and not isinstance(delta, bool) and key[1]:
                scores[key] = scores.get(key, 0.0) + float(delta) * weight
    return scores


def _texts(value: Any) -> tuple[str, ...]:
    """A learned list of lines (a relationship's facts or guidance), blank and non-text left
    out."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(str(line).strip() for line in value if isinstance(line, str) and line.strip())


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@attrs.define
class LearnedRetrievalStore:
    """The imported retrieval data and the learned items, read as one store.

    :param imported: what ``promptweave import`` wrote (SQLite or in memory).
    :param learned: what the learners learned.
    :param clock: the time feedback scores decay to (the runtime sets its own clock, so a replay
        decays on the log's).
    """

    imported: RetrievalStore
    learned: LearnedStore
    clock: Callable[[], dt.datetime] = _utc_now
    cache: ScopeCache = attrs.field(factory=ScopeCache, repr=False)

    @property
    def blocking_reads(self) -> bool:
        """Reads may wait on I/O unless both sides say they do not."""
        return bool(
            getattr(self.imported, "blocking_reads", True)
            or getattr(self.learned, "blocking_reads", True)
        )

    def __getattr__(self, name: str) -> Any:
        # What else the imported store offers (its database, its import helpers).
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.imported, name)

    # -- caching -------------------------------------------------------------------------------

    def _imported_version(self, bot_id: str, group_id: str, kinds: Collection[str]) -> Hashable:
        version: Callable[..., Hashable] | None = getattr(self.imported, "version", None)
        return None if version is None else version(bot_id, group_id, kinds)

    def cached(
        self,
        bot_id: str,
        group_id: str,
        key: Hashable,
        build: Callable[[], T],
        *,
        kinds: Collection[str],
    ) -> T:
        """``build()``, remembered for this scope until its imported data of ``kinds`` or
        anything learned of it changes."""
        version = (
            self._imported_version(bot_id, group_id, kinds),
            self.learned.version(bot_id, group_id),
        )
        return self.cache.get((bot_id, group_id), key, version, build)

    def _learned(self, bot_id: str, group_id: str, kind: str) -> tuple[LearnedItem, ...]:
        """The scope's learned items of ``kind`` that negative feedback has not dropped."""

        def read() -> tuple[LearnedItem, ...]:
            items = self.learned.items(bot_id, group_id, kind=kind, limit=LEARNED_READ)
            scored_as = _SCORED_AS.get(kind)
            if scored_as is None or not items:
                return tuple(items)
            scores = self._scores(bot_id, group_id)
            return tuple(
                item
                for item in items
                if scores.get((scored_as, learned_id(item)), 0.0) > FEEDBACK_DROP_SCORE
            )

        version = self.learned.version(bot_id, group_id)
        return self.cache.get((bot_id, group_id), ("learned", kind), version, read)

    def _scores(self, bot_id: str, group_id: str) -> dict[tuple[str, str], float]:
        outcomes = self.learned.items(bot_id, group_id, kind="feedback", limit=LEARNED_READ)
        return feedback_scores(outcomes, self.clock()) if outcomes else {}

    # -- the reads the sections make -----------------------------------------------------------

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        learned = [
            ExpressionPairRecord(
                bot_id=bot_id,
                group_id=group_id,
                trigger=str(item.fields["trigger"]),
                reply=str(item.fields["reply"]),
                id=learned_id(item),
            )
            for item in self._learned(bot_id, group_id, "expression_pair")
            if str(item.fields.get("trigger", "")).strip()
            and str(item.fields.get("reply", "")).strip()
        ]
        if len(learned) >= limit:
            return learned[:limit]
        imported = [
            pair if pair.id else attrs.evolve(pair, id=imported_pair_id(pair))
            for pair in self.imported.expression_pairs(bot_id, group_id, limit=limit - len(learned))
        ]
        if imported and self.learned.items(bot_id, group_id, kind="feedback", limit=1):
            scores = self._scores(bot_id, group_id)
            imported = [
                pair
                for pair in imported
                if scores.get(("expression", pair.id), 0.0) > FEEDBACK_DROP_SCORE
            ]
        return learned + imported

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        imported = self.imported.rhythm_baseline(bot_id, group_id)
        if imported is not None:
            return imported
        for item in self._learned(bot_id, group_id, "rhythm"):
            share = item.fields.get("single_bubble_share")
            median = item.fields.get("median_segment_chars")
            if isinstance(share, int | float) and isinstance(median, int) and 0 <= share <= 1:
                return RhythmRecord(
                    bot_id=bot_id,
                    group_id=group_id,
                    single_bubble_share=float(share),
                    median_segment_chars=max(0, median),
                    id=learned_id(item),
                )
        return None

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        found = self._kept_memories(
            bot_id, group_id, self.imported.search_memories(bot_id, group_id, terms, limit=limit)
        )
        teachings = self.cache.get(
            (bot_id, group_id),
            ("learned_memories",),
            self.learned.version(bot_id, group_id),
            lambda: tuple(
                (self._memory(item), text_terms(str(item.fields.get("text", ""))))
                for kind in _MEMORY_KINDS
                for item in self._learned(bot_id, group_id, kind)
                if str(item.fields.get("text", "")).strip()
            ),
        )
        if not teachings:
            return found
        for record, record_terms in teachings:
            score, matched = score_text(terms, record_terms)
            if matched:
                found.append(Scored(record=record, score=score, matched=matched))
        found.sort(key=lambda hit: -hit.score)
        return found[:limit]

    def member_teachings(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        terms: Sequence[str] = (),
        *,
        limit: int,
    ) -> list[MemoryRecord]:
        """What ``user_id`` taught the bot, for the memory retriever to carry with their
        messages: their name (subject ``name:<user_id>``) always, then each other teaching of
        theirs that shares a term with the message (one is enough: they said it to the bot
        themselves); the newest first."""
        subject = f"name:{user_id}"
        own = sorted(
            (i for i in self._learned(bot_id, group_id, "teaching") if i.user_id == user_id),
            key=lambda item: item.updated_at or item.learned_at,
            reverse=True,
        )
        names = [item for item in own if item.fields.get("subject") == subject]
        related = [
            item
            for item in own
            if item.fields.get("subject") != subject
            and score_text(terms, text_terms(str(item.fields.get("text", ""))))[1] > 0
        ]
        return [self._memory(item) for item in (names + related)[: max(0, limit)]]

    def _kept_memories(
        self, bot_id: str, group_id: str, found: list[Scored[MemoryRecord]]
    ) -> list[Scored[MemoryRecord]]:
        """``found`` without the imported memories negative feedback dropped (by their id)."""
        if not found or not any(hit.record.id for hit in found):
            return found
        scores = self.cache.get(
            (bot_id, group_id),
            ("feedback_scores",),
            self.learned.version(bot_id, group_id),
            lambda: self._scores(bot_id, group_id),
        )
        return [
            hit
            for hit in found
            if not hit.record.id or scores.get(("memory", hit.record.id), 0.0) > FEEDBACK_DROP_SCORE
        ]

    @staticmethod
    def _memory(item: LearnedItem) -> MemoryRecord:
        kind = _MEMORY_KINDS[item.kind]
        return MemoryRecord(
            bot_id=item.bot_id,
            group_id=item.group_id,
            kind=kind,
            text=str(item.fields["text"]),
            source="teach" if kind is MemoryKind.TEACHING else "group_event",
            id=learned_id(item),
            created_at=item.learned_at,
        )

    # -- the imported store's, as they are -----------------------------------------------------

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        return self.imported.write(batch)

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        return self.imported.search_knowledge(bot_id, group_id, terms, limit=limit)

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        imported = self.imported.relationship(bot_id, group_id, user_id)
        if imported is not None:
            return imported
        for item in self._learned(bot_id, group_id, "relationship"):
            if item.user_id != user_id:
                continue
            affinity = item.fields.get("affinity", 0.0)
            if isinstance(affinity, bool) or not isinstance(affinity, int | float):
                affinity = 0.0
            return RelationshipRecord(
                bot_id=bot_id,
                group_id=group_id,
                user_id=user_id,
                facts=_texts(item.fields.get("facts")),
                guidance=_texts(item.fields.get("guidance")),
                affinity=max(-1.0, min(1.0, float(affinity))),
                id=learned_id(item),
            )
        return None

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        learned = sorted(
            (
                item
                for item in self._learned(bot_id, group_id, "person_fact")
                if item.user_id == user_id and str(item.fields.get("text", "")).strip()
            ),
            key=lambda item: item.updated_at or item.learned_at,
            reverse=True,
        )
        found = [
            PersonFactRecord(
                bot_id=bot_id,
                group_id=group_id,
                user_id=user_id,
                text=str(item.fields["text"]),
                id=learned_id(item),
            )
            for item in learned[:limit]
        ]
        if len(found) >= limit:
            return found
        seen = {fact.text for fact in found}
        for fact in self.imported.person_facts(bot_id, group_id, user_id, limit=limit):
            if fact.text not in seen and len(found) < limit:
                found.append(fact)
        return found

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        learned = []
        for item in self._learned(bot_id, group_id, "strategy"):
            fields = item.fields
            scene = str(fields.get("scene", "")).strip()
            action = str(fields.get("action", "")).strip()
            kind = str(fields.get("learning_type", ""))
            if not scene or not action or kind not in {t.value for t in LearningType}:
                continue
            learned.append(
                BehaviorRecord(
                    bot_id=bot_id,
                    group_id=group_id,
                    scene=scene,
                    action=action,
                    outcome=str(fields.get("outcome", "")).strip(),
                    learning_type=LearningType(kind),
                    support=item.count,
                    id=learned_id(item),
                )
            )
        learned.sort(key=lambda record: -record.support)
        if len(learned) >= limit:
            return learned[:limit]
        return learned + self.imported.behavior_strategies(
            bot_id, group_id, limit=limit - len(learned)
        )

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> Sequence[str]:
        return self.imported.list_summaries(bot_id, group_id, user_id, limit)

    def counts(self) -> dict[str, int]:
        return self.imported.counts()
