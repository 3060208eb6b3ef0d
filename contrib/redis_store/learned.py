"""The learned store in Redis (:class:`promptweave.store.learned.LearnedStore`, ``docs/learning.md``).

Everything learned of one bot in one group lives under keys with that scope's hash tag
(``<prefix>{<bot>:<group>}:learned:…``, ``docs/store.md``), so every script and transaction
touches one slot:

- ``learned:items:<kind>`` (hash: item key → JSON) and ``learned:kinds`` (set of the kinds
  holding items), ``learned:forgotten:<kind>`` (hash: item key → JSON list of the message ids
  forgotten with it), ``learned:version`` (counter of item changes);
- ``learned:cursors`` (hash: learner → JSON cursor) and ``learned:leases`` (hash: ``h:<learner>``
  → holder, ``u:<learner>`` → lease end, epoch seconds);
- ``learned:injections`` (hash: message id → JSON), ``learned:injections:order`` (sorted set of
  the message ids by ``learned:injections:seq``, a counter), the newest kept.

What is kept and evicted is decided by the rules of :mod:`promptweave.store.learned`
(:func:`~promptweave.store.learned.merge_item`, :func:`~promptweave.store.learned.eviction_order`)
in Python, inside one optimistic transaction per scope (:meth:`RedisNamespace.transaction`), so it
is the memory store's to the item. Leases and cursors are Lua scripts, atomic across processes; a
lease's end is compared as the number Python wrote, never Redis's own key expiry, so a replay
leases on the log's clock. :meth:`RedisLearnedStore.scopes` and :meth:`~RedisLearnedStore.counts`
list the keys with ``SCAN`` (no key shared by every scope, which a cluster could not shard): a
walk of the database, for the commands and the start-up that call them, never on a turn's path.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import unquote

import attrs
from redis.commands.core import Script

from promptweave.contrib.redis_store._namespace import (
    Pipeline,
    RedisNamespace,
    decode_time,
    dumps,
    encode_time,
)
from promptweave.store.learned import (
    LEASE_S,
    DeliveredInjection,
    LearnedItem,
    LearnerCursor,
    PutResult,
    beyond_cap,
    merge_item,
)
from promptweave.store.learned_memory import sorted_items

__all__ = ["RedisLearnedStore", "scan_scopes"]

_Scope = tuple[str, str]

# KEYS: leases. ARGV: learner, holder, now, lease end. Another holder's lease still running
# refuses; otherwise the lease is the holder's until the end.
_CLAIM = """
local holder = redis.call('HGET', KEYS[1], 'h:' .. ARGV[1])
local ends = redis.call('HGET', KEYS[1], 'u:' .. ARGV[1])
if holder and holder ~= ARGV[2] and ends and tonumber(ends) > tonumber(ARGV[3]) then
    return 0
end
redis.call('HSET', KEYS[1], 'h:' .. ARGV[1], ARGV[2], 'u:' .. ARGV[1], ARGV[4])
return 1
"""

# KEYS: leases, cursors. ARGV: learner, holder, now, cursor (JSON). Saved only by the holder of a
# lease still running.
_ADVANCE = """
local holder = redis.call('HGET', KEYS[1], 'h:' .. ARGV[1])
local ends = redis.call('HGET', KEYS[1], 'u:' .. ARGV[1])
if holder ~= ARGV[2] or not ends or tonumber(ends) <= tonumber(ARGV[3]) then
    return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
"""

# KEYS: leases. ARGV: learner, holder.
_RELEASE = """
if redis.call('HGET', KEYS[1], 'h:' .. ARGV[1]) == ARGV[2] then
    redis.call('HDEL', KEYS[1], 'h:' .. ARGV[1], 'u:' .. ARGV[1])
end
return 0
"""

# KEYS: rows, order, counter. ARGV: message id, row (JSON), keep. The message becomes the newest;
# beyond ``keep`` the oldest go.
_REMEMBER = """
local number = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], number, ARGV[1])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess - 1)) do
        redis.call('HDEL', KEYS[1], old)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, excess - 1)
end
return 0
"""


def _glob(text: str) -> str:
    """``text`` matched literally by a ``SCAN MATCH`` pattern."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


def scan_scopes(namespace: RedisNamespace, name: str) -> Iterator[tuple[str, str, str]]:
    """``(bot, group, name)`` of every key of ``namespace`` whose name (after the scope's hash
    tag) matches the glob ``name``: one ``SCAN`` of the database. Ids are percent-encoded in keys,
    so the hash tag splits at its one raw ``:``."""
    prefix = namespace.prefix
    with namespace.reached():
        keys = list(namespace.client.scan_iter(match=f"{_glob(prefix)}{{*}}:{name}", count=1000))
    for key in keys:
        rest = str(key)[len(prefix) :]
        if not rest.startswith("{"):
            continue
        tag, found, tail = rest[1:].partition("}:")
        bot, colon, group = tag.partition(":")
        if found and colon:
            yield unquote(bot), unquote(group), tail


def _text(value: str | bytes) -> str:
    """A reply of the client (``decode_responses=True``: always text)."""
    return value if isinstance(value, str) else value.decode("utf-8")


def _texts(found: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(key): _text(value) for key, value in found.items()}


def _hset_items(mapping: Mapping[str, str]) -> list[str]:
    """``HSET`` field, value, field, value…"""
    return [part for pair in mapping.items() for part in pair]


def _item_row(item: LearnedItem) -> str:
    return dumps(
        {
            "user_id": item.user_id,
            "fields": dict(item.fields),
            "ids": list(item.source_message_ids),
            "count": item.count,
            "learner": item.learner,
            "learned_at": encode_time(item.learned_at),
            "updated_at": encode_time(item.updated_at or item.learned_at),
        }
    )


def _item(bot_id: str, group_id: str, kind: str, key: str, row: str) -> LearnedItem:
    data: dict[str, Any] = json.loads(row)
    return LearnedItem(
        kind=kind,
        bot_id=bot_id,
        group_id=group_id,
        key=key,
        user_id=data["user_id"],
        fields=data["fields"],
        source_message_ids=tuple(data["ids"]),
        count=data["count"],
        learner=data["learner"],
        learned_at=decode_time(data["learned_at"]),
        updated_at=decode_time(data["updated_at"]),
    )


@attrs.define
class _ScopePut:
    """What :meth:`RedisLearnedStore.put_items` did in one scope."""

    stored: list[tuple[int, LearnedItem]]
    evicted: list[tuple[str, str]]
    unchanged: int


@attrs.define
class RedisLearnedStore:
    """:class:`promptweave.store.learned.LearnedStore` in Redis, shared by every process on the
    server: the items, the learners' cursors and leases, and the delivered injections."""

    #: Every read is one round trip of one scope (a pipeline).
    blocking_reads: ClassVar[bool] = False

    namespace: RedisNamespace
    _claim: Script = attrs.field(init=False, repr=False)
    _advance: Script = attrs.field(init=False, repr=False)
    _release: Script = attrs.field(init=False, repr=False)
    _remember: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._claim = self.namespace.script(_CLAIM)
        self._advance = self.namespace.script(_ADVANCE)
        self._release = self.namespace.script(_RELEASE)
        self._remember = self.namespace.script(_REMEMBER)

    def _key(self, scope: _Scope, name: str, *parts: str) -> str:
        return self.namespace.key(scope[0], scope[1], f"learned:{name}", *parts)

    # -- items ---------------------------------------------------------------------------------

    def put_items(
        self, items: Sequence[LearnedItem], *, caps: Mapping[str, int] | None = None
    ) -> PutResult:
        by_scope: dict[_Scope, list[tuple[int, LearnedItem]]] = {}
        for index, item in enumerate(items):
            by_scope.setdefault((item.bot_id, item.group_id), []).append((index, item))
        stored: list[tuple[int, LearnedItem]] = []
        evicted: list[tuple[str, str]] = []
        unchanged = 0
        for scope in sorted(by_scope):
            done = self._put_scope(scope, by_scope[scope], caps or {})
            # An item evicted by the call in its own scope is not reported stored.
            gone = set(done.evicted)
            stored += [(i, item) for i, item in done.stored if (item.kind, item.key) not in gone]
            evicted += done.evicted
            unchanged += done.unchanged
        return PutResult(
            stored=tuple(item for _index, item in sorted(stored, key=lambda pair: pair[0])),
            evicted=tuple(evicted),
            unchanged=unchanged,
        )

    def _put_scope(
        self, scope: _Scope, entries: list[tuple[int, LearnedItem]], caps: Mapping[str, int]
    ) -> _ScopePut:
        """One scope's share of :meth:`put_items`, in one optimistic transaction."""
        kinds = sorted({item.kind for _index, item in entries})
        kept_keys = {kind: self._key(scope, "items", kind) for kind in kinds}
        gone_keys = {kind: self._key(scope, "forgotten", kind) for kind in kinds}
        kinds_key, version_key = self._key(scope, "kinds"), self._key(scope, "version")

        def put(pipeline: Pipeline) -> _ScopePut:
            kept: dict[str, dict[str, LearnedItem]] = {}
            forgotten: dict[str, dict[str, tuple[str, ...]]] = {}
            for kind in kinds:
                wanted = list(dict.fromkeys(item.key for _i, item in entries if item.kind == kind))
                if kind in caps:
                    rows = _texts(pipeline.hgetall(kept_keys[kind]))
                else:
                    values = pipeline.hmget(kept_keys[kind], wanted)
                    rows = {
                        key: _text(row)
                        for key, row in zip(wanted, values, strict=True)
                        if row is not None
                    }
                kept[kind] = {key: _item(*scope, kind, key, row) for key, row in rows.items()}
                ids = pipeline.hmget(gone_keys[kind], wanted)
                forgotten[kind] = {
                    key: tuple(json.loads(_text(found)))
                    for key, found in zip(wanted, ids, strict=True)
                    if found is not None
                }
            result = _ScopePut(stored=[], evicted=[], unchanged=0)
            changed: dict[str, set[str]] = {}
            for index, item in entries:
                merged = merge_item(
                    kept[item.kind].get(item.key),
                    item,
                    forgotten[item.kind].get(item.key, ()),
                )
                if merged is None:
                    result.unchanged += 1
                    continue
                kept[item.kind][item.key] = merged
                result.stored.append((index, merged))
                changed.setdefault(item.kind, set()).add(item.key)
            evicted: dict[str, list[str]] = {}
            for kind in sorted(changed):
                cap = caps.get(kind)
                if cap is None:
                    continue
                of_kind = list(kept[kind].values())
                for item in beyond_cap(of_kind, cap):
                    del kept[kind][item.key]
                    evicted.setdefault(kind, []).append(item.key)
                    result.evicted.append((kind, item.key))
            if not changed:
                return result
            pipeline.multi()
            for kind, keys in sorted(changed.items()):
                rows_now = {key: _item_row(kept[kind][key]) for key in keys if key in kept[kind]}
                if rows_now:
                    pipeline.hset(kept_keys[kind], items=_hset_items(rows_now))
                if evicted.get(kind):
                    pipeline.hdel(kept_keys[kind], *evicted[kind])
                if kept[kind]:
                    pipeline.sadd(kinds_key, kind)
                else:
                    pipeline.srem(kinds_key, kind)
            pipeline.incr(version_key)
            return result

        return self.namespace.transaction(
            [*kept_keys.values(), *gone_keys.values(), kinds_key], put
        )

    def _kinds(self, scope: _Scope) -> list[str]:
        with self.namespace.reached():
            return sorted(map(_text, self.namespace.client.smembers(self._key(scope, "kinds"))))

    def items(
        self,
        bot_id: str,
        group_id: str,
        *,
        kind: str | None = None,
        user_id: str | None = None,
        limit: int = 1000,
    ) -> list[LearnedItem]:
        scope = (bot_id, group_id)
        kinds = [kind] if kind is not None else self._kinds(scope)
        with self.namespace.reached(), self.namespace.client.pipeline(transaction=False) as pipe:
            for of_kind in kinds:
                pipe.hgetall(self._key(scope, "items", of_kind))
            found = pipe.execute()
        items = [
            _item(bot_id, group_id, of_kind, key, row)
            for of_kind, rows in zip(kinds, found, strict=True)
            for key, row in rows.items()
        ]
        if user_id is not None:
            items = [item for item in items if item.user_id == user_id]
        return sorted_items(items)[: max(0, limit)]

    def item(self, bot_id: str, group_id: str, kind: str, key: str) -> LearnedItem | None:
        with self.namespace.reached():
            row = self.namespace.client.hget(self._key((bot_id, group_id), "items", kind), key)
        return None if row is None else _item(bot_id, group_id, kind, key, _text(row))

    def forget(
        self, bot_id: str, group_id: str, *, kind: str | None = None, key: str | None = None
    ) -> list[LearnedItem]:
        scope = (bot_id, group_id)
        kinds_key, version_key = self._key(scope, "kinds"), self._key(scope, "version")

        def forget(pipeline: Pipeline) -> list[LearnedItem]:
            kinds = [kind] if kind is not None else sorted(map(_text, pipeline.smembers(kinds_key)))
            kept_keys = {k: self._key(scope, "items", k) for k in kinds}
            gone_keys = {k: self._key(scope, "forgotten", k) for k in kinds}
            if kinds:
                pipeline.watch(*kept_keys.values(), *gone_keys.values())  # type: ignore[no-untyped-call]
            gone: dict[str, list[LearnedItem]] = {}
            left: dict[str, int] = {}
            for of_kind in kinds:
                rows = _texts(pipeline.hgetall(kept_keys[of_kind]))
                picked = [
                    _item(bot_id, group_id, of_kind, k, row)
                    for k, row in rows.items()
                    if key is None or k == key
                ]
                if picked:
                    gone[of_kind] = picked
                    left[of_kind] = len(rows) - len(picked)
            if not gone:
                return []
            before: dict[str, list[Any]] = {
                of_kind: list(pipeline.hmget(gone_keys[of_kind], [item.key for item in items]))
                for of_kind, items in gone.items()
            }
            pipeline.multi()
            for of_kind, picked in gone.items():
                pipeline.hdel(kept_keys[of_kind], *(item.key for item in picked))
                remembered = {}
                for item, known in zip(picked, before[of_kind], strict=True):
                    earlier = tuple(json.loads(_text(known))) if known is not None else ()
                    ids = tuple(dict.fromkeys(earlier + item.source_message_ids))
                    remembered[item.key] = dumps(list(ids))
                pipeline.hset(gone_keys[of_kind], items=_hset_items(remembered))
                if left[of_kind] == 0:
                    pipeline.srem(kinds_key, of_kind)
            pipeline.incr(version_key)
            return [item for picked in gone.values() for item in picked]

        return sorted_items(self.namespace.transaction([kinds_key], forget))

    def forgotten(self, bot_id: str, group_id: str, kind: str) -> dict[str, tuple[str, ...]]:
        with self.namespace.reached():
            rows = _texts(
                self.namespace.client.hgetall(self._key((bot_id, group_id), "forgotten", kind))
            )
        return {key: tuple(json.loads(ids)) for key, ids in rows.items()}

    def scopes(self) -> list[tuple[str, str]]:
        found = {
            (bot_id, group_id)
            for bot_id, group_id, name in scan_scopes(self.namespace, "learned:*")
            if name.startswith("learned:items:")
            or name in ("learned:cursors", "learned:injections")
        }
        return sorted(found)

    def counts(self) -> dict[str, int]:
        keys = [
            (
                self.namespace.key(bot_id, group_id, name),
                unquote(name.removeprefix("learned:items:")),
            )
            for bot_id, group_id, name in scan_scopes(self.namespace, "learned:items:*")
        ]
        with self.namespace.reached(), self.namespace.client.pipeline(transaction=False) as pipe:
            for key, _kind in keys:
                pipe.hlen(key)
            sizes = pipe.execute()
        counts: dict[str, int] = {}
        for (_key, kind), size in zip(keys, sizes, strict=True):
            if size:
                counts[kind] = counts.get(kind, 0) + int(size)
        return dict(sorted(counts.items()))

    def version(self, bot_id: str, group_id: str) -> int:
        with self.namespace.reached():
            value = self.namespace.client.get(self._key((bot_id, group_id), "version"))
        return int(value or 0)

    # -- cursors and leases ----------------------------------------------------------------------

    def cursor(self, learner: str, bot_id: str, group_id: str) -> LearnerCursor:
        with self.namespace.reached():
            row = self.namespace.client.hget(self._key((bot_id, group_id), "cursors"), learner)
        if row is None:
            return LearnerCursor()
        data = json.loads(row)
        return LearnerCursor(
            position=data["position"],
            state=data["state"],
            updated_at=decode_time(data["updated_at"]),
        )

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
        stamp = now.timestamp()
        with self.namespace.reached():
            won = self._claim(
                keys=[self._key((bot_id, group_id), "leases")],
                args=[learner, holder, repr(stamp), repr(stamp + lease_s)],
            )
        return bool(won)

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
        scope = (bot_id, group_id)
        row = dumps(
            {
                "position": cursor.position,
                "state": dict(cursor.state),
                "updated_at": encode_time(now),
            }
        )
        with self.namespace.reached():
            saved = self._advance(
                keys=[self._key(scope, "leases"), self._key(scope, "cursors")],
                args=[learner, holder, repr(now.timestamp()), row],
            )
        return bool(saved)

    def release(self, learner: str, bot_id: str, group_id: str, holder: str) -> None:
        with self.namespace.reached():
            self._release(keys=[self._key((bot_id, group_id), "leases")], args=[learner, holder])

    def reset(self, bot_id: str, group_id: str) -> None:
        scope = (bot_id, group_id)
        with self.namespace.reached():
            self.namespace.client.delete(self._key(scope, "cursors"), self._key(scope, "leases"))

    # -- delivered injections --------------------------------------------------------------------

    def remember_injection(self, injection: DeliveredInjection, *, keep: int = 256) -> None:
        scope = (injection.bot_id, injection.group_id)
        row = dumps(
            {
                "text": injection.text,
                "answering": injection.answering,
                "sources": [dict(source) for source in injection.sources],
                "delivered_at": encode_time(injection.delivered_at),
            }
        )
        keys = [
            self._key(scope, "injections"),
            self._key(scope, "injections:order"),
            self._key(scope, "injections:seq"),
        ]
        with self.namespace.reached():
            self._remember(keys=keys, args=[injection.message_id, row, max(0, keep)])

    def injection(self, bot_id: str, group_id: str, message_id: str) -> DeliveredInjection | None:
        with self.namespace.reached():
            row = self.namespace.client.hget(
                self._key((bot_id, group_id), "injections"), message_id
            )
        if row is None:
            return None
        data = json.loads(row)
        return DeliveredInjection(
            bot_id=bot_id,
            group_id=group_id,
            message_id=message_id,
            text=data["text"],
            answering=data["answering"],
            sources=tuple(data["sources"]),
            delivered_at=decode_time(data["delivered_at"]),
        )
