"""Benchmark: retrieval of one turn against a large store, and concurrency of slow retrievers.

Run: ``python benchmarks/bench_retrieval.py [--turns 300] [--memories 100000] [--chunks 10000]``

1. A SQLite store holding ``--memories`` memories and ``--chunks`` knowledge chunks, all in the
   scope of the benchmark's bot and group (the worst case: the scope filter removes nothing). Each
   turn runs all the built-in retrievers (memory, knowledge, relationship, person facts, old
   topics, group expression, behavior strategies) for a question; the script prints the median and
   99th percentile wall time per turn, and per retriever.
2. Five retrievers that each wait 20 ms (async ones, then sync ones in worker threads): the
   script prints how long a turn's retrieval takes with all five; run one after the other, it
   would take 100 ms.
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

from framework import (
    Bot,
    ChatMessage,
    Config,
    Decision,
    Promptweave,
    Retriever,
    Turn,
    hookimpl,
)
from framework.config import StoreConfig
from framework.store.retrieval import (
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

BOT, GROUP, USER = "10001", "20001", "30017"
NOW = dt.datetime(2026, 11, 28, 20, 41, tzinfo=dt.timezone(dt.timedelta(hours=8)))
KINDS = ("teaching", "group_event", "ip_knowledge", "group_memory")
QUESTIONS = ("怎么", "在哪", "几点", "是什么", "规则", "能不能")


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

    def sentence(self, words: int) -> str:
        picked = self.rng.choices(self.words, self.weights, k=words)
        return "，".join("".join(picked[i : i + 2]) for i in range(0, len(picked), 2)) + "。"


def build_store(path: Path, memories: int, chunks: int, vocabulary: Vocabulary) -> Promptweave:
    config = Config(store=StoreConfig(backend="sqlite", path=str(path)))
    runtime = Promptweave.from_config(config, environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    store = runtime.stores.retrieval
    started = time.perf_counter()
    for start in range(0, memories, 10_000):
        store.write(
            RetrievalBatch(
                memories=tuple(
                    MemoryRecord(
                        bot_id=BOT,
                        group_id=GROUP,
                        kind=vocabulary.rng.choice(KINDS),
                        text=f"{vocabulary.sentence(vocabulary.rng.randint(4, 9))}（{start + i}）",
                    )
                    for i in range(min(10_000, memories - start))
                )
            )
        )
    sections_per_document = 10
    documents = tuple(
        KnowledgeDocument(
            bot_id=BOT,
            group_id=GROUP,
            source=f"doc-{d}.md",
            text=f"# 文档 {d}\n\n"
            + "\n\n".join(
                f"## 第 {s} 节\n\n{vocabulary.sentence(vocabulary.rng.randint(10, 20))}"
                for s in range(sections_per_document)
            ),
        )
        for d in range(chunks // sections_per_document)
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
        f"store: {counts['memories']} memories, {counts['knowledge_chunks']} knowledge chunks "
        f"(built in {time.perf_counter() - started:.1f} s, "
        f"{path.stat().st_size / 2**20:.0f} MiB)"
    )
    return runtime


def _turn(text: str) -> Turn:
    return Turn(
        bot=Bot(id=BOT, name="小织"),
        group_id=GROUP,
        message=ChatMessage(sender_id=USER, text=text, time=NOW),
    )


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def bench_store(runtime: Promptweave, turns: int, vocabulary: Vocabulary) -> None:
    decision = Decision(action="reply")

    async def run() -> tuple[list[float], dict[str, list[float]]]:
        totals: list[float] = []
        per_retriever: dict[str, list[float]] = {}
        for _ in range(turns):
            text = (
                vocabulary.sentence(vocabulary.rng.randint(3, 6)).rstrip("。")
                + vocabulary.rng.choice(QUESTIONS)
                + "？"
            )
            started = time.perf_counter()
            outcome = await runtime.retrieve(_turn(text), decision=decision)
            totals.append((time.perf_counter() - started) * 1000)
            for trace in outcome.traces:
                assert trace.status != "skipped" or trace.reason != "error", trace
                per_retriever.setdefault(trace.retriever, []).append(trace.duration_ms)
        return totals, per_retriever

    asyncio.run(runtime.retrieve(_turn("预热一下怎么样？"), decision=decision))
    totals, per_retriever = asyncio.run(run())
    print(
        f"full retrieval per turn ({turns} turns, 7 built-in retrievers): "
        f"median {statistics.median(totals):.1f} ms, p99 {_percentile(totals, 0.99):.1f} ms"
    )
    for name, values in per_retriever.items():
        print(
            f"    {name:<20} median {statistics.median(values):6.2f} ms   "
            f"p99 {_percentile(values, 0.99):6.2f} ms"
        )


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


def bench_concurrency(turns: int) -> None:
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
        for _ in range(turns):
            outcome = asyncio.run(runtime.retrieve(_turn("周六还去吗？"), decision=decision))
            totals.append(outcome.duration_ms)
        print(
            f"five retrievers waiting 20 ms each ({label}): median "
            f"{statistics.median(totals):.1f} ms, max {max(totals):.1f} ms per turn "
            f"(one after the other: 100 ms)"
        )
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    vocabulary = Vocabulary(random.Random(args.seed))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.sqlite3"
        runtime = build_store(path, args.memories, args.chunks, vocabulary)
        bench_store(runtime, args.turns, vocabulary)
        runtime.close()
    bench_concurrency(min(args.turns, 50))


if __name__ == "__main__":
    main()
