"""Benchmark: a whole turn on the SQLite store as the store grows, and concurrency of slow retrievers.

Run: ``python benchmarks/bench_retrieval.py [--turns 200] [--repeats 9] [--sizes 0,10000,100000]``

1. **Whole turn.** One SQLite store per size, each holding ``SIZE`` memories and ``SIZE / 10``
   knowledge chunks (10,000 chunks beside 100,000 memories), all in the scope of the benchmark's
   bot and group (the worst case: the scope removes nothing), plus the group's profile: 2,000
   expression pairs, 200 behavior strategies, 60 old-topic summaries, a relationship note, person
   facts and a rhythm baseline. Size 0 is the "empty" store: that profile, no memory and no
   knowledge. Each timed turn is ``Promptweave.render(turn)`` on an addressed question with six
   recent group lines: reading the session, routing (gates, reply necessity, decide rules, the
   routing state in the same SQLite file), the seven built-in retrievers and the assembly. The
   sizes are interleaved: each repeat runs ``--turns`` fresh questions on every store in turn, and
   the figures are the medians over ``--repeats`` repeats of each repeat's p50 and p99.
2. **Concurrency.** Five retrievers that each wait 20 ms (async ones, then sync ones in worker
   threads): how long a turn's retrieval takes with all five; one after the other it would take
   100 ms.

The last two lines are the figures of ``docs/retrieval.md``'s targets: ``whole turn at 100000
memories: p50 X ms, p99 Y ms`` and ``whole turn on an empty store: p50 X ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import statistics
import tempfile
import time
from pathlib import Path

from promptweave import Bot, ChatMessage, Config, Decision, Promptweave, Retriever, Turn, hookimpl
from promptweave.config import StoreConfig
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RhythmRecord,
    SummaryRecord,
)
from promptweave.turn import SpeakTrigger

BOT, GROUP, USER = "10001", "20001", "30017"
MEMBERS = ("30017", "30022", "30031", "30045", "30052")
NOW = dt.datetime(2026, 11, 28, 20, 41, tzinfo=dt.timezone(dt.timedelta(hours=8)))
KINDS = ("teaching", "group_event", "ip_knowledge", "group_memory")
QUESTIONS = ("怎么", "在哪", "几点", "是什么", "规则", "能不能")
EVENTS = ("周六", "明晚", "改到", "活动", "报名")
SECTIONS_PER_DOCUMENT = 10
RECENT_LINES = 6
#: The share of questions made of the most common words only.
COMMON_SHARE = 0.1


class Vocabulary:
    """Synthetic Chinese words with a Zipf distribution, like the words of real chat.

    8000 two- and three-character words over 3000 common characters; word ``r`` is drawn with
    weight ``1 / r``, so a few words are everywhere and most are rare.
    """

    def __init__(self, rng: random.Random) -> None:
        characters = [chr(code) for code in range(0x4E00, 0x4E00 + 3000)]
        self.rng = rng
        self.words = [
            "".join(rng.sample(characters, rng.choice((2, 2, 2, 3)))) for _ in range(8000)
        ]
        self.weights = [1 / rank for rank in range(1, len(self.words) + 1)]

    def sentence(self, words: int, *, common: bool = False) -> str:
        """Words joined two by two; ``common``: only the 30 most frequent words, whose terms are
        in a large share of the store (the costliest searches)."""
        if common:
            picked = self.rng.choices(self.words[:30], k=words)
        else:
            picked = self.rng.choices(self.words, self.weights, k=words)
        return "，".join("".join(picked[i : i + 2]) for i in range(0, len(picked), 2)) + "。"


def build_store(path: Path, memories: int, vocabulary: Vocabulary) -> Promptweave:
    """A runtime over a new SQLite file holding ``memories`` memories, a tenth as many knowledge
    chunks, and the group's profile."""
    config = Config(store=StoreConfig(backend="sqlite", path=str(path)))
    runtime = Promptweave.from_config(config, environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    store = runtime.stores.retrieval
    rng = vocabulary.rng
    started = time.perf_counter()
    for start in range(0, memories, 10_000):
        store.write(
            RetrievalBatch(
                memories=tuple(
                    MemoryRecord(
                        bot_id=BOT,
                        group_id=GROUP,
                        kind=rng.choice(KINDS),
                        text=f"{vocabulary.sentence(rng.randint(4, 9))}（{start + i}）",
                    )
                    for i in range(min(10_000, memories - start))
                )
            )
        )
    documents = tuple(
        KnowledgeDocument(
            bot_id=BOT,
            group_id=GROUP,
            source=f"doc-{d}.md",
            text=f"# 文档 {d}\n\n"
            + "\n\n".join(
                f"## 第 {s} 节\n\n{vocabulary.sentence(rng.randint(10, 20))}"
                for s in range(SECTIONS_PER_DOCUMENT)
            ),
        )
        for d in range(memories // 10 // SECTIONS_PER_DOCUMENT)
    )
    store.write(
        RetrievalBatch(
            knowledge=documents,
            relationships=(
                RelationshipRecord(
                    bot_id=BOT, group_id=GROUP, user_id=USER, facts=["桌游局常客"], affinity=0.6
                ),
            ),
            person_facts=tuple(
                PersonFactRecord(
                    bot_id=BOT, group_id=GROUP, user_id=USER, text=vocabulary.sentence(3)
                )
                for _ in range(8)
            ),
            expression_pairs=tuple(
                ExpressionPairRecord(
                    bot_id=BOT,
                    group_id=GROUP,
                    trigger=vocabulary.sentence(2),
                    reply=vocabulary.sentence(2),
                )
                for _ in range(2000)
            ),
            rhythms=(
                RhythmRecord(
                    bot_id=BOT, group_id=GROUP, single_bubble_share=0.8, median_segment_chars=8
                ),
            ),
            strategies=tuple(
                BehaviorRecord(
                    bot_id=BOT,
                    group_id=GROUP,
                    scene=vocabulary.sentence(2),
                    action=vocabulary.sentence(3),
                )
                for _ in range(200)
            ),
            summaries=tuple(
                SummaryRecord(
                    bot_id=BOT,
                    group_id=GROUP,
                    user_id=USER,
                    text="【此前对话摘要】" + vocabulary.sentence(8),
                )
                for _ in range(60)
            ),
        )
    )
    counts = store.counts()
    print(
        f"store {memories}: {counts['memories']} memories, {counts['knowledge_chunks']} knowledge"
        f" chunks, {counts['expression_pairs']} expression pairs (built in"
        f" {time.perf_counter() - started:.1f} s, {path.stat().st_size / 2**20:.0f} MiB)"
    )
    return runtime


def make_turn(vocabulary: Vocabulary, number: int) -> Turn:
    """An addressed question with recent group lines, some of which read as events; one question
    in ten is made of common words only."""
    rng = vocabulary.rng
    at = NOW + dt.timedelta(seconds=30 * number)
    words = vocabulary.sentence(rng.randint(3, 6), common=rng.random() < COMMON_SHARE)
    question = words.rstrip("。") + rng.choice(QUESTIONS) + "？"
    recent = tuple(
        ChatMessage(
            id=f"{number}-{i}",
            sender_id=rng.choice(MEMBERS[1:]),
            text=vocabulary.sentence(rng.randint(2, 5)) + (rng.choice(EVENTS) if i % 2 else ""),
            time=at - dt.timedelta(seconds=20 * (RECENT_LINES - i)),
        )
        for i in range(RECENT_LINES)
    )
    return Turn(
        bot=Bot(id=BOT, name="小织"),
        group_id=GROUP,
        trigger=SpeakTrigger.MENTION,
        message=ChatMessage(
            id=str(number), sender_id=USER, text=f"@小织 {question}", addressed=True, time=at
        ),
        recent_messages=recent,
    )


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


class Sample:
    """The turns of one store size: p50, p99 and CPU time per turn of each repeat, and the time
    of each stage."""

    def __init__(self) -> None:
        self.p50: list[float] = []
        self.p99: list[float] = []
        self.cpu: list[float] = []
        self.stages: dict[str, list[float]] = {}

    def add(self, totals: list[float], cpu_ms: float) -> None:
        self.p50.append(statistics.median(totals))
        self.p99.append(_percentile(totals, 0.99))
        self.cpu.append(cpu_ms / len(totals))


def run_turns(runtime: Promptweave, turns: list[Turn], sample: Sample) -> None:
    totals = []
    cpu = time.process_time()
    for turn in turns:
        started = time.perf_counter()
        rendered = runtime.render(turn)
        totals.append((time.perf_counter() - started) * 1000)
        for section in rendered.trace["retrieval"]["sections"].values():
            for trace in section:
                if trace["status"] == "skipped" and trace["reason"] in ("error", "timeout"):
                    raise SystemExit(f"retriever {trace['retriever']} failed: {trace}")
        for stage, duration in rendered.stage_durations_ms.items():
            sample.stages.setdefault(stage, []).append(duration)
    sample.add(totals, (time.process_time() - cpu) * 1000)


def bench_whole_turn(
    sizes: list[int], turns: int, repeats: int, vocabulary: Vocabulary, directory: Path
) -> dict[int, Sample]:
    runtimes = {
        size: build_store(directory / f"{size}.sqlite3", size, vocabulary) for size in sizes
    }
    samples = {size: Sample() for size in sizes}
    number = 0
    for runtime in runtimes.values():  # warm-up: connections, caches, the event loop
        for _ in range(20):
            runtime.render(make_turn(vocabulary, number))
            number += 1
    for _ in range(repeats):
        batch = [make_turn(vocabulary, number + i) for i in range(turns)]
        number += turns
        for size, runtime in runtimes.items():
            run_turns(runtime, batch, samples[size])
    print(
        f"\nwhole turn, Promptweave.render(turn) on SQLite: median over {repeats} repeats of"
        f" {turns} turns (each repeat's p50 / p99)"
    )
    print("| memories | knowledge chunks | p50 ms | p99 ms | CPU ms per turn |")
    print("|---:|---:|---:|---:|---:|")
    for size, sample in samples.items():
        print(
            f"| {size:,} | {size // 10:,} | {statistics.median(sample.p50):.2f} |"
            f" {statistics.median(sample.p99):.2f} | {statistics.median(sample.cpu):.2f} |"
        )
    for size, sample in samples.items():
        stages = ", ".join(
            f"{stage.removeprefix('retrieval.')} {statistics.median(values):.3f}"
            for stage, values in sample.stages.items()
            if stage != "retrieval"
        )
        print(f"stages at {size} memories (median ms): {stages}")
    return samples


class _SlowRetrievers:
    """Five retrievers that each wait 20 ms, async or sync."""

    def __init__(self, use_async: bool) -> None:
        self.use_async = use_async

    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        for i in range(5):
            register(Retriever(name=f"slow_{i}", feeds="memory", retrieve=self.retrieve))

    def retrieve(self, query):  # type: ignore[no-untyped-def]
        if self.use_async:
            return self._wait()
        time.sleep(0.02)
        return []

    async def _wait(self) -> list[object]:
        await asyncio.sleep(0.02)
        return []


def bench_concurrency(turns: int, vocabulary: Vocabulary) -> None:
    for label, use_async in (("async", True), ("sync, in threads", False)):
        runtime = Promptweave.from_config(
            Config(store=StoreConfig(backend="memory")),
            extra_plugins=[_SlowRetrievers(use_async)],
            environ={
                "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1",
                "PROMPTWEAVE_DISABLE_PLUGINS": "retrievers",
            },
        )
        decision = Decision(action="reply")
        totals = []
        for number in range(turns):
            outcome = asyncio.run(
                runtime.retrieve(make_turn(vocabulary, number), decision=decision)
            )
            totals.append(outcome.duration_ms)
        print(
            f"five retrievers waiting 20 ms each ({label}): median "
            f"{statistics.median(totals):.1f} ms, max {max(totals):.1f} ms per turn "
            f"(one after the other: 100 ms)"
        )
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per store and repeat")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--sizes", default="0,10000,100000", help="memories per store")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    vocabulary = Vocabulary(random.Random(args.seed))
    with tempfile.TemporaryDirectory() as directory:
        samples = bench_whole_turn(sizes, args.turns, args.repeats, vocabulary, Path(directory))
    print()
    bench_concurrency(min(args.turns, 50), vocabulary)
    print()
    p50 = {size: statistics.median(sample.p50) for size, sample in samples.items()}
    if 10_000 in p50 and 100_000 in p50:
        print(f"growth from 10000 to 100000 memories (p50): {p50[100_000] / p50[10_000]:.2f}x")
    largest = samples[sizes[-1]]
    print(
        f"whole turn at {sizes[-1]} memories: p50 {p50[sizes[-1]]:.2f} ms,"
        f" p99 {statistics.median(largest.p99):.2f} ms"
    )
    if 0 in p50:
        print(f"whole turn on an empty store: p50 {p50[0]:.2f} ms")


if __name__ == "__main__":
    main()
