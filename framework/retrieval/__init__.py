"""Retrieval: what each turn looks up for sections 4–10, concurrently, with a trace.

- :class:`RetrievalQuery` is what every retriever receives; it returns items or a
  :class:`RetrievalResult` (``docs/retrieval.md``, "Writing a retriever").
- :class:`RetrievalRunner` runs a turn's retrievers concurrently, each within its timeout.
- Whether a turn may read persistent memory is the routing decision's memory policy
  (:func:`framework.routing.allows_persistent_memory`); short social turns may not.
- :mod:`framework.retrieval.scoring` explains how the built-in search matches and scores text.
"""

from __future__ import annotations

from framework.retrieval.policy import (
    EVENT_WORDS,
    KNOWLEDGE_QUESTION_WORDS,
    looks_like_knowledge_question,
    reads_as_event,
)
from framework.retrieval.query import RetrievalHit, RetrievalQuery, RetrievalResult, SkipReason
from framework.retrieval.runner import RetrievalOutcome, RetrievalRunner, RetrieverTrace
from framework.retrieval.scoring import (
    fts_query,
    index_text,
    normalize_query,
    query_terms,
    score_text,
    text_terms,
)

__all__ = [
    "EVENT_WORDS",
    "KNOWLEDGE_QUESTION_WORDS",
    "RetrievalHit",
    "RetrievalOutcome",
    "RetrievalQuery",
    "RetrievalResult",
    "RetrievalRunner",
    "RetrieverTrace",
    "SkipReason",
    "fts_query",
    "index_text",
    "looks_like_knowledge_question",
    "normalize_query",
    "query_terms",
    "reads_as_event",
    "score_text",
    "text_terms",
]
