"""Retrieval: what each turn looks up for sections 4–10, concurrently, with a trace.

- :class:`RetrievalQuery` is what every retriever receives; it returns items or a
  :class:`RetrievalResult` (``docs/retrieval.md``, "Writing a retriever").
- :class:`RetrievalRunner` runs a turn's retrievers concurrently, each within its timeout.
- :func:`allows_persistent_memory` tells a short social turn (no persistent memory, relationship,
  person facts or old topics) from the rest.
- :mod:`framework.retrieval.scoring` explains how the built-in search matches and scores text.
"""

from __future__ import annotations

from framework.retrieval.policy import (
    EVENT_WORDS,
    KNOWLEDGE_QUESTION_WORDS,
    QUESTION_OR_REQUEST_WORDS,
    SHORT_SOCIAL_MAX_CHARS,
    allows_persistent_memory,
    has_question_or_request,
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
    "QUESTION_OR_REQUEST_WORDS",
    "SHORT_SOCIAL_MAX_CHARS",
    "RetrievalHit",
    "RetrievalOutcome",
    "RetrievalQuery",
    "RetrievalResult",
    "RetrievalRunner",
    "RetrieverTrace",
    "SkipReason",
    "allows_persistent_memory",
    "fts_query",
    "has_question_or_request",
    "index_text",
    "looks_like_knowledge_question",
    "normalize_query",
    "query_terms",
    "reads_as_event",
    "score_text",
    "text_terms",
]
