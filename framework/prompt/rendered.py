"""What one turn produced: the sections, the system prompt, the messages, the decision, the trace."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from promptweave.decision import Decision
from promptweave.messages.prompt_message import PromptMessage
from promptweave.prompt.render_context import RenderContext

__all__ = ["RenderedSection", "RenderedTurn", "SectionListing", "TurnTrace"]


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


class TurnTrace(Mapping[str, Any]):
    """The trace of a turn, built the first time it is read.

    Most turns of a running bot are never explained, so the trace (a dozen dictionaries, the
    injection snapshot with its hashes, the messages the budget dropped) is only built when
    someone reads it: a key, its length, iteration or ``dict(trace)``. Built once, it stays.

    :param build: makes the trace's dictionary.
    """

    __slots__ = ("_build", "_built")

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build: Callable[[], dict[str, Any]] | None = build
        self._built: dict[str, Any] | None = None

    def _data(self) -> dict[str, Any]:
        built = self._built
        if built is not None:
            return built
        build = self._build
        if build is None:  # another thread has just built it
            return self._built or {}
        built = self._built = build()
        self._build = None  # what the builder held is no longer needed
        return built

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return f"TurnTrace({self._data()!r})"


@attrs.frozen(kw_only=True)
class RenderedTurn:
    """The result of one turn: what the LLM receives, the decision, and why.

    :param trace: why the turn came out as it did; a :class:`TurnTrace` from
        :meth:`promptweave.Promptweave.render`, built when first read.
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
