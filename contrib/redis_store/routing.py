"""The routing state in Redis: one hash of small values per bot and group, and lists for the
messages kept during a cooldown, the quote candidates and the recent bot replies."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import TypeVar
from urllib.parse import quote

import attrs

from promptweave.contrib.redis_store._namespace import (
    Pipeline,
    RedisNamespace,
    decode_message,
    decode_time,
    dumps,
    encode_message,
    encode_time,
)
from promptweave.items import RhythmProfile
from promptweave.store.routing_state import (
    REPLY_LOG_MAX,
    GroupMute,
    GroupSnapshot,
    GroupSwitch,
    QuoteCandidate,
    RoutingState,
    candidates_after,
    kept_messages_after,
)
from promptweave.turn import ChatMessage

__all__ = ["RedisRoutingState"]

T = TypeVar("T")

#: The fields of a group's routing hash that :meth:`RedisRoutingState.snapshot` reads.
_SNAPSHOT_FIELDS = (
    "switch",
    "disabled",
    "cooldown_until",
    "silence_until",
    "last_quote_at",
    "last_phrase",
    "rhythm",
)


def _time(value: str | bytes | None) -> dt.datetime | None:
    return None if value is None else decode_time(json.loads(value))


def _switch(value: str | bytes | None, disabled: str | bytes | None) -> GroupSwitch | None:
    """The group's switch; ``disabled = "1"``, what releases before the switch wrote, is a
    switch off without an author."""
    if value is not None:
        return GroupSwitch.from_json(json.loads(value))
    return GroupSwitch(enabled=False) if disabled == "1" else None


def _mute(
    switch: GroupSwitch | None, cooldown: str | bytes | None, silence: str | bytes | None
) -> GroupMute:
    return GroupMute(
        disabled=switch is not None and not switch.enabled,
        cooldown_until=_time(cooldown),
        silence_until=_time(silence),
        switch=switch,
    )


def _rhythm(value: str | None) -> RhythmProfile | None:
    return None if value is None else RhythmProfile(**json.loads(value))


def _encode_candidate(candidate: QuoteCandidate) -> str:
    return dumps(
        {
            "message_id": candidate.message_id,
            "sender_id": candidate.sender_id,
            "text": candidate.text,
            "time": encode_time(candidate.time),
        }
    )


def _decode_candidate(row: str | bytes) -> QuoteCandidate:
    data = json.loads(row)
    return QuoteCandidate(**{**data, "time": decode_time(data["time"])})


def _decode_message(row: str | bytes) -> ChatMessage:
    return decode_message(json.loads(row))


@attrs.define
class RedisRoutingState(RoutingState):
    """:class:`promptweave.store.routing_state.RoutingState` in Redis, with the behaviour of
    :class:`promptweave.store.routing_state.MemoryRoutingState`; times read back with the UTC offset
    they were written with."""

    namespace: RedisNamespace

    def _key(self, bot_id: str, group_id: str, name: str = "routing") -> str:
        return self.namespace.key(bot_id, group_id, name)

    def _set(self, bot_id: str, group_id: str, field: str, value: str) -> None:
        with self.namespace.reached():
            self.namespace.client.hset(self._key(bot_id, group_id), field, value)

    def _get(self, bot_id: str, group_id: str, field: str) -> str | None:
        with self.namespace.reached():
            value = self.namespace.client.hget(self._key(bot_id, group_id), field)
        return None if value is None else str(value)

    def snapshot(
        self, bot_id: str, group_id: str, *, replies_since: dt.datetime | None = None
    ) -> GroupSnapshot:
        # One round trip: the group's hash and, when counted, its reply log.
        with self.namespace.reached():
            pipeline = self.namespace.client.pipeline(transaction=False)
            pipeline.hmget(self._key(bot_id, group_id), _SNAPSHOT_FIELDS)
            if replies_since is not None:
                pipeline.lrange(self._key(bot_id, group_id, "routing:replies"), 0, -1)
            found = pipeline.execute()
        switch, disabled, cooldown, silence, quoted, phrase, rhythm = found[0]
        bot_replies = 0
        if replies_since is not None:
            since = replies_since.timestamp()
            bot_replies = sum(1 for stamp in found[1] if float(stamp) >= since)
        return GroupSnapshot(
            mute=_mute(_switch(switch, disabled), cooldown, silence),
            last_quote_at=_time(quoted),
            last_phrase=phrase,
            rhythm=_rhythm(rhythm),
            replies_since=replies_since,
            bot_replies=bot_replies,
        )

    def mute(self, bot_id: str, group_id: str) -> GroupMute:
        fields = ("switch", "disabled", "cooldown_until", "silence_until")
        with self.namespace.reached():
            switch, disabled, cooldown, silence = self.namespace.client.hmget(
                self._key(bot_id, group_id), fields
            )
        return _mute(_switch(switch, disabled), cooldown, silence)

    @property
    def _switch_index(self) -> str:
        # One hash of every switch set, so that listing them needs no scan of the key space. It
        # is outside any group's hash tag, so it is written beside the group's hash, not in one
        # transaction with it: the group's hash is what routing reads.
        return f"{self.namespace.prefix}group_switches"

    def set_switch(self, bot_id: str, group_id: str, switch: GroupSwitch | None) -> None:
        field = f"{quote(bot_id, safe='')}:{quote(group_id, safe='')}"
        with self.namespace.reached():
            pipeline = self.namespace.client.pipeline(transaction=False)
            if switch is None:
                pipeline.hdel(self._key(bot_id, group_id), "switch", "disabled")
                pipeline.hdel(self._switch_index, field)
            else:
                value = dumps(switch.to_json())
                pipeline.hset(self._key(bot_id, group_id), "switch", value)
                pipeline.hdel(self._key(bot_id, group_id), "disabled")
                indexed = {"bot_id": bot_id, "group_id": group_id, **switch.to_json()}
                pipeline.hset(self._switch_index, field, dumps(indexed))
            pipeline.execute()

    def switches(self, bot_id: str | None = None) -> tuple[tuple[str, str, GroupSwitch], ...]:
        with self.namespace.reached():
            rows = self.namespace.client.hvals(self._switch_index)
        found = []
        for row in rows:
            data = json.loads(row)
            if bot_id is None or data["bot_id"] == bot_id:
                found.append(
                    (str(data["bot_id"]), str(data["group_id"]), GroupSwitch.from_json(data))
                )
        return tuple(sorted(found, key=lambda entry: (entry[0], entry[1])))

    def start_cooldown(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._set(bot_id, group_id, "cooldown_until", dumps(encode_time(until)))

    def start_silence(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        self._set(bot_id, group_id, "silence_until", dumps(encode_time(until)))

    def keep_message(self, bot_id: str, group_id: str, message: ChatMessage, limit: int) -> None:
        self._change_list(
            self._key(bot_id, group_id, "routing:kept"),
            _decode_message,
            lambda kept: kept_messages_after(kept, message, limit),
            encode_message,
        )

    def take_kept_messages(self, bot_id: str, group_id: str) -> tuple[ChatMessage, ...]:
        key = self._key(bot_id, group_id, "routing:kept")
        with self.namespace.reached():
            transaction = self.namespace.client.pipeline(transaction=True)
            transaction.lrange(key, 0, -1)
            transaction.delete(key)
            rows, _deleted = transaction.execute()
        return tuple(map(_decode_message, rows))

    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...]:
        rows = self._change_list(
            self._key(bot_id, group_id, "routing:candidates"),
            _decode_candidate,
            lambda kept: candidates_after(kept, candidates, limit),
            _encode_candidate,
        )
        return tuple(map(_decode_candidate, rows))

    def candidates(self, bot_id: str, group_id: str) -> tuple[QuoteCandidate, ...]:
        with self.namespace.reached():
            rows = self.namespace.client.lrange(
                self._key(bot_id, group_id, "routing:candidates"), 0, -1
            )
        return tuple(map(_decode_candidate, rows))

    def _change_list(
        self,
        key: str,
        decode: Callable[[str | bytes], T],
        change: Callable[[list[T]], list[T]],
        encode: Callable[[T], str],
    ) -> list[str | bytes]:
        """Replace list ``key`` by what ``change`` makes of it, in one optimistic transaction (the
        rule is :mod:`promptweave.store.routing_state`'s; the lists are short).

        :returns: the rows the list holds afterwards.
        """

        def apply(pipeline: Pipeline) -> list[str | bytes]:
            rows: list[str | bytes] = pipeline.lrange(key, 0, -1)
            kept = [decode(row) for row in rows]
            after = change(kept)
            if after == kept:
                return rows
            stored: list[str | bytes] = [encode(item) for item in after]
            pipeline.multi()
            pipeline.delete(key)
            if stored:
                pipeline.rpush(key, *stored)
            return stored

        return self.namespace.transaction([key], apply)

    def last_quote_at(self, bot_id: str, group_id: str) -> dt.datetime | None:
        return _time(self._get(bot_id, group_id, "last_quote_at"))

    def note_quote_delivered(
        self, bot_id: str, group_id: str, message_id: str, at: dt.datetime
    ) -> None:
        self._set(bot_id, group_id, "last_quote_at", dumps(encode_time(at)))

    def last_phrase(self, bot_id: str, group_id: str) -> str | None:
        return self._get(bot_id, group_id, "last_phrase")

    def note_phrase(self, bot_id: str, group_id: str, phrase: str) -> None:
        self._set(bot_id, group_id, "last_phrase", phrase)

    def note_bot_reply(self, bot_id: str, group_id: str, at: dt.datetime) -> None:
        key = self._key(bot_id, group_id, "routing:replies")
        with self.namespace.reached():
            transaction = self.namespace.client.pipeline(transaction=True)
            transaction.rpush(key, repr(at.timestamp()))
            transaction.ltrim(key, -REPLY_LOG_MAX, -1)
            transaction.execute()

    def bot_replies_since(self, bot_id: str, group_id: str, since: dt.datetime) -> int:
        with self.namespace.reached():
            stamps = self.namespace.client.lrange(
                self._key(bot_id, group_id, "routing:replies"), 0, -1
            )
        return sum(1 for stamp in stamps if float(stamp) >= since.timestamp())

    def rhythm(self, bot_id: str, group_id: str) -> RhythmProfile | None:
        return _rhythm(self._get(bot_id, group_id, "rhythm"))

    def set_rhythm(self, bot_id: str, group_id: str, profile: RhythmProfile) -> None:
        self._set(bot_id, group_id, "rhythm", dumps(attrs.asdict(profile)))
