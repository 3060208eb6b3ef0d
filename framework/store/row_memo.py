"""Records built from stored rows, remembered by the row's values.

A window read returns mostly the rows the previous read of the same group returned (the timeline
slides by one message a turn), and building a record from a row costs more than the query. A
:class:`RowMemo` maps a row's exact values to the frozen record built from them, so a row seen
before is not built again. It caches a pure function of the values, not the store's contents:
a row another process changed or deleted has other values (or is not read at all), so nothing
here can go stale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["ROW_MEMO_SIZE", "RowMemo"]

#: How many records a memo keeps before it starts over.
ROW_MEMO_SIZE = 1024

Record = TypeVar("Record")


class RowMemo(Generic[Record]):
    """``memo(row)`` is ``build(tuple(row))``, built once per distinct row.

    :param build: makes the record from the row's values, in the order the query selects them;
        the record must be immutable, since one instance is handed out for every equal row.
    :param size: records kept; when full, the memo starts over (a cheap bound, no LRU order).
    """

    def __init__(self, build: Callable[[tuple[Any, ...]], Record], size: int = ROW_MEMO_SIZE):
        self._build = build
        self._size = size
        self._built: dict[tuple[Any, ...], Record] = {}

    def __call__(self, row: Sequence[Any]) -> Record:
        values = tuple(row)
        found = self._built.get(values)
        if found is None:
            if len(self._built) >= self._size:
                self._built.clear()
            found = self._built[values] = self._build(values)
        return found
