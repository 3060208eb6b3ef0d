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
from framework.store.sqlite import Migration, SQLiteDatabase, StoreUnavailableError

__all__ = [
    "BehaviorRecord",
    "ExpressionPairRecord",
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
    "StoreUnavailableError",
    "SummaryRecord",
    "TopicSummarySource",
]
