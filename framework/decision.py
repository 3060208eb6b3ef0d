"""The routing decision of a turn and its compact trace (seed 004, 入口路由)."""

from __future__ import annotations

import enum
from typing import Any

import attrs

__all__ = ["Decision", "DeliveryStyle", "RouteContext", "SocialAction", "TurnAction"]


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
class Decision:
    """What to do with the current message, and why.

    :param source: ``rule``, ``model``, ``fallback`` or ``default``.
    :param reason: the name of the rule or condition that decided.
    :param reply_message_id: the message to quote when ``delivery_style`` is ``quote``.
    """

    action: TurnAction = attrs.field(converter=TurnAction)
    social_action: SocialAction = attrs.field(default=SocialAction.ANSWER, converter=SocialAction)
    delivery_style: DeliveryStyle = attrs.field(
        default=DeliveryStyle.PLAIN, converter=DeliveryStyle
    )
    source: str = "rule"
    reason: str = ""
    reply_message_id: str | None = None

    def trace(self) -> dict[str, Any]:
        """The compact trace ``{action, social_action, delivery_style, source, reason}``."""
        return {
            "action": self.action.value,
            "social_action": self.social_action.value,
            "delivery_style": self.delivery_style.value,
            "source": self.source,
            "reason": self.reason,
        }


@attrs.frozen(kw_only=True)
class RouteContext:
    """What a :class:`framework.DecisionRule` receives.

    :param turn: the turn being routed.
    :param now: the turn's time.
    :param config: the deployment's settings.
    """

    turn: Any
    now: Any
    config: Any
