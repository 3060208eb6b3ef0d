"""The SQLite session store keeps each user's newest rows per connection
(``framework/store/row_counts.py``, ``docs/store.md``): every read gives what the window query gives,
and a write, of this store or another connection, is seen by the next read."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import attrs

from promptweave.store.session_rows import SessionTurn, TurnKind
from promptweave.store.sessions_schema import SESSION_MIGRATIONS
from promptweave.store.sessions_sqlite import SQLiteSessionStore
from promptweave.store.sqlite import SQLiteDatabase

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
SCOPE = ("b", "g", "u")


def _store(path: Path) -> SQLiteSessionStore:
    database = SQLiteDatabase(path)
    database.migrate(SESSION_MIGRATIONS)
    return SQLiteSessionStore(database)


def _turn(number: int, seconds: float, *, usage: bool = False) -> SessionTurn:
    return SessionTurn(
        bot_id="b",
        group_id="g",
        user_id="u",
        role="user" if number % 2 else "assistant",
        content=f"第{number}句",
        message_id=f"m{number}",
        time=T0 + dt.timedelta(seconds=seconds),
        usage={"prompt_tokens": number} if usage else None,
    )


def _queried(store: SQLiteSessionStore, **window: object) -> list[SessionTurn]:
    """The window query itself, which the kept rows stand in for."""
    return store._window(
        "user_id = ?",
        SCOPE,
        window["until"],  # type: ignore[arg-type]
        window.get("since"),  # type: ignore[arg-type]
        window["limit"],  # type: ignore[arg-type]
    )


def test_every_read_gives_what_the_window_query_gives(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = _store(path)
    other = _store(path)  # another connection to the file
    rng = random.Random(3)
    number = 0
    for _ in range(300):
        if rng.random() < 0.3:
            number += 1
            writer = other if rng.random() < 0.3 else store
            late = rng.random() < 0.2
            seconds = number * 10 - (rng.choice((15, 95)) if late else 0)
            writer.append_turns(
                [_turn(number, seconds, usage=rng.random() < 0.2)], storage_window=12
            )
        until = T0 + dt.timedelta(seconds=rng.choice((number * 10 + 5, number * 10 - 35, 40)))
        since = rng.choice((None, T0 + dt.timedelta(seconds=max(0, number * 10 - 120))))
        limit = rng.choice((3, 7, 19))
        read = store.user_turns("b", "g", "u", until=until, since=since, limit=limit)
        assert read == _queried(store, until=until, since=since, limit=limit)


def test_a_user_read_again_while_nothing_changed_costs_no_query(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite3")
    store.append_turns([_turn(1, 1), _turn(2, 2)], storage_window=12)
    until = T0 + dt.timedelta(hours=1)
    first = store.user_turns("b", "g", "u", until=until, limit=19)
    statements: list[str] = []
    store.database.connection().set_trace_callback(statements.append)
    assert store.user_turns("b", "g", "u", until=until, limit=19) == first
    assert statements == ["PRAGMA data_version"]
    store.append_turns([_turn(3, 3)], storage_window=12)
    assert [t.message_id for t in store.user_turns("b", "g", "u", until=until, limit=19)] == [
        "m1",
        "m2",
        "m3",
    ]


def test_a_summary_replacing_rows_is_seen_by_the_next_read(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite3")
    store.append_turns([_turn(n, n) for n in range(1, 5)], storage_window=12)
    until = T0 + dt.timedelta(hours=1)
    rows = store.user_turns("b", "g", "u", until=until, limit=19)
    summary = SessionTurn(
        bot_id="b",
        group_id="g",
        user_id="u",
        role="user",
        kind=TurnKind.SUMMARY,
        content="此前聊了四句",
        time=T0 + dt.timedelta(seconds=2.5),
    )
    assert store.replace_with_summary(
        "b", "g", "u", remove=[t.key for t in rows[:3] if t.key is not None], summary=summary
    )
    after = store.user_turns("b", "g", "u", until=until, limit=19)
    assert [t.content for t in after] == ["此前聊了四句", "第4句"]


def test_rows_with_usage_are_built_afresh_for_every_read(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite3")
    store.append_turns([_turn(1, 1, usage=True)], storage_window=12)
    until = T0 + dt.timedelta(hours=1)
    (first,) = store.user_turns("b", "g", "u", until=until, limit=5)
    assert first.usage is not None
    first.usage["prompt_tokens"] = 999  # a caller changing what it got
    (again,) = store.user_turns("b", "g", "u", until=until, limit=5)
    assert again.usage == {"prompt_tokens": 1}


def test_a_read_without_usage_gives_the_same_rows_without_it_and_builds_them_once(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "s.sqlite3")
    store.append_turns(
        [_turn(1, 1), _turn(2, 2, usage=True), _turn(3, 3), _turn(4, 4, usage=True)],
        storage_window=12,
    )
    until = T0 + dt.timedelta(hours=1)
    full = store.user_turns("b", "g", "u", until=until, limit=5)
    bare = store.user_turns("b", "g", "u", until=until, limit=5, usage=False)
    assert [t.usage for t in full] == [None, {"prompt_tokens": 2}, None, {"prompt_tokens": 4}]
    assert [t.usage for t in bare] == [None] * 4
    assert [attrs.evolve(t, usage=None) for t in full] == bare
    again = store.user_turns("b", "g", "u", until=until, limit=5, usage=False)
    assert all(a is b for a, b in zip(again, bare, strict=True))
    # A read with usage still gets its own dicts.
    assert store.user_turns("b", "g", "u", until=until, limit=5)[1].usage is not full[1].usage
    # A write drops what was kept: the next read without usage sees the new row.
    store.append_turns([_turn(5, 5, usage=True)], storage_window=12)
    after = store.user_turns("b", "g", "u", until=until, limit=5, usage=False)
    assert [t.content for t in after] == [f"第{n}句" for n in range(1, 6)]
    assert after[-1].usage is None
