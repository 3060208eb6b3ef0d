"""The learned store in this process's memory, for tests and single-process bots
(:class:`promptweave.store.learned.LearnedStore`)."""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import ClassVar

import attrs

from promptweave.store.learned import (
    LEASE_S,
    DeliveredInjection,
    LearnedItem,
    LearnerCursor,
    PutResult,
    beyond_cap,
    merge_item,
)

__all__ = ["MemoryLearnedStore", "sorted_items"]

_Scope = tuple[str, str]


def sorted_items(items: list[LearnedItem]) -> list[LearnedItem]:
    """Items in the order :meth:`LearnedStore.items` lists them: most counted first, then the
    most recently learned, then by key."""
    return sorted(
        items,
        key=lambda i: (-i.count, -(i.updated_at or i.learned_at).timestamp(), i.kind, i.key),
    )


@attrs.define
class MemoryLearnedStore:
    """Everything in dicts behind one lock; two stores never share anything."""

    blocking_reads: ClassVar[bool] = False

    _items: dict[_Scope, dict[tuple[str, str], LearnedItem]] = attrs.field(factory=dict)
    _forgotten: dict[_Scope, dict[tuple[str, str], tuple[str, ...]]] = attrs.field(factory=dict)
    _cursors: dict[tuple[str, str, str], LearnerCursor] = attrs.field(factory=dict)
    _leases: dict[tuple[str, str, str], tuple[str, float]] = attrs.field(factory=dict)
    _injections: dict[_Scope, OrderedDict[str, DeliveredInjection]] = attrs.field(factory=dict)
    _versions: dict[_Scope, int] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def put_items(
        self, items: Sequence[LearnedItem], *, caps: Mapping[str, int] | None = None
    ) -> PutResult:
        stored: list[LearnedItem] = []
        evicted: list[tuple[str, str]] = []
        unchanged = 0
        gone: set[tuple[_Scope, str, str]] = set()
        with self._lock:
            touched: set[tuple[_Scope, str]] = set()
            for item in items:
                scope = (item.bot_id, item.group_id)
                kept = self._items.setdefault(scope, {})
                forgotten = self._forgotten.get(scope, {}).get((item.kind, item.key), ())
                merged = merge_item(kept.get((item.kind, item.key)), item, forgotten)
                if merged is None:
                    unchanged += 1
                    continue
                kept[(item.kind, item.key)] = merged
                stored.append(merged)
                touched.add((scope, item.kind))
                self._versions[scope] = self._versions.get(scope, 0) + 1
            for scope, kind in sorted(touched):
                cap = (caps or {}).get(kind)
                if cap is None:
                    continue
                kept = self._items[scope]
                of_kind = [i for (k, _key), i in kept.items() if k == kind]
                for item in beyond_cap(of_kind, cap):
                    del kept[(kind, item.key)]
                    evicted.append((kind, item.key))
                    gone.add((scope, kind, item.key))
        return PutResult(
            stored=tuple(i for i in stored if ((i.bot_id, i.group_id), i.kind, i.key) not in gone),
            evicted=tuple(evicted),
            unchanged=unchanged,
        )

    def items(
        self,
        bot_id: str,
        group_id: str,
        *,
        kind: str | None = None,
        user_id: str | None = None,
        limit: int = 1000,
    ) -> list[LearnedItem]:
        with self._lock:
            found = [
                item
                for (k, _key), item in self._items.get((bot_id, group_id), {}).items()
                if (kind is None or k == kind) and (user_id is None or item.user_id == user_id)
            ]
        return sorted_items(found)[: max(0, limit)]

    def item(self, bot_id: str, group_id: str, kind: str, key: str) -> LearnedItem | None:
        with self._lock:
            return self._items.get((bot_id, group_id), {}).get((kind, key))

    def forget(
        self, bot_id: str, group_id: str, *, kind: str | None = None, key: str | None = None
    ) -> list[LearnedItem]:
        scope = (bot_id, group_id)
        with self._lock:
            kept = self._items.get(scope, {})
            gone = [
                item
                for (k, item_key), item in kept.items()
                if (kind is None or k == kind) and (key is None or item_key == key)
            ]
            forgotten = self._forgotten.setdefault(scope, {})
            for item in gone:
                del kept[(item.kind, item.key)]
                before = forgotten.get((item.kind, item.key), ())
                forgotten[(item.kind, item.key)] = tuple(
                    dict.fromkeys(before + item.source_message_ids)
                )
            if gone:
                self._versions[scope] = self._versions.get(scope, 0) + 1
        return sorted_items(gone)

    def forgotten(self, bot_id: str, group_id: str, kind: str) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return {
                key: ids
                for (k, key), ids in self._forgotten.get((bot_id, group_id), {}).items()
                if k == kind
            }

    def scopes(self) -> list[tuple[str, str]]:
        with self._lock:
            found = {s for s, kept in self._items.items() if kept}
            found.update((b, g) for _learner, b, g in self._cursors)
            found.update(s for s, kept in self._injections.items() if kept)
        return sorted(found)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self._lock:
            for kept in self._items.values():
                for kind, _key in kept:
                    counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items()))

    def version(self, bot_id: str, group_id: str) -> int:
        return self._versions.get((bot_id, group_id), 0)

    def cursor(self, learner: str, bot_id: str, group_id: str) -> LearnerCursor:
        with self._lock:
            return self._cursors.get((learner, bot_id, group_id), LearnerCursor())

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
        key = (learner, bot_id, group_id)
        with self._lock:
            lease = self._leases.get(key)
            if lease is not None and lease[0] != holder and lease[1] > now.timestamp():
                return False
            self._leases[key] = (holder, now.timestamp() + lease_s)
            return True

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
        key = (learner, bot_id, group_id)
        with self._lock:
            lease = self._leases.get(key)
            if lease is None or lease[0] != holder or lease[1] <= now.timestamp():
                return False
            self._cursors[key] = attrs.evolve(cursor, updated_at=now)
            return True

    def release(self, learner: str, bot_id: str, group_id: str, holder: str) -> None:
        key = (learner, bot_id, group_id)
        with self._lock:
            lease = self._leases.get(key)
            if lease is not None and lease[0] == holder:
                del self._leases[key]

    def reset(self, bot_id: str, group_id: str) -> None:
        with self._lock:
            for key in [k for k in self._cursors if k[1:] == (bot_id, group_id)]:
                del self._cursors[key]
            for key in [k for k in self._leases if k[1:] == (bot_id, group_id)]:
                del self._leases[key]

    def remember_injection(self, injection: DeliveredInjection, *, keep: int = 256) -> None:
        scope = (injection.bot_id, injection.group_id)
        with self._lock:
            kept = self._injections.setdefault(scope, OrderedDict())
            kept[injection.message_id] = injection
            kept.move_to_end(injection.message_id)
            while len(kept) > keep:
                kept.popitem(last=False)

    def injection(self, bot_id: str, group_id: str, message_id: str) -> DeliveredInjection | None:
        with self._lock:
            kept = self._injections.get((bot_id, group_id))
            return None if kept is None else kept.get(message_id)
