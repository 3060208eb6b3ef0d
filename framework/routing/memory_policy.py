"""The memory policy of a turn (``docs/design.md#short-social-turns``).

Short social turns (greetings, nicknames, teasing, a short sigh: at most 24 characters with no
question or request) read no persistent memory, relationship notes, person facts or old topics;
they keep the user's bounded history window. The retrieval stage asks
:func:`promptweave.decision.allows_persistent_memory`.
"""

from __future__ import annotations

from promptweave.decision import Decision, MemoryPolicy, SocialAction, TurnAction
from promptweave.routing.signals import MessageSignals
from promptweave.turn import Turn

__all__ = [
    "PERSISTENT_MEMORY_SECTIONS",
    "SHORT_SOCIAL_ACTIONS",
    "memory_policy_for",
]

#: The sections of persistent memory, empty on a short social turn
#: (docs/design.md#short-social-turns): memory, relationship, person facts and old topics. Sections
#: fed by a retriever registered with ``persistent=True`` count too.
PERSISTENT_MEMORY_SECTIONS = frozenset({"memory", "relationship", "person_facts", "mid_term"})

#: Social actions that make a reply a short social turn whatever its text.
SHORT_SOCIAL_ACTIONS = (SocialAction.ACK, SocialAction.AFFECTION, SocialAction.JOKE)


# Every turn gets one of four policies: frozen records, each made once.
_SILENT = MemoryPolicy(read_persistent_memory=False, reason="silent")
_SUBSTANTIVE = MemoryPolicy()
_SHORT_SOCIAL = MemoryPolicy(read_persistent_memory=False, reason="short_social_turn")
_SHORT_SOCIAL_IN_EXCHANGE = MemoryPolicy(
    read_persistent_memory=False, include_ambient_excerpt=False, reason="short_social_turn"
)


def memory_policy_for(decision: Decision, signals: MessageSignals, turn: Turn) -> MemoryPolicy:
    """The memory policy of a decided turn."""
    if decision.action is TurnAction.PASS:
        return _SILENT
    short = decision.action is TurnAction.REPLY and (
        signals.short_social or decision.social_action in SHORT_SOCIAL_ACTIONS
    )
    if not short:
        return _SUBSTANTIVE
    # The bot just answered this user: the exchange itself is the context
    # (docs/design.md#short-social-turns).
    in_exchange = signals.addressed and (
        signals.back_and_forth or bool(turn.history and turn.history[-1].role == "assistant")
    )
    return _SHORT_SOCIAL_IN_EXCHANGE if in_exchange else _SHORT_SOCIAL
