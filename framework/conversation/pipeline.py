"""One turn's message side: the sequence, the budget and the injection snapshot.

:class:`framework.Promptweave` calls :func:`framework.conversation.session.read_session` before the
sections render (the timeline and the quoted bot text come from the store) and
:func:`build_turn_messages` after (the budget needs the finished system prompt).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from framework.conversation.ambient import snapshot_from_timeline
from framework.conversation.budget import Measure, apply_budget
from framework.conversation.images import vision_image_urls
from framework.conversation.sequence import HistoryRow, PromptMessage, build_message_sequence
from framework.conversation.session import SessionReader
from framework.conversation.timeline import GroupTimeline
from framework.store.sessions import group_scope
from framework.turn import ChatMessage, Turn

__all__ = [
    "TurnMessages",
    "build_turn_messages",
    "carried_by_history",
]


@attrs.frozen(kw_only=True)
class TurnMessages:
    """The messages of a turn after the budget, and the trace entries that explain them."""

    messages: tuple[PromptMessage, ...]
    vision_images: tuple[str, ...]
    trace: dict[str, Any]


def build_turn_messages(
    reader: SessionReader,
    turn: Turn,
    timeline: GroupTimeline,
    system_prompt: str,
    measure: Measure,
    *,
    include_ambient_excerpt: bool = True,
) -> TurnMessages:
    """Build the sequence, apply the budget, and derive the injection snapshot from what
    survived: the ambient excerpt's entries only when its message is still there (found by its
    ``source_token``), else the timeline's entries when the timeline is in the system prompt."""
    config = reader.config
    history = reader.history()
    sequence = build_message_sequence(
        reader.persona,
        config,
        turn,
        history=history,
        timeline_present=bool(timeline.text),
        ambient=reader.ambient,
        degraded=reader.degraded,
        include_ambient_excerpt=include_ambient_excerpt,
    )
    kept, report = apply_budget(
        sequence.messages,
        system_prompt,
        config.budget.chars,
        measure,
        keep_tail=reader.persona.format(reader.persona.user_turn.injection_suffix),
    )
    tokens = {message.source_token for message in kept if message.source_token}
    if sequence.ambient_token is not None and sequence.ambient_token in tokens:
        snapshot_source, entries = "ambient_excerpt", sequence.ambient_entries
    elif timeline.text and turn.group_id is not None:
        snapshot_source = "timeline"
        entries = snapshot_from_timeline(
            timeline,
            bot_id=turn.bot.id,
            group_id=group_scope(turn.group_id),
            line_chars=config.timeline.line_chars,
        )
    else:
        snapshot_source, entries = "none", ()
    trace: dict[str, Any] = {
        "degraded": reader.degraded,
        "messages": {
            **sequence.notes,
            "sources": dict(reader.sources),
            "sent": [{"role": m.role, "source": m.source, "chars": len(m.content)} for m in kept],
        },
        "budget": report.trace(),
        "injection_snapshot": {
            "source": snapshot_source,
            "ambient_turns": [entry.to_json() for entry in entries],
        },
        "vision": {
            "current": list(vision_image_urls(turn.message.images, turn.quoted_message_images)),
            "images": list(timeline.images),
            "withheld": timeline.images_withheld,
        },
    }
    return TurnMessages(messages=tuple(kept), vision_images=timeline.images, trace=trace)


def carried_by_history(history: Sequence[HistoryRow], turn: Turn) -> Callable[[ChatMessage], bool]:
    """Whether a group message is already in the user's history rows, so the timeline need not
    show it again (the message sequence never repeats what the system prompt carries). Matched by
    message id when the row has one, else by speaker and text: the user's own lines and the bot's.
    """
    ids = {row.message_id for row in history if row.message_id is not None and not row.summary}
    texts = {
        (row.role, row.content.strip())
        for row in history
        if row.message_id is None and not row.summary
    }

    def carried(message: ChatMessage) -> bool:
        if message.id is not None and message.id in ids:
            return True
        if message.sender_id == turn.bot.id:
            role = "assistant"
        elif message.sender_id == turn.message.sender_id:
            role = "user"
        else:
            return False
        return (role, message.text.strip()) in texts

    return carried
