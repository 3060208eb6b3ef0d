"""What the Redis stores share: the client, the key layout, transactions, error and time
conversions.

Every key is ``<prefix>{<bot>:<group>}:<name>``, optionally followed by ``:<user>`` or
``:<outcome>``. The part in braces is a Redis Cluster hash tag: all keys of one bot in one group land
in the same slot, so a cluster shards by bot and group and every Lua script or transaction touches
one slot only.
Ids are percent-encoded (``:``, ``{``, ``}`` and ``%`` never appear raw), so no two scopes can
produce the same key and an id can never end the hash tag early.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote

import attrs
import redis
from redis.client import Pipeline
from redis.commands.core import Script

from promptweave._dates import from_timestamp
from promptweave.store.sqlite import StoreUnavailableError
from promptweave.turn import ChatMessage

__all__ = [
    "DEFAULT_PREFIX",
    "Pipeline",
    "RedisNamespace",
    "decode_message",
    "decode_time",
    "dumps",
    "encode_message",
    "encode_time",
    "row_key",
]

T = TypeVar("T")

#: The key prefix of ``[store] prefix``.
DEFAULT_PREFIX = "promptweave:"

#: Row keys are zero-padded so that members with equal scores sort by insertion in a sorted set
#: (Redis orders them lexicographically), as the SQLite ``seq`` column breaks ties.
ROW_KEY_DIGITS = 16

# The newest ARGV[3] members of sorted set KEYS[1] with scores in [ARGV[2], ARGV[1]], newest
# first, each followed by its row in hash KEYS[2]; one script, so a trim between the two reads
# cannot leave a hole.
WINDOW_SCRIPT = """
local found = {}
for _, member in ipairs(redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, ARGV[3])) do
    found[#found + 1] = member
    found[#found + 1] = redis.call('HGET', KEYS[2], member)
end
return found
"""


def row_key(number: int) -> str:
    """The sorted-set member of row ``number`` (what Lua's ``%016d`` writes)."""
    return f"{number:0{ROW_KEY_DIGITS}d}"


def _part(value: str) -> str:
    return quote(value, safe="")


def encode_time(value: dt.datetime) -> list[float]:
    """``[UTC epoch seconds, UTC offset seconds]``: sorts by the epoch, reads back as written."""
    offset = value.utcoffset() or dt.timedelta(0)
    return [value.timestamp(), offset.total_seconds()]


def decode_time(value: Sequence[float]) -> dt.datetime:
    """The aware datetime :func:`encode_time` stored."""
    epoch, offset = value
    return from_timestamp(epoch, offset)


def _has_decoded_responses(instance: object, attribute: object, client: redis.Redis) -> None:
    if not client.get_encoder().decode_responses:
        raise ValueError("the Redis client must be created with decode_responses=True")


def _no_braces(instance: object, attribute: object, prefix: str) -> None:
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"a Redis key prefix cannot contain braces (hash tags): {prefix!r}")


@attrs.frozen
class RedisNamespace:
    """One Redis database and a key prefix: where a set of Redis stores keeps its keys.

    :param client: a ``redis.Redis`` created with ``decode_responses=True``; it is thread-safe
        (a connection pool), so one namespace serves every thread of a process.
    :param prefix: the start of every key, so several deployments can share one Redis.
    """

    client: redis.Redis = attrs.field(validator=_has_decoded_responses)
    prefix: str = attrs.field(default=DEFAULT_PREFIX, validator=_no_braces)
    _window_script: Script = attrs.field(
        init=False,
        repr=False,
        default=attrs.Factory(lambda self: self.script(WINDOW_SCRIPT), takes_self=True),
    )

    def key(self, bot_id: str, group_id: str, name: str, *parts: str) -> str:
        """The key ``name`` of one bot in one group, with optional sub-scope ``parts``."""
        tail = "".join(f":{_part(part)}" for part in parts)
        return f"{self.prefix}{{{_part(bot_id)}:{_part(group_id)}}}:{name}{tail}"

    def script(self, source: str) -> Script:
        """A Lua script run with ``EVALSHA`` (loaded on first use, and again after a flush)."""
        return self.client.register_script(source)

    def window(
        self,
        index: str,
        rows: str,
        *,
        until: dt.datetime | None,
        since: dt.datetime | None = None,
        limit: int,
    ) -> list[tuple[str, dict[str, Any]]]:
        """The newest ``limit`` rows of sorted set ``index`` in ``[since, until]`` (``None``: no
        bound), oldest first, as ``(row key, row)`` pairs read from hash ``rows``."""
        if limit <= 0:
            return []
        top = "+inf" if until is None else repr(until.timestamp())
        bottom = "-inf" if since is None else repr(since.timestamp())
        with self.reached():
            found = self._window_script(keys=[index, rows], args=[top, bottom, limit])
        pairs = [(str(found[at]), json.loads(found[at + 1])) for at in range(0, len(found), 2)]
        return pairs[::-1]

    def transaction(self, keys: Sequence[str], change: Callable[[Pipeline], T]) -> T:
        """Run ``change`` as one optimistic transaction over ``keys``, and return what it returns.

        ``change`` reads ``keys`` through the pipeline it is given (the commands run at once while
        the keys are watched), decides in Python, and queues its writes after ``pipeline.multi()``.
        They are applied only if no other client changed a watched key meanwhile; otherwise
        ``change`` runs again on what is there now. So a rule written once in Python (in
        ``promptweave.store``) is atomic across processes, as a Lua script would be. Every key must
        carry the same hash tag (one bot and group), as for a script.
        """
        with self.reached(), self.client.pipeline(transaction=True) as pipeline:
            while True:
                try:
                    pipeline.watch(*keys)  # type: ignore[no-untyped-call]  # unannotated upstream
                    result = change(pipeline)
                    pipeline.execute()
                except redis.WatchError:
                    continue
                return result

    @property
    def where(self) -> str:
        """The server, for error messages (never the password)."""
        options = self.client.get_connection_kwargs()
        if options.get("path"):
            return f"unix:{options['path']}"
        host, port = options.get("host", "localhost"), options.get("port", 6379)
        return f"{host}:{port}/{options.get('db', 0)}"

    @contextmanager
    def reached(self) -> Iterator[None]:
        """Turn any ``redis.RedisError`` into :class:`promptweave.StoreUnavailableError`.

        The runtime degrades on :data:`promptweave.store.sqlite.STORE_ERRORS`; raising that
        project error here keeps ``framework`` free of any Redis import, exactly as the SQLite
        stores turn ``sqlite3.Error`` into it.
        """
        try:
            yield
        except redis.RedisError as exc:
            raise StoreUnavailableError(f"Redis store {self.where}: {exc}") from exc


def dumps(data: Any) -> str:
    """Compact JSON, non-ASCII text kept as is."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def encode_message(message: ChatMessage) -> str:
    """A chat message as JSON. ``raw`` (the platform's own form) is not kept, as in SQLite:
    what the stores serve is read from the other fields."""
    return dumps(
        {
            "id": message.id,
            "sender_id": message.sender_id,
            "sender_name": message.sender_name,
            "text": message.text,
            "reply_to": message.reply_to,
            "images": list(message.images),
            "mentions": list(message.mentions),
            "addressed": message.addressed,
            "time": encode_time(message.time),
        }
    )


def decode_message(data: dict[str, Any]) -> ChatMessage:
    """The message :func:`encode_message` stored, parsed."""
    return ChatMessage(**{**data, "time": decode_time(data["time"])})
