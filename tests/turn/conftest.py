"""Fixtures of the whole-turn tests: a runtime on each backend (whole turns need the whole
runtime)."""

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
