"""The group log and the sessions in Redis.

Rows live in a hash (row key → JSON) beside sorted sets that index them by time; the row keys come
from one counter per bot and group and are zero-padded, so rows of equal time keep their insertion
order, like the SQLite ``seq`` column. Every write that checks before it changes is atomic, so bot
processes sharing a Redis stay correct without locks: a duplicate message id and the windows are
checked in one Lua script (the rows stay on the server), the compaction cooldown of
:func:`promptweave.store.sessions.compaction_due` in one optimistic transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import attrs
from redis.commands.core import Script

from promptweave.contrib.redis_store._namespace import (
    Pipeline,
    RedisNamespace,
    decode_message,
    decode_time,
    dumps,
    encode_message,
    encode_time,
    row_key,
)
from promptweave.contrib.redis_store.learned import scan_scopes
from promptweave.store.learned import LoggedMessage
from promptweave.store.session_rows import SessionTurn
from promptweave.store.sessions import (
    GROUP_LOG_MAX_PER_GROUP,
    TRIM_BATCH,
    compaction_due,
    summary_row,
)
from promptweave.turn import ChatMessage

__all__ = ["RedisGroupLog", "RedisSessionStore"]

# KEYS: index, rows, ids, counter. ARGV: has id, id, time, row, max rows, trim batch.
_APPEND_MESSAGE = """
if ARGV[1] == '1' and redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
    return 0
end
local row = string.format('%016d', redis.call('INCR', KEYS[4]))
redis.call('ZADD', KEYS[1], ARGV[3], row)
redis.call('HSET', KEYS[2], row, ARGV[4])
if ARGV[1] == '1' then
    redis.call('HSET', KEYS[3], ARGV[2], row)
end
local function drop(old)
    local id = cjson.decode(redis.call('HGET', KEYS[2], old))['id']
    if type(id) == 'string' and redis.call('HGET', KEYS[3], id) == old then
        redis.call('HDEL', KEYS[3], id)
    end
    redis.call('HDEL', KEYS[2], old)
    redis.call('ZREM', KEYS[1], old)
end
local window = tonumber(ARGV[5])
local excess = math.min(redis.call('ZCARD', KEYS[1]) - window, tonumber(ARGV[6]))
if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[1], 0, excess - 1)) do
        drop(old)
    end
end
-- A message older than the whole window was dropped at once, or fell into a backlog left for
-- later batches (then it goes now): nothing was added.
local rank = redis.call('ZREVRANK', KEYS[1], row)
if not rank then
    return 0
end
if rank >= window then
    drop(row)
    return 0
end
return 1
"""

# KEYS: rows. ARGV: position, limit. The first ``limit`` rows whose row number is above
# ``position``, in the order appended (row numbers come from the scope's counter), each followed
# by its row. The log holds at most ``max_per_group`` rows (and a trim backlog), so they are
# filtered here rather than kept in one more index that every append would write.
_MESSAGES_AFTER = """
local after = tonumber(ARGV[1])
local found = {}
for _, row in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(row) > after then
        found[#found + 1] = row
    end
end
table.sort(found)
local rows = {}
for index = 1, math.min(#found, tonumber(ARGV[2])) do
    rows[#rows + 1] = found[index]
    rows[#rows + 1] = redis.call('HGET', KEYS[1], found[index])
end
return rows
"""

# KEYS: ids, rows. ARGV: message id. The row of that id, read in one step so a concurrent prune
# cannot leave an id pointing at nothing.
_FIND_MESSAGE = """
local row = redis.call('HGET', KEYS[1], ARGV[1])
if not row then
    return false
end
return redis.call('HGET', KEYS[2], row)
"""

# Forget one session row: KEYS as in _APPEND_TURNS, ``slot`` the user's first key.
_FORGET_ROW = """
local function forget(slot, row)
    local stored = redis.call('HGET', KEYS[2], row)
    if not stored then
        return
    end
    local turn = cjson.decode(stored)
    if type(turn['message_id']) == 'string' then
        local field = turn['role'] .. ':' .. turn['message_id']
        if redis.call('HGET', KEYS[slot + 1], field) == row then
            redis.call('HDEL', KEYS[slot + 1], field)
        end
    end
    redis.call('HDEL', KEYS[2], row)
    redis.call('ZREM', KEYS[3], row)
    redis.call('ZREM', KEYS[slot], row)
    redis.call('ZREM', KEYS[slot + 2], row)
end
"""

# KEYS: counter, rows, group turns, then per user: session, ids, summaries.
# ARGV: storage window, trim batch, then per turn: user number, kind, has id, role:id, time, row.
_APPEND_TURNS = (
    _FORGET_ROW
    + """
local window = tonumber(ARGV[1])
local added = {}
local touched = {}
for index = 3, #ARGV, 6 do
    local slot = 4 + 3 * tonumber(ARGV[index])
    local has_id, field = ARGV[index + 2] == '1', ARGV[index + 3]
    if not has_id or redis.call('HEXISTS', KEYS[slot + 1], field) == 0 then
        local row = string.format('%016d', redis.call('INCR', KEYS[1]))
        redis.call('HSET', KEYS[2], row, ARGV[index + 5])
        redis.call('ZADD', KEYS[slot], ARGV[index + 4], row)
        if ARGV[index + 1] == 'summary' then
            redis.call('ZADD', KEYS[slot + 2], ARGV[index + 4], row)
        else
            redis.call('ZADD', KEYS[3], ARGV[index + 4], row)
        end
        if has_id then
            redis.call('HSET', KEYS[slot + 1], field, row)
        end
        added[#added + 1] = {slot, row}
        touched[slot] = true
    end
end
for slot in pairs(touched) do
    local excess = math.min(redis.call('ZCARD', KEYS[slot]) - window, tonumber(ARGV[2]))
    if excess > 0 then
        for _, old in ipairs(redis.call('ZRANGE', KEYS[slot], 0, excess - 1)) do
            forget(slot, old)
        end
    end
end
-- A row older than the storage window was deleted at once, or fell into a backlog left for
-- later batches (then it goes now): it does not count as added.
local kept = 0
for _, entry in ipairs(added) do
    local rank = redis.call('ZREVRANK', KEYS[entry[1]], entry[2])
    if rank and rank >= window then
        forget(entry[1], entry[2])
    elseif rank then
        kept = kept + 1
    end
end
return kept
"""
)

# KEYS: counter, rows, group turns, session, ids, summaries.
# ARGV: time, summary row (which has no message id), then the row keys to remove.
_REPLACE_WITH_SUMMARY = (
    _FORGET_ROW
    + """
local removed = 0
for index = 3, #ARGV do
    if redis.call('ZSCORE', KEYS[4], ARGV[index]) then
        forget(4, ARGV[index])
        removed = removed + 1
    end
end
if removed == 0 then
    return 0
end
local row = string.format('%016d', redis.call('INCR', KEYS[1]))
redis.call('HSET', KEYS[2], row, ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[1], row)
redis.call('ZADD', KEYS[6], ARGV[1], row)
return 1
"""
)


def _turn_row(turn: SessionTurn) -> str:
    return dumps(
        {
            "user_id": turn.user_id,
            "role": turn.role,
            "kind": turn.kind.value,
            "content": turn.content,
            "message_id": turn.message_id,
            "reply_to": turn.reply_to,
            "images": list(turn.images),
            "time": encode_time(turn.time),
            "usage": None if turn.usage is None else dict(turn.usage),
        }
    )


def _turn(bot_id: str, group_id: str, key: str, row: dict[str, Any]) -> SessionTurn:
    return SessionTurn(
        bot_id=bot_id,
        group_id=group_id,
        **{**row, "time": decode_time(row["time"])},
        key=int(key),
    )


def _id_field(turn: SessionTurn) -> tuple[str, str]:
    """``(has id, "role:id")``: the duplicate check of a session row."""
    if turn.message_id is None:
        return "0", ""
    return "1", f"{turn.role}:{turn.message_id}"


@attrs.define
class RedisGroupLog:
    """:class:`promptweave.store.sessions.GroupLog` in Redis.

    :param max_per_group: messages kept per bot and group; the oldest go first (and their ids may
        be recorded again), exactly like :class:`promptweave.store.sessions_memory.MemoryGroupLog`,
        so the log's memory stays bounded (the timeline reads at most 16).
    """

    namespace: RedisNamespace
    max_per_group: int = attrs.field(
        default=GROUP_LOG_MAX_PER_GROUP, validator=attrs.validators.ge(16)
    )
    _append: Script = attrs.field(init=False, repr=False)
    _find: Script = attrs.field(init=False, repr=False)
    _after: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._append = self.namespace.script(_APPEND_MESSAGE)
        self._find = self.namespace.script(_FIND_MESSAGE)
        self._after = self.namespace.script(_MESSAGES_AFTER)

    def _keys(self, bot_id: str, group_id: str) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "log"),
            key(bot_id, group_id, "log:rows"),
            key(bot_id, group_id, "log:ids"),
            key(bot_id, group_id, "seq"),
        ]

    def append_group_message(self, bot_id: str, group_id: str, message: ChatMessage) -> bool:
        has_id = "0" if message.id is None else "1"
        args = [has_id, message.id or "", repr(message.time.timestamp())]
        with self.namespace.reached():
            added = self._append(
                keys=self._keys(bot_id, group_id),
                args=[*args, encode_message(message), self.max_per_group, TRIM_BATCH],
            )
        return bool(added)

    def recent_group_messages(
        self, bot_id: str, group_id: str, *, until: dt.datetime, limit: int
    ) -> list[ChatMessage]:
        index, rows = self._keys(bot_id, group_id)[:2]
        return [
            decode_message(row)
            for _key, row in self.namespace.window(index, rows, until=until, limit=limit)
        ]

    def find_group_message(self, bot_id: str, group_id: str, message_id: str) -> ChatMessage | None:
        _index, rows, ids, _counter = self._keys(bot_id, group_id)
        with self.namespace.reached():
            found = self._find(keys=[ids, rows], args=[message_id])
        return None if found is None else decode_message(json.loads(found))

    def messages_after(
        self, bot_id: str, group_id: str, position: int, *, limit: int
    ) -> list[LoggedMessage]:
        """:meth:`promptweave.store.learned.LearningSource.messages_after`: a message's position
        is its row number, which the scope's counter (``seq``) gives in the order appended."""
        if limit <= 0:
            return []
        rows = self._keys(bot_id, group_id)[1]
        with self.namespace.reached():
            found = self._after(keys=[rows], args=[max(0, position), limit])
        return [
            LoggedMessage(
                position=int(found[at]), message=decode_message(json.loads(found[at + 1]))
            )
            for at in range(0, len(found), 2)
        ]

    def group_scopes(self) -> list[tuple[str, str]]:
        """:meth:`promptweave.store.learned.LearningSource.group_scopes`: the scopes of the
        ``log:rows`` keys, found with ``SCAN`` (a walk of the database, for start-up and
        ``promptweave learn``; no key is shared by every group, which a cluster could not
        shard)."""
        return sorted(
            {
                (bot_id, group_id)
                for bot_id, group_id, _name in scan_scopes(self.namespace, "log:rows")
                if group_id
            }
        )


@attrs.define
class RedisSessionStore:
    """:class:`promptweave.store.sessions.SessionStore` in Redis.

    Appends are atomic per bot and group (one script per bot and group of the batch).
    """

    namespace: RedisNamespace
    _append: Script = attrs.field(init=False, repr=False)
    _replace: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._append = self.namespace.script(_APPEND_TURNS)
        self._replace = self.namespace.script(_REPLACE_WITH_SUMMARY)

    def _group_keys(self, bot_id: str, group_id: str) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "seq"),
            key(bot_id, group_id, "turns:rows"),
            key(bot_id, group_id, "turns"),
        ]

    def _user_keys(self, bot_id: str, group_id: str, user_id: str) -> list[str]:
        key = self.namespace.key
        return [
            key(bot_id, group_id, "turns:user", user_id),
            key(bot_id, group_id, "turns:ids", user_id),
            key(bot_id, group_id, "turns:summaries", user_id),
        ]

    def append_turns(self, turns: Sequence[SessionTurn], *, storage_window: int) -> int:
        batches: dict[tuple[str, str], list[SessionTurn]] = {}
        for turn in turns:
            batches.setdefault((turn.bot_id, turn.group_id), []).append(turn)
        added = 0
        for (bot_id, group_id), batch in batches.items():
            users = list(dict.fromkeys(turn.user_id for turn in batch))
            keys = self._group_keys(bot_id, group_id)
            for user_id in users:
                keys += self._user_keys(bot_id, group_id, user_id)
            args: list[Any] = [storage_window, TRIM_BATCH]
            for turn in batch:
                has_id, field = _id_field(turn)
                args += [
                    users.index(turn.user_id),
                    turn.kind.value,
                    has_id,
                    field,
                    repr(turn.time.timestamp()),
                    _turn_row(turn),
                ]
            with self.namespace.reached():
                added += int(self._append(keys=keys, args=args))
        return added

    def user_turns(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
        usage: bool = True,
    ) -> list[SessionTurn]:
        # Each row is decoded from its hash anyway: the usage costs nothing to keep.
        index = self._user_keys(bot_id, group_id, user_id)[0]
        rows = self._group_keys(bot_id, group_id)[1]
        found = self.namespace.window(index, rows, until=until, since=since, limit=limit)
        return [_turn(bot_id, group_id, key, row) for key, row in found]

    def latest_summary(
        self, bot_id: str, group_id: str, user_id: str, *, until: dt.datetime
    ) -> SessionTurn | None:
        index = self._user_keys(bot_id, group_id, user_id)[2]
        rows = self._group_keys(bot_id, group_id)[1]
        found = self.namespace.window(index, rows, until=until, limit=1)
        return _turn(bot_id, group_id, *found[0]) if found else None

    def group_turns(
        self,
        bot_id: str,
        group_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
    ) -> list[SessionTurn]:
        _counter, rows, index = self._group_keys(bot_id, group_id)
        found = self.namespace.window(index, rows, until=until, since=since, limit=limit)
        return [_turn(bot_id, group_id, key, row) for key, row in found]

    def claim_compaction(
        self, bot_id: str, group_id: str, user_id: str, *, now: dt.datetime, cooldown_s: float
    ) -> bool:
        key = self.namespace.key(bot_id, group_id, "compactions")

        def claim(pipeline: Pipeline) -> bool:
            started = pipeline.hget(key, user_id)
            if not compaction_due(None if started is None else float(started), now, cooldown_s):
                return False
            pipeline.multi()
            pipeline.hset(key, user_id, repr(now.timestamp()))
            return True

        return self.namespace.transaction([key], claim)

    def replace_with_summary(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        remove: Sequence[int],
        summary: SessionTurn,
    ) -> bool:
        stored = summary_row(bot_id, group_id, user_id, summary)
        keys = self._group_keys(bot_id, group_id) + self._user_keys(bot_id, group_id, user_id)
        args = [repr(stored.time.timestamp()), _turn_row(stored), *map(row_key, remove)]
        with self.namespace.reached():
            replaced = self._replace(keys=keys, args=args)
        return bool(replaced)
