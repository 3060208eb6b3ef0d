"""Fixtures of the delivery tests: runtimes on each backend (a delivery is recorded through the
runtime's stores)."""

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
