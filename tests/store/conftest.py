"""Fixtures of the store tests: the test Redis server (the store contract's Redis backend), and
runtimes on each backend for the tests of what a runtime builds its stores with. The contract's
own backends (``store_backend``, ``retrieval_store``, ``shared_stores``) are built of the stores
alone, in ``test_store_contract.py``."""

from __future__ import annotations

from runtime_fixtures import (
    memory_runtime,
    redis_namespace,
    redis_prefix,
    redis_runtime,
    redis_url,
    runtime,
    sqlite_runtime,
)

__all__ = [
    "memory_runtime",
    "redis_namespace",
    "redis_prefix",
    "redis_runtime",
    "redis_url",
    "runtime",
    "sqlite_runtime",
]
