"""The schema of component ``retrieval`` in the shared SQLite database.

Memories and knowledge chunks have FTS5 indexes (``trigram`` tokenizer) over their terms
(:func:`framework.retrieval.scoring.index_text`), kept in sync by triggers, and ``fts5vocab``
tables giving each term's document count, so a search can match on the rarest terms.
"""

from __future__ import annotations

from framework.store.sqlite import Migration

__all__ = ["MIGRATIONS"]

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
)
