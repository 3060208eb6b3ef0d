"""Retrieval data: what the built-in retrievers search, behind one store interface.

Every record carries its scope: ``bot_id`` and ``group_id`` (``""`` is the private-chat scope),
plus ``user_id`` for what belongs to one person. Reads always name the whole scope, so no read can
return another bot's or another group's data. Two implementations: the SQLite one
(:mod:`promptweave.store.retrieval_sqlite`, FTS5 with the ``trigram`` tokenizer) and the in-memory
one (:mod:`promptweave.store.retrieval_memory`). The file formats are in ``docs/retrieval.md``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from promptweave.items import LearningType, MemoryKind

__all__ = [
    "BehaviorRecord",
    "ExpressionPairRecord",
    "KnowledgeChunk",
    "KnowledgeDocument",
    "MemoryRecord",
    "PersonFactRecord",
    "RelationshipRecord",
    "RetrievalBatch",
    "RetrievalStore",
    "RhythmRecord",
    "Scored",
    "SummaryRecord",
    "TopicSummarySource",
]

T = TypeVar("T")
E = TypeVar("E", MemoryKind, LearningType)


def _non_blank(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be empty")


def _text_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ValueError("expected a list of strings, got a string")
    return tuple(value)


def _aware(_instance: Any, attribute: attrs.Attribute[Any], value: dt.datetime | None) -> None:
    if value is None:
        return
    if value.tzinfo is None:
        raise ValueError(f"{attribute.name} {value.isoformat()} has no UTC offset")
    try:
        value.astimezone(dt.UTC)  # the store keeps the UTC time
    except OverflowError:
        raise ValueError(
            f"{attribute.name} {value.isoformat()} is outside the calendar in UTC "
            "(0001-01-01 to 9999-12-31)"
        ) from None


def _member(enum_type: type[E], name: str, value: Any) -> E:
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise ValueError(f"{name} must be one of {allowed}, not {value!r}") from None


def _memory_kind(value: Any) -> MemoryKind:
    return _member(MemoryKind, "kind", value)


def _learning_type(value: Any) -> LearningType:
    return _member(LearningType, "learning_type", value)


_required = attrs.field(validator=_non_blank)
_moment = attrs.field(default=None, validator=_aware)
_unit_interval = attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.le(1.0))


@attrs.frozen(kw_only=True)
class MemoryRecord:
    """A stored memory of one of the four kinds.

    :param source: where it came from (``teach``, ``group_event``, an importer's name…).
    :param id: an id of the caller's, shown in the trace.
    """

    bot_id: str = _required
    group_id: str
    kind: MemoryKind = attrs.field(converter=_memory_kind)
    text: str = _required
    source: str = ""
    id: str = ""
    created_at: dt.datetime | None = _moment


@attrs.frozen(kw_only=True)
class KnowledgeDocument:
    """A knowledge document before chunking; writing it replaces every earlier chunk of the same
    ``source`` in its scope.

    :param source: the document's stable name (a file name, a URL, a notice id).
    :param title: its title; chunks show ``title › heading``.
    """

    bot_id: str = _required
    group_id: str
    source: str = _required
    text: str = _required
    title: str = ""


@attrs.frozen(kw_only=True)
class KnowledgeChunk:
    """One searchable piece of a knowledge document."""

    bot_id: str
    group_id: str
    source: str
    title: str
    text: str
    index: int

    @property
    def chunk_id(self) -> str:
        return f"{self.source}#{self.index}"


@attrs.frozen(kw_only=True)
class RelationshipRecord:
    """What the bot knows of its relationship with one member of one group.

    :param affinity: from -1 (aversion) to 1 (close friend).
    :param id: the note's id, when it has one (a learned one's ``learned:relationship:…``); the
        retrieval trace shows the member's id otherwise.
    """

    bot_id: str = _required
    group_id: str
    user_id: str = _required
    facts: tuple[str, ...] = attrs.field(default=(), converter=_text_tuple)
    guidance: tuple[str, ...] = attrs.field(default=(), converter=_text_tuple)
    affinity: float = attrs.field(
        default=0.0,
        validator=attrs.validators.and_(attrs.validators.ge(-1.0), attrs.validators.le(1.0)),
    )
    id: str = ""


@attrs.frozen(kw_only=True)
class PersonFactRecord:
    """A stable preference of one member.

    :param id: the fact's id, when it has one (a learned one's ``learned:person_fact:…``).
    """

    bot_id: str = _required
    group_id: str
    user_id: str = _required
    text: str = _required
    id: str = ""


@attrs.frozen(kw_only=True)
class ExpressionPairRecord:
    """A learned direct pair: when a member said ``trigger``, another answered ``reply``.

    :param id: the pair's id, when it has one (a learned pair's ``learned:expression_pair:…``).
    """

    bot_id: str = _required
    group_id: str
    trigger: str = _required
    reply: str = _required
    id: str = ""


@attrs.frozen(kw_only=True)
class RhythmRecord:
    """The group's reply rhythm: single-bubble share and median segment length.

    :param id: the baseline's id, when it has one (a learned one's ``learned:rhythm:rhythm``).
    """

    bot_id: str = _required
    group_id: str
    single_bubble_share: float = attrs.field(validator=_unit_interval)
    median_segment_chars: int = attrs.field(validator=attrs.validators.ge(0))
    id: str = ""


@attrs.frozen(kw_only=True)
class BehaviorRecord:
    """A pick-up strategy (scene → action → outcome).

    :param support: how many exchanges it was learned from; more support ranks higher.
    :param id: the strategy's id, when it has one (a learned one's ``learned:strategy:…``):
        negative feedback scores it.
    """

    bot_id: str = _required
    group_id: str
    scene: str = _required
    action: str = _required
    outcome: str = ""
    learning_type: LearningType = attrs.field(
        default=LearningType.OBSERVED, converter=_learning_type
    )
    support: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    id: str = ""


@attrs.frozen(kw_only=True)
class SummaryRecord:
    """An earlier session summary of one member's conversation (``mid_term``)."""

    bot_id: str = _required
    group_id: str
    user_id: str = _required
    text: str = _required
    created_at: dt.datetime | None = _moment


@attrs.frozen(kw_only=True)
class RetrievalBatch:
    """Records written together, in one transaction: all of them or none."""

    memories: tuple[MemoryRecord, ...] = ()
    knowledge: tuple[KnowledgeDocument, ...] = ()
    relationships: tuple[RelationshipRecord, ...] = ()
    person_facts: tuple[PersonFactRecord, ...] = ()
    expression_pairs: tuple[ExpressionPairRecord, ...] = ()
    rhythms: tuple[RhythmRecord, ...] = ()
    strategies: tuple[BehaviorRecord, ...] = ()
    summaries: tuple[SummaryRecord, ...] = ()

    def counts(self) -> dict[str, int]:
        return {field.name: len(getattr(self, field.name)) for field in attrs.fields(type(self))}


@attrs.frozen(kw_only=True)
class Scored(Generic[T]):
    """A search hit: the record, its score in [0, 1], the number of query terms it matched, and
    its ``bm25`` (``None`` when the store has no full-text index)."""

    record: T
    score: float
    matched: int
    bm25: float | None = None


class TopicSummarySource(Protocol):
    """Where old topics come from: a member's earlier session summaries, newest first."""

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str, limit: int
    ) -> Sequence[str]:
        """At most ``limit`` summary texts of this bot, group (``None``: private) and user."""
        ...


class RetrievalStore(TopicSummarySource, Protocol):
    """The retrieval data of every bot and group. Reads take the full scope."""

    def write(self, batch: RetrievalBatch) -> dict[str, int]:
        """Write ``batch`` atomically (same natural key: replaced). Returns counts per kind."""
        ...

    def search_memories(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[MemoryRecord]]:
        """Memories sharing terms with the query, best first, at most ``limit``."""
        ...

    def search_knowledge(
        self, bot_id: str, group_id: str, terms: Sequence[str], *, limit: int
    ) -> list[Scored[KnowledgeChunk]]:
        """Knowledge chunks sharing terms with the query, best first, at most ``limit``."""
        ...

    def relationship(self, bot_id: str, group_id: str, user_id: str) -> RelationshipRecord | None:
        """The relationship note of this member, if any."""
        ...

    def person_facts(
        self, bot_id: str, group_id: str, user_id: str, *, limit: int
    ) -> list[PersonFactRecord]:
        """This member's facts, oldest first."""
        ...

    def expression_pairs(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[ExpressionPairRecord]:
        """The group's direct pairs, newest first."""
        ...

    def rhythm_baseline(self, bot_id: str, group_id: str) -> RhythmRecord | None:
        """The group's rhythm baseline, if any."""
        ...

    def behavior_strategies(
        self, bot_id: str, group_id: str, *, limit: int
    ) -> list[BehaviorRecord]:
        """The group's strategies, most supported first."""
        ...

    def counts(self) -> dict[str, int]:
        """How many records of each kind the store holds (all scopes)."""
        ...
