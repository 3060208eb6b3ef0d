"""The delivery ledger in Redis: each delivered bot message is counted once, across processes."""

from __future__ import annotations

import datetime as dt

import attrs
from redis.commands.core import Script

from contrib.redis_store._namespace import RedisNamespace
from framework.store.deliveries import DELIVERY_LEDGER_MAX, DeliveryState

__all__ = ["RedisDeliveryLedger"]

# KEYS: the (bot, group)'s deliveries, oldest first, each {"a": answering, "m": message} with ""
# for an unknown side. ARGV: answering, message, how many deliveries are kept.
_RECORD_DELIVERY = """
local answering, message = ARGV[1], ARGV[2]
local entries = {}
for index, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    local entry = cjson.decode(raw)
    if message ~= '' and entry['m'] == message then
        return 'repeated'
    end
    entries[index] = entry
end
if answering ~= '' then
    local noted, same = nil, false
    for index, entry in ipairs(entries) do
        if entry['a'] == answering then
            same = true
            if noted == nil and entry['m'] == '' then
                noted = index
            end
        end
    end
    if message == '' and same then
        return 'repeated'
    end
    if noted ~= nil then
        entries[noted]['m'] = message
        redis.call('LSET', KEYS[1], noted - 1, cjson.encode(entries[noted]))
        return 'completed'
    end
end
redis.call('RPUSH', KEYS[1], cjson.encode({a = answering, m = message}))
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
return 'new'
"""


@attrs.define
class RedisDeliveryLedger:
    """:class:`framework.store.deliveries.DeliveryLedger` in Redis, exactly like
    :class:`framework.store.deliveries.MemoryDeliveryLedger`: the newest
    :data:`framework.store.deliveries.DELIVERY_LEDGER_MAX` deliveries per bot and group, in one
    list, checked and changed by one script, so bot processes reporting the same delivery record
    it once."""

    namespace: RedisNamespace
    max_entries: int = attrs.field(default=DELIVERY_LEDGER_MAX, validator=attrs.validators.ge(1))
    _record: Script = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._record = self.namespace.script(_RECORD_DELIVERY)

    def record_delivery(
        self,
        bot_id: str,
        group_id: str,
        *,
        answering: str | None,
        message: str | None,
        now: dt.datetime,
    ) -> DeliveryState:
        if answering is None and message is None:
            raise ValueError("a delivery needs the answered or the delivered message")
        with self.namespace.reached():
            state = self._record(
                keys=[self.namespace.key(bot_id, group_id, "deliveries")],
                args=[answering or "", message or "", self.max_entries],
            )
        return DeliveryState(state)
