"""The delivery ledger in Redis: each delivered bot message is counted once, across processes."""

from __future__ import annotations

import datetime as dt
import json

import attrs

from promptweave.contrib.redis_store._namespace import Pipeline, RedisNamespace, dumps
from promptweave.store.deliveries import DELIVERY_LEDGER_MAX, DeliveryState, settle_delivery

__all__ = ["RedisDeliveryLedger"]


def _entry(answering: str | None, message: str | None) -> str:
    """A delivery as the list keeps it: ``{"a": answering, "m": message}``, ``""`` for an unknown
    side."""
    return dumps({"a": answering or "", "m": message or ""})


@attrs.define
class RedisDeliveryLedger:
    """:class:`promptweave.store.deliveries.DeliveryLedger` in Redis, exactly like
    :class:`promptweave.store.deliveries.MemoryDeliveryLedger`: the newest
    :data:`promptweave.store.deliveries.DELIVERY_LEDGER_MAX` deliveries per bot and group, oldest
    first, in one list that each report reads and changes in one transaction
    (:meth:`RedisNamespace.transaction`), so bot processes reporting the same delivery record it
    once."""

    namespace: RedisNamespace
    max_entries: int = attrs.field(default=DELIVERY_LEDGER_MAX, validator=attrs.validators.ge(1))

    def record_delivery(
        self,
        bot_id: str,
        group_id: str,
        *,
        answering: str | None,
        message: str | None,
        now: dt.datetime,
    ) -> DeliveryState:
        key = self.namespace.key(bot_id, group_id, "deliveries")

        def record(pipeline: Pipeline) -> DeliveryState:
            entries = [json.loads(raw) for raw in pipeline.lrange(key, 0, -1)]
            known = [(entry["a"] or None, entry["m"] or None) for entry in entries]
            state, noted = settle_delivery(known, answering=answering, message=message)
            pipeline.multi()
            if noted is not None:
                pipeline.lset(key, noted, _entry(answering, message))
            elif state is DeliveryState.NEW:
                pipeline.rpush(key, _entry(answering, message))
                pipeline.ltrim(key, -self.max_entries, -1)
            return state

        return self.namespace.transaction([key], record)
