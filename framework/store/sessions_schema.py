"""The SQLite schema of component ``sessions`` (``docs/store.md``), as versioned migrations.

A schema change is a new :class:`promptweave.store.sqlite.Migration` with the next version, never an
edit of an applied one.
"""

from __future__ import annotations

from promptweave.store.sqlite import Migration

__all__ = ["SESSION_MIGRATIONS"]

SESSION_MIGRATIONS = (
    Migration(
        component="sessions",
        version=1,
        sql="""
        CREATE TABLE group_messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT,
            sender_id TEXT NOT NULL,
            sender_name TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL,
            reply_to TEXT,
            images TEXT NOT NULL DEFAULT '[]',
            addressed INTEGER NOT NULL DEFAULT 0,
            time REAL NOT NULL,
            utc_offset INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX group_messages_window ON group_messages (bot_id, group_id, time, seq);
        CREATE UNIQUE INDEX group_messages_message
            ON group_messages (bot_id, group_id, message_id) WHERE message_id IS NOT NULL;

        CREATE TABLE session_turns (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            kind TEXT NOT NULL DEFAULT 'turn' CHECK (kind IN ('turn', 'summary')),
            content TEXT NOT NULL,
            message_id TEXT,
            reply_to TEXT,
            images TEXT NOT NULL DEFAULT '[]',
            time REAL NOT NULL,
            utc_offset INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX session_turns_user ON session_turns (bot_id, group_id, user_id, time, seq);
        CREATE INDEX session_turns_group ON session_turns (bot_id, group_id, time, seq);
        CREATE INDEX session_turns_summary
            ON session_turns (bot_id, group_id, user_id, time) WHERE kind = 'summary';
        CREATE UNIQUE INDEX session_turns_message
            ON session_turns (bot_id, group_id, user_id, role, message_id)
            WHERE message_id IS NOT NULL;

        CREATE TABLE session_compactions (
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            started REAL NOT NULL,
            PRIMARY KEY (bot_id, group_id, user_id)
        );

        CREATE TABLE session_summaries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            created REAL NOT NULL,
            utc_offset INTEGER NOT NULL DEFAULT 0,
            turns_covered INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX session_summaries_user
            ON session_summaries (bot_id, group_id, user_id, created);
        CREATE INDEX session_summaries_group ON session_summaries (bot_id, group_id, created);

        CREATE TABLE bot_reply_context (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            group_id TEXT NOT NULL,
            bot_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            text TEXT NOT NULL,
            expires REAL NOT NULL
        );
        CREATE UNIQUE INDEX bot_reply_context_key
            ON bot_reply_context (group_id, bot_id, message_id);
        CREATE INDEX bot_reply_context_expiry ON bot_reply_context (expires);

        CREATE TABLE feedback_phrases (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            outcome_id TEXT NOT NULL,
            phrase TEXT NOT NULL,
            created REAL NOT NULL
        );
        CREATE UNIQUE INDEX feedback_phrases_outcome
            ON feedback_phrases (bot_id, group_id, outcome_id, phrase);
        CREATE INDEX feedback_phrases_scope ON feedback_phrases (bot_id, group_id, seq);
        """,
    ),
    Migration(
        component="sessions",
        version=2,
        # What the provider reported for a delivered answer (the live loop's usage), as JSON.
        sql="ALTER TABLE session_turns ADD COLUMN usage TEXT;",
    ),
    Migration(
        component="sessions",
        version=3,
        # The group log's seq without AUTOINCREMENT: every append of the bot's path updated
        # sqlite_sequence too, one more B-tree write and page a commit (4–8 µs of a 40 µs
        # append). Rows keep their seq; a new one still gets one more than the largest, so only
        # the seq of the newest row, once deleted, can come again, which nothing keeps.
        sql="""
        CREATE TABLE group_messages_new (
            seq INTEGER PRIMARY KEY,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT,
            sender_id TEXT NOT NULL,
            sender_name TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL,
            reply_to TEXT,
            images TEXT NOT NULL DEFAULT '[]',
            addressed INTEGER NOT NULL DEFAULT 0,
            time REAL NOT NULL,
            utc_offset INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO group_messages_new (seq, bot_id, group_id, message_id, sender_id, sender_name,
            text, reply_to, images, addressed, time, utc_offset)
            SELECT seq, bot_id, group_id, message_id, sender_id, sender_name, text, reply_to,
                images, addressed, time, utc_offset
            FROM group_messages;
        DROP TABLE group_messages;
        ALTER TABLE group_messages_new RENAME TO group_messages;
        CREATE INDEX group_messages_window ON group_messages (bot_id, group_id, time, seq);
        CREATE UNIQUE INDEX group_messages_message
            ON group_messages (bot_id, group_id, message_id) WHERE message_id IS NOT NULL;
        """,
    ),
)
