"""Recorded expectations of the retrieval: what it finds for seeded inputs, and the generator.

``tests/data/retrieval_expected.json`` holds what the retrieval returned, when it was recorded,
for the inputs built here: the example turns over the example data, and randomised stores and
turns from a small shared vocabulary (many shared terms, duplicate triggers, equal supports and
equally long texts, so ties are everywhere). It was first recorded while the tests still
compared the retrieval with a copy of the earlier one (every expression pair and strategy
compared on every turn, the scope filtered after the full-text match, nothing cached), and both
gave exactly these outputs: so the cached, bounded retrieval is still checked against what the
earlier one found. The tests that read it are ``test_retrieval_unchanged.py`` and
``test_retrieval_bounds.py``.

Small outputs are recorded in full (a change reads as a diff); long ones as the digest of their
canonical JSON, one per retriever, so a failure still names what changed. Each case also records
the digest of its generated store, so a change to the generators here fails as "the inputs
changed" rather than as a retrieval that finds otherwise. ``python tests/regenerate.py retrieval``
rewrites the file (only ever on purpose: when a change of what the retrieval finds is intended,
reviewed with ``git diff``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import cattrs

from promptweave import Bot, ChatMessage, Config, Promptweave, Stores, Turn, load_turn_file
from promptweave.config import RetrievalConfig, StoreConfig
from promptweave.store import retrieval_sqlite
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
from promptweave.store.retrieval_chunks import chunk_document
from promptweave.store.retrieval_import import read_files
from promptweave.store.retrieval_schema import MIGRATIONS
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.text.scoring import index_text, query_terms
from promptweave.turn import SpeakTrigger

__all__ = [
    "BACKENDS",
    "EXAMPLES",
    "EXPECTED",
    "READS_SEED",
    "RENDER_COLUMNS",
    "RENDER_SEEDS",
    "RETRIEVAL_CONFIGS",
    "RETRIEVERS",
    "SCOPES",
    "SEARCH_COLUMNS",
    "SEARCH_SEEDS",
    "USERS",
    "VERSION_1_SEED",
    "comparable",
    "digest",
    "example_batch",
    "example_renders",
    "example_runtime",
    "example_turns",
    "expected",
    "random_batch",
    "random_text",
    "random_turn",
    "randomised_case",
    "reads_store",
    "record",
    "recorded_text",
    "render_form",
    "render_row",
    "runtime",
    "scope_reads",
    "search_queries",
    "search_row",
    "sqlite_search_case",
    "version_1_case",
    "write_version_1",
]

EXPECTED = Path(__file__).resolve().parent / "data" / "retrieval_expected.json"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NO_AUTOLOAD = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}
UTC8 = dt.timezone(dt.timedelta(hours=8))
NOW = dt.datetime(2026, 11, 28, 20, 41, tzinfo=UTC8)

WORDS = (
    "周六", "晚上", "桌游", "地铁", "米线", "报表", "加班", "柠檬", "阿瓦隆", "卡坦", "生日",
    "蛋糕", "订位", "格子", "咖啡", "猫咪", "今天", "明天", "规则", "报名", "换到", "地方",
    "好的", "哈哈", "确实", "可以", "真的", "ok", "bug", "ps5", "steam", "的", "了", "吗",
)  # fmt: skip
MARKS = ("", "", "", "，", "。", "？", "！", " ", "～", "...", "、")
QUESTIONS = ("怎么", "在哪", "几点", "是什么", "规则", "能不能", "吗", "")
SCOPES = (("10001", "20001"), ("10001", "20002"), ("10002", "20001"), ("10001", ""))
USERS = ("30017", "30022", "30031")


def random_text(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(MARKS) for _ in range(rng.randint(low, high)))


def random_batch(rng: random.Random) -> RetrievalBatch:
    """Every kind of record in four scopes, from a small shared vocabulary: many shared terms,
    duplicate triggers, equal supports and equally long texts, so ties are everywhere."""
    memories, knowledge, relationships, facts, pairs, rhythms, strategies, summaries = (
        [] for _ in range(8)
    )
    for bot_id, group_id in SCOPES:
        scope = {"bot_id": bot_id, "group_id": group_id}
        for i in range(rng.randint(20, 60)):
            memories.append(
                MemoryRecord(
                    **scope,
                    kind=rng.choice(("teaching", "group_event", "ip_knowledge", "group_memory")),
                    text=random_text(rng, 1, 8) + rng.choice(("", f"（{i}）")),
                    id=f"m{i}",
                    created_at=NOW - dt.timedelta(days=i) if rng.random() < 0.5 else None,
                )
            )
        for d in range(rng.randint(0, 4)):
            sections = "\n\n".join(
                f"## {random_text(rng, 1, 2)}\n\n{random_text(rng, 3, 30)}"
                for _ in range(rng.randint(1, 4))
            )
            knowledge.append(
                KnowledgeDocument(
                    **scope, source=f"doc{d}.md", title=random_text(rng, 1, 2), text=sections
                )
            )
        for user_id in USERS:
            if rng.random() < 0.7:
                relationships.append(
                    RelationshipRecord(
                        **scope,
                        user_id=user_id,
                        facts=[random_text(rng, 1, 3) for _ in range(rng.randint(0, 2))],
                        guidance=[random_text(rng, 1, 3) for _ in range(rng.randint(0, 2))],
                        affinity=round(rng.uniform(-1, 1), 2) if rng.random() < 0.8 else 0.0,
                    )
                )
            facts.extend(
                PersonFactRecord(**scope, user_id=user_id, text=random_text(rng, 1, 4))
                for _ in range(rng.randint(0, 8))
            )
            summaries.extend(
                SummaryRecord(
                    **scope,
                    user_id=user_id,
                    text=rng.choice(("【此前对话摘要】", "")) + random_text(rng, 2, 12),
                    created_at=NOW - dt.timedelta(hours=rng.randint(0, 300))
                    if rng.random() < 0.8
                    else None,
                )
                for _ in range(rng.randint(0, 10))
            )
        triggers = [random_text(rng, 1, 3) for _ in range(rng.randint(0, 60))]
        pairs.extend(
            ExpressionPairRecord(
                **scope, trigger=rng.choice(triggers), reply=random_text(rng, 1, 2)
            )
            for _ in range(len(triggers) * 2)
        )
        if rng.random() < 0.8:
            rhythms.append(
                RhythmRecord(
                    **scope,
                    single_bubble_share=round(rng.random(), 2),
                    median_segment_chars=rng.randint(3, 20),
                )
            )
        strategies.extend(
            BehaviorRecord(
                **scope,
                scene=random_text(rng, 1, 3),
                action=random_text(rng, 1, 3),
                outcome=random_text(rng, 0, 2),
                learning_type=rng.choice(("observed", "self_reflection")),
                support=rng.randint(1, 4),
            )
            for _ in range(rng.randint(0, 40))
        )
    return RetrievalBatch(
        memories=tuple(memories),
        knowledge=tuple(knowledge),
        relationships=tuple(relationships),
        person_facts=tuple(facts),
        expression_pairs=tuple(pairs),
        rhythms=tuple(rhythms),
        strategies=tuple(strategies),
        summaries=tuple(summaries),
    )


def random_turn(rng: random.Random, number: int) -> Turn:
    bot_id, group_id = rng.choice(SCOPES)
    at = NOW + dt.timedelta(minutes=3 * number)
    text = random_text(rng, 1, 6) + rng.choice(QUESTIONS) + rng.choice(("？", "", "。"))
    addressed = rng.random() < 0.7
    return Turn(
        bot=Bot(id=bot_id, name="小织", peer_bot_ids=("10009",)),
        group_id=group_id or None,
        trigger=SpeakTrigger.MENTION if addressed else None,
        message=ChatMessage(
            id=f"t{number}",
            sender_id=rng.choice(USERS),
            sender_name="青柠汽水",
            text=f"@小织 {text}" if addressed else text,
            addressed=addressed,
            time=at,
        ),
        recent_messages=tuple(
            ChatMessage(
                id=f"t{number}-{i}",
                sender_id=rng.choice((*USERS, "10009")),
                text=random_text(rng, 1, 5) + rng.choice(("明晚", "周六", "改到", "")),
                time=at - dt.timedelta(seconds=30 * (6 - i)),
            )
            for i in range(rng.randint(0, 6))
        ),
    )


RETRIEVERS = (
    "memory",
    "knowledge",
    "relationship",
    "person_facts",
    "mid_term",
    "group_expression",
    "behavior_reference",
)
#: The retrieval settings the randomised turns render with, by the name their recordings use.
RETRIEVAL_CONFIGS = {
    "defaults": RetrievalConfig(),
    "loose": RetrievalConfig(
        expression_min_similarity=0.2, memory_min_score=0.0, knowledge_min_score=0.0, strategies=6
    ),
    "no_minimum": RetrievalConfig(expression_min_similarity=0.0, expression_pairs=5),
}
#: The random seed of each recorded case: randomised renders, SQLite searches, reads by scope, and
#: searches of a database written by schema version 1.
RENDER_SEEDS = (1, 2, 3)
SEARCH_SEEDS = (4, 5, 6)
READS_SEED = 9
VERSION_1_SEED = 12
BACKENDS = ("sqlite", "memory")

# Records, lists of them and plain values as JSON: attrs classes as dicts, enums as their values.
_converter = cattrs.Converter()


def digest(value: Any) -> str:
    """The first 8 hex digits of the sha256 of the canonical JSON of ``value`` (records
    included; a time as its ISO text)."""
    text = json.dumps(
        _converter.unstructure(value), ensure_ascii=False, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def comparable(value: Any) -> Any:
    """A rendered turn without what the retrieval does not decide: the times taken, and which
    plugin gave each section and retriever."""
    if isinstance(value, dict):
        return {
            key: comparable(item)
            for key, item in value.items()
            if key not in ("duration_ms", "stage_durations_ms", "plugin")
        }
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


def example_batch() -> RetrievalBatch:
    """The example data (``examples/data``) of bot 10001 in group 20001."""
    return read_files("auto", [EXAMPLES / "data"], bot_id="10001", group_id="20001")


def example_turns() -> dict[str, Turn]:
    """The example turn files (``examples/turns``), by file name."""
    return {path.name: load_turn_file(path) for path in sorted((EXAMPLES / "turns").glob("*.json"))}


def runtime(
    directory: Path, backend: str, batch: RetrievalBatch, retrieval: RetrievalConfig, seed: int
) -> Promptweave:
    """A runtime on ``backend`` (its SQLite file in ``directory``) over stores filled with
    ``batch``, routing with the random numbers of ``seed``."""
    config = Config(
        store=StoreConfig(backend=backend, path=str(directory / f"{backend}.sqlite3")),
        retrieval=retrieval,
    )
    stores = Stores.from_config(config)
    stores.retrieval.write(batch)
    return Promptweave.from_config(
        config, environ=NO_AUTOLOAD, stores=stores, rng=random.Random(seed)
    )


def render_form(rendered: dict[str, Any]) -> dict[str, Any]:
    """What a rendered example turn (``to_json()``) is compared by: the retrieval trace of each
    section in full (the hits: text, score, where from), the system prompt, the messages and the
    whole render as digests."""
    form = comparable(rendered)
    return {
        "render": digest(form),
        "system_prompt": digest(form["system_prompt"]),
        "messages": digest(form["messages"]),
        "retrieval": form["trace"]["retrieval"].get("sections", {}),
    }


#: The columns of a randomised turn's row: the digests of the whole render and of each
#: retriever's trace (``-``: the retriever did not run).
RENDER_COLUMNS = ("render", *RETRIEVERS)


def render_row(rendered: dict[str, Any]) -> str:
    """A randomised turn's row of digests, in the order of :data:`RENDER_COLUMNS`."""
    form = comparable(rendered)
    sections = form["trace"]["retrieval"].get("sections", {})
    retrievers = [digest(sections[name]) if name in sections else "-" for name in RETRIEVERS]
    return " ".join([digest(form), *retrievers])


def search_queries(
    rng: random.Random, count: int, *, words: int, limits: tuple[int, ...]
) -> list[tuple[str, str, list[str], int]]:
    """``count`` searches: a scope (bot, group), the terms of a random text of at most ``words``
    words, one of ``limits``."""
    queries = []
    for _ in range(count):
        bot_id, group_id = rng.choice(SCOPES)
        terms = query_terms(random_text(rng, 1, words))
        queries.append((bot_id, group_id, terms, rng.choice(limits)))
    return queries


#: The columns of a search's row: how many memories and knowledge chunks the store found, the
#: digests of each list (record, score, matched terms, bm25, in order) and of the terms the
#: store matched memories and knowledge on.
SEARCH_COLUMNS = ("memories", "chunks", "memories_found", "chunks_found", "match_terms")


def search_row(store: SQLiteRetrievalStore, query: tuple[str, str, list[str], int]) -> str:
    """What a SQLite store finds for ``query``, in the order of :data:`SEARCH_COLUMNS`."""
    bot_id, group_id, terms, limit = query
    memories = store.search_memories(bot_id, group_id, terms, limit=limit)
    knowledge = store.search_knowledge(bot_id, group_id, terms, limit=limit)
    match_terms = [
        store._match_terms(retrieval_sqlite._MEMORIES, terms),
        store._match_terms(retrieval_sqlite._KNOWLEDGE, terms),
    ]
    return " ".join(
        [
            str(len(memories)),
            str(len(knowledge)),
            digest(memories),
            digest(knowledge),
            digest(match_terms),
        ]
    )


def scope_reads(store: SQLiteRetrievalStore) -> dict[str, dict[str, str]]:
    """The digest of every read by scope (no search terms), per scope and per user."""
    reads: dict[str, dict[str, str]] = {}
    for bot_id, group_id in SCOPES:
        scope = {
            "expression_pairs": digest(store.expression_pairs(bot_id, group_id, limit=50)),
            "behavior_strategies": digest(store.behavior_strategies(bot_id, group_id, limit=9)),
            "rhythm_baseline": digest(store.rhythm_baseline(bot_id, group_id)),
        }
        for user_id in USERS:
            scope[f"relationship {user_id}"] = digest(store.relationship(bot_id, group_id, user_id))
            scope[f"person_facts {user_id}"] = digest(
                store.person_facts(bot_id, group_id, user_id, limit=4)
            )
            scope[f"list_summaries {user_id}"] = digest(
                store.list_summaries(bot_id, group_id or None, user_id, 5)
            )
        reads[f"{bot_id}/{group_id}"] = scope
    return reads


def write_version_1(database: SQLiteDatabase, batch: RetrievalBatch) -> None:
    """Write memories and knowledge as schema version 1 did: one sequence of row ids for all
    scopes."""
    database.migrate(MIGRATIONS[:1])
    with database.transaction() as db:
        db.executemany(
            "INSERT OR IGNORE INTO memories (bot_id, group_id, kind, text, terms)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (m.bot_id, m.group_id, m.kind.value, m.text, index_text(m.text))
                for m in batch.memories
            ],
        )
        for document in batch.knowledge:
            db.execute(
                "DELETE FROM knowledge_chunks WHERE bot_id = ? AND group_id = ? AND source = ?",
                (document.bot_id, document.group_id, document.source),
            )
            db.executemany(
                "INSERT INTO knowledge_chunks (bot_id, group_id, source, chunk_index, title,"
                " text, title_terms, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (c.bot_id, c.group_id, c.source, c.index, c.title, c.text,
                     index_text(c.title), index_text(c.text))
                    for c in chunk_document(document)
                ],
            )  # fmt: skip


def example_renders(pw: Promptweave) -> dict[str, dict[str, Any]]:
    """Every example turn rendered by ``pw``, as :func:`render_form` gives it."""
    return {name: render_form(pw.render(turn).to_json()) for name, turn in example_turns().items()}


def example_runtime(directory: Path, backend: str) -> Promptweave:
    """A runtime on ``backend`` over the example data."""
    return runtime(directory, backend, example_batch(), RetrievalConfig(), seed=5)


def randomised_case(
    directory: Path, config: str, backend: str, seed: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Forty random turns over a random store: the recording (the store's digest, a row per
    turn) and the rendered turns."""
    rng = random.Random(seed)
    batch = random_batch(rng)
    pw = runtime(directory, backend, batch, RETRIEVAL_CONFIGS[config], seed)
    rendered = [pw.render(random_turn(rng, number)).to_json() for number in range(40)]
    pw.close()
    return {"batch": digest(batch), "turns": [render_row(r) for r in rendered]}, rendered


def _searches(
    store: SQLiteRetrievalStore, batch: RetrievalBatch, queries: list[Any]
) -> dict[str, Any]:
    return {
        "batch": digest(batch),
        "queries": digest(queries),
        "found": [search_row(store, query) for query in queries],
    }


def sqlite_search_case(directory: Path, seed: int) -> dict[str, Any]:
    """150 searches of a random SQLite store: the store's and the queries' digests, a row per
    search."""
    rng = random.Random(seed)
    batch = random_batch(rng)
    store = SQLiteRetrievalStore(SQLiteDatabase(directory / f"search-{seed}.sqlite3"))
    store.write(batch)
    return _searches(store, batch, search_queries(rng, 150, words=12, limits=(1, 3, 6, 12, 40)))


def version_1_case(directory: Path) -> dict[str, Any]:
    """80 searches of a random store written by schema version 1, moved to the current schema
    when the store opens it."""
    rng = random.Random(VERSION_1_SEED)
    batch = random_batch(rng)
    path = directory / "version-1.sqlite3"
    write_version_1(SQLiteDatabase(path), batch)
    queries = search_queries(rng, 80, words=10, limits=(3, 12))
    return _searches(SQLiteRetrievalStore(SQLiteDatabase(path)), batch, queries)


def reads_store(directory: Path) -> tuple[SQLiteRetrievalStore, str]:
    """The random SQLite store of the reads by scope, and its batch's digest."""
    batch = random_batch(random.Random(READS_SEED))
    store = SQLiteRetrievalStore(SQLiteDatabase(directory / "reads.sqlite3"))
    store.write(batch)
    return store, digest(batch)


def record() -> dict[str, Any]:
    """Every recorded expectation, from the code as it is now."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)

        def fresh(name: str) -> Path:
            (directory / name).mkdir()
            return directory / name

        examples = {}
        for backend in BACKENDS:
            pw = example_runtime(fresh(f"examples-{backend}"), backend)
            examples[backend] = example_renders(pw)
            pw.close()
        randomised = {
            f"{config}/{backend}/{seed}": randomised_case(
                fresh(f"{config}-{backend}-{seed}"), config, backend, seed
            )[0]
            for config in sorted(RETRIEVAL_CONFIGS)
            for backend in BACKENDS
            for seed in RENDER_SEEDS
        }
        reads, reads_batch = reads_store(directory)
        return {
            "example_turns": examples,
            "render_columns": " ".join(RENDER_COLUMNS),
            "randomised_turns": randomised,
            "search_columns": " ".join(SEARCH_COLUMNS),
            "sqlite_searches": {
                str(seed): sqlite_search_case(directory, seed) for seed in SEARCH_SEEDS
            },
            "reads_by_scope": {"batch": reads_batch, "reads": scope_reads(reads)},
            "version_1_searches": version_1_case(directory),
        }


def recorded_text() -> str:
    """The text of ``tests/data/retrieval_expected.json`` as the code now records it."""
    return json.dumps(record(), ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def expected() -> dict[str, Any]:
    """The recorded expectations, as ``tests/data/retrieval_expected.json`` holds them."""
    return json.loads(EXPECTED.read_text(encoding="utf-8"))
