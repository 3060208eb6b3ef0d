"""The model-based decision, behind ``[routing] model_decision`` (default off).

A plugin implementing ``decide_with_model`` returns the model's raw answer: one JSON object in
the shape of :data:`MODEL_ANSWER_FORMAT`. The answer is validated strictly (unknown keys and
unknown enum values are refused); an invalid answer or a failed request falls back to the decide
rules. A valid answer is then checked against the turn, as the rules would: no tool without
permission, no silence on an addressed question, no mention without several members talking,
no quote of a message that is not a candidate.
"""

from __future__ import annotations

import attrs

from promptweave._convert import parse_json, structure
from promptweave.decision import Decision, DeliveryStyle, RouteContext, SocialAction, TurnAction
from promptweave.errors import ConfigError, PromptweaveError
from promptweave.turn import Turn

__all__ = [
    "MODEL_ANSWER_FORMAT",
    "MODEL_ANSWER_MAX_CHARS",
    "OVERLAP_MESSAGES",
    "ModelAnswer",
    "ModelAnswerError",
    "check_model_answer",
    "parse_model_answer",
    "several_members_talking",
]

#: The longest model answer read; a decision is a few dozen characters.
MODEL_ANSWER_MAX_CHARS = 4000

#: The JSON object the model must answer with (for the model prompt of a plugin).
MODEL_ANSWER_FORMAT = (
    '{"action": "reply|pass|tool|follow_up", '
    '"social_action": "ack|affection|joke|stance|answer|ask_one", '
    '"delivery_style": "plain|quote|mention", '
    '"reply_message_id": "<a candidate message id, or null>", '
    '"reason": "<a few words>"}'
)


class ModelAnswerError(PromptweaveError):
    """The model's answer is not a valid decision; the message says what is wrong."""


@attrs.frozen(kw_only=True)
class ModelAnswer:
    """A model's decision, as validated from its JSON answer."""

    action: TurnAction
    social_action: SocialAction = SocialAction.ANSWER
    delivery_style: DeliveryStyle = DeliveryStyle.PLAIN
    reply_message_id: str | None = None
    reason: str = ""


def parse_model_answer(raw: str) -> ModelAnswer:
    """Validate the model's raw answer.

    :raises ModelAnswerError: not JSON, not an object, an unknown key, a missing action, or a
        value outside its enum; one line per problem.
    """
    if isinstance(raw, str) and len(raw) > MODEL_ANSWER_MAX_CHARS:
        raise ModelAnswerError(
            f"model answer is {len(raw)} characters long; a decision takes at most "
            f"{MODEL_ANSWER_MAX_CHARS}"
        )
    try:
        data = parse_json(raw)
    except (TypeError, ValueError) as exc:
        raise ModelAnswerError(f"model answer is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelAnswerError("model answer must be a JSON object")
    try:
        return structure(data, ModelAnswer, "model answer")
    except ConfigError as exc:
        raise ModelAnswerError(str(exc)) from exc


#: How far back the group's recent messages are read for :func:`several_members_talking`.
OVERLAP_MESSAGES = 6


def several_members_talking(turn: Turn) -> bool:
    """Whether several members are talking at once, so that an @ says whom the bot answers:
    ``route_hints.multi_party_overlap`` when the bot framework says so, else another member than
    the speaker (the bot left out) among the group's last :data:`OVERLAP_MESSAGES` messages."""
    if turn.route_hints.multi_party_overlap:
        return True
    if turn.group_id is None:
        return False
    speakers = {
        message.sender_id
        for message in turn.recent_messages[-OVERLAP_MESSAGES:]
        if message.sender_id != turn.bot.id
    }
    speakers.discard(turn.message.sender_id)
    return bool(speakers)


def check_model_answer(answer: ModelAnswer, context: RouteContext) -> Decision:
    """Turn a valid answer into a decision, correcting what the turn does not allow."""
    signals = context.signals
    if answer.action is TurnAction.TOOL and not context.turn.route_hints.tools_permitted:
        return Decision(action=TurnAction.REPLY, source="fallback", reason="tool_not_permitted")
    if answer.action is TurnAction.PASS and signals.addressed and signals.obligation:
        return Decision(action=TurnAction.REPLY, source="rule", reason="addressed_obligation_reply")
    if (
        answer.action is TurnAction.REPLY
        and answer.social_action in (SocialAction.ACK, SocialAction.JOKE)
        and signals.low_value_social
        and not signals.addressed
    ):
        return Decision(
            action=TurnAction.PASS,
            social_action=answer.social_action,
            source="rule",
            reason=f"low_value_{answer.social_action.value}_pass",
        )
    style, source, reason = answer.delivery_style, "model", "model_action"
    if style is DeliveryStyle.MENTION and not several_members_talking(context.turn):
        style, source, reason = (
            DeliveryStyle.PLAIN,
            "fallback",
            "mention_without_multi_party_overlap",
        )
    target = answer.reply_message_id
    if target is not None and any(c.message_id == target for c in context.candidates):
        style = DeliveryStyle.QUOTE
    else:
        target = None
        if style is DeliveryStyle.QUOTE:
            style = DeliveryStyle.PLAIN
    return Decision(
        action=answer.action,
        social_action=answer.social_action,
        delivery_style=style,
        source=source,
        reason=reason,
        reply_message_id=target,
    )
