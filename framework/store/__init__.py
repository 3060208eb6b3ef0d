"""Storage for conversational and retrieval state.

Every store is an interface with an embedded SQLite implementation (the default, nothing to
install) and an in-memory one. Callers only see the interfaces, so another engine can be added
without touching them. No state lives in module globals.
"""

from __future__ import annotations

from framework.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeChunk,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RetrievalStore,
    RhythmRecord,
    Scored,
    SummaryRecord,
    TopicSummarySource,
)
from framework.store.retrieval_memory import InMemoryRetrievalStore
from framework.store.retrieval_sqlite import SQLiteRetrievalStore
from framework.store.sessions import (
    SUMMARY_MARK,
    BotReplyContext,
    FeedbackLedger,
    GroupLog,
    SessionStore,
    SessionSummary,
    SessionTurn,
    SummaryStore,
    TurnKind,
    group_scope,
)
from framework.store.sqlite import Migration, SQLiteDatabase, StoreUnavailableError

__all__ = [
    "SUMMARY_MARK",
    "BehaviorRecord",
    "BotReplyContext",
    "ExpressionPairRecord",
    "FeedbackLedger",
    "GroupLog",
    "InMemoryRetrievalStore",
    "KnowledgeChunk",
    "KnowledgeDocument",
    "MemoryRecord",
    "Migration",
    "PersonFactRecord",
    "RelationshipRecord",
    "RetrievalBatch",
    "RetrievalStore",
    "RhythmRecord",
    "SQLiteDatabase",
    "SQLiteRetrievalStore",
    "Scored",
    "SessionStore",
    "SessionSummary",
    "SessionTurn",
    "StoreUnavailableError",
    "SummaryRecord",
    "SummaryStore",
    "TopicSummarySource",
    "TurnKind",
    "group_scope",
]
