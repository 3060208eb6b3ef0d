"""Benchmark of the live loop (``docs/bot.md``) on the embedded SQLite store.

Two figures:

- **non-reply traffic**: raw OneBot v11 group messages that the bot stays silent on, each carried
  through the whole loop (parse with the ``parse_event`` hook, record into the group log, route,
  silence), in messages per second. Target: at least 5,000 a second in one process.
- **the loop's own time around one reply**: an addressed question answered by a model that
  answers at once, minus the assembly (``render``, ``turn_context`` and ``request`` stages) and
  the model call itself: recording, routing, reading the answer, planning and sending two
  bubbles, recording them. Target: at most 2 ms a reply.

With learning on and off side by side (``docs/learning.md``): the same non-reply traffic through
two loops, one with the learner stage running in the background (every ``tick_s``, in worker
threads) and one with ``[learning] enabled = false``, interleaved repeat by repeat (the first
loop's learners are stopped while the second is timed, and start again with its next message). Target: with
learning on, at least 90% of the throughput with it off. And the learner stage's own rate:
messages the built-in learners learn from per second, over what the loop recorded.

Each figure is the median of several repeats, run in one process. Before timing, the script
checks that every non-reply message was routed ``pass`` and every reply delivered two bubbles.
Beside the wall-clock rate it prints the CPU time the process spent per non-reply message: on a
machine shared with other work that figure moves much less, so it is the one to compare two
builds by (the target is the wall-clock rate on a quiet machine).

Run: ``python benchmarks/bench_loop.py [--messages 4000] [--replies 300] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from promptweave import BotLoop, Config, Promptweave, SubmitResult, hookimpl
from promptweave.config import DeliveryConfig, LearningConfig, RoutingConfig, StoreConfig
from promptweave.loop.events import OutcomeStatus

BOT_ID = 10001
CHATTER = (
    "今天食堂又是土豆烧鸡",
    "土豆比鸡多系列",
    "楼下新开了家米线",
    "下午的会改到三点了",
    "有人一起拼车吗",
    "这周末天气不错",
    "我刚看完那部电影",
    "猫又把杯子推下去了",
)
ASSEMBLY_STAGES = ("render", "turn_context", "request", "submit")


class _InstantModel:
    """Answers every request at once with two bubbles."""

    @hookimpl
    def submit_request_async(self, request: Any, config: Config) -> Any:
        async def answer() -> SubmitResult:
            return SubmitResult(sent=True, status="ok", text="周六晚上七点桌游局\n在格子桌游吧")

        return answer()


class _Transport:
    platform = "onebot.v11"

    def __init__(self) -> None:
        self._ids = itertools.count(9_000_000)

    async def call_api(self, api: str, **params: Any) -> dict[str, int]:
        return {"message_id": next(self._ids)}


def _payload(number: int, group: int, text: str, *, at_bot: bool = False) -> dict[str, Any]:
    segments = [{"type": "text", "data": {"text": text}}]
    if at_bot:
        segments.insert(0, {"type": "at", "data": {"qq": str(BOT_ID)}})
    return {
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "self_id": BOT_ID,
        "group_id": group,
        "user_id": 30000 + number % 40,
        "message_id": number,
        "time": 1_764_400_000 + number,
        "sender": {
            "user_id": 30000 + number % 40,
            "nickname": f"群友{number % 40}",
            "role": "member",
        },
        "message": segments,
    }


def _loop(folder: Path, *, learn: bool = True, name: str = "bench") -> BotLoop:
    config = Config(
        store=StoreConfig(backend="sqlite", path=str(folder / f"{name}.sqlite3")),
        routing=RoutingConfig(low_engagement=False),
        delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
        learning=LearningConfig(enabled=learn),
    )
    runtime = Promptweave.from_config(
        config, contrib=["onebot"], extra_plugins=[_InstantModel()], rng=random.Random(1)
    )

    async def no_pause(_seconds: float) -> None:
        return None

    return BotLoop(runtime=runtime, sleep=no_pause)


async def _non_reply_rate(loop: BotLoop, start: int, count: int) -> tuple[float, float]:
    """Messages per second of wall-clock time, and microseconds of process CPU time each."""
    transport = _Transport()
    payloads = [_payload(start + n, 20000 + n % 8, CHATTER[n % len(CHATTER)]) for n in range(count)]
    began, cpu = time.perf_counter(), time.process_time()
    for payload in payloads:
        outcome = await loop.handle_payload("onebot", payload, str(BOT_ID), transport)
        if outcome.status != OutcomeStatus.SILENT:
            raise SystemExit(f"expected silence, got {outcome.status} ({outcome.reason})")
    return count / (time.perf_counter() - began), (time.process_time() - cpu) / count * 1e6


async def _reply_overheads(loop: BotLoop, start: int, count: int) -> list[float]:
    transport = _Transport()
    overheads = []
    for n in range(count):
        payload = _payload(start + n, 21000 + n % 50, "周末有什么活动吗？", at_bot=True)
        outcome = await loop.handle_payload("onebot", payload, str(BOT_ID), transport)
        if outcome.status != OutcomeStatus.REPLIED or len(outcome.bubbles) != 2:
            raise SystemExit(f"expected two bubbles, got {outcome.status} ({outcome.reason})")
        stages = outcome.stage_durations_ms
        assembly = sum(stages.get(stage, 0.0) for stage in ASSEMBLY_STAGES)
        overheads.append(stages["total"] + stages.get("record", 0.0) - assembly)
    return overheads


async def _main(messages: int, replies: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        loop = _loop(Path(folder))
        off = _loop(Path(folder), learn=False, name="learning_off")
        await _non_reply_rate(loop, 1, 200)  # warm-up: imports, caches, the SQLite file
        await _non_reply_rate(off, 1, 200)
        await _reply_overheads(loop, 1_000, 20)
        rates, cpu_us, medians, off_rates, off_cpu = [], [], [], [], []
        for repeat in range(repeats):
            base = 100_000 * (repeat + 1)
            rate, cpu = await _non_reply_rate(loop, base, messages)
            rates.append(rate)
            cpu_us.append(cpu)
            # Each contender alone: the learners of the first do not run while the second is timed.
            await loop.stop_learning()
            rate, cpu = await _non_reply_rate(off, base, messages)
            off_rates.append(rate)
            off_cpu.append(cpu)
            medians.append(statistics.median(await _reply_overheads(loop, base + 50_000, replies)))
        await loop.aclose()
        await off.aclose()
        stage = loop.runtime.learning
        began = time.perf_counter()
        runs = stage.run_all(loop.runtime.clock())
        learned_s = time.perf_counter() - began
        learned_messages = sum(run.messages for run in runs)
        failed = [run.describe() for run in runs if run.status == "failed"]
        background = [run for run in stage.runs if run.status == "learned"]
        loop.runtime.close()
        off.runtime.close()
    if failed:
        raise SystemExit("a learner failed: " + "; ".join(failed))
    print(f"repeats: {repeats}; {messages} non-reply messages and {replies} replies each")
    print(
        f"non-reply messages per second (parse, record, route, silence), median: {statistics.median(rates):,.0f}"
    )
    print(f"  per repeat: {', '.join(f'{rate:,.0f}' for rate in rates)}")
    print(
        f"process CPU time per non-reply message, median: {statistics.median(cpu_us):.0f} us"
        f" ({1e6 / statistics.median(cpu_us):,.0f} messages per CPU second)"
    )
    print(f"  per repeat: {', '.join(f'{us:.0f}' for us in cpu_us)}")
    print(
        f"with learning off, non-reply messages per second, median: {statistics.median(off_rates):,.0f}"
        f"; CPU per message {statistics.median(off_cpu):.0f} us"
    )
    print(
        "learning on / off, non-reply throughput (medians):"
        f" {statistics.median(rates) / statistics.median(off_rates):.3f};"
        f" per repeat: {', '.join(f'{on / o:.3f}' for on, o in zip(rates, off_rates, strict=True))}"
    )
    print(
        f"learner runs in the background during the repeats: {len(background)};"
        f" catching up afterwards: {learned_messages:,} messages read by the learners in {learned_s:.2f} s"
        f" ({learned_messages / learned_s if learned_s else 0:,.0f} a second, the five learners together)"
    )
    print(
        f"loop's own time per reply, assembly and model excluded, median: {statistics.median(medians):.3f} ms"
    )
    print(f"  per repeat: {', '.join(f'{ms:.3f}' for ms in medians)}")
    print("targets: >= 5,000 messages per second; <= 2 ms per reply; learning on >= 0.90 of off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--replies", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(_main(args.messages, args.replies, args.repeats))


if __name__ == "__main__":
    main()
