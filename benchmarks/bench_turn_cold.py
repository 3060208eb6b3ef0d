"""One answered turn of a real store, with the processor's caches warm and cold, side by side.

Inside a running bot a turn seldom finds its code and data in the processor's caches: between
two messages the bot's process waits, and the machine's other processes (the chat client,
NoneBot, other bots) run on the same cores. ``bench_nonebot.py`` measures that whole process;
this script measures what it does to promptweave's own stages, in one process, so the stages can
be worked on without NoneBot's noise around them.

The store is the bundled chat (``examples/replay``) replayed into a scratch SQLite file with its
retrieval data imported and the learners on (``promptweave replay --store``), so every retriever
reads real rows and learned items. Then each of the chat's @-questions is asked again as a new
message, through the stages that come before the model call: the session read, routing, the
seven retrievers, the fifteen sections and the messages (``TurnPipeline.render``), the turn
context and the provider request.

The turns are taken in triples, interleaved in one run: the processor's caches are flushed
(a buffer of twice the last-level cache is written through), one turn runs **cold**, and the next
runs right after it, **warm**; which of two questions takes the cold place alternates. The
figures are the medians per stage in each case and their ratio. Both cases run the same code on
the same questions and are checked to build the same requests for them first.

Run: ``python benchmarks/bench_turn_cold.py [--turns 300]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from promptweave import Bot, ChatMessage, Config, Promptweave, Turn
from promptweave.config import StoreConfig
from promptweave.providers.exchange import ProviderSpec
from promptweave.turn import SpeakTrigger

ROOT = Path(__file__).resolve().parent.parent
REPLAY = ROOT / "examples" / "replay"
CHAT = REPLAY / "weekend_chat.onebot.jsonl"
BOT = Bot(id="10001", name="小织", aliases=("织织", "小织子"))
#: The stages timed, in the order they run.
STAGES = ("session", "route", "retrieval", "sections", "messages", "turn_context", "request")


def last_level_cache_bytes() -> int:
    """The size of the largest processor cache Linux reports (32 MiB if it reports none)."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        text = (index / "size").read_text().strip() if (index / "size").exists() else ""
        if text.endswith("K"):
            sizes.append(int(text[:-1]) * 1024)
        elif text.endswith("M"):
            sizes.append(int(text[:-1]) * 1024 * 1024)
    return max(sizes, default=32 * 1024 * 1024)


def flusher(size: int) -> Callable[[], None]:
    """Writes one byte of every cache line of a buffer of ``size`` bytes."""
    buffer = bytearray(size)
    lines = len(buffer[::64])
    ones, twos = b"\x01" * lines, b"\x02" * lines
    state = [False]

    def flush() -> None:
        state[0] = not state[0]
        buffer[::64] = ones if state[0] else twos

    return flush


def questions() -> list[tuple[str, str, str]]:
    """The chat's @-questions to the bot: (sender id, sender name, text without the @)."""
    found = []
    for line in CHAT.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("post_type") != "message" or event.get("message_type") != "group":
            continue
        segments = event["message"]
        if not any(s["type"] == "at" and str(s["data"].get("qq")) == BOT.id for s in segments):
            continue
        text = "".join(s["data"]["text"] for s in segments if s["type"] == "text").strip()
        if text:
            sender = event["sender"]
            name = sender.get("card") or sender.get("nickname") or ""
            found.append((str(event["user_id"]), name, text))
    return found


def replayed_store(folder: Path) -> Path:
    """The bundled chat replayed into a SQLite file in ``folder`` (data imported, learners on)."""
    store = folder / "replayed.sqlite3"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "promptweave",
            "replay",
            str(CHAT),
            "--config",
            str(REPLAY / "promptweave.toml"),
            "--store",
            str(store),
            "--no-progress",
            "--format",
            "jsonl",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=folder,
        env={**os.environ, "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    # Everything into the main file, so that a copy of the file alone is the whole store.
    with contextlib.closing(sqlite3.connect(store)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


@attrs.define
class Bench:
    runtime: Promptweave
    spec: ProviderSpec
    asked: list[tuple[str, str, str]]
    at: dt.datetime
    number: int = 0

    def turn(self, index: int) -> Turn:
        sender_id, name, text = self.asked[index % len(self.asked)]
        self.number += 1
        self.at += dt.timedelta(seconds=30)
        message = ChatMessage(
            id=f"bench-{self.number}",
            sender_id=sender_id,
            sender_name=name,
            text=text,
            raw=f"@{BOT.name} {text}",
            addressed=True,
            time=self.at,
        )
        return Turn(bot=BOT, group_id="20001", trigger=SpeakTrigger.MENTION, message=message)

    def run(self, turn: Turn) -> tuple[dict[str, float], bytes]:
        """The turn through the stages before the model call: milliseconds per stage, and the
        request's body."""
        begun = time.perf_counter()
        pipeline = self.runtime.pipeline(turn, turn.message.time)
        rendered = pipeline.render()
        spent = {name: rendered.stage_durations_ms.get(name, 0.0) for name in STAGES[:5]}
        start = time.perf_counter()
        pipeline.build_turn_context()
        middle = time.perf_counter()
        request = pipeline.build_request(self.spec)
        end = time.perf_counter()
        spent["turn_context"] = (middle - start) * 1000
        spent["request"] = (end - middle) * 1000
        spent["stages"] = sum(spent[name] for name in STAGES)
        spent["total"] = (end - begun) * 1000
        return spent, request.body_bytes()


def make_bench(store: Path, asked: list[tuple[str, str, str]]) -> Bench:
    config = Config.from_file(REPLAY / "promptweave.toml")
    config = attrs.evolve(config, store=StoreConfig(path=str(store)))
    runtime = Promptweave.from_config(
        config, environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}, strict=True
    )
    # After the chat's last message, as a new question would come.
    start = dt.datetime.fromtimestamp(
        max(
            json.loads(line).get("time", 0)
            for line in CHAT.read_text(encoding="utf-8").splitlines()
        ),
        dt.UTC,
    ) + dt.timedelta(minutes=5)
    return Bench(runtime, ProviderSpec.from_config(config.provider), asked, start)


def check_same(store: Path, asked: list[tuple[str, str, str]], flush: Callable[[], None]) -> None:
    """Two runtimes on copies of the store ask the same questions, one with the caches flushed
    before every turn: their requests must be byte for byte the same."""
    bodies: list[list[bytes]] = []
    for flushed in (False, True):
        copy = store.with_name(f"check-{int(flushed)}.sqlite3")
        copy.write_bytes(store.read_bytes())
        bench = make_bench(copy, asked)
        found = []
        for index in range(len(asked)):
            turn = bench.turn(index)
            if flushed:
                flush()
            found.append(bench.run(turn)[1])
        bench.runtime.close()
        bodies.append(found)
    if bodies[0] != bodies[1]:
        raise SystemExit("a turn run cold built a different request from the same turn run warm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in each case")
    parser.add_argument("--warmup", type=int, default=40, help="turns before measuring")
    args = parser.parse_args(argv)

    asked = questions()
    cache = last_level_cache_bytes()
    flush = flusher(2 * cache)
    with tempfile.TemporaryDirectory(prefix="bench-turn-cold-") as base:
        store = replayed_store(Path(base))
        check_same(store, asked, flush)
        bench = make_bench(store, asked)
        for index in range(args.warmup):
            bench.run(bench.turn(index))
        found: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
        for index in range(args.turns):
            first, second = bench.turn(2 * index), bench.turn(2 * index + 1)
            if index % 2:
                first, second = second, first
            flush()
            found["cold"].append(bench.run(first)[0])
            found["warm"].append(bench.run(second)[0])
        bench.runtime.close()

    print(
        f"{len(asked)} @-questions of the bundled chat asked again on its replayed store, "
        f"{args.turns} turns cold and {args.turns} warm, interleaved (caches flushed through "
        f"{2 * cache // (1024 * 1024)} MiB before each cold turn; Python {sys.version.split()[0]})"
    )
    print("every question built the same request cold and warm")
    print(f"{'stage':<14} {'warm ms':>9} {'cold ms':>9} {'cold / warm':>12}")
    for name in (*STAGES, "stages", "total"):
        warm = statistics.median(sample[name] for sample in found["warm"])
        cold = statistics.median(sample[name] for sample in found["cold"])
        ratio = f"{cold / warm:12.2f}" if warm else f"{'-':>12}"
        print(f"{name:<14} {warm:9.3f} {cold:9.3f} {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
