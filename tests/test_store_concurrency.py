"""Several processes and several asyncio tasks writing one SQLite file lose nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
from pathlib import Path

from framework import ChatMessage, SessionTurn, Stores
from framework.store.sessions_sqlite import SESSION_MIGRATIONS
from framework.store.sqlite import SQLiteDatabase

WRITERS = 4
PER_WRITER = 150
BASE = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def _write_from_process(path: str, writer: int) -> None:
    # Each process opens the file on its own, as separate bot processes would.
    database = SQLiteDatabase(Path(path))
    database.migrate(SESSION_MIGRATIONS)
    stores = Stores.sqlite(database)
    assert stores.group_log is not None and stores.sessions is not None
    for number in range(PER_WRITER):
        time = BASE + dt.timedelta(seconds=number)
        stores.group_log.append_group_message(
            "10001",
            "20001",
            ChatMessage(id=f"{writer}-{number}", sender_id=str(writer), text="在吗", time=time),
        )
        stores.sessions.append_turns(
            [
                SessionTurn(
                    bot_id="10001",
                    group_id="20001",
                    user_id=str(writer),
                    role="user",
                    content=f"第{number}句",
                    message_id=f"{writer}-{number}",
                    time=time,
                )
            ],
            storage_window=10_000,
        )
    database.close()


def test_processes_writing_one_sqlite_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_write_from_process, args=(str(path), writer))
        for writer in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS

    connection = SQLiteDatabase(path).connection()
    assert connection.execute("SELECT COUNT(*) FROM group_messages").fetchone()[0] == (
        WRITERS * PER_WRITER
    )
    per_user = dict(
        connection.execute("SELECT user_id, COUNT(*) FROM session_turns GROUP BY user_id")
    )
    assert per_user == {str(writer): PER_WRITER for writer in range(WRITERS)}


def test_asyncio_tasks_writing_one_sqlite_file_lose_nothing(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "tasks.sqlite3")
    database.migrate(SESSION_MIGRATIONS)
    stores = Stores.sqlite(database)
    log = stores.group_log
    assert log is not None

    def write(task: int, number: int) -> bool:
        message = ChatMessage(
            id=f"{task}-{number}",
            sender_id=str(task),
            text="收到",
            time=BASE + dt.timedelta(seconds=number),
        )
        return log.append_group_message("10001", "20001", message)

    async def writer(task: int) -> int:
        # Each write runs on a worker thread, so the tasks really overlap on the file.
        results = [await asyncio.to_thread(write, task, number) for number in range(50)]
        return sum(results)

    async def main() -> list[int]:
        return await asyncio.gather(*(writer(task) for task in range(8)))

    assert asyncio.run(main()) == [50] * 8
    count = database.connection().execute("SELECT COUNT(*) FROM group_messages").fetchone()[0]
    assert count == 400
