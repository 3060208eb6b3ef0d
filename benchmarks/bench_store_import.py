"""Benchmark of ``promptweave store import``: its memory does not grow with the log.

Writes a log of ``--events`` message events (every tenth answered by the bot, spread over 100
groups and 2000 members), then runs the command on it in a child process and prints the child's
peak resident memory and its wall time, beside those of a log a tenth as long. Both passes (check,
then record) read the file a line at a time, so the two peaks must be close; the script exits with
status 1 when the long log's peak is more than 1.5 times the short one's.

Run: ``python benchmarks/bench_store_import.py [--events 1000000]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
GROUPS = 100
MEMBERS = 2000


def write_log(path: Path, events: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for number in range(events):
            group = str(20000 + number % GROUPS)
            time_ = START + dt.timedelta(seconds=number)
            message = {
                "id": f"m{number}",
                "sender_id": str(30000 + number % MEMBERS),
                "text": f"第{number}条消息，聊聊今天的安排",
                "time": time_.isoformat(),
            }
            line = {"event": "message", "bot_id": "10001", "group_id": group, "message": message}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            if number % 10 == 9:
                reply = {
                    "event": "bot_reply",
                    "bot_id": "10001",
                    "group_id": group,
                    "text": "收到",
                    "message_id": f"r{number}",
                    "time": (time_ + dt.timedelta(milliseconds=500)).isoformat(),
                    "answering": f"m{number}",
                }
                handle.write(json.dumps(reply, ensure_ascii=False) + "\n")


def run_import(log: Path, store: Path) -> tuple[float, float]:
    """The child's peak RSS in MB and its wall time in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "promptweave",
            "store",
            "import",
            str(log),
            "--store",
            str(store),
            "--no-compress",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest child so far: run the small log first.
    return max(peak, before) / 1024, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        results = []
        for events in (args.events // 10, args.events):
            log = root / f"log-{events}.jsonl"
            write_log(log, events)
            peak, wall = run_import(log, root / f"store-{events}.sqlite3")
            size = log.stat().st_size / 2**20
            print(
                f"{events:>9} events ({size:7.1f} MB log): peak RSS {peak:7.1f} MB, {wall:7.1f} s"
            )
            results.append(peak)
    small, large = results
    ratio = large / small
    print(f"peak ratio (long / short): {ratio:.2f} (target: at most 1.5)")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
