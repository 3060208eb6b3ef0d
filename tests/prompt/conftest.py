"""Fixtures of the prompt-assembly tests: an in-memory runtime, for the tests that assemble through
it."""

from __future__ import annotations

from runtime_fixtures import (
    memory_runtime,
)

__all__ = [
    "memory_runtime",
]
