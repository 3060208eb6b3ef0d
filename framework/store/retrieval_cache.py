"""Per-scope caches of retrieval data: values remembered with the version they were built at.

A group's expression pairs, strategies, relationship notes… are read on every turn and change
rarely. The retrieval stores keep what was read or derived from them here, per ``(bot_id,
group_id)``, together with the version of the data it came from (a change counter of the scope and
the kinds of data it depends on, ``docs/retrieval.md#caching``). A value is handed out again only
while that version is still current, so a write, from this process or another, is seen on the next
read. The least recently read scopes are dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

import attrs

__all__ = ["CACHED_SCOPES", "ScopeCache"]

T = TypeVar("T")

#: The most scopes a store keeps cached data of.
CACHED_SCOPES = 128


@attrs.define
class ScopeCache:
    """Values per scope and key, each with the version it was built at; thread-safe.

    :param max_scopes: the most scopes kept; the least recently read is dropped first.
    """

    max_scopes: int = CACHED_SCOPES
    _scopes: OrderedDict[tuple[str, str], dict[Hashable, tuple[Hashable, Any]]] = attrs.field(
        factory=OrderedDict, init=False, repr=False
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def get(
        self, scope: tuple[str, str], key: Hashable, version: Hashable, build: Callable[[], T]
    ) -> T:
        """The value of ``key`` in ``scope`` built at ``version``: the remembered one, or
        ``build()`` (then remembered). ``build`` runs outside the lock, so concurrent readers
        of a stale value may each build it once."""
        with self._lock:
            entries = self._scopes.get(scope)
            if entries is not None:
                self._scopes.move_to_end(scope)
                found = entries.get(key)
                if found is not None and found[0] == version:
                    return cast(T, found[1])
        value = build()
        with self._lock:
            entries = self._scopes.get(scope)
            if entries is None:
                entries = self._scopes[scope] = {}
            self._scopes.move_to_end(scope)
            entries[key] = (version, value)
            while len(self._scopes) > self.max_scopes:
                self._scopes.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._scopes.clear()
