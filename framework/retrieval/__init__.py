"""Retrieval: what each turn looks up for sections 4–10, concurrently, with a trace.

- :class:`RetrievalQuery` is what every retriever receives; it returns items or a
  :class:`RetrievalResult` (``docs/retrieval.md``, "Writing a retriever").
- :class:`RetrievalRunner` runs a turn's retrievers concurrently, each within its timeout.
- Whether a turn may read persistent memory is the routing decision's memory policy
  (:func:`promptweave.decision.allows_persistent_memory`); short social turns may not.
- :mod:`promptweave.text.scoring` explains how the built-in search matches and scores text, and
  :mod:`promptweave.store.retrieval_chunks` how knowledge documents are split.
"""
