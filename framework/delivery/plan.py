"""The delivery plan: the messages one turn sends, in order, paced, quoting or mentioning.

The decision's delivery style applies to the first message only, since quoting decides which
message is answered, not the shape of the answer (``docs/design.md``): a quote only while its
target is still one of the group's quote candidates (the target may have left the group's newest
six), a mention only in a group and outside its mention cooldown. Every bubble after the first waits a pause that grows with its
length; a sticker is its own last message.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

from promptweave.config import Config, DeliveryConfig
from promptweave.decision import Decision, DeliveryStyle
from promptweave.delivery.outgoing import DeliveryPlan, ModelAnswer, OutgoingMessage, Segment

__all__ = ["PauseConfig", "plan_delivery", "plan_phrase"]


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


@attrs.frozen(kw_only=True)
class PauseConfig:
    """The pause before each bubble after the first: it grows with the bubble's length, capped.

    :param base_s: the pause of an empty bubble.
    :param per_char_s: added per character.
    :param max_s: the longest pause.
    """

    base_s: float = attrs.field(default=0.6, validator=_non_negative)
    per_char_s: float = attrs.field(default=0.05, validator=_non_negative)
    max_s: float = attrs.field(default=3.0, validator=_non_negative)

    @classmethod
    def from_config(cls, config: DeliveryConfig | Config) -> PauseConfig:
        """The pauses of ``[delivery]``: give the table (``config.delivery``) or all settings."""
        delivery = config.delivery if isinstance(config, Config) else config
        return cls(
            base_s=delivery.pause_base_s,
            per_char_s=delivery.pause_per_char_s,
            max_s=delivery.pause_max_s,
        )

    def pause_for(self, text: str) -> float:
        """``min(max_s, base_s + per_char_s * len(text))``."""
        return min(self.max_s, self.base_s + self.per_char_s * len(text))


def plan_delivery(
    answer: ModelAnswer,
    *,
    bot_id: str,
    group_id: str | None,
    user_id: str,
    decision: Decision,
    quote_candidate_ids: Collection[str],
    sticker_segment: Segment | None,
    pause: PauseConfig,
    mention_allowed: bool = True,
) -> DeliveryPlan:
    """Plan the messages of a read answer.

    :param answer: the answer, read by the reply contract.
    :param bot_id: the bot's account id.
    :param group_id: the group; ``None`` for a private chat.
    :param user_id: the user the turn answers (the one a mention names).
    :param decision: the turn's decision: its ``delivery_style`` and ``reply_message_id``.
    :param quote_candidate_ids: the ids of the group's current quote candidates; a quote of any
        other message goes out plain.
    :param sticker_segment: the segment ``choose_sticker`` gave for the answer's sticker intent,
        or ``None`` (no intent, or dropped).
    :param pause: the pauses between bubbles.
    :param mention_allowed: ``False`` while the group's mention cooldown runs
        (:class:`promptweave.delivery.mention.MentionCooldown`): a mention goes out plain.
    :returns: the plan; no messages when the answer is silent.
    """
    trace: dict[str, Any] = {
        "decided_style": decision.delivery_style.value,
        "answer": _answer_trace(answer),
    }
    style, quoted = _resolve_style(decision, group_id, quote_candidate_ids, mention_allowed, trace)
    parts: list[list[Segment]] = [[Segment.text(bubble)] for bubble in answer.bubbles]
    pauses = [0.0 if i == 0 else pause.pause_for(b) for i, b in enumerate(answer.bubbles)]
    if answer.silent:
        trace["silent"] = answer.reason
    elif answer.sticker is not None:
        trace["sticker"] = answer.sticker if sticker_segment is not None else "dropped"
        if sticker_segment is not None:
            parts.append([sticker_segment])
            pauses.append(pause.pause_for("") if pauses else 0.0)
    if parts:
        parts[0] = _styled(parts[0], style, quoted, user_id)
    messages = tuple(
        OutgoingMessage(
            bot_id=bot_id,
            group_id=group_id,
            user_id=user_id,
            segments=tuple(segments),
            bubble_index=index,
            pause_s=pauses[index],
        )
        for index, segments in enumerate(parts)
    )
    trace["messages"] = len(messages)
    trace["pauses_s"] = [round(m.pause_s, 3) for m in messages]
    # Nothing sent, nothing quoted: the caller records the quote cooldown from the plan.
    return DeliveryPlan(
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        messages=messages,
        style=style if messages else DeliveryStyle.PLAIN,
        quoted_message_id=quoted if messages else None,
        trace=trace,
    )


def plan_phrase(phrase: str, *, bot_id: str, group_id: str | None, user_id: str) -> DeliveryPlan:
    """Plan the low-engagement exit's canned phrase: one plain bubble, no pause.

    :param phrase: the phrase (``Decision.low_engagement_phrase``); a blank one plans nothing.
    :returns: the plan, traced as ``low_engagement``.
    """
    text = phrase.strip()
    messages = (
        (
            OutgoingMessage(
                bot_id=bot_id,
                group_id=group_id,
                user_id=user_id,
                segments=(Segment.text(text),),
                bubble_index=0,
            ),
        )
        if text
        else ()
    )
    return DeliveryPlan(
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        messages=messages,
        style=DeliveryStyle.PLAIN,
        quoted_message_id=None,
        trace={"source": "low_engagement", "messages": len(messages)},
    )


def _answer_trace(answer: ModelAnswer) -> dict[str, Any]:
    return {
        "bubbles": len(answer.bubbles),
        "sticker": answer.sticker,
        "removed": list(answer.removed),
    }


def _resolve_style(
    decision: Decision,
    group_id: str | None,
    quote_candidate_ids: Collection[str],
    mention_allowed: bool,
    trace: dict[str, Any],
) -> tuple[DeliveryStyle, str | None]:
    """The style actually used, and the message quoted."""
    style = decision.delivery_style
    if style is DeliveryStyle.QUOTE:
        target = decision.reply_message_id
        if target is None:
            trace["quote_dropped"] = "no target"
            style = DeliveryStyle.PLAIN
        elif target not in quote_candidate_ids:
            trace["quote_dropped"] = "not a candidate"
            style = DeliveryStyle.PLAIN
        else:
            trace["style"] = style.value
            trace["quoted_message_id"] = target
            return style, target
    elif style is DeliveryStyle.MENTION and group_id is None:
        trace["mention_dropped"] = "private chat"
        style = DeliveryStyle.PLAIN
    elif style is DeliveryStyle.MENTION and not mention_allowed:
        trace["mention_dropped"] = "cooldown"
        style = DeliveryStyle.PLAIN
    trace["style"] = style.value
    return style, None


def _styled(
    segments: list[Segment], style: DeliveryStyle, quoted: str | None, user_id: str
) -> list[Segment]:
    """The first message's segments with its quote or mention in front."""
    if style is DeliveryStyle.QUOTE and quoted is not None:
        return [Segment.reply(quoted), *segments]
    if style is DeliveryStyle.MENTION:
        first, *rest = segments
        if first.kind == "text":
            first = Segment.text(" " + first.data["text"])
        else:
            rest = [first, *rest]
            first = Segment.text(" ")
        return [Segment.at(user_id), first, *rest]
    return segments
