"""Fixtures of the message-building tests (the group timeline, the message sequence): the timeline
stage alone, and runtimes on each backend for the tests that read the group log and sessions from a
store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from runtime_fixtures import (
    memory_runtime,
    redis_prefix,
    redis_runtime,
    redis_url,
    runtime,
    sqlite_runtime,
)
from timeline_support import DEFAULT_PERSONA

from promptweave import Turn
from promptweave.config import TimelineConfig
from promptweave.messages.timeline import GroupTimeline, build_group_timeline

__all__ = [
    "memory_runtime",
    "redis_prefix",
    "redis_runtime",
    "redis_url",
    "runtime",
    "sqlite_runtime",
    "timeline",
]


@pytest.fixture
def timeline() -> Callable[..., GroupTimeline]:
    """``timeline(turn, **fields)``: the group timeline of ``turn``'s own recent messages, built by
    the timeline stage alone (the built-in persona pack, a ``TimelineConfig`` of ``fields``): no
    runtime, stores, router or sections."""

    def build(turn: Turn, **fields: Any) -> GroupTimeline:
        return build_group_timeline(turn, DEFAULT_PERSONA, TimelineConfig(**fields))

    return build
