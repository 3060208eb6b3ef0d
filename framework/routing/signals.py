"""What routing reads from a message, computed once per turn and handed to every rule.

Signals are facts ("the message is face-only", "it replies to the bot"); the rules in
``builtin_plugins/routing_rules.py`` turn them into decisions. A plugin that disagrees with a fact
writes a rule with its own predicate rather than patching the signals.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import attrs

from promptweave._dates import shifted
from promptweave.config import RoutingConfig
from promptweave.store.routing_state import QuoteCandidate, RoutingState
from promptweave.text import routing_words as ts
from promptweave.turn import ChatMessage, SpeakTrigger, Turn

__all__ = ["MessageSignals", "mention_ids", "raw_reply_id"]

#: How many of the group's latest messages are searched for a sender repeating himself.
FLOOD_WINDOW = 8
#: How many of the latest messages are searched for an exchange with the bot.
EXCHANGE_WINDOW = 4
ALL_MEMBERS = ("all", "全体成员")
#: After the bot's name at the start, one of these makes it a call: ``小织，在吗``.
VOCATIVE_SEPARATORS = ("，", ",", "、", ":", "：", " ", "!", "！", "~", "～")
#: ``小织晚安``: the name plus at most this many characters is a call too.
VOCATIVE_TAIL_CHARS = 4


def _segments(raw: object) -> Iterator[dict[str, object]]:
    if isinstance(raw, list):
        for segment in raw:
            if isinstance(segment, dict):
                yield segment


def mention_ids(message: ChatMessage) -> tuple[str, ...]:
    """Account ids the message @-mentions: its ``mentions``, CQ ``at`` codes, ``at`` segments."""
    found = list(message.mentions)
    raw = message.raw
    if isinstance(raw, str):
        # A string has no segments; without an "[CQ:at" it has no at codes either.
        if "[CQ:at" in raw:
            found += ts.cq_mentions(raw)
        return tuple(dict.fromkeys(found))
    for segment in _segments(raw):
        data = segment.get("data")
        if segment.get("type") == "at" and isinstance(data, dict) and "qq" in data:
            found.append(str(data["qq"]))
    return tuple(dict.fromkeys(found))


def raw_reply_id(raw: object) -> str | None:
    """The id of the message a raw OneBot message replies to: a ``[CQ:reply,id=…]`` code or a
    ``reply`` segment; ``None`` when it replies to none."""
    if isinstance(raw, str):
        return ts.cq_reply_id(raw)
    for segment in _segments(raw):
        data = segment.get("data")
        if segment.get("type") == "reply" and isinstance(data, dict):
            found = str(data.get("id") or "").strip()
            if found:
                return found
    return None


def _raw_text(message: ChatMessage) -> str:
    if isinstance(message.raw, str):
        return message.raw
    return "".join(
        f"[CQ:{segment.get('type')}]"
        for segment in _segments(message.raw)
        if segment.get("type") in ("face", "mface", "sface", "bface")
    )


#: The part of a message routing reads.
ROUTING_TEXT_CHARS = 4000


@attrs.frozen(kw_only=True)
class MessageSignals:
    """Facts about the current message, for the routing rules (``docs/routing.md``).

    :param text: the focus text: the bot's @-mentions and CQ codes removed, trimmed.
    :param addressed: @-mentions the bot, replies to it, calls it by name (``小织，…``,
        ``晚安小织``, ``小织在吗``), is flagged addressed, or is private.
    :param mentioned: names the bot (@, nickname or alias anywhere in the text).
    :param follow_up: continues an exchange with the bot (follow-up trigger or a reply to it).
    :param follow_up_call: the trigger is ``followup`` and the bot spoke in the conversation
        within ``[routing] follow_up_window_s`` before the message: the bot is called, as by an
        @ (``docs/design.md#reply-necessity`` counts the follow-up trigger among the ways the bot is
        called), so the
        reply-necessity score does not hold it back.
    :param reply_to_bot: replies to one of the bot's messages.
    :param bystander: @-mentions someone else and neither addresses nor names the bot.
    :param shut_up: asks the bot to be quiet, directed at the bot.
    :param back_and_forth: the sender and the bot were just talking.
    :param reply_to_candidate: replies to one of the group's quote candidates.
    :param missing_object: an addressed request or question whose object is nowhere
        (:func:`promptweave.text.routing_words.is_bare_request`, ``is_deictic_question``, no
        reply, image or recent message to refer to): the bot should ask back.
    :param affinity: the relationship affinity with the sender, when known.
    """

    text: str
    length: int
    has_images: bool
    addressed: bool
    mentioned: bool
    follow_up: bool
    reply_to_bot: bool
    mentions_others: bool
    bystander: bool
    shut_up: bool
    face_only: bool
    noise: bool
    incomplete: bool
    spam: bool
    short_reaction: bool
    request: bool
    obligation: bool
    low_value_social: bool
    short_social: bool
    short_vent: bool
    emotion: bool
    back_and_forth: bool
    reply_to_candidate: bool
    missing_object: bool
    affinity: float | None
    follow_up_call: bool = False

    @classmethod
    def read(
        cls,
        turn: Turn,
        *,
        config: RoutingConfig,
        candidates: tuple[QuoteCandidate, ...],
        now: dt.datetime,
        state: RoutingState | None = None,
    ) -> MessageSignals:
        """Read the signals of ``turn``'s message.

        :param state: the routing state, whose log of the bot's replies tells, with the recent
            messages, whether a follow-up comes within the follow-up window.
        """
        bot = turn.bot
        # Routing reads the head of a message: what decides it is there, and word lists over a
        # megabyte of text would only cost time (the reference bot's decision input holds 4000).
        message = turn.message
        if len(message.text) > ROUTING_TEXT_CHARS:
            message = attrs.evolve(message, text=message.text[:ROUTING_TEXT_CHARS])
        self_names = tuple(filter(None, (bot.name, *bot.aliases)))
        focused = ts.focus_text(message.text, self_names)
        text = _without_call(focused, self_names)
        ids = mention_ids(message)
        written = ts.mentioned_names(message.text)
        reply_to = message.reply_to
        reply_to_bot = turn.quoted_bot_text is not None or (
            bool(reply_to)
            and any(m.id == reply_to and m.sender_id == bot.id for m in turn.recent_messages)
        )
        called = text != focused
        at_bot = bot.id in ids or any(name in self_names for name in written)
        addressed = message.addressed or turn.is_private or at_bot or reply_to_bot or called
        mentioned = at_bot or any(name in message.text for name in self_names)
        others = [i for i in ids if i != bot.id and i not in ALL_MEMBERS] + [
            name for name in written if name not in self_names and name not in ALL_MEMBERS
        ]
        recent = turn.recent_messages
        bot_spoke_lately = any(m.sender_id == bot.id for m in recent[-2:])
        low_value = ts.is_low_value_social(text, config.short_social_chars)
        request = ts.has_request_words(text)
        relationship = turn.retrieved.relationship
        signals = cls(
            text=text,
            length=len(text),
            has_images=bool(message.images),
            addressed=addressed,
            mentioned=mentioned,
            follow_up=turn.trigger is SpeakTrigger.FOLLOWUP or reply_to_bot,
            follow_up_call=turn.trigger is SpeakTrigger.FOLLOWUP
            and _bot_spoke_within(turn, state, now, config.follow_up_window_s),
            reply_to_bot=reply_to_bot,
            mentions_others=bool(others),
            bystander=bool(others) and not addressed and not mentioned,
            shut_up=ts.is_shut_up(text) and (addressed or mentioned or bot_spoke_lately),
            face_only=not message.images and _face_only(message, self_names),
            noise=ts.is_noise(text),
            incomplete=ts.is_incomplete(text),
            spam=ts.is_spam_text(text) or _floods(turn, text),
            short_reaction=ts.is_short_reaction(text),
            request=request,
            obligation=ts.has_reply_obligation(text),
            low_value_social=low_value,
            short_social=low_value and not request,
            short_vent=ts.is_short_vent(text, config.short_social_chars),
            emotion=ts.has_emotion_words(text),
            back_and_forth=_back_and_forth(turn),
            reply_to_candidate=message.reply_to is not None
            and any(c.message_id == message.reply_to and not c.is_current for c in candidates),
            missing_object=addressed
            and (ts.is_bare_request(text) or ts.is_deictic_question(text))
            and not _has_antecedent(turn, now, config.follow_up_window_s),
            affinity=None if relationship is None else relationship.affinity,
        )
        return signals


def _face_only(message: ChatMessage, self_names: tuple[str, ...]) -> bool:
    """:func:`promptweave.text.routing_words.is_face_only` of the message, its raw form read only
    when it can change the answer: a focus text is trimmed, so a non-empty one holds a character
    that answers without the raw form (a face or emoji says yes, any other character no)."""
    text = ts.focus_text(message.text, self_names, keep_cq=True)
    return ts.is_face_only(text, "" if text else _raw_text(message))


def _without_call(text: str, self_names: tuple[str, ...]) -> str:
    """The text without the bot's name when the bot is called by it: ``小织，…``, ``…小织`` at
    the end, or ``小织`` plus a few characters (``小织晚安``). Unchanged otherwise.

    A name inside a sentence (``我觉得小织说得对``, ``小织说得也太对了``) only mentions the bot.
    """
    core = ts.strip_trailing_punctuation(text)
    # Most messages neither start nor end with a name of the bot: two calls say so.
    if not (core.startswith(self_names) or core.endswith(self_names)):
        return text
    for name in sorted(self_names, key=len, reverse=True):
        if core.endswith(name) and core != name:
            return core[: -len(name)].rstrip(" ，,、")
        if core.startswith(name):
            rest = core[len(name) :]
            if rest[:1] in VOCATIVE_SEPARATORS:
                return text[len(name) :].lstrip("".join(VOCATIVE_SEPARATORS))
            if len(rest) <= VOCATIVE_TAIL_CHARS:
                return text[len(name) :]
    return text


def _floods(turn: Turn, text: str) -> bool:
    """The sender already posted the same text twice among the latest messages."""
    if len(text) < 2:
        return False
    # Collapsing whitespace never lengthens a text: a shorter one cannot match.
    size, sender = len(text), turn.message.sender_id
    same = [
        m
        for m in turn.recent_messages[-FLOOD_WINDOW:]
        if m.sender_id == sender and len(m.text) >= size and " ".join(m.text.split()) == text
    ]
    return len(same) >= 2


def _back_and_forth(turn: Turn) -> bool:
    """The bot spoke among the latest messages, answering or right after this sender."""
    window = turn.recent_messages[-EXCHANGE_WINDOW:]
    sender = turn.message.sender_id
    for index, message in enumerate(window):
        if message.sender_id != turn.bot.id:
            continue
        reply_to = message.reply_to
        if reply_to and any(
            m.id == reply_to and m.sender_id == sender for m in turn.recent_messages
        ):
            return True
        if index > 0 and window[index - 1].sender_id == sender:
            return True
    return False


def _has_antecedent(turn: Turn, now: dt.datetime, window_s: float) -> bool:
    """Something a bare ``帮我查一下`` or ``那个怎么弄`` could refer to."""
    message = turn.message
    if message.reply_to is not None or message.images or turn.quoted_bot_text:
        return True
    since = shifted(now, -window_s)
    return any(since <= m.time <= now for m in turn.recent_messages)


def _bot_spoke_within(
    turn: Turn, state: RoutingState | None, now: dt.datetime, window_s: float
) -> bool:
    """The bot's own message among the recent ones, or a reply in the routing state's log, at
    most ``window_s`` before ``now``; in a private chat, its last answer in the history."""
    since = shifted(now, -window_s)
    bot_id = turn.bot.id
    if any(m.sender_id == bot_id and since <= m.time <= now for m in turn.recent_messages):
        return True
    if turn.group_id is None:
        return bool(turn.history) and turn.history[-1].role == "assistant"
    return state is not None and state.bot_replies_since(bot_id, turn.group_id, since) > 0
