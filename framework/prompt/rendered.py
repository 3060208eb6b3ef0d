"""What one turn produced: the sections, the system prompt, the messages, the decision, the trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from framework.conversation.sequence import PromptMessage
from framework.decision import Decision
from framework.prompt.render_context import RenderContext

__all__ = ["RenderedSection", "RenderedTurn", "SectionListing"]


@attrs.frozen(kw_only=True)
class RenderedSection:
    """One section as it went into the system prompt.

    :param status: ``rendered``, ``empty``, ``duplicate``, ``disabled`` or ``error``.
    :param override: the override mode in force, if any.
    """

    id: str
    title: str
    plugin: str
    volatility: str
    text: str
    status: str
    override: str | None = None
    error: str | None = None

    @property
    def chars(self) -> int:
        return len(self.text)


@attrs.frozen(kw_only=True)
class RenderedTurn:
    """The result of one turn: what the LLM receives, the decision, and why.

    :param context: the render context the sections saw (the turn completed from the store, the
        retrieved items), for the later stages of the turn such as the notes hook.
    """

    sections: tuple[RenderedSection, ...]
    system_prompt: str
    messages: tuple[PromptMessage, ...]
    decision: Decision
    trace: Mapping[str, Any]
    stage_durations_ms: Mapping[str, float]
    vision_images: tuple[str, ...] = ()
    context: RenderContext | None = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "sections": [
                {
                    "id": s.id,
                    "plugin": s.plugin,
                    "title": s.title,
                    "volatility": s.volatility,
                    "text": s.text,
                    "chars": s.chars,
                    "status": s.status,
                    "override": s.override,
                }
                for s in self.sections
                if s.status == "rendered"
            ],
            "system_prompt": self.system_prompt,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "decision": self.decision.trace(),
            **(
                {"low_engagement_phrase": self.decision.low_engagement_phrase}
                if self.decision.low_engagement_phrase
                else {}
            ),
            "trace": dict(self.trace),
            "stage_durations_ms": dict(self.stage_durations_ms),
        }


@attrs.frozen(kw_only=True)
class SectionListing:
    """One row of ``promptweave sections``."""

    id: str
    title: str
    plugin: str
    volatility: str
    override: str | None
    error: str | None = None
