"""The data a turn carries and the items retrievers contribute to sections.

A turn file (see ``docs/turn_file.md``) and the retrievers produce these records; the built-in
sections read them from :class:`promptweave.prompt.render_context.RenderContext`. Third-party sections may define
items of their own: the context hands a section whatever its retrievers returned.
"""

from __future__ import annotations

import enum
import math

import attrs

from promptweave._fields import one_of, str_tuple

__all__ = [
    "REPLY_SHAPE_BANDS",
    "REPLY_SHAPE_RHYTHMS",
    "TURN_POLICY_REPLY_TARGETS",
    "TURN_POLICY_SERIOUSNESS",
    "TURN_POLICY_SOCIAL_ACTIONS",
    "BehaviorStrategy",
    "ExpressionPair",
    "KnowledgeItem",
    "LearningType",
    "MemoryItem",
    "MemoryKind",
    "PersonFact",
    "RelationshipNote",
    "ReplyShape",
    "RhythmBaseline",
    "RhythmProfile",
    "RouteHints",
    "ToolContext",
    "TopicSummary",
    "TurnPolicy",
]


def _clamp_unit(value: float) -> float:
    number = float(value)
    if math.isnan(number):
        raise ValueError("affinity must be a number from -1 to 1, not NaN")
    return max(-1.0, min(1.0, number))


def _bubble_cap(value: int) -> int:
    return min(5, max(1, int(value)))


def _at_least_one(value: int) -> int:
    return max(1, int(value))


class MemoryKind(enum.StrEnum):
    """The four memory blocks, in the order the memory section renders them
    (``docs/design.md#the-fifteen-sections``, section 6)."""

    TEACHING = "teaching"
    GROUP_EVENT = "group_event"
    IP_KNOWLEDGE = "ip_knowledge"
    GROUP_MEMORY = "group_memory"


class LearningType(enum.StrEnum):
    """Who a behaviour strategy was learned from: group members, or the bot itself."""

    OBSERVED = "observed"
    SELF_REFLECTION = "self_reflection"


@attrs.frozen(kw_only=True)
class MemoryItem:
    """One remembered fact: a teaching, a confirmed group event, IP knowledge or a group memory."""

    kind: MemoryKind = attrs.field(converter=MemoryKind)
    text: str
    id: str = ""
    source: str = ""
    score: float = 0.0


@attrs.frozen(kw_only=True)
class KnowledgeItem:
    """A chunk of a knowledge document; shown with its title, else its source."""

    text: str
    title: str = ""
    source: str = ""
    chunk_id: str = ""
    score: float = 0.0


@attrs.frozen(kw_only=True)
class RelationshipNote:
    """What the bot knows of its relationship with the current speaker in this group.

    :param affinity: from -1 (aversion) to 1 (close friend); 0 means no affinity line.
    """

    facts: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    guidance: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    affinity: float = attrs.field(default=0.0, converter=_clamp_unit)


@attrs.frozen(kw_only=True)
class PersonFact:
    """A stable preference of the current speaker."""

    text: str
    score: float = 0.0


@attrs.frozen(kw_only=True)
class TopicSummary:
    """An earlier session summary recalled by topic (section ``mid_term``)."""

    text: str
    score: float = 0.0


@attrs.frozen(kw_only=True)
class ExpressionPair:
    """A learned direct pair: when a member said ``trigger``, another answered ``reply``."""

    trigger: str
    reply: str
    score: float = 0.0


@attrs.frozen(kw_only=True)
class RhythmBaseline:
    """The group's reply rhythm: share of single-bubble replies and median segment length."""

    single_bubble_share: float = attrs.field(
        validator=attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.le(1.0))
    )
    median_segment_chars: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class BehaviorStrategy:
    """An abstract pick-up strategy: in a scene like ``scene``, someone did ``action``."""

    scene: str
    action: str
    outcome: str = ""
    learning_type: LearningType = attrs.field(default=LearningType.OBSERVED, converter=LearningType)


#: The words of :class:`ReplyShape` and :class:`TurnPolicy`, each field's whole choice.
REPLY_SHAPE_RHYTHMS = ("single", "multi")
REPLY_SHAPE_BANDS = ("short", "complete", "task")
TURN_POLICY_REPLY_TARGETS = ("fact", "emotion", "short_tease", "answer", "silent")
TURN_POLICY_SERIOUSNESS = ("casual", "serious")
TURN_POLICY_SOCIAL_ACTIONS = ("ack", "affection", "joke", "stance", "answer", "ask_one")


@attrs.frozen(kw_only=True)
class ReplyShape:
    """Bubble count, per-bubble length and rhythm of this turn's reply (section ``reply_shape``).

    Its words reach the system prompt, so each is one of a fixed set; anything else raises
    ``ValueError`` (``docs/turn_file.md``).

    :param rhythm: ``single`` (单条) or ``multi`` (多条连发).
    :param band: ``short`` (banter), ``complete`` (serious), ``task`` (tool work).
    """

    max_bubbles: int = attrs.field(default=2, converter=_bubble_cap)
    preferred_bubbles: int = attrs.field(default=1, converter=_at_least_one)
    min_chars: int = attrs.field(default=4, validator=attrs.validators.ge(0))
    max_chars: int = attrs.field(default=18)

    @max_chars.validator
    def _max_not_below_min(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if value < self.min_chars:
            raise ValueError(f"max_chars ({value}) is below min_chars ({self.min_chars})")

    rhythm: str = attrs.field(default="single", validator=one_of(*REPLY_SHAPE_RHYTHMS))
    band: str = attrs.field(default="short", validator=one_of(*REPLY_SHAPE_BANDS))


@attrs.frozen(kw_only=True)
class TurnPolicy:
    """How to answer this turn (section ``turn_policy``).

    Its words reach the system prompt, so each is one of a fixed set; anything else raises
    ``ValueError`` (``docs/turn_file.md``).

    :param reply_target: one of :data:`TURN_POLICY_REPLY_TARGETS`.
    :param seriousness: ``casual`` or ``serious``.
    :param social_action: one of :data:`TURN_POLICY_SOCIAL_ACTIONS` (the values of
        :class:`promptweave.decision.SocialAction`).
    """

    reply_target: str = attrs.field(default="fact", validator=one_of(*TURN_POLICY_REPLY_TARGETS))
    seriousness: str = attrs.field(default="casual", validator=one_of(*TURN_POLICY_SERIOUSNESS))
    social_action: str = attrs.field(
        default="answer", validator=one_of(*TURN_POLICY_SOCIAL_ACTIONS)
    )
    needs_tool: bool = False
    needs_grounding: bool = False
    allow_teasing: bool = True


@attrs.frozen(kw_only=True)
class ToolContext:
    """Tool results and tool rules for this turn (section ``tool_context``)."""

    background_events: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    action_tools_enabled: bool = False
    ask_before_call: bool = False
    missing_required_params: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    mention_tokens_enabled: bool = False

    @property
    def is_empty(self) -> bool:
        return not (
            self.background_events
            or self.action_tools_enabled
            or self.ask_before_call
            or self.mention_tokens_enabled
        )


def _unit_weight(value: float) -> float:
    return max(0.0, float(value))


@attrs.frozen(kw_only=True)
class RhythmProfile:
    """How members of a group actually reply: bubble counts and single/multi-bubble weights.

    It shapes casual replies (section ``reply_shape``). ``None`` percentiles mean unknown.

    :param bubble_count_p50: median number of bubbles in a member's reply.
    :param bubble_count_p90: 90th percentile of the same.
    :param single_weight: how much the group favours single-bubble replies (any scale, >= 0).
    :param multi_weight: how much it favours multi-bubble replies (same scale).
    """

    bubble_count_p50: float | None = None
    bubble_count_p90: float | None = None
    single_weight: float = attrs.field(default=0.0, converter=_unit_weight)
    multi_weight: float = attrs.field(default=0.0, converter=_unit_weight)


@attrs.frozen(kw_only=True)
class RouteHints:
    """What the bot knows of a turn beyond its text, for routing (``docs/routing.md``).

    :param tool_intent: the tool the message requires, from the bot's intent detection.
    :param tools_permitted: whether the sender may use tools here.
    :param scene: ``casual``, ``banter``, ``venting``, ``light_help``, ``serious`` or ``unknown``;
        ``None`` lets the router infer it from the decision.
    :param multi_party_overlap: several members are talking about the same thing, so a reply may
        @-mention (delivery style ``mention``).
    :param rhythm: the group's reply rhythm; ``None`` falls back to the routing state, then to the
        group expression baseline.
    """

    tool_intent: str | None = None
    tools_permitted: bool = False
    scene: str | None = None
    multi_party_overlap: bool = False
    rhythm: RhythmProfile | None = None
