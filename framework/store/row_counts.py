"""How many rows each group holds in a table, known without counting them again; and, the same
way, what else a connection may remember of a group's rows.

The group log trims a group to its window on every append. Finding what lies beyond the window
by walking the window index costs a walk of the whole window (a thousand entries) per message;
knowing the group's row count, the append deletes the oldest rows beyond it directly. A
:class:`RowCounts` keeps each group's count as this thread's connection last left it, and trusts
the counts only while ``PRAGMA data_version`` says that no other connection (another thread's,
another process's) has committed to the file since. The writer reads it inside its own write
transaction, which holds the file's write lock, so no commit can come in between; any other
commit drops every count, and the next append of a group counts it once (``COUNT(*)``).

Counts are kept per :class:`promptweave.store.sqlite.SQLiteDatabase` object and per thread (each
thread has its own connection), so every store over one database object shares them. They hold
while the rows of the table are written through those stores only, as they are.

The same way, the stores keep other values than counts (``docs/store.md``, "What a connection
keeps"): the group log each group's newest rows for the timeline reads and a full group's oldest
rows for trimming, the session store each user's newest rows, the routing state each group's
quote candidate rows and its routing row, the retrieval store its change counters. A reader that
keeps values outside a write transaction takes them as of its ``PRAGMA data_version`` read; any
commit of another connection after it drops them on the next read. A rollback on the connection,
of a whole transaction or of a part of one (``promptweave.store.sqlite.Connection.rollbacks``),
drops them all: a store may have kept what it wrote in it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Any

from promptweave.store.sqlite import Connection, SQLiteDatabase

__all__ = ["KEPT_GROUPS_MAX", "RowCounts", "row_counts"]

#: The most groups a connection keeps values of per table; past it, it starts over (a bot in
#: very many groups counts or reads a group again now and then, and memory stays bounded).
KEPT_GROUPS_MAX = 10_000


class RowCounts:
    """The row counts of one table's groups (or what else is kept of their rows), per thread,
    valid while no other connection wrote."""

    def __init__(self) -> None:
        self._local = threading.local()

    def current(self, connection: Connection) -> dict[Hashable, Any]:
        """The counts this thread's ``connection`` may trust now, by group: those it kept, unless
        another connection has committed since or a transaction was rolled back on this one,
        then none. Call it inside a write transaction, and store a count into it only once that
        transaction has committed or, when it is a part of an outer one, released (a rollback of
        the outer one drops them all); outside one, store only values read after this call."""
        version = connection.data_version()
        kept: tuple[Connection, int, int, dict[Hashable, Any]] | None = getattr(
            self._local, "kept", None
        )
        if (
            kept is None
            or kept[0] is not connection
            or kept[1] != version
            or kept[2] != connection.rollbacks
            or len(kept[3]) >= KEPT_GROUPS_MAX
        ):
            kept = self._local.kept = (connection, version, connection.rollbacks, {})
        return kept[3]


#: Per database object (by id, with a weak reference to tell a reused id apart): its tables'
#: counts. An entry goes when its database object is collected.
_COUNTS: dict[int, tuple[weakref.ref[SQLiteDatabase], dict[str, RowCounts]]] = {}
# Reentrant: the garbage collector may run a finalizer (_forget) of another database object
# while this thread holds the lock in row_counts, and that finalizer takes the lock too.
_COUNTS_LOCK = threading.RLock()


def row_counts(database: SQLiteDatabase, table: str) -> RowCounts:
    """The :class:`RowCounts` of ``table`` in ``database``, shared by every store over it."""
    entry = _COUNTS.get(id(database))
    if entry is None or entry[0]() is not database or table not in entry[1]:
        with _COUNTS_LOCK:
            entry = _COUNTS.get(id(database))
            if entry is None or entry[0]() is not database:
                entry = _COUNTS[id(database)] = (weakref.ref(database), {})
                weakref.finalize(database, _forget, id(database), entry[0])
            entry[1].setdefault(table, RowCounts())
    return entry[1][table]


def _forget(key: int, reference: weakref.ref[SQLiteDatabase]) -> None:
    with _COUNTS_LOCK:
        entry = _COUNTS.get(key)
        if entry is not None and entry[0] is reference:
            del _COUNTS[key]
