"""The bot-reply context and the feedback ledger in Redis."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import attrs
from redis.commands.core import Script

from promptweave.contrib.redis_store._namespace import RedisNamespace, dumps
from promptweave.store.sessions import (
    BOT_REPLY_MAX_ENTRIES,
    BOT_REPLY_TEXT_CHARS,
    BOT_REPLY_TTL_S,
    FEEDBACK_MAX_PHRASES,
    bot_reply_entry,
    feedback_phrases,
)

__all__ = ["RedisBotReplyContext", "RedisFeedbackLedger"]

# KEYS: recency, expiries, texts, counter. ARGV: message id, text, expires, max entries.
_REMEMBER = """
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[4]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[1], 0, excess - 1)) do
        redis.call('HDEL', KEYS[2], old)
        redis.call('HDEL', KEYS[3], old)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1)
end
"""

# KEYS: as _REMEMBER. ARGV: message id, now, '1' to refresh (and drop an expired entry).
_LOOKUP = """
local expires = redis.call('HGET', KEYS[2], ARGV[1])
if not expires then
    return false
end
local refresh = ARGV[3] == '1'
if tonumber(expires) <= tonumber(ARGV[2]) then
    if refresh then
        redis.call('ZREM', KEYS[1], ARGV[1])
        redis.call('HDEL', KEYS[2], ARGV[1])
        redis.call('HDEL', KEYS[3], ARGV[1])
    end
    return false
end
if refresh then
    redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[4]), ARGV[1])
end
return redis.call('HGET', KEYS[3], ARGV[1])
"""

# KEYS: ledger, the outcome's entries, counter. ARGV: the entries ([outcome, phrase] JSON).
_RECORD_OUTCOME = """
local added = 0
for _, entry in ipairs(ARGV) do
    if not redis.call('ZSCORE', KEYS[1], entry) then
        redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[3]), entry)
        redis.call('SADD', KEYS[2], entry)
        added = added + 1
    end
end
return added
"""

# KEYS: ledger, the outcome's entries.
_UNDO_OUTCOME = """
local removed = 0
for _, entry in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    removed = removed + redis.call('ZREM', KEYS[1], entry)
end
redis.call('DEL', KEYS[2])
return removed
"""

# KEYS: ledger. ARGV: how many distinct phrases. Newest first, each phrase once.
_BLACKLISTED = """
local wanted = tonumber(ARGV[1])
local seen, phrases, start = {}, {}, 0
while #phrases < wanted do
    local page = redis.call('ZREVRANGE', KEYS[1], start, start + 127)
    if #page == 0 then
        break
    end
    for _, entry in ipairs(page) do
        local phrase = cjson.decode(entry)[2]
        if not seen[phrase] and #phrases < wanted then
            seen[phrase] = true
            phrases[#phrases + 1] = phrase
        end
    end
    start = start + 128
end
return phrases
"""


@attrs.define
class RedisBotReplyContext:
    """:class:`promptweave.store.sessions.BotReplyContext` in Redis, an LRU with a TTL exactly like
    :class:`promptweave.store.sessions_memory.MemoryBotReplyContext`: a hit makes the entry the most
    recently used (without extending its expiry), an expired entry is dropped when looked up, and
    beyond ``max_entries`` the least recently used go.

    ``max_entries`` counts per bot and group: one count across groups would need a key every group
    shares, which a cluster could not shard. Expiry follows the caller's ``now`` (the runtime's
    clock), not Redis's own key expiry, so a replayed day expires as it did live.

    :param refresh_on_lookup: ``False`` for a reader that must leave the shared state as it is
        (``promptweave render``): a lookup then changes nothing, not even an expired entry.
    """

    namespace: RedisNamespace
    ttl_s: float = BOT_REPLY_TTL_S
    max_entries: int = BOT_REPLY_MAX_ENTRIES
    text_chars: int = BOT_REPLY_TEXT_CHARS
    refresh_on_lookup: bool = True
    _remember: Script = attrs.field(init=False, repr=False)
    _lookup: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._remember = self.namespace.script(_REMEMBER)
        self._lookup = self.namespace.script(_LOOKUP)

    def _keys(self, bot_id: str, group_id: str) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "replies"),
            key(bot_id, group_id, "replies:expires"),
            key(bot_id, group_id, "replies:text"),
            key(bot_id, group_id, "seq"),
        ]

    def remember(
        self, bot_id: str, group_id: str, message_id: str, text: str, *, now: dt.datetime
    ) -> None:
        entry = bot_reply_entry(
            message_id, text, now=now, ttl_s=self.ttl_s, text_chars=self.text_chars
        )
        if entry is None:
            return
        text, expires = entry
        with self.namespace.reached():
            self._remember(
                keys=self._keys(bot_id, group_id),
                args=[message_id, text, repr(expires), self.max_entries],
            )

    def lookup(
        self, bot_id: str, group_id: str, message_id: str, *, now: dt.datetime
    ) -> str | None:
        with self.namespace.reached():
            text = self._lookup(
                keys=self._keys(bot_id, group_id),
                args=[message_id, repr(now.timestamp()), "1" if self.refresh_on_lookup else "0"],
            )
        return None if text is None else str(text)


@attrs.define
class RedisFeedbackLedger:
    """:class:`promptweave.store.sessions.FeedbackLedger` in Redis: a sorted set of
    ``[outcome, phrase]`` entries in the order they were recorded, and one set per outcome for
    undoing it."""

    namespace: RedisNamespace
    _record: Script = attrs.field(init=False, repr=False)
    _undo: Script = attrs.field(init=False, repr=False)
    _blacklisted: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._record = self.namespace.script(_RECORD_OUTCOME)
        self._undo = self.namespace.script(_UNDO_OUTCOME)
        self._blacklisted = self.namespace.script(_BLACKLISTED)

    def _keys(self, bot_id: str, group_id: str, outcome_id: str) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "feedback"),
            key(bot_id, group_id, "feedback:outcome", outcome_id),
        ]

    def record_outcome(
        self,
        bot_id: str,
        group_id: str,
        outcome_id: str,
        phrases: Sequence[str],
        *,
        now: dt.datetime,
    ) -> int:
        unique = feedback_phrases(phrases)
        if not unique:
            return 0
        keys = [
            *self._keys(bot_id, group_id, outcome_id),
            self.namespace.key(bot_id, group_id, "seq"),
        ]
        with self.namespace.reached():
            added = self._record(keys=keys, args=[dumps([outcome_id, p]) for p in unique])
        return int(added)

    def undo_outcome(self, bot_id: str, group_id: str, outcome_id: str) -> int:
        with self.namespace.reached():
            removed = self._undo(keys=self._keys(bot_id, group_id, outcome_id))
        return int(removed)

    def blacklisted_phrases(self, bot_id: str, group_id: str) -> tuple[str, ...]:
        ledger = self.namespace.key(bot_id, group_id, "feedback")
        with self.namespace.reached():
            phrases = self._blacklisted(keys=[ledger], args=[FEEDBACK_MAX_PHRASES])
        return tuple(str(phrase) for phrase in phrases)
