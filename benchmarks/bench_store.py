"""Benchmark of the SQLite conversational store: window reads and a full turn, small vs large.

Fills two store files, one with 10 thousand and one with 1 million stored messages (group log and
session turns each), then measures the median of:

- the three window reads a turn makes (group timeline, user history, ambient excerpt);
- a complete ``Promptweave.render`` whose timeline and history come from the store;

and the append throughput of ``record_message`` and ``record_bot_reply``. The window reads are
index range scans, so their median must grow by less than 2x from the small to the large store; the
script exits with status 1 when it does not.

Run: ``python benchmarks/bench_store.py [--large 1000000] [--small 10000]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from promptweave import Bot, ChatMessage, Config, Promptweave, Stores, Turn
from promptweave.config import SessionConfig
from promptweave.store.sessions_sqlite import SESSION_MIGRATIONS
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.turn import SpeakTrigger

BOT = Bot(id="10001", name="小织", peer_bot_ids=("10002",))
GROUPS = 200
USERS_PER_GROUP = 50
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LINES = (
    "中午吃什么好纠结",
    "楼下新开了家米线",
    "今天的作业第三题好难",
    "周末有人去爬山吗",
    "这个表情包哪来的",
    "小织你觉得呢",
    "我刚下班，累死了",
    "明天要交报告了还没写",
)


def fill(path: Path, rows: int) -> None:
    """Write ``rows`` group messages and ``rows`` session turns in one transaction."""
    database = SQLiteDatabase(path)
    database.migrate(SESSION_MIGRATIONS)
    connection = database.connection()
    rng = random.Random(7)

    def group_rows() -> object:
        for number in range(rows):
            group = number % GROUPS
            user = 30000 + group * USERS_PER_GROUP + rng.randrange(USERS_PER_GROUP)
            stamp = START.timestamp() + number
            yield (
                BOT.id,
                str(20000 + group),
                str(number),
                str(user),
                "",
                LINES[number % 8],
                None,
                "[]",
                0,
                stamp,
                28800,
            )

    def session_rows() -> object:
        for number in range(rows):
            group = number % GROUPS
            user = 30000 + group * USERS_PER_GROUP + (number // GROUPS) % USERS_PER_GROUP
            role = "user" if number % 2 == 0 else "assistant"
            stamp = START.timestamp() + number
            yield (
                BOT.id,
                str(20000 + group),
                str(user),
                role,
                "turn",
                LINES[number % 8],
                f"s{number}",
                None,
                "[]",
                stamp,
                28800,
            )

    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO group_messages (bot_id, group_id, message_id, sender_id, sender_name, text,"
        " reply_to, images, addressed, time, utc_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        group_rows(),  # type: ignore[arg-type]
    )
    connection.executemany(
        "INSERT INTO session_turns (bot_id, group_id, user_id, role, kind, content, message_id,"
        " reply_to, images, time, utc_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        session_rows(),  # type: ignore[arg-type]
    )
    # The measured user has a real conversation in both stores, so every read returns full windows.
    target_group, target_user = _target()
    connection.executemany(
        "INSERT INTO session_turns (bot_id, group_id, user_id, role, kind, content, message_id,"
        " reply_to, images, time, utc_offset) VALUES (?, ?, ?, ?, 'turn', ?, ?, NULL, '[]', ?, 0)",
        [
            (
                BOT.id,
                target_group,
                target_user,
                "user" if turn % 2 == 0 else "assistant",
                LINES[turn % 8],
                f"t{turn}",
                START.timestamp() + rows + turn,
            )
            for turn in range(40)
        ],
    )
    connection.execute("COMMIT")
    connection.execute("ANALYZE")
    database.close()


def _target() -> tuple[str, str]:
    return str(20000 + GROUPS // 2), str(30000 + (GROUPS // 2) * USERS_PER_GROUP + 3)


def median_ms(action: Callable[[], object], repeat: int) -> float:
    for _ in range(min(50, repeat)):
        action()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def measure(path: Path, rows: int, repeat: int) -> dict[str, float]:
    database = SQLiteDatabase(path)
    stores = Stores.sqlite(database)
    assert stores.group_log and stores.sessions
    end = START + dt.timedelta(seconds=rows + 60)
    rng = random.Random(11)
    group, user = _target()
    config = attrs.evolve(Config(), session=SessionConfig(summary_enabled=False))
    runtime = Promptweave.from_config(config, stores=stores)
    current = ChatMessage(
        id="current",
        sender_id=user,
        sender_name="阿蒙",
        text="小织你说呢",
        time=end,
        addressed=True,
    )
    turn = Turn(bot=BOT, group_id=group, message=current, trigger=SpeakTrigger.MENTION)
    ambient_turn = attrs.evolve(turn, trigger=None)

    def random_group() -> str:
        return str(20000 + rng.randrange(GROUPS))

    figures = {
        "timeline_read_ms": median_ms(
            lambda: stores.group_log.recent_group_messages(  # type: ignore[union-attr]
                BOT.id, random_group(), until=end, limit=9
            ),
            repeat,
        ),
        "history_read_ms": median_ms(
            lambda: stores.sessions.user_turns(  # type: ignore[union-attr]
                BOT.id, group, user, until=end, limit=19
            ),
            repeat,
        ),
        "ambient_read_ms": median_ms(
            lambda: stores.sessions.group_turns(  # type: ignore[union-attr]
                BOT.id, random_group(), until=end, limit=9
            ),
            repeat,
        ),
        "turn_with_timeline_ms": median_ms(lambda: runtime.render(turn), repeat // 4),
        "turn_with_ambient_ms": median_ms(lambda: runtime.render(ambient_turn), repeat // 4),
    }
    rendered = runtime.render(turn)
    assert rendered.trace["messages"]["sources"].get("timeline") == "store", rendered.trace
    database.close()
    return figures


def append_throughput(path: Path, count: int) -> dict[str, float]:
    database = SQLiteDatabase(path)
    database.migrate(SESSION_MIGRATIONS)
    config = attrs.evolve(Config(), session=SessionConfig(summary_enabled=False))
    runtime = Promptweave.from_config(config, stores=Stores.sqlite(database))
    base = START + dt.timedelta(days=400)
    start = time.perf_counter()
    for number in range(count):
        message = ChatMessage(
            id=f"a{number}",
            sender_id="30022",
            text=LINES[number % 8],
            time=base + dt.timedelta(seconds=number),
        )
        runtime.recorder.record_message(BOT.id, "29999", message)
    messages_per_s = count / (time.perf_counter() - start)
    start = time.perf_counter()
    for number in range(count):
        asked = ChatMessage(
            id=f"q{number}",
            sender_id="30022",
            text=LINES[number % 8],
            time=base + dt.timedelta(seconds=number),
        )
        runtime.recorder.record_bot_reply(
            BOT.id,
            "29999",
            "收到",
            message_id=f"r{number}",
            answering=asked,
            time=base + dt.timedelta(seconds=number, milliseconds=500),
        )
    replies_per_s = count / (time.perf_counter() - start)
    runtime.close()
    return {"record_message_per_s": messages_per_s, "record_bot_reply_per_s": replies_per_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        results: dict[str, dict[str, float]] = {}
        for label, rows in (("small", args.small), ("large", args.large)):
            path = Path(directory) / f"{label}.sqlite3"
            start = time.perf_counter()
            fill(path, rows)
            print(
                f"filled {rows:>9,} messages + {rows:,} session turns in "
                f"{time.perf_counter() - start:.1f} s",
                file=sys.stderr,
            )
            results[label] = measure(path, rows, args.repeat)
        results["append"] = append_throughput(Path(directory) / "append.sqlite3", args.appends)

    ratios = {key: results["large"][key] / results["small"][key] for key in results["small"]}
    if args.json:
        print(json.dumps({**results, "ratio": ratios}, indent=2))
    else:
        print(f"{'median (ms)':<24}{args.small:>12,}{args.large:>12,}{'ratio':>8}")
        for key in results["small"]:
            print(
                f"{key:<24}{results['small'][key]:>12.3f}{results['large'][key]:>12.3f}"
                f"{ratios[key]:>8.2f}"
            )
        for key, value in results["append"].items():
            print(f"{key:<24}{value:>12,.0f}")
    worst = max(ratios.values())
    if worst >= 2.0:
        print(f"FAIL: a median grew {worst:.2f}x (limit: below 2x)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
