"""Fixtures of the store tests: the test Redis server, the stores alone on each backend, and
runtimes on each backend for the tests of what a runtime builds its stores with."""

from __future__ import annotations

from runtime_fixtures import (
    memory_runtime,
    memory_stores,
    redis_namespace,
    redis_prefix,
    redis_runtime,
    redis_stores,
    redis_url,
    runtime,
    sqlite_runtime,
    sqlite_stores,
    stores,
)

__all__ = [
    "memory_runtime",
    "memory_stores",
    "redis_namespace",
    "redis_prefix",
    "redis_runtime",
    "redis_stores",
    "redis_url",
    "runtime",
    "sqlite_runtime",
    "sqlite_stores",
    "stores",
]
