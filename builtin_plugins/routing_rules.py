"""Built-in plugin ``routing_rules``: every gate, reply-necessity term and decide rule.

``docs/design.md#the-routing-flow``. Orders start at 1000 so that a plugin's rule (default order
100) runs before the built-ins; a plugin replaces one with ``DecisionRule(name=..., replace=True)``
or blocks this whole plugin with ``PROMPTWEAVE_DISABLE_PLUGINS=routing_rules``
(``docs/routing.md``).
"""

from __future__ import annotations

from collections.abc import Callable

from promptweave import (
    Decision,
    DecisionRule,
    GateSkip,
    RouteContext,
    ScoreTerm,
    TurnAction,
    hookimpl,
)
from promptweave.decision import DeliveryStyle, SocialAction
from promptweave.plugins.contributions import RuleStage
from promptweave.routing.quoting import quote_allowed

# -- stage gate: skip in silence ------------------------------------------------------------


# The answers of the rules below are frozen records: each is made once and returned every time.
_OWN_MESSAGE = GateSkip(reason="own_message")
_FACE = GateSkip(reason="face")
_NOISE = GateSkip(reason="noise")
_INCOMPLETE = GateSkip(reason="incomplete")
_BYSTANDER = GateSkip(reason="bystander")
_SHORT = GateSkip(reason="short")
_SILENCED = GateSkip(reason="shut_up_silence")
_COOLDOWN = GateSkip(reason="cooldown", keep_message=True)


def gate_own_message(context: RouteContext) -> GateSkip | None:
    # The bot never answers itself: a platform echoing the bot's own message must not start a
    # loop of replies.
    turn = context.turn
    return _OWN_MESSAGE if turn.message.sender_id == turn.bot.id else None


def gate_shut_up(context: RouteContext) -> GateSkip | None:
    if not context.signals.shut_up:
        return None
    silence = context.config.routing.shut_up_silence_s
    return GateSkip(reason="shut_up", silence_s=float(silence) if silence else None)


def gate_face(context: RouteContext) -> GateSkip | None:
    return _FACE if context.signals.face_only else None


def gate_noise(context: RouteContext) -> GateSkip | None:
    return _NOISE if context.signals.noise else None


def gate_incomplete(context: RouteContext) -> GateSkip | None:
    return _INCOMPLETE if context.signals.incomplete else None


def gate_bystander(context: RouteContext) -> GateSkip | None:
    return _BYSTANDER if context.signals.bystander else None


def gate_short(context: RouteContext) -> GateSkip | None:
    signals = context.signals
    if signals.has_images or signals.length >= context.config.routing.min_chars:
        return None
    if signals.addressed and signals.length == 0:
        return None  # a bare "@bot" is a summons, not a short message
    return _SHORT


def gate_silenced(context: RouteContext) -> GateSkip | None:
    if context.group_id is None or context.signals.addressed:
        return None
    until = context.state.mute(context.bot_id, context.group_id).silence_until
    return _SILENCED if until and context.now < until else None


def gate_cooldown(context: RouteContext) -> GateSkip | None:
    if context.group_id is None:
        return None
    until = context.state.mute(context.bot_id, context.group_id).cooldown_until
    if until is None or context.now >= until:
        return None
    return _COOLDOWN


GATES: tuple[tuple[str, int, Callable[[RouteContext], GateSkip | None]], ...] = (
    ("own_message", 900, gate_own_message),
    ("shut_up", 1000, gate_shut_up),
    ("face", 1100, gate_face),
    ("noise", 1200, gate_noise),
    ("incomplete", 1300, gate_incomplete),
    ("bystander", 1400, gate_bystander),
    ("short", 1500, gate_short),
    ("shut_up_silence", 2100, gate_silenced),
    ("cooldown", 2200, gate_cooldown),
)

# -- stage necessity: one named term each ---------------------------------------------------

#: Points per recent bot reply (0–6 replies).
BOT_PRESENCE_POINTS = -8
#: Affinity below this lowers the score, from -10 points down to -30 at -1.
LOW_AFFINITY_BELOW = -0.3
SHORT_LENGTH = (2, 24)


def _when(
    name: str, points: int, predicate: Callable[[RouteContext], bool]
) -> Callable[[RouteContext], ScoreTerm | None]:
    term = ScoreTerm(name=name, points=points)

    def evaluate(context: RouteContext) -> ScoreTerm | None:
        return term if predicate(context) else None

    return evaluate


def term_recent_bot_presence(context: RouteContext) -> ScoreTerm | None:
    count = context.recent_bot_replies
    signals = context.signals
    if count == 0 or (signals.addressed and signals.obligation):
        return None  # an addressed question is never starved by the bot's own presence
    return ScoreTerm(
        name="recent_bot_presence",
        points=BOT_PRESENCE_POINTS * count,
        detail=f"{count} recent bot replies",
    )


def term_low_affinity(context: RouteContext) -> ScoreTerm | None:
    affinity = context.signals.affinity
    if affinity is None or affinity >= LOW_AFFINITY_BELOW or context.signals.addressed:
        return None
    depth = (LOW_AFFINITY_BELOW - affinity) / (1 + LOW_AFFINITY_BELOW)
    return ScoreTerm(
        name="low_affinity", points=-round(10 + 20 * depth), detail=f"affinity {affinity:.2f}"
    )


def _short_length(context: RouteContext) -> bool:
    low, high = SHORT_LENGTH
    return low <= context.signals.length <= high


def _low_value_social(context: RouteContext) -> bool:
    signals = context.signals
    return signals.low_value_social and not (signals.mentioned or signals.follow_up)


NECESSITY: tuple[tuple[str, Callable[[RouteContext], ScoreTerm | None]], ...] = (
    ("addressed", _when("addressed", 55, lambda c: c.signals.addressed)),
    ("mention", _when("mention", 35, lambda c: c.signals.mentioned)),
    ("follow_up", _when("follow_up", 25, lambda c: c.signals.follow_up)),
    ("bystander", _when("bystander", -45, lambda c: c.signals.bystander)),
    ("noise", _when("noise", -40, lambda c: c.signals.noise)),
    ("spam", _when("spam", -50, lambda c: c.signals.spam)),
    (
        "incomplete",
        _when("incomplete", -20, lambda c: c.signals.incomplete and not c.signals.addressed),
    ),
    ("short_reaction", _when("short_reaction", -25, lambda c: c.signals.short_reaction)),
    ("request_words", _when("request_words", 25, lambda c: c.signals.request)),
    ("obligation", _when("obligation", 20, lambda c: c.signals.obligation)),
    ("low_value_social", _when("low_value_social", -35, _low_value_social)),
    ("back_and_forth", _when("back_and_forth", 15, lambda c: c.signals.back_and_forth)),
    ("candidate_pool", _when("candidate_pool", 10, lambda c: c.signals.reply_to_candidate)),
    ("recent_bot_presence", term_recent_bot_presence),
    ("length", _when("length", 5, _short_length)),
    ("low_affinity", term_low_affinity),
)


# -- stage decide: first match wins ---------------------------------------------------------


_REQUIRED_TOOL = Decision(action=TurnAction.TOOL, reason="required_tool_intent")
_SHORT_VENT = Decision(
    action=TurnAction.REPLY, social_action=SocialAction.ACK, reason="rule_short_vent_ack"
)
_LOW_VALUE_PASS = Decision(
    action=TurnAction.PASS, social_action=SocialAction.ACK, reason="rule_low_value_social_pass"
)
_FOLLOW_UP = Decision(
    action=TurnAction.FOLLOW_UP,
    social_action=SocialAction.ASK_ONE,
    reason="rule_follow_up_missing_object",
)
_OBLIGATION = Decision(action=TurnAction.REPLY, reason="rule_reply_obligation")
_DEFAULT_REPLY = Decision(action=TurnAction.REPLY, reason="rule_default_reply")


def decide_required_tool(context: RouteContext) -> Decision | None:
    hints = context.turn.route_hints
    if hints.tool_intent and hints.tools_permitted:
        return _REQUIRED_TOOL
    return None


def decide_short_vent(context: RouteContext) -> Decision | None:
    return _SHORT_VENT if context.signals.short_vent else None


def decide_reply_quote(context: RouteContext) -> Decision | None:
    if not context.signals.reply_to_candidate or not quote_allowed(context):
        return None
    return Decision(
        action=TurnAction.REPLY,
        delivery_style=DeliveryStyle.QUOTE,
        reply_message_id=context.turn.message.reply_to,
        reason="rule_reply_quote",
    )


def decide_low_value_pass(context: RouteContext) -> Decision | None:
    signals = context.signals
    if signals.addressed or not signals.low_value_social:
        return None
    return _LOW_VALUE_PASS


def decide_follow_up(context: RouteContext) -> Decision | None:
    return _FOLLOW_UP if context.signals.missing_object else None


def decide_obligation(context: RouteContext) -> Decision | None:
    if not (context.signals.obligation or context.signals.request):
        return None
    return _OBLIGATION


def decide_default(context: RouteContext) -> Decision:
    return _DEFAULT_REPLY


DECIDE: tuple[tuple[str, int, Callable[[RouteContext], Decision | None]], ...] = (
    ("required_tool_intent", 1000, decide_required_tool),
    ("short_vent", 1100, decide_short_vent),
    ("reply_quote", 1200, decide_reply_quote),
    ("low_value_social_pass", 1300, decide_low_value_pass),
    ("follow_up", 1400, decide_follow_up),
    ("reply_obligation", 1500, decide_obligation),
    ("default_reply", 9000, decide_default),
)


@hookimpl
def register_decision_rules(register: Callable[[DecisionRule], None]) -> None:
    for name, order, gate in GATES:
        register(
            DecisionRule(name=f"gate_{name}", stage=RuleStage.GATE, evaluate=gate, order=order)
        )
    for index, (name, term) in enumerate(NECESSITY):
        register(
            DecisionRule(
                name=f"necessity_{name}",
                stage=RuleStage.NECESSITY,
                evaluate=term,
                order=1000 + 10 * index,
            )
        )
    for name, order, rule in DECIDE:
        register(
            DecisionRule(name=f"decide_{name}", stage=RuleStage.DECIDE, evaluate=rule, order=order)
        )
