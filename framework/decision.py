"""The routing decision of a turn, what each routing stage returns, and its trace
(``docs/design.md#the-routing-flow``).

A :class:`promptweave.DecisionRule` receives a :class:`RouteContext`. What its ``evaluate`` returns
depends on its stage (``docs/routing.md``):

- ``gate``: a :class:`GateSkip` to stop the turn in silence, or ``None`` to let it through;
- ``necessity``: a :class:`ScoreTerm` to add to the reply-necessity score, or ``None`` when the
  term does not apply;
- ``decide``: a :class:`Decision`, or ``None`` to let the next rule decide.
"""

from __future__ import annotations

import datetime as dt
import enum
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from promptweave.items import ReplyShape, TurnPolicy

if TYPE_CHECKING:
    from promptweave.config import Config
    from promptweave.routing.signals import MessageSignals
    from promptweave.store.routing_state import QuoteCandidate, RoutingState
    from promptweave.turn import ChatMessage, Turn

__all__ = [
    "Decision",
    "DeliveryStyle",
    "GateSkip",
    "LowEngagement",
    "MemoryPolicy",
    "NecessityScore",
    "RouteContext",
    "ScoreTerm",
    "SocialAction",
    "TurnAction",
    "allows_persistent_memory",
]


class TurnAction(enum.StrEnum):
    """What the bot does with the message."""

    REPLY = "reply"
    PASS = "pass"
    TOOL = "tool"
    FOLLOW_UP = "follow_up"


class SocialAction(enum.StrEnum):
    """The social move of a reply."""

    ACK = "ack"
    AFFECTION = "affection"
    JOKE = "joke"
    STANCE = "stance"
    ANSWER = "answer"
    ASK_ONE = "ask_one"


class DeliveryStyle(enum.StrEnum):
    """How the reply is delivered: plainly, quoting the message it answers, or with a mention."""

    PLAIN = "plain"
    QUOTE = "quote"
    MENTION = "mention"


@attrs.frozen(kw_only=True)
class GateSkip:
    """What a ``gate`` rule returns to stop the turn: the bot stays silent.

    :param reason: why, for the trace (``face``, ``noise``, ``cooldown``…).
    :param silence_s: start a per-group silence of this many seconds (a shut-up request).
    :param keep_message: keep the message for the next trigger instead of dropping it (cooldown).
    """

    reason: str
    silence_s: float | None = None
    keep_message: bool = False


@attrs.frozen(kw_only=True)
class ScoreTerm:
    """What a ``necessity`` rule returns: one named term of the reply-necessity score.

    :param name: the term, for the trace (``addressed``, ``low_value_social``…).
    :param points: added to the score; negative terms argue for silence.
    :param detail: what was seen, for the trace (``"3 recent bot replies"``).
    """

    name: str
    points: int
    detail: str = ""


@attrs.frozen(kw_only=True)
class NecessityScore:
    """The reply-necessity score of a turn and the terms it was summed from.

    :param bypassed: why the score was not applied (``addressed``, ``follow_up``,
        ``required_tool_intent``), or ``None`` when it decided.
    """

    score: int
    threshold: int
    terms: tuple[ScoreTerm, ...] = ()
    bypassed: str | None = None

    @property
    def proceeds(self) -> bool:
        """Whether the turn goes on to the decide stage."""
        return self.bypassed is not None or self.score >= self.threshold

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "threshold": self.threshold,
            "bypassed": self.bypassed,
            "terms": [
                {"name": t.name, "points": t.points, **({"detail": t.detail} if t.detail else {})}
                for t in self.terms
            ],
        }


@attrs.frozen(kw_only=True)
class MemoryPolicy:
    """What the retrieval stage may read for this turn (``docs/design.md#short-social-turns``).

    :param read_persistent_memory: ``False`` on short social turns: no persistent memory,
        relationship notes, person facts or old topics.
    :param include_ambient_excerpt: ``False`` when a short social turn continues an exchange the
        bot just had with the same user.
    :param reason: ``short_social_turn``, ``silent`` (PASS: nothing is retrieved) or
        ``substantive``.
    """

    read_persistent_memory: bool = True
    include_ambient_excerpt: bool = True
    reason: str = "substantive"


@attrs.frozen(kw_only=True)
class LowEngagement:
    """The low-engagement exit of a PASS: a short canned phrase instead of silence, no LLM.

    :param trigger: ``rule_pass`` or ``necessity_short_reaction``.
    :param recent_bot_replies: the count the probability was read from.
    :param probability: the chance of emitting.
    :param roll: the draw compared with ``probability`` (emit when ``roll < probability``).
    :param phrase: the phrase to send, or ``None`` (the roll missed, or no pool had a phrase).
    :param pool: the pool the phrase came from.
    :param emotion: the message carried emotion words, so the tangent pools applied.
    """

    trigger: str
    recent_bot_replies: int
    probability: float
    roll: float
    phrase: str | None = None
    pool: str | None = None
    emotion: bool = False

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


# The router builds a few decisions a turn; a member given is kept as it is, which costs less
# than the enum's own call.
def _turn_action(value: TurnAction | str) -> TurnAction:
    return value if type(value) is TurnAction else TurnAction(value)


def _social_action(value: SocialAction | str) -> SocialAction:
    return value if type(value) is SocialAction else SocialAction(value)


def _delivery_style(value: DeliveryStyle | str) -> DeliveryStyle:
    return value if type(value) is DeliveryStyle else DeliveryStyle(value)


@attrs.frozen(kw_only=True)
class Decision:
    """What to do with the current message, and why.

    :param source: ``rule``, ``model``, ``fallback``, ``gate``, ``necessity`` or ``default``.
    :param reason: the name of the rule or condition that decided.
    :param reply_message_id: the message to quote when ``delivery_style`` is ``quote``.
    :param stage: the stage that decided: ``gate``, ``necessity`` or ``decide``.
    :param necessity: the reply-necessity score, when the turn got that far.
    :param memory_policy: what the retrieval stage may read.
    :param low_engagement: the low-engagement exit of a PASS, when it was considered.
    :param reply_shape: the resolved reply shape (used when the turn gives none).
    :param turn_policy: the resolved turn policy (used when the turn gives none).
    :param kept_messages: messages kept during a cooldown, handed to this turn.
    :param silence_until: the end of the silence this turn started (a shut-up request).
    :param notes: what else happened while deciding (model fallbacks, rules that raised).
    """

    action: TurnAction = attrs.field(converter=_turn_action)
    social_action: SocialAction = attrs.field(default=SocialAction.ANSWER, converter=_social_action)
    delivery_style: DeliveryStyle = attrs.field(
        default=DeliveryStyle.PLAIN, converter=_delivery_style
    )
    source: str = "rule"
    reason: str = ""
    reply_message_id: str | None = None
    stage: str = "decide"
    necessity: NecessityScore | None = None
    memory_policy: MemoryPolicy = MemoryPolicy()
    low_engagement: LowEngagement | None = None
    reply_shape: ReplyShape | None = None
    turn_policy: TurnPolicy | None = None
    kept_messages: tuple[ChatMessage, ...] = ()
    silence_until: dt.datetime | None = None
    notes: tuple[str, ...] = ()

    @property
    def low_engagement_phrase(self) -> str | None:
        """The canned phrase to send instead of an LLM reply, if any."""
        return None if self.low_engagement is None else self.low_engagement.phrase

    @property
    def speaks(self) -> bool:
        """Whether the turn goes to the LLM (REPLY, TOOL or FOLLOW_UP)."""
        return self.action is not TurnAction.PASS

    def trace(self) -> dict[str, Any]:
        """The compact trace ``{action, social_action, delivery_style, source, reason}``."""
        return {
            "action": self.action.value,
            "social_action": self.social_action.value,
            "delivery_style": self.delivery_style.value,
            "source": self.source,
            "reason": self.reason,
        }

    def details(self) -> dict[str, Any]:
        """Everything else the router knows about this decision, for the runtime trace."""
        return {
            "stage": self.stage,
            "reply_message_id": self.reply_message_id,
            "necessity": None if self.necessity is None else self.necessity.to_json(),
            "memory_policy": attrs.asdict(self.memory_policy),
            "low_engagement": None
            if self.low_engagement is None
            else self.low_engagement.to_json(),
            "reply_shape": None if self.reply_shape is None else attrs.asdict(self.reply_shape),
            "turn_policy": None if self.turn_policy is None else attrs.asdict(self.turn_policy),
            "kept_messages": [
                {"id": m.id, "sender_id": m.sender_id, "text": m.text} for m in self.kept_messages
            ],
            "silence_until": None if self.silence_until is None else self.silence_until.isoformat(),
            "notes": list(self.notes),
        }


@attrs.frozen(kw_only=True)
class RouteContext:
    """What a :class:`promptweave.DecisionRule` receives.

    :param turn: the turn being routed.
    :param now: the routing time (the message's time unless given).
    :param config: the deployment's settings; ``config.routing`` holds the routing defaults.
    :param signals: what the router read from the message once, for every rule
        (:class:`promptweave.routing.signals.MessageSignals`).
    :param state: the routing state of the deployment (cooldowns, quote candidates, …).
    :param candidates: the group's quotable recent messages, the current one included.
    :param recent_bot_replies: the bot's replies among the group's recent messages (0–6).
    :param rng: the runtime's random source; draw from it only, so a replay is exact.
    :param necessity: the reply-necessity score (``decide`` stage only).
    :param learned_replies: the group's learned short replies (its stored expression pairs),
        read only when asked for (the low-engagement exit's ``group_phrases`` pool does).
    """

    turn: Turn
    now: dt.datetime
    config: Config
    signals: MessageSignals
    state: RoutingState
    candidates: tuple[QuoteCandidate, ...] = ()
    recent_bot_replies: int = 0
    rng: random.Random = attrs.field(factory=random.Random)
    necessity: NecessityScore | None = None
    learned_replies: Callable[[], Sequence[str]] = tuple

    @property
    def bot_id(self) -> str:
        return self.turn.bot.id

    @property
    def group_id(self) -> str | None:
        return self.turn.group_id


def allows_persistent_memory(decision: Decision) -> bool:
    """Whether retrieval may read persistent memory, relationship notes, person facts and old
    topics for this turn. Retrievers registered with ``persistent=True`` are skipped otherwise,
    and the retrieval trace says ``skipped_short_social_turn``."""
    return decision.memory_policy.read_persistent_memory
