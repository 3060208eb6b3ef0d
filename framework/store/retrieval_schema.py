"""The schema of component ``retrieval`` in the shared SQLite database.

Memories and knowledge chunks have FTS5 indexes (``trigram`` tokenizer) over their terms
(:func:`promptweave.text.scoring.index_text`), kept in sync by triggers, and ``fts5vocab``
tables giving each term's document count, so a search can match on the rarest terms.

Version 2 puts the scope into the index: every ``(bot_id, group_id)`` gets a number in
``retrieval_scopes``, and the row ids of memories and knowledge chunks are
``scope number × 2**32 + n``, so a full-text search names its scope as a range of row ids, which
FTS5 seeks to instead of filtering every match. It keeps each term's document count in
``memory_terms`` and ``knowledge_terms`` (what ``fts5vocab`` gives by reading the term's whole list
of documents, in one indexed read). And it counts changes: triggers bump ``retrieval_versions``
(per scope and kind of data) on every insert, update and delete, whoever writes, so a process
caching a group's data can tell with one indexed read whether it is still current.
"""

from __future__ import annotations

from promptweave.store.sqlite import Migration

__all__ = ["MIGRATIONS", "SCOPE_ROWS", "VERSIONED_TABLES"]

#: Row ids of one scope: ``scope number * SCOPE_ROWS + 1`` up to ``(scope number + 1) *
#: SCOPE_ROWS - 1``.
SCOPE_ROWS = 2**32

#: The tables whose changes ``retrieval_versions`` counts, with the kind of data each holds
#: (named like the fields of :class:`promptweave.store.retrieval.RetrievalBatch`).
VERSIONED_TABLES = {
    "memories": "memories",
    "knowledge_chunks": "knowledge",
    "relationship_notes": "relationships",
    "person_facts": "person_facts",
    "expression_pairs": "expression_pairs",
    "rhythm_baselines": "rhythms",
    "behavior_strategies": "strategies",
    "topic_summaries": "summaries",
}


def _renumber(table: str) -> str:
    """Move ``table``'s rows to the row ids of their scope, keeping their order."""
    return f"""
        UPDATE {table} SET id = renumbered.new_id FROM (
            SELECT t.id AS old_id,
                   s.id * {SCOPE_ROWS} + ROW_NUMBER() OVER (
                       PARTITION BY t.bot_id, t.group_id ORDER BY t.id
                   ) AS new_id
            FROM {table} AS t
            JOIN retrieval_scopes AS s ON s.bot_id = t.bot_id AND s.group_id = t.group_id
        ) AS renumbered
        WHERE {table}.id = renumbered.old_id;
    """


def _count_changes(table: str, kind: str) -> str:
    """Triggers counting every change of ``table`` in its scope's version of ``kind`` (an update
    counts in the scope it leaves and in the one it enters)."""

    def bump(row: str) -> str:
        return (
            "INSERT INTO retrieval_versions (bot_id, group_id, kind, version)"
            f" VALUES ({row}.bot_id, {row}.group_id, '{kind}', 1)"
            " ON CONFLICT (bot_id, group_id, kind) DO UPDATE SET version = version + 1;"
        )

    return f"""
        CREATE TRIGGER {table}_version_ai AFTER INSERT ON {table} BEGIN {bump("new")} END;
        CREATE TRIGGER {table}_version_ad AFTER DELETE ON {table} BEGIN {bump("old")} END;
        CREATE TRIGGER {table}_version_au AFTER UPDATE ON {table} BEGIN
            {bump("old")} {bump("new")}
        END;
    """


def _tokens(indexed: str) -> str:
    """The distinct index tokens (``桌游#``, ``word``) of an index-form SQL expression, as the
    ``value`` column of ``json_each``."""
    quoted = f"replace(replace({indexed}, '\\', '\\\\'), '\"', '\\\"')"
    return f"""json_each('["' || replace({quoted}, ' ', '","') || '"]')"""


def _count_terms(table: str, counts: str, indexed: str) -> str:
    """``counts``: how many rows of ``table`` hold each index token of ``indexed`` (an
    expression over the row), filled from the rows there are and kept by triggers."""

    def add(row: str, step: str) -> str:
        return (
            f"INSERT INTO {counts} (term, docs)"
            f" SELECT DISTINCT value, {step} FROM {_tokens(indexed.format(row=row))}"
            " WHERE value <> ''"
            f" ON CONFLICT (term) DO UPDATE SET docs = docs + {step};"
        )

    return f"""
        CREATE TABLE {counts} (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO {counts} (term, docs)
            SELECT value, COUNT(*) FROM (
                SELECT DISTINCT t.id, j.value
                FROM {table} AS t, {_tokens(indexed.format(row="t"))} AS j
                WHERE j.value <> ''
            ) GROUP BY value;
        CREATE TRIGGER {counts}_ai AFTER INSERT ON {table} BEGIN {add("new", "1")} END;
        CREATE TRIGGER {counts}_ad AFTER DELETE ON {table} BEGIN {add("old", "-1")} END;
    """


MIGRATIONS = (
    Migration(
        component="retrieval",
        version=1,
        sql="""
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, kind TEXT NOT NULL,
            text TEXT NOT NULL, terms TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '', external_id TEXT NOT NULL DEFAULT '',
            created_at TEXT,
            UNIQUE (bot_id, group_id, kind, text)
        );
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            terms, content='memories', content_rowid='id', tokenize='trigram'
        );
        CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, terms)
            VALUES ('delete', old.id, old.terms);
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF terms ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, terms)
            VALUES ('delete', old.id, old.terms);
            INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
        END;

        CREATE TABLE knowledge_chunks (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, source TEXT NOT NULL,
            chunk_index INTEGER NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
            title_terms TEXT NOT NULL, terms TEXT NOT NULL,
            UNIQUE (bot_id, group_id, source, chunk_index)
        );
        CREATE VIRTUAL TABLE knowledge_fts USING fts5(
            title_terms, terms, content='knowledge_chunks', content_rowid='id',
            tokenize='trigram'
        );
        CREATE VIRTUAL TABLE knowledge_vocab USING fts5vocab(knowledge_fts, 'row');
        CREATE TRIGGER knowledge_ai AFTER INSERT ON knowledge_chunks BEGIN
            INSERT INTO knowledge_fts (rowid, title_terms, terms)
            VALUES (new.id, new.title_terms, new.terms);
        END;
        CREATE TRIGGER knowledge_ad AFTER DELETE ON knowledge_chunks BEGIN
            INSERT INTO knowledge_fts (knowledge_fts, rowid, title_terms, terms)
            VALUES ('delete', old.id, old.title_terms, old.terms);
        END;

        CREATE TABLE relationship_notes (
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
            facts TEXT NOT NULL, guidance TEXT NOT NULL, affinity REAL NOT NULL,
            PRIMARY KEY (bot_id, group_id, user_id)
        );
        CREATE TABLE person_facts (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (bot_id, group_id, user_id, text)
        );
        CREATE TABLE expression_pairs (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL,
            trigger TEXT NOT NULL, reply TEXT NOT NULL,
            UNIQUE (bot_id, group_id, trigger, reply)
        );
        CREATE TABLE rhythm_baselines (
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL,
            single_bubble_share REAL NOT NULL, median_segment_chars INTEGER NOT NULL,
            PRIMARY KEY (bot_id, group_id)
        );
        CREATE TABLE behavior_strategies (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, learning_type TEXT NOT NULL,
            scene TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL,
            support INTEGER NOT NULL,
            UNIQUE (bot_id, group_id, learning_type, scene, action)
        );
        CREATE TABLE topic_summaries (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
            text TEXT NOT NULL, created_at TEXT,
            UNIQUE (bot_id, group_id, user_id, text)
        );
        CREATE INDEX topic_summaries_scope
            ON topic_summaries (bot_id, group_id, user_id, created_at);
        """,
    ),
    Migration(
        component="retrieval",
        version=2,
        sql=f"""
        CREATE TABLE retrieval_scopes (
            id INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL,
            UNIQUE (bot_id, group_id)
        );
        INSERT INTO retrieval_scopes (bot_id, group_id)
            SELECT bot_id, group_id FROM memories
            UNION SELECT bot_id, group_id FROM knowledge_chunks
            ORDER BY 1, 2;
        {_renumber("memories")}
        {_renumber("knowledge_chunks")}
        INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
        INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');

        CREATE TABLE retrieval_versions (
            bot_id TEXT NOT NULL, group_id TEXT NOT NULL, kind TEXT NOT NULL,
            version INTEGER NOT NULL,
            PRIMARY KEY (bot_id, group_id, kind)
        ) WITHOUT ROWID;
        {"".join(_count_changes(table, kind) for table, kind in VERSIONED_TABLES.items())}

        {_count_terms("memories", "memory_terms", "{row}.terms")}
        CREATE TRIGGER memory_terms_au AFTER UPDATE OF terms ON memories BEGIN
            UPDATE memory_terms SET docs = docs - 1
            WHERE term IN (SELECT value FROM {_tokens("old.terms")});
            INSERT INTO memory_terms (term, docs)
            SELECT DISTINCT value, 1 FROM {_tokens("new.terms")} WHERE value <> ''
            ON CONFLICT (term) DO UPDATE SET docs = docs + 1;
        END;
        {_count_terms("knowledge_chunks", "knowledge_terms", "({row}.title_terms || ' ' || {row}.terms)")}
        """,
    ),
)
