"""The object every section's ``render`` receives."""

from __future__ import annotations

import datetime as dt
import types
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from promptweave.config import Config
from promptweave.decision import Decision, allows_persistent_memory
from promptweave.items import ReplyShape, ToolContext, TurnPolicy
from promptweave.messages.timeline import GroupTimeline
from promptweave.text.persona import PersonaPack
from promptweave.turn import Turn

__all__ = ["RenderContext"]

T = TypeVar("T")


def _read_only_items(items: Mapping[str, Any]) -> Mapping[str, tuple[Any, ...]]:
    # A copy behind a read-only view, each section's items a tuple: a section that tries
    # ``context.retrieved.clear()`` raises (and is traced) instead of emptying later sections.
    return types.MappingProxyType({key: tuple(found) for key, found in items.items()})


@attrs.frozen(kw_only=True)
class RenderContext:
    """Everything known about the turn when its sections render.

    :param turn: the turn being assembled.
    :param persona: the persona pack in force.
    :param config: the deployment's settings.
    :param now: the turn's time (aware).
    :param decision: the routing decision for this turn.
    :param allow_persistent_memory: whether this turn may show persistent memory, relationship
        notes, person facts and old topics; the decision's memory policy
        (:func:`promptweave.decision.allows_persistent_memory`) unless the caller said otherwise.
    :param reply_shape: the resolved reply shape.
    :param turn_policy: the resolved turn policy.
    :param timeline: the group timeline of this turn (empty when none is shown).
    :param retrieved: items per section id, from the turn and from the retrievers; a read-only
        view, so that no section can take items from the sections after it.
    :param extras: free room for plugins to keep data for the rest of the turn (one dict per
        turn; key it by your plugin's name).
    """

    turn: Turn
    persona: PersonaPack
    config: Config
    now: dt.datetime
    decision: Decision
    allow_persistent_memory: bool = attrs.field()
    reply_shape: ReplyShape
    turn_policy: TurnPolicy
    timeline: GroupTimeline = attrs.field(factory=GroupTimeline)
    retrieved: Mapping[str, tuple[Any, ...]] = attrs.field(factory=dict, converter=_read_only_items)
    extras: dict[str, Any] = attrs.field(factory=dict)

    @allow_persistent_memory.default
    def _allow_persistent_memory_by_decision(self) -> bool:
        return allows_persistent_memory(self.decision)

    @property
    def tool_context(self) -> ToolContext | None:
        return self.turn.tool_context

    def items(self, section_id: str, kind: type[T] | None = None) -> tuple[T, ...]:
        """The items retrieved for ``section_id``, optionally only those of type ``kind``."""
        found = self.retrieved.get(section_id, ())
        if kind is None:
            return found
        for item in found:
            if not isinstance(item, kind):
                return tuple(item for item in found if isinstance(item, kind))
        return found  # all of them are of the kind asked for: the tuple itself
