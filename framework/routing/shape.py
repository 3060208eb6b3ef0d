"""Turn policy and reply shape resolution (sections 12 and 13,
``docs/design.md#the-reply-contract``).

The router resolves both for every turn; the runtime uses them whenever the turn does not bring
its own. Casual replies follow the group's rhythm profile; randomness comes from the runtime's
``rng`` only, so a replay gives the same shape.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable

from promptweave.config import RoutingConfig
from promptweave.decision import Decision, SocialAction, TurnAction
from promptweave.items import ReplyShape, RhythmProfile, TurnPolicy
from promptweave.routing.signals import MessageSignals
from promptweave.store.routing_state import RoutingState
from promptweave.turn import Turn

__all__ = [
    "CASUAL_SCENES",
    "SCENES",
    "infer_scene",
    "resolve_reply_shape",
    "resolve_reply_target",
    "resolve_turn_policy",
    "rhythm_for",
]

SCENES = ("casual", "banter", "venting", "light_help", "serious", "unknown")
#: Scenes answered casually (short band); every other scene is answered seriously.
CASUAL_SCENES = ("casual", "banter", "venting")
#: Scenes in which the bot may open with a tease.
TEASING_SCENES = ("casual", "banter")


def infer_scene(decision: Decision, signals: MessageSignals, config: RoutingConfig) -> str:
    """The scene of a turn the bot gave none for."""
    if decision.action in (TurnAction.TOOL, TurnAction.FOLLOW_UP):
        return "light_help"
    if decision.social_action is SocialAction.JOKE:
        return "banter"
    if signals.short_vent or (decision.social_action is SocialAction.ACK and signals.emotion):
        return "venting"
    if signals.request or (signals.obligation and signals.length > config.short_social_chars):
        return "light_help"
    return "casual"


def resolve_reply_target(decision: Decision, signals: MessageSignals) -> str:
    """``silent``, ``emotion``, ``short_tease``, ``answer`` or ``fact``."""
    social = decision.social_action
    if decision.action is TurnAction.PASS:
        return "silent"
    if social is SocialAction.ACK:
        return "emotion" if signals.short_vent or signals.emotion else "fact"
    if social is SocialAction.AFFECTION:
        return "emotion"
    if social is SocialAction.JOKE:
        return "short_tease"
    if signals.obligation or social in (
        SocialAction.ANSWER,
        SocialAction.ASK_ONE,
        SocialAction.STANCE,
    ):
        return "answer"
    return "fact"


def resolve_turn_policy(decision: Decision, signals: MessageSignals, scene: str) -> TurnPolicy:
    """The turn policy for section 13: reply target, seriousness, tool and grounding rules."""
    known = scene in SCENES
    if decision.action is TurnAction.PASS:
        target = "silent"
    elif scene == "venting" or decision.social_action is SocialAction.AFFECTION:
        target = "emotion"
    else:
        target = resolve_reply_target(decision, signals)
    if not known and target == "short_tease":
        target = "answer"
    needs_tool = decision.action is TurnAction.TOOL
    return _turn_policy(
        target,
        "casual" if scene in CASUAL_SCENES else "serious",
        decision.social_action.value,
        needs_tool,
        needs_tool or not known or scene in ("light_help", "unknown"),
        scene in TEASING_SCENES,
    )


# Policies and shapes are frozen records of a few small values, checked when made: every turn
# resolves one of each, so each distinct one is made once.
@functools.lru_cache(maxsize=256)
def _turn_policy(
    reply_target: str,
    seriousness: str,
    social_action: str,
    needs_tool: bool,
    needs_grounding: bool,
    allow_teasing: bool,
) -> TurnPolicy:
    return TurnPolicy(
        reply_target=reply_target,
        seriousness=seriousness,
        social_action=social_action,
        needs_tool=needs_tool,
        needs_grounding=needs_grounding,
        allow_teasing=allow_teasing,
    )


@functools.lru_cache(maxsize=256)
def _reply_shape(
    preferred_bubbles: int, max_bubbles: int, min_chars: int, max_chars: int, rhythm: str, band: str
) -> ReplyShape:
    return ReplyShape(
        preferred_bubbles=preferred_bubbles,
        max_bubbles=max_bubbles,
        min_chars=min_chars,
        max_chars=max_chars,
        rhythm=rhythm,
        band=band,
    )


def rhythm_for(
    turn: Turn,
    state: RoutingState,
    stored_share: Callable[[str, str], float | None] | None = None,
) -> RhythmProfile | None:
    """The group's rhythm: from the turn's hints, else the routing state, else the rhythm
    baseline the turn carries, else the stored baseline (``stored_share(bot_id, group_id)``, the
    same one section ``group_expression`` shows)."""
    if turn.route_hints.rhythm is not None:
        return turn.route_hints.rhythm
    if turn.group_id is None:
        return None
    stored = state.rhythm(turn.bot.id, turn.group_id)
    if stored is not None:
        return stored
    expression = turn.retrieved.group_expression
    if expression is not None and expression.baseline is not None:
        return _from_share(expression.baseline.single_bubble_share)
    share = stored_share(turn.bot.id, turn.group_id) if stored_share is not None else None
    return None if share is None else _from_share(share)


def _from_share(share: float) -> RhythmProfile:
    # A group whose replies are mostly one bubble has a median of one bubble.
    return RhythmProfile(
        bubble_count_p50=1.0 if share >= 0.5 else 2.0,
        single_weight=share,
        multi_weight=1.0 - share,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _rhythm(profile: RhythmProfile | None) -> str:
    if profile is None:
        return "single"
    single, multi = _finite(profile.single_weight), _finite(profile.multi_weight)
    if multi is not None and multi > 0 and (single is None or multi > single):
        return "multi"
    return "single"


def resolve_reply_shape(
    policy: TurnPolicy, rhythm: RhythmProfile | None, rng: random.Random
) -> ReplyShape:
    """Bubble counts, per-bubble length and rhythm for section 12.

    Tool work: 1 (at most 2) bubbles of 8–160 chars. Serious: 1 (2) of 8–80. Casual: the group's
    median bubble count (1–3; a random 1–3 without a profile), at most its 90th percentile (5 at
    most, 3 when unknown), 4–18 chars, and whichever rhythm the group favours (``single`` on a tie).
    """
    if policy.needs_tool:
        return _reply_shape(1, 2, 8, 160, "single", "task")
    if policy.seriousness != "casual":
        return _reply_shape(1, 2, 8, 80, "single", "complete")
    if rhythm is None:
        preferred = rng.choice((1, 2, 3))
    else:
        median = _finite(rhythm.bubble_count_p50)
        preferred = min(3, max(1, round(median) if median else 2))
    p90 = _finite(rhythm.bubble_count_p90) if rhythm is not None else None
    ceiling = min(5, max(1, round(p90) if p90 else 3))
    return _reply_shape(preferred, max(preferred, ceiling), 4, 18, _rhythm(rhythm), "short")
