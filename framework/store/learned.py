"""What the bot learned of its groups, and where each learner stands (``docs/learning.md``).

A learner (:mod:`promptweave.learning`) reads the group log after its cursor and writes
:class:`LearnedItem` records: an expression pair, a group's rhythm, a teaching, a pick-up of the
bot's, a negative outcome… Every item names its scope (``bot_id``, ``group_id`` and, for what
belongs to one member, ``user_id``), its ``kind``, a ``key`` unique within kind and scope, its
fields (JSON-safe), the ids of the messages it came from and when it was learned. The sections
read them through :class:`promptweave.store.learned_retrieval.LearnedRetrievalStore`, next to
what an operator imported.

The :class:`LearnedStore` also keeps, per (learner, bot, group), the learner's cursor (the
position in the group log it has learned up to) with a small state of its own, and a lease, so
that of several bot processes sharing one store only one learns a batch, and a holder that dies
frees it when its lease expires. And it keeps the injection snapshot of each delivered reply
(:class:`DeliveredInjection`), which negative feedback reads.

What an implementation keeps and evicts is decided by the functions of this module, which every
backend calls (:func:`merge_item`; :func:`beyond_cap`, which evicts in :func:`eviction_order`). In-memory
(:mod:`promptweave.store.learned_memory`), SQLite (:mod:`promptweave.store.learned_sqlite`) and
Redis (``promptweave.contrib.redis_store``) implementations exist. Every method takes the time it
acts at from the caller, so a replay learns on the log's clock.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from promptweave._fields import str_tuple
from promptweave.turn import ChatMessage

__all__ = [
    "LEASE_S",
    "SOURCE_IDS_KEPT",
    "DeliveredInjection",
    "LearnedItem",
    "LearnedStore",
    "LearnerCursor",
    "LearningSource",
    "LoggedMessage",
    "PutResult",
    "beyond_cap",
    "eviction_order",
    "item_key",
    "merge_item",
]

#: The most message ids an item keeps (the newest): what ``learned list`` shows it came from.
SOURCE_IDS_KEPT = 16
#: Seconds a learner's lease on a (bot, group) lasts unless renewed: a holder that dies frees it.
LEASE_S = 120.0


def _aware(_instance: object, attribute: attrs.Attribute[Any], value: dt.datetime) -> None:
    if value.tzinfo is None:
        raise ValueError(f"{attribute.name} {value.isoformat()} has no UTC offset")


def _json_fields(value: Mapping[str, Any]) -> dict[str, Any]:
    fields = dict(value)
    try:
        json.dumps(fields, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"fields must be JSON-safe: {exc}") from None
    return fields


def _non_blank(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be empty")


def item_key(*parts: str) -> str:
    """A stable key made of ``parts`` (a pair's trigger and reply, a teaching's subject): the
    first 24 hex digits of their SHA-256, so keys are short and the same on every backend."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:24]


@attrs.frozen(kw_only=True)
class LearnedItem:
    """One thing learned of one (bot, group).

    :param kind: what it is: ``expression_pair``, ``rhythm``, ``pickup``, ``teaching``,
        ``feedback``, or a learner plugin's own kind.
    :param key: unique within kind and scope; learning the same key again merges
        (:func:`merge_item`).
    :param fields: the learned fields, JSON-safe (a pair's ``trigger`` and ``reply``…).
    :param user_id: the member it belongs to (a teaching's teacher), ``""`` for the group.
    :param source_message_ids: the messages it came from, oldest first (at most
        :data:`SOURCE_IDS_KEPT`, the newest).
    :param count: how many times it was learned (a pair seen three times counts 3).
    :param learner: the learner that wrote it.
    :param learned_at: when it was first learned.
    :param updated_at: when it was last learned again.
    """

    kind: str = attrs.field(validator=_non_blank)
    bot_id: str = attrs.field(validator=_non_blank)
    group_id: str
    key: str = attrs.field(validator=_non_blank)
    fields: Mapping[str, Any] = attrs.field(factory=dict, converter=_json_fields, hash=False)
    user_id: str = ""
    source_message_ids: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    count: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    learner: str = ""
    learned_at: dt.datetime = attrs.field(validator=_aware)
    updated_at: dt.datetime | None = attrs.field(default=None)

    def to_json(self) -> dict[str, Any]:
        """The item as ``promptweave learned list --json`` prints it: its scope and kind, its
        fields at the top level, then its provenance."""
        return {
            "kind": self.kind,
            "bot_id": self.bot_id,
            "group_id": self.group_id,
            "user_id": self.user_id,
            "key": self.key,
            **self.fields,
            "count": self.count,
            "learner": self.learner,
            "source_message_ids": list(self.source_message_ids),
            "learned_at": self.learned_at.isoformat(),
            "updated_at": (self.updated_at or self.learned_at).isoformat(),
        }


def merge_item(
    old: LearnedItem | None, new: LearnedItem, forgotten: Iterable[str] = ()
) -> LearnedItem | None:
    """What a store keeps when ``new`` is learned while ``old`` (same kind, scope and key) is
    stored, or ``None`` when nothing changes.

    - Message ids already counted (in ``old``) or forgotten (``forgotten``, the ids of an item
      of this key that was forgotten) are not counted again, so a batch learned twice (a learner
      that died before moving its cursor) counts once, and a forgotten item is not learned back
      from the same messages. A new item whose every id is one of these changes nothing; one
      with no ids at all (a rhythm recomputed from its learner's state) always replaces.
    - Otherwise the fields of ``new`` replace those of ``old``, the counts add up, the ids are
      appended (the newest :data:`SOURCE_IDS_KEPT` kept), ``learned_at`` stays the first and
      ``updated_at`` is the new one's.
    """
    dropped = set(forgotten)
    if old is not None:
        dropped.update(old.source_message_ids)
    fresh = tuple(dict.fromkeys(i for i in new.source_message_ids if i not in dropped))
    if new.source_message_ids and not fresh:
        return None
    if old is None:
        return attrs.evolve(
            new, source_message_ids=fresh[-SOURCE_IDS_KEPT:], updated_at=new.learned_at
        )
    return attrs.evolve(
        new,
        source_message_ids=(old.source_message_ids + fresh)[-SOURCE_IDS_KEPT:],
        count=old.count + new.count if fresh else new.count,
        learned_at=old.learned_at,
        updated_at=new.learned_at,
    )


def eviction_order(item: LearnedItem) -> tuple[int, float, str]:
    """Items of one kind and scope beyond its cap are evicted in this order (smallest first):
    the least counted, then the least recently learned, then by key."""
    return item.count, (item.updated_at or item.learned_at).timestamp(), item.key


def beyond_cap(items: Iterable[LearnedItem], cap: int) -> list[LearnedItem]:
    """What a store evicts of the items of one kind and scope to keep at most ``cap`` of them:
    the first in :func:`eviction_order`."""
    ordered = sorted(items, key=eviction_order)
    return ordered[: max(0, len(ordered) - cap)]


@attrs.frozen(kw_only=True)
class PutResult:
    """What :meth:`LearnedStore.put_items` did: the items now stored (new or merged), the keys
    of those it evicted to stay within a cap, and how many it left unchanged."""

    stored: tuple[LearnedItem, ...] = ()
    evicted: tuple[tuple[str, str], ...] = ()
    unchanged: int = 0


@attrs.frozen(kw_only=True)
class LearnerCursor:
    """Where a learner stands in one (bot, group).

    :param position: the group-log position (:attr:`LoggedMessage.position`) it has learned up
        to, included; ``0`` before the first batch.
    :param state: the learner's own small state (JSON-safe), saved with the position.
    :param updated_at: when the position last moved.
    """

    position: int = 0
    state: Mapping[str, Any] = attrs.field(factory=dict, converter=_json_fields, hash=False)
    updated_at: dt.datetime | None = None


def _sources(values: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(_json_fields(source) for source in values)


@attrs.frozen(kw_only=True)
class DeliveredInjection:
    """A delivered bot message and what was injected into the reply it belongs to.

    :param sources: the injection snapshot, JSON-safe: ``[{"type": "ambient" | "expression" |
        "strategy" | "memory" | "knowledge" | "self_alias" | "section", "id": …, "text_hash": …,
        "preview": …}]``.
    """

    bot_id: str
    group_id: str
    message_id: str
    text: str
    answering: str | None = None
    sources: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_sources)
    delivered_at: dt.datetime = attrs.field(validator=_aware)


@attrs.frozen(kw_only=True)
class LoggedMessage:
    """A group-log message with its position: positions grow with every message appended to a
    (bot, group), in the order appended (not by the message's own time)."""

    position: int
    message: ChatMessage


@runtime_checkable
class LearningSource(Protocol):
    """What a group log offers learners; the three built-in group logs implement it."""

    def messages_after(
        self, bot_id: str, group_id: str, position: int, *, limit: int
    ) -> list[LoggedMessage]:
        """The first ``limit`` messages appended after ``position``, in the order appended."""

    def group_scopes(self) -> list[tuple[str, str]]:
        """Every (bot, group) the log holds messages of, private chats (group ``""``) left out."""


@runtime_checkable
class LearnedStore(Protocol):
    """Learned items, learner cursors and leases, and delivered injections, per (bot, group)."""

    def put_items(
        self, items: Sequence[LearnedItem], *, caps: Mapping[str, int] | None = None
    ) -> PutResult:
        """Store ``items`` (merged with stored ones of the same kind, scope and key by
        :func:`merge_item`), then evict beyond ``caps`` (kind → most items per scope) in
        :func:`eviction_order`. Atomic per scope."""

    def items(
        self,
        bot_id: str,
        group_id: str,
        *,
        kind: str | None = None,
        user_id: str | None = None,
        limit: int = 1000,
    ) -> list[LearnedItem]:
        """Stored items of one scope (of ``kind``, of ``user_id``), most counted first, then
        the most recently learned."""

    def item(self, bot_id: str, group_id: str, kind: str, key: str) -> LearnedItem | None:
        """One stored item, or ``None``."""

    def forget(
        self, bot_id: str, group_id: str, *, kind: str | None = None, key: str | None = None
    ) -> list[LearnedItem]:
        """Delete one item (``kind`` and ``key``), every item of ``kind``, or every item of the
        scope; each forgotten item's message ids are remembered under its key, so they are not
        learned again (:func:`merge_item`). :returns: the items deleted."""

    def forgotten(self, bot_id: str, group_id: str, kind: str) -> dict[str, tuple[str, ...]]:
        """Key → the message ids forgotten with it."""

    def scopes(self) -> list[tuple[str, str]]:
        """Every (bot, group) holding items, cursors or injections."""

    def counts(self) -> dict[str, int]:
        """Items stored per kind, every scope."""

    def version(self, bot_id: str, group_id: str) -> int:
        """A number that changes whenever the scope's items change (for caches)."""

    # -- cursors and leases ------------------------------------------------------------------

    def cursor(self, learner: str, bot_id: str, group_id: str) -> LearnerCursor:
        """The learner's cursor in the scope (position 0 and no state when it never ran)."""

    def claim(
        self,
        learner: str,
        bot_id: str,
        group_id: str,
        holder: str,
        *,
        now: dt.datetime,
        lease_s: float = LEASE_S,
    ) -> bool:
        """Take (or renew) the lease of (learner, bot, group) for ``holder`` until ``now +
        lease_s``, unless another holder's lease is still running. Atomic across processes."""

    def advance(
        self,
        learner: str,
        bot_id: str,
        group_id: str,
        holder: str,
        cursor: LearnerCursor,
        *,
        now: dt.datetime,
    ) -> bool:
        """Save ``cursor`` if ``holder`` still holds the lease at ``now`` (else nothing changes:
        another holder took over). Atomic across processes. :returns: whether it was saved."""

    def release(self, learner: str, bot_id: str, group_id: str, holder: str) -> None:
        """End ``holder``'s lease, if it holds it."""

    def reset(self, bot_id: str, group_id: str) -> None:
        """Delete the cursors and leases of every learner in the scope (after a group opts
        out or is forgotten whole)."""

    # -- delivered injections ----------------------------------------------------------------

    def remember_injection(self, injection: DeliveredInjection, *, keep: int = 256) -> None:
        """Keep the injection of a delivered message (the newest ``keep`` per scope)."""

    def injection(self, bot_id: str, group_id: str, message_id: str) -> DeliveredInjection | None:
        """The injection of a delivered message, if kept."""
