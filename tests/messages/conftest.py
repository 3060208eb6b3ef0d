"""Fixtures of the message-building tests (the group timeline, the message sequence): runtimes on
each backend, for the tests that read the group log and sessions from a store."""

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
