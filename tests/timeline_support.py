"""The group timeline as its own stage renders it (:mod:`promptweave.messages.timeline`), for tests
of other stages that check what reached the timeline, not how a timeline line is spelt: they
compare with :func:`timeline_lines` instead of a literal line, so a change of the line format fails
the timeline's tests (``tests/messages/``) and the golden ones, not theirs."""

from __future__ import annotations

import attrs

from promptweave import ChatMessage, Turn
from promptweave.builtin_plugins.persona_packs import DEFAULT_PACK
from promptweave.config import TimelineConfig
from promptweave.messages.timeline import build_group_timeline
from promptweave.text.persona import PersonaPack

__all__ = ["DEFAULT_PERSONA", "timeline_lines"]

#: The built-in persona pack (小织), the one a runtime built from ``Config()`` uses.
DEFAULT_PERSONA = PersonaPack.from_file(DEFAULT_PACK)


def timeline_lines(
    turn: Turn,
    *messages: ChatMessage,
    persona: PersonaPack = DEFAULT_PERSONA,
    config: TimelineConfig | None = None,
) -> list[str]:
    """The lines, header left out, of the timeline of ``turn``'s bot showing ``messages`` alone:
    the turn addressed and the window wide enough that every one of them is shown."""
    config = config or TimelineConfig()
    addressed = attrs.evolve(
        turn,
        message=attrs.evolve(turn.message, addressed=True),
        recent_messages=messages,
    )
    wide = attrs.evolve(config, addressed_limit=max(config.addressed_limit, len(messages)))
    return build_group_timeline(addressed, persona, wide).text.splitlines()[1:]
