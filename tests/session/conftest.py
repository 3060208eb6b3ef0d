"""Fixtures of the session-read tests: runtimes on each backend."""

from __future__ import annotations

from runtime_fixtures import (
    memory_runtime,
    redis_prefix,
    redis_runtime,
    redis_url,
    runtime,
    sqlite_runtime,
)

__all__ = [
    "memory_runtime",
    "redis_prefix",
    "redis_runtime",
    "redis_url",
    "runtime",
    "sqlite_runtime",
]
