"""Native quoting (``docs/design.md#quoting``).

A reply to one of the group's recent candidates may be delivered quoting it, when the group's
throttle allows: 120 s since the last *delivered* quote, then a 0.25 draw. At delivery the target
must still be a candidate; otherwise the reply goes out plain.
"""

from __future__ import annotations

import attrs

from promptweave.decision import Decision, DeliveryStyle, RouteContext
from promptweave.store.routing_state import RoutingState

__all__ = ["Delivery", "quote_allowed", "resolve_delivery"]


def quote_allowed(context: RouteContext) -> bool:
    """The group's quote throttle: cooldown since the last delivered quote, then a draw.

    The draw happens only once the cooldown is over, so a replay draws the same numbers.
    """
    group_id = context.group_id
    if group_id is None:
        return False
    routing = context.config.routing
    last = context.state.last_quote_at(context.bot_id, group_id)
    if last is not None and (context.now - last).total_seconds() < routing.quote_cooldown_s:
        return False
    return context.rng.random() < routing.quote_probability


@attrs.frozen(kw_only=True)
class Delivery:
    """How a decided reply actually goes out.

    :param style: the delivery style to use.
    :param reply_message_id: the message to quote, when ``style`` is ``quote``.
    :param reason: ``as_decided``, ``quote_target_candidate`` or ``quote_target_not_candidate``.
    """

    style: DeliveryStyle
    reply_message_id: str | None = None
    reason: str = "as_decided"


def resolve_delivery(
    state: RoutingState, *, bot_id: str, group_id: str | None, decision: Decision
) -> Delivery:
    """Check a QUOTE decision at delivery: quote only a message that is still a candidate."""
    if decision.delivery_style is not DeliveryStyle.QUOTE:
        return Delivery(style=decision.delivery_style)
    target = decision.reply_message_id
    if group_id is None or target is None:
        return Delivery(style=DeliveryStyle.PLAIN, reason="quote_target_not_candidate")
    if all(c.message_id != target for c in state.candidates(bot_id, group_id)):
        return Delivery(style=DeliveryStyle.PLAIN, reason="quote_target_not_candidate")
    return Delivery(
        style=DeliveryStyle.QUOTE, reply_message_id=target, reason="quote_target_candidate"
    )
