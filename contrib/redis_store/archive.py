"""The summary archive in Redis: every summary written, for recalling older topics."""

from __future__ import annotations

import attrs
from redis.commands.core import Script

from promptweave.contrib.redis_store._namespace import (
    RedisNamespace,
    decode_time,
    dumps,
    encode_time,
)
from promptweave.store.session_rows import SessionSummary
from promptweave.store.sessions import group_scope

__all__ = ["RedisSummaryStore"]

# KEYS: counter, rows, group index, user index. ARGV: created, row.
_ADD_SUMMARY = """
local row = string.format('%016d', redis.call('INCR', KEYS[1]))
redis.call('HSET', KEYS[2], row, ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[1], row)
redis.call('ZADD', KEYS[4], ARGV[1], row)
"""


@attrs.define
class RedisSummaryStore:
    """:class:`promptweave.store.sessions.SummaryStore` in Redis: one index per bot and group and
    one per user, both by creation time."""

    namespace: RedisNamespace
    _add: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._add = self.namespace.script(_ADD_SUMMARY)

    def _keys(self, bot_id: str, group_id: str, user_id: str | None) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "seq"),
            key(bot_id, group_id, "archive:rows"),
            key(bot_id, group_id, "archive")
            if user_id is None
            else key(bot_id, group_id, "archive:user", user_id),
        ]

    def add_summary(self, summary: SessionSummary) -> None:
        keys = self._keys(summary.bot_id, summary.group_id, None)
        keys.append(self._keys(summary.bot_id, summary.group_id, summary.user_id)[2])
        row = dumps(
            {
                "user_id": summary.user_id,
                "text": summary.text,
                "created": encode_time(summary.created),
                "turns_covered": summary.turns_covered,
            }
        )
        with self.namespace.reached():
            self._add(keys=keys, args=[repr(summary.created.timestamp()), row])

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str | None, limit: int
    ) -> list[SessionSummary]:
        scope = group_scope(group_id)
        _counter, rows, index = self._keys(bot_id, scope, user_id)
        found = self.namespace.window(index, rows, until=None, limit=limit)
        return [
            SessionSummary(
                bot_id=bot_id,
                group_id=scope,
                user_id=row["user_id"],
                text=row["text"],
                created=decode_time(row["created"]),
                turns_covered=row["turns_covered"],
            )
            for _key, row in reversed(found)
        ]
