"""Records built from stored rows are remembered by the rows' values (``docs/store.md``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from promptweave import ChatMessage
from promptweave.store.row_memo import RowMemo
from promptweave.store.sessions_schema import SESSION_MIGRATIONS
from promptweave.store.sessions_sqlite import SQLiteGroupLog
from promptweave.store.sqlite import SQLiteDatabase

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def test_a_row_seen_before_is_not_built_again() -> None:
    built: list[tuple[object, ...]] = []

    def build(values: tuple[object, ...]) -> str:
        built.append(values)
        return "-".join(map(str, values))

    memo = RowMemo(build)
    assert memo(["a", 1]) == "a-1"
    assert memo(("a", 1)) == "a-1"
    assert memo(["a", 2]) == "a-2"
    assert built == [("a", 1), ("a", 2)]


def test_a_full_memo_starts_over() -> None:
    built: list[object] = []

    def build(values: tuple[object, ...]) -> object:
        built.append(values[0])
        return values[0]

    memo = RowMemo(build, size=2)
    for number in (1, 2, 3, 1):
        memo([number])
    assert built == [1, 2, 3, 1]


def test_a_window_read_through_another_connection_sees_the_rows_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    first = SQLiteDatabase(path)
    first.migrate(SESSION_MIGRATIONS)
    reader = SQLiteGroupLog(first, max_per_group=16)
    writer = SQLiteGroupLog(SQLiteDatabase(path), max_per_group=16)
    for number in range(16):
        message = ChatMessage(
            id=str(number),
            sender_id="3",
            text=f"第{number}条",
            time=T0 + dt.timedelta(seconds=number),
        )
        writer.append_group_message("b", "g", message)
    until = T0 + dt.timedelta(minutes=5)
    before = reader.recent_group_messages("b", "g", until=until, limit=4)
    assert [m.id for m in before] == ["12", "13", "14", "15"]
    # The other connection adds two newer messages; the two oldest leave the log.
    for number in (16, 17):
        later = ChatMessage(
            id=str(number), sender_id="3", text="新", time=T0 + dt.timedelta(seconds=number)
        )
        writer.append_group_message("b", "g", later)
    after = reader.recent_group_messages("b", "g", until=until, limit=4)
    assert [m.id for m in after] == ["14", "15", "16", "17"]
    assert after[:2] == before[2:]
    assert reader.find_group_message("b", "g", "0") is None
