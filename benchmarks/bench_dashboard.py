"""Benchmark of the dashboard (``promptweave serve``) over a store of a million messages.

Fills a SQLite store quickly with ``executemany``: ``--messages`` group messages (the group log
and the turn log each hold them all, one turn a message, a ninth of them answered with a full
request), spread over ``--groups`` groups (half of them in one busy group) and ``--days`` days,
with ``turn_daily`` summed from the turn log, and a few hundred learned items per group. Then
asks each page through the application in this process (FastAPI's test client: routing, the
queries, the templates, no socket) and prints the median and the 95th percentile of each.

Every query is an indexed range or seek (``docs/dashboard.md``, "Scale"); compare the figures
with ``--messages 10000`` to see that they do not grow with the store.

Run: ``python benchmarks/bench_dashboard.py [--messages 1000000] [--groups 50] [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from fastapi.testclient import TestClient

from promptweave.serve.app import Dashboard, create_app
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.stores import Stores
from promptweave.store.turn_log_sqlite import pack_record, text_hash

BOT = "10001"
START = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
SECTIONS = (
    ("injection_guard", "static", 420),
    ("persona", "static", 1200),
    ("identity", "static", 160),
    ("group_expression", "profile", 240),
    ("memory", "retrieval", 300),
    ("group_timeline", "turn", 900),
    ("reply_shape", "turn", 360),
    ("turn_policy", "turn", 210),
    ("current_time", "turn", 40),
)


def _group_of(index: int, groups: int) -> str:
    # Half the messages go to the busy group, the rest round the others.
    return "20000" if index % 2 == 0 or groups == 1 else str(20000 + 1 + index % (groups - 1))


def _messages(count: int, groups: int, days: int, seed: int) -> Iterator[tuple[object, ...]]:
    rng = random.Random(seed)
    step = days * 86400 / count
    for index in range(count):
        yield (
            index + 1,
            _group_of(index, groups),
            f"m{index}",
            str(30000 + rng.randrange(200)),
            f"成员{rng.randrange(200)}",
            "今天晚上吃什么呀，有没有人一起去吃火锅" * rng.randint(1, 3),
            START.timestamp() + index * step,
        )


def _records(seed: int) -> tuple[bytes, bytes, dict[str, str]]:
    """A passed turn's record and an answered one's, packed as the loop packs them."""
    rng = random.Random(seed)
    texts = {}
    sections = []
    for section_id, volatility, chars in SECTIONS:
        text = f"【{section_id}】" + "".join(
            rng.choice("群友今天说了很多话题") for _ in range(chars)
        )
        digest = text_hash(text)
        texts[digest] = text
        sections.append(
            {
                "id": section_id,
                "title": section_id,
                "plugin": "builtin",
                "volatility": volatility,
                "status": "rendered",
                "chars": len(text),
                "text": digest,
            }
        )
    message = {"sender_id": "30001", "sender_name": "成员", "text": "今天晚上吃什么呀", "images": 0}
    passed = {
        **message,
        "status": "silent",
        "reason": "necessity_below_threshold",
        "decision": {"action": "pass", "source": "necessity", "reason": "below"},
        "necessity": {
            "score": 12,
            "threshold": 50,
            "bypassed": None,
            "terms": [{"name": "length", "points": 5}, {"name": "question", "points": 7}],
        },
        "bubbles": [],
        "sends": [],
        "durations_ms": {"record": 0.05, "route": 0.4, "total": 0.5},
    }
    answered = {
        **message,
        "status": "replied",
        "reason": "rule_default_reply",
        "decision": {"action": "reply", "source": "rule", "reason": "rule_default_reply"},
        "necessity": {"score": 95, "threshold": 50, "bypassed": "addressed", "terms": []},
        "bubbles": ["火锅可以啊", "我也想吃"],
        "sends": [{"bubble": 0, "ok": True, "id": "r1"}, {"bubble": 1, "ok": True, "id": "r2"}],
        "sections": sections,
        "request": {
            "api": "openai_chat",
            "model": "gpt-4o-mini",
            "bytes": 9000,
            "prefix": {
                "common_prefix_bytes": 6000,
                "request_bytes": 9000,
                "previous_bytes": 8800,
                "ratio": 0.667,
                "first_difference": "section group_timeline",
            },
            "messages": [
                {"index": 0, "role": "system", "system": True},
                {"index": 1, "role": "user", "text": "【用户消息】今天晚上吃什么呀" * 10},
            ],
        },
        "usage": {"prompt_tokens": 3000, "output_tokens": 40, "cached_tokens": 2000},
        "durations_ms": {"total": 900.0},
    }
    return pack_record(passed), pack_record(answered), texts


def fill(path: Path, *, messages: int, groups: int, days: int, seed: int) -> None:
    database = SQLiteDatabase(path)
    Stores.migrate(database)
    passed, answered, texts = _records(seed)
    with database.transaction() as connection:
        connection.executemany(
            "INSERT INTO group_messages (seq, bot_id, group_id, message_id, sender_id,"
            " sender_name, text, time) VALUES (?, '10001', ?, ?, ?, ?, ?, ?)",
            _messages(messages, groups, days, seed),
        )
        connection.execute(
            "INSERT INTO turn_records (seq, bot_id, group_id, message_id, time, day, status,"
            " action, reason, prompt_tokens, cached_tokens, output_tokens, record)"
            " SELECT seq, bot_id, group_id, message_id, time,"
            " date(time, 'unixepoch', '+8 hours'),"
            " CASE WHEN seq % 9 = 0 THEN 'replied' ELSE 'silent' END,"
            " CASE WHEN seq % 9 = 0 THEN 'reply' ELSE 'pass' END,"
            " CASE WHEN seq % 9 = 0 THEN 'rule_default_reply' ELSE 'necessity_below_threshold' END,"
            " CASE WHEN seq % 9 = 0 THEN 3000 END, CASE WHEN seq % 9 = 0 THEN 2000 END,"
            " CASE WHEN seq % 9 = 0 THEN 40 END,"
            " CASE WHEN seq % 9 = 0 THEN ? ELSE ? END FROM group_messages",
            (answered, passed),
        )
        connection.executemany(
            "INSERT INTO turn_texts (hash, text) VALUES (?, ?)", list(texts.items())
        )
        connection.execute(
            "INSERT INTO turn_daily (bot_id, group_id, day, status, action, reason, turns,"
            " requests, prompt_tokens, cached_tokens, output_tokens)"
            " SELECT bot_id, group_id, day, status, action, reason, COUNT(*),"
            " COUNT(prompt_tokens), TOTAL(prompt_tokens), TOTAL(cached_tokens),"
            " TOTAL(output_tokens) FROM turn_records"
            " GROUP BY bot_id, group_id, day, status, action, reason"
        )
        rng = random.Random(seed)
        now = START.timestamp()
        items = []
        for group in range(groups):
            group_id = "20000" if group == 0 else str(20000 + group)
            for number in range(300):
                kind = ("expression_pair", "teaching", "person_fact", "strategy")[number % 4]
                items.append(
                    (
                        BOT,
                        group_id,
                        kind,
                        f"k{number}",
                        str(30000 + rng.randrange(200)) if kind != "expression_pair" else "",
                        json.dumps({"trigger": "吃什么", "reply": "火锅"}, ensure_ascii=False),
                        json.dumps([f"m{rng.randrange(messages)}" for _ in range(3)]),
                        rng.randint(1, 20),
                        now,
                        now,
                    )
                )
        connection.executemany(
            "INSERT INTO learned_items (bot_id, group_id, kind, key, user_id, fields,"
            " source_message_ids, count, learned_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?)",
            items,
        )
    database.close()


def _timed(client: TestClient, url: str, repeats: int) -> tuple[float, float, int]:
    times = []
    size = 0
    for _ in range(repeats):
        start = time.perf_counter()
        answer = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        if answer.status_code != 200:
            raise SystemExit(f"{url}: HTTP {answer.status_code}: {answer.text[:200]}")
        size = len(answer.content)
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return statistics.median(times), p95, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "store.sqlite3"
        start = time.perf_counter()
        fill(
            path,
            messages=arguments.messages,
            groups=arguments.groups,
            days=arguments.days,
            seed=arguments.seed,
        )
        print(
            f"store: {arguments.messages:,} messages, {arguments.groups} groups,"
            f" {arguments.days} days; filled in {time.perf_counter() - start:.1f} s,"
            f" {path.stat().st_size / 1e6:.0f} MB"
        )
        end = START + dt.timedelta(days=arguments.days)
        dashboard = Dashboard.open(path, clock=lambda: end)
        client = TestClient(create_app(dashboard))
        middle = dashboard.reads.timeline(BOT, "20000", limit=1)[0]
        deep = f"{middle.time - arguments.days * 86400 / 3:.3f}:{middle.seq // 3}"
        replied = dashboard.reads.timeline(BOT, "20000", status="replied", limit=1)[0].seq
        pages = {
            "groups": "/",
            "live (version)": "/live",
            "timeline, newest page": f"/groups/{BOT}/20000",
            "timeline, a page a third back": f"/groups/{BOT}/20000?before={deep}",
            "timeline, replied only": f"/groups/{BOT}/20000?status=replied",
            "timeline, live update (nothing new)": f"/groups/{BOT}/20000/newer?after={middle.time}:{middle.seq}",
            "turn with its full request": f"/turns/{replied}",
            "learned, every kind": f"/groups/{BOT}/20000/learned",
            "learned, one kind": f"/groups/{BOT}/20000/learned?kind=teaching",
            "spend, 30 days, every group": "/spend?days=30",
            "spend, 90 days, one group": f"/spend?days=90&bot={BOT}&group=20000",
        }
        print(f"{'page':<40} {'p50 ms':>8} {'p95 ms':>8} {'bytes':>9}")
        for name, url in pages.items():
            client.get(url)  # warm: the templates compiled, the pages of the file cached
            p50, p95, size = _timed(client, url, arguments.repeats)
            print(f"{name:<40} {p50:>8.1f} {p95:>8.1f} {size:>9,}")


if __name__ == "__main__":
    main()
