"""The embedded SQLite database shared by the SQLite stores.

One file holds every component's tables. Each component (sessions, routing state, retrieval data…)
brings its own ordered list of migrations; :meth:`SQLiteDatabase.migrate` applies the missing ones
and records ``(component, version)`` in ``schema_versions``. The database runs in WAL mode with a
busy timeout, so several asyncio tasks (each call opens its own connection per thread) and several
processes can write the same file without losing data.

Durability (``docs/store.md``, "What recorded means"): a write is committed when its call returns.
With the default ``synchronous = NORMAL`` a committed write survives the crash or kill of any
process; a power loss or an operating-system crash may take back the last writes before the OS
flushed them, never the file's consistency. ``FULL`` (``[store] synchronous = "full"``) syncs the
journal on every commit, so a committed write survives a power loss too.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import NoReturn

import attrs

from promptweave._fields import one_of
from promptweave.config import SYNCHRONOUS_LEVELS
from promptweave.errors import PromptweaveError

__all__ = [
    "STORE_ERRORS",
    "Connection",
    "Migration",
    "SQLiteDatabase",
    "StoreUnavailableError",
]

log = logging.getLogger("promptweave.store")

BUSY_TIMEOUT_MS = 10_000
#: WAL pages after which a commit checkpoints the log into the database file (SQLite's default is
#: 1000, about 4 MB). Each checkpoint syncs both files; a bot writes a short transaction of about
#: eight pages per message, so with the default it stalls on a sync every hundred messages or so.
#: Ten times the log (about 40 MB, a little more while a background checkpoint holds the automatic
#: one off) means a tenth of the syncs and fewer pages copied, since a page written again before
#: the checkpoint is copied once.
WAL_AUTOCHECKPOINT_PAGES = 10_000
#: Commits through :meth:`SQLiteDatabase.transaction` after which a thread of the database
#: object's own checkpoints the log (``PRAGMA wal_checkpoint(PASSIVE)``): up to about eight pages
#: a commit on the bot's path, so a few thousand pages, before :data:`WAL_AUTOCHECKPOINT_PAGES`.
#: Most of the copying then happens beside the bot's writes; the commit that crosses the limit
#: copies only what came since (a passive checkpoint racing the writes never lets the log start
#: over, that one does). Measured on ``benchmarks/bench_loop.py``: 3–5% more messages a second
#: for 3–4 µs more CPU time each, spent on the other thread.
CHECKPOINT_EVERY_COMMITS = 1000


class StoreUnavailableError(PromptweaveError):
    """The store cannot be read or written (missing directory, locked, corrupt, disabled)."""


#: What a failing store raises: callers on the bot's path catch these, log them and go on. Stores
#: over another engine turn its errors into :class:`StoreUnavailableError` (the Redis store does),
#: so this tuple never needs an optional dependency.
STORE_ERRORS = (StoreUnavailableError, sqlite3.Error, OSError)


@attrs.frozen(kw_only=True)
class Migration:
    """One schema step of a component.

    :param component: the owning component, for example ``"sessions"``.
    :param version: 1, 2, 3… in order; applied once.
    :param sql: one or more statements, run in a single transaction with the version record.
    """

    component: str
    version: int
    sql: str


@attrs.define
class SQLiteDatabase:
    """A SQLite file with WAL, a busy timeout and versioned migrations.

    :param path: the database file; ``":memory:"`` is refused because every thread would see
        another database (use the in-memory stores instead).
    :param synchronous: the ``PRAGMA synchronous`` level of every connection, one of
        :data:`promptweave.config.SYNCHRONOUS_LEVELS`: what a committed write survives (``docs/store.md``).
    """

    path: Path = attrs.field(converter=Path)
    synchronous: str = attrs.field(default="normal", validator=one_of(*SYNCHRONOUS_LEVELS))
    _local: threading.local = attrs.field(factory=threading.local, init=False, repr=False)
    _checkpointer: _Checkpointer = attrs.field(init=False, repr=False, eq=False)
    _commits: int = attrs.field(default=0, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if str(self.path) == ":memory:":
            raise ValueError("use the in-memory stores instead of a ':memory:' SQLite database")
        # The path as of now: the thread opens it later, whatever the working directory is then.
        self._checkpointer = _Checkpointer(self.path.absolute(), self.synchronous)
        weakref.finalize(self, self._checkpointer.stop)

    def _committed(self) -> None:
        """Count a commit; every :data:`CHECKPOINT_EVERY_COMMITS`, ask for a checkpoint. (Two
        threads committing at once may count one commit less: a checkpoint comes a little later.)"""
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY_COMMITS:
            self._commits = 0
            self._checkpointer.request()

    def _open(self) -> Connection:
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=True,
                factory=Connection,
            )
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            connection.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            connection.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"cannot open SQLite store {self.path}: {exc}") from exc
        connection.row_factory = sqlite3.Row
        return connection

    def connection(self) -> Connection:
        """This thread's connection, opened on first use."""
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            self._local.connection = connection
        return connection

    def transaction(self, *, store_errors: bool = False, savepoints: bool = True) -> _Transaction:
        """A write transaction (``BEGIN IMMEDIATE``): committed on success, rolled back on error.

        Opened inside another transaction of this thread's connection, it is a part of that one:
        committed with the outer transaction, so several stores' writes take one commit
        (:meth:`promptweave.store.stores.Stores.transaction`). A part is a ``SAVEPOINT``, released
        on success and rolled back on error, its own writes alone, unless the outer transaction
        was opened with ``savepoints=False``: its parts then join it as they are, and a part that
        fails fails the whole transaction (two statements less a part).

        :param store_errors: also turn a SQLite error raised inside the transaction (or by its
            rollback) into :class:`StoreUnavailableError`, once rolled back.
        :param savepoints: for an outer transaction, whether its parts are savepoints.
        :raises StoreUnavailableError: the database could not be written.
        """
        return _Transaction(self, store_errors, savepoints)

    def reading(self) -> AbstractContextManager[None]:
        """The reads of this thread's connection made inside it, in one read transaction: they
        see the file as of the first of them, and each costs less (a read outside a transaction
        opens and ends one of its own). A write made inside it ends it first, so that the write
        starts from the newest data; the reads after that write go on one by one. Inside another
        transaction of the connection it does nothing.

        Hold it for a short stretch of reads: a read transaction keeps a checkpoint from copying
        what was committed after it began.
        """
        return _Reading(self)

    def migrate(self, migrations: Sequence[Migration]) -> list[tuple[str, int]]:
        """Apply the migrations not yet recorded, in version order per component.

        :returns: the ``(component, version)`` pairs applied now.
        """
        with self.transaction() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions ("
                " component TEXT NOT NULL, version INTEGER NOT NULL,"
                " applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,"
                " PRIMARY KEY (component, version))"
            )
        applied: list[tuple[str, int]] = []
        for migration in sorted(migrations, key=lambda m: (m.component, m.version)):
            with self.transaction() as connection:
                done = connection.execute(
                    "SELECT 1 FROM schema_versions WHERE component = ? AND version = ?",
                    (migration.component, migration.version),
                ).fetchone()
                if done:
                    continue
                for statement in _statements(migration.sql):
                    connection.execute(statement)
                connection.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (?, ?)",
                    (migration.component, migration.version),
                )
                applied.append((migration.component, migration.version))
        return applied

    def schema_version(self, component: str) -> int:
        """The highest applied version of ``component`` (0 when none)."""
        row = (
            self.connection()
            .execute("SELECT MAX(version) FROM schema_versions WHERE component = ?", (component,))
            .fetchone()
        )
        return int(row[0] or 0)

    def close(self) -> None:
        """Stop the checkpointing thread (the next commits start it again), copy the write-ahead
        log into the database file and empty it (:meth:`checkpoint_all`), and close this thread's
        connection (other threads close theirs on exit)."""
        self._checkpointer.stop()
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self.checkpoint_all()
            connection.close()
            self._local.connection = None

    def checkpoint_all(self) -> bool:
        """Copy the whole write-ahead log into the database file and truncate the log to nothing
        (``PRAGMA wal_checkpoint(TRUNCATE)``), without waiting: whether it did. A connection of
        another thread that is still reading, or writing, keeps its part of the log (``False``,
        logged at debug level); SQLite's own checkpoints copy it later.

        Called by :meth:`close`, so the file alone is the whole store once the bot or a command
        has stopped, even while a connection of another thread is still open (``docs/store.md``,
        "Several processes")."""
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.in_transaction:
            return False
        try:
            connection.execute("PRAGMA busy_timeout = 0")
            try:
                busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            log.debug("checkpointing %s at close: %s", self.path, exc)
            return False
        if busy:
            log.debug("checkpointing %s at close: another connection is using the log", self.path)
        return not busy


class Connection(sqlite3.Connection):
    """A connection of :class:`SQLiteDatabase`: a :class:`sqlite3.Connection` that counts the
    transactions rolled back on it.

    A store may keep what it wrote once its transaction is over (``promptweave.store.row_counts``);
    when that transaction was a part of an outer one (:meth:`SQLiteDatabase.transaction`) that is
    then rolled back, what it kept is wrong, and the changed count tells.
    """

    rollbacks: int = 0
    #: In a write transaction of :meth:`SQLiteDatabase.transaction` (the outer one).
    writing: bool = False
    #: The parts of that transaction join it without savepoints (``savepoints=False``).
    joined: bool = False
    #: In the read transaction of :meth:`SQLiteDatabase.reading`.
    reading: bool = False
    #: ``PRAGMA data_version`` as read inside the transaction in progress (either kind); ``None``
    #: outside one or before the first read. A write transaction holds the write lock, so no
    #: other connection can commit before it ends; a read transaction sees the file as of its
    #: first read, and the value stays that of that moment.
    known_version: int | None = None

    def data_version(self) -> int:
        """``PRAGMA data_version``: it changes when another connection commits to the file. Read
        once per transaction (:attr:`known_version`)."""
        version = self.known_version
        if version is None:
            version = self.execute("PRAGMA data_version").fetchone()[0]
            if self.writing or self.reading:
                self.known_version = version
        return version


class _Reading:
    """:meth:`SQLiteDatabase.reading`. It never raises: reads need no transaction to be right,
    only to be cheap, so a read transaction that cannot begin or end is left out."""

    __slots__ = ("_began", "_connection", "_database")

    def __init__(self, database: SQLiteDatabase) -> None:
        self._database = database
        self._began = False

    def __enter__(self) -> None:
        try:
            connection = self._connection = self._database.connection()
            if not connection.in_transaction:
                connection.execute("BEGIN")
                connection.reading = self._began = True
                connection.known_version = None
        except (sqlite3.Error, StoreUnavailableError) as exc:
            log.debug("reading without a read transaction: %s", exc)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        if not self._began:
            return
        connection = self._connection
        if not connection.reading:
            return  # a write inside ended it (_Transaction)
        connection.reading = False
        connection.known_version = None
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            log.debug("ending a read transaction: %s", exc)
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")


class _Transaction:
    """:meth:`SQLiteDatabase.transaction`: a plain context manager rather than a generator one,
    since every write of the bot's path opens one (a generator costs about a microsecond more
    on each)."""

    __slots__ = ("_connection", "_database", "_part", "_savepoints", "_store_errors")

    def __init__(self, database: SQLiteDatabase, store_errors: bool, savepoints: bool) -> None:
        self._database = database
        self._store_errors = store_errors
        self._savepoints = savepoints

    def __enter__(self) -> Connection:
        connection = self._connection = self._database.connection()
        try:
            if connection.reading:
                # A write ends the read transaction it meets (:meth:`SQLiteDatabase.reading`):
                # it starts from the newest data, and the reads after it go on one by one.
                connection.reading = False
                connection.known_version = None
                connection.execute("COMMIT")
            if not connection.in_transaction:
                self._part = None
                connection.execute("BEGIN IMMEDIATE")
                connection.writing = True
                connection.joined = not self._savepoints
            elif connection.joined:
                self._part = "joined"
            else:
                self._part = "savepoint"
                connection.execute("SAVEPOINT nested")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"cannot write SQLite store {self._database.path}: {exc}"
            ) from exc
        return connection

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        connection = self._connection
        part = self._part
        if part is None:
            connection.writing = connection.joined = False
            connection.known_version = None
        if error is not None:
            # What stores kept of the rows written since is wrong now (a part of a transaction
            # too: what it kept before failing is not taken back with it).
            connection.rollbacks += 1
            if part == "joined":
                return  # the outer transaction fails with it
            try:
                if part == "savepoint":
                    connection.execute("ROLLBACK TO nested")
                    connection.execute("RELEASE nested")
                else:
                    connection.execute("ROLLBACK")
            except sqlite3.Error as exc:
                if self._store_errors:
                    self._unavailable(exc)
                raise
            if self._store_errors and isinstance(error, sqlite3.Error):
                self._unavailable(error)
            return
        if part == "joined":
            return
        if part == "savepoint":
            try:
                connection.execute("RELEASE nested")
            except sqlite3.Error as exc:
                self._unavailable(exc)
            return
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            connection.rollbacks += 1
            try:
                connection.execute("ROLLBACK")
            except sqlite3.Error as again:
                if self._store_errors:
                    self._unavailable(again)
                raise
            raise StoreUnavailableError(f"cannot commit to {self._database.path}: {exc}") from exc
        self._database._committed()

    def _unavailable(self, error: sqlite3.Error) -> NoReturn:
        raise StoreUnavailableError(
            f"cannot write SQLite store {self._database.path}: {error}"
        ) from error


class _Checkpointer:
    """Checkpoints one database file's write-ahead log on a daemon thread with a connection of
    its own, when asked (:meth:`request`). It holds no reference to the
    :class:`SQLiteDatabase`, which stops it when collected or closed.

    A passive checkpoint copies what no reader still needs and never blocks a writer; SQLite
    releases the GIL while it runs, so the copy and its syncs overlap the bot's own work. A
    failed checkpoint is logged and left to the next one (or to the automatic one at
    :data:`WAL_AUTOCHECKPOINT_PAGES`). A process forked from one whose thread ran starts its own
    on its first request.
    """

    def __init__(self, path: Path, synchronous: str) -> None:
        self._path = path
        self._synchronous = synchronous
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def request(self) -> None:
        """Checkpoint soon, starting the thread if it is not running. Called right after a
        commit, it never raises: a thread that cannot start is logged, and the automatic
        checkpoint does the work."""
        with self._lock:
            self._stopping = False
            thread = self._thread
            if thread is None or not thread.is_alive():
                thread = threading.Thread(
                    target=self._run, name=f"sqlite-checkpoint {self._path.name}", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError as exc:
                    log.warning("cannot start a thread to checkpoint %s: %s", self._path, exc)
                    return
                self._thread = thread
            self._wake.set()

    def stop(self) -> None:
        """Stop the thread (it finishes a checkpoint under way first) and close its connection."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        try:
            # mode=rw: a file gone meanwhile is an error, not a new empty database.
            connection = sqlite3.connect(
                f"{self._path.as_uri()}?mode=rw",
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
            )
            connection.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
        except sqlite3.Error as exc:
            log.warning("cannot open %s to checkpoint it: %s", self._path, exc)
            return
        try:
            while True:
                self._wake.wait()
                with self._lock:
                    if self._stopping:
                        return
                    self._wake.clear()
                try:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    log.warning("checkpointing %s failed: %s", self._path, exc)
        finally:
            connection.close()


def _statements(sql: str) -> Iterator[str]:
    """Split a migration script into complete statements (``executescript`` would commit)."""
    buffer = ""
    for part in sql.split(";"):
        buffer += part + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n\t;"):
                yield buffer.strip()
            buffer = ""
