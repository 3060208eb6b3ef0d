"""Contrib plugin ``group_tools``: two harmless tools for a group bot (``docs/bot.md``, "Tools").

Enable it with ``[plugins] contrib = ["group_tools"]``. It registers:

- ``roll_dice``: rolls ``count`` dice of ``sides`` sides (``1-20`` dice, ``2-1000`` sides) with
  the runtime's random source, so a replay rolls the same numbers. Anyone may use it; "掷骰子",
  "摇骰子", "roll" make an addressed message require it.
- ``upcoming_events``: the group's confirmed events (memories of kind ``group_event``) and what
  the group's knowledge documents say about its activities, read from the store. Anyone may use
  it in a group (a private chat has no group events); "活动", "有什么安排" make an addressed
  message require it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from promptweave import Tool, ToolCallContext, hookimpl
from promptweave.items import MemoryKind
from promptweave.text.scoring import query_terms

__all__ = ["EVENT_QUERY", "register_tools", "roll_dice", "upcoming_events"]

MAX_DICE = 20
MAX_SIDES = 1000
#: What ``upcoming_events`` searches the store for when the asker names nothing more precise.
EVENT_QUERY = "活动 安排 聚会 桌游 时间 地点 周六 周日 报名"
EVENTS_SHOWN = 5


def _bounded(arguments: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = arguments.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number between {low} and {high}")
    return max(low, min(high, int(value)))


def roll_dice(arguments: Mapping[str, Any], context: ToolCallContext) -> str:
    """Roll the dice; the result names each die and the total."""
    count = _bounded(arguments, "count", 1, 1, MAX_DICE)
    sides = _bounded(arguments, "sides", 6, 2, MAX_SIDES)
    rolls = [context.rng.randint(1, sides) for _ in range(count)]
    shown = " ".join(str(roll) for roll in rolls)
    return f"{count}d{sides}: {shown}" + (f" (total {sum(rolls)})" if count > 1 else "")


def upcoming_events(arguments: Mapping[str, Any], context: ToolCallContext) -> str:
    """The group's known events and activity rules, one a line, or a sentence saying none."""
    if context.group_id is None:
        return "no group: a private chat has no group events"
    if context.stores is None or context.stores.retrieval is None:
        return "the bot's store is not available"
    topic = str(arguments.get("topic") or "").strip()
    terms = query_terms(f"{topic} {EVENT_QUERY}" if topic else EVENT_QUERY)
    retrieval = context.stores.retrieval
    events = [
        hit.record.text
        for hit in retrieval.search_memories(
            context.bot_id, context.group_id, terms, limit=EVENTS_SHOWN * 3
        )
        if hit.record.kind is MemoryKind.GROUP_EVENT
    ][:EVENTS_SHOWN]
    notes = [
        f"{hit.record.title}: {' '.join(hit.record.text.split())[:160]}"
        for hit in retrieval.search_knowledge(
            context.bot_id, context.group_id, terms, limit=EVENTS_SHOWN
        )
    ]
    lines = [f"- 群事件：{text}" for text in events] + [f"- 群资料：{text}" for text in notes]
    return "\n".join(lines) if lines else "no upcoming events are known for this group"


def _tool(
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    call: Callable[[Mapping[str, Any], ToolCallContext], str],
    intent_words: tuple[str, ...],
) -> Tool:
    return Tool(
        name=name,
        description=description,
        parameters=parameters,
        call=call,
        intent_words=intent_words,
    )


@hookimpl
def register_tools(register: Callable[[Tool], None]) -> None:
    register(
        _tool(
            "roll_dice",
            "Roll dice for the group, for example to decide who goes first.",
            {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "maximum": MAX_DICE},
                    "sides": {"type": "integer", "minimum": 2, "maximum": MAX_SIDES},
                },
                "additionalProperties": False,
            },
            roll_dice,
            ("掷骰子", "掷个骰子", "摇骰子", "摇个骰子", "扔骰子", "roll"),
        )
    )
    register(
        _tool(
            "upcoming_events",
            "List the group's upcoming events and activity rules the bot knows of.",
            {
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "description": "what kind of event, if any"},
                },
                "additionalProperties": False,
            },
            upcoming_events,
            ("有什么活动", "什么活动", "活动安排", "有什么安排", "桌游局"),
        )
    )
