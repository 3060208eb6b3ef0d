"""Built-in plugin ``wording_hints``: the wording hints (措辞提示) of a turn (``docs/messages.md``).

It reads the bot's recent replies in this group and the current message, and gives at most one
hint of each kind, every text from the persona pack's ``[wording_hints]`` (a text left ``""``
gives no hint of its kind):

- ``repeat`` (「同句重回」): the user says again what the bot already answered (the message, its
  whitespace removed and lower-cased, cut at 80 characters, equals an earlier message of at least
  2 characters, or contains it or is contained in it when it has 6 characters or more); the bot's
  answer then is quoted so the model says it differently. Else, the bot gave the same reply
  (compared the same way) at least twice among its last 4 replies.
- ``opening``: an opening (a family of the pack's ``opener_classes``, one of its
  ``opener_words``, else the first 3–4 characters before any punctuation) began at least 2 of the
  bot's last 4 replies.
- ``closing``: the bot's last 3 replies all ended with the same character (a question mark gets
  ``closing_question``).
- ``scene_tone``: a short message (at most ``[routing] short_social_chars``) with a greeting word,
  else with a praise word; else a turn whose social action is ``ack`` (接住/附和) and whose reply
  target is not the speaker's emotion.

The bot's replies are its messages among the group's recent messages (the store's group log),
oldest first; with none there, the assistant rows of the user's history.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import attrs

from promptweave import HistoryEntry, RenderContext, WordingHint, hookimpl, quote_user_text
from promptweave.text.persona import WordingHintTexts
from promptweave.text.rules import InjectionDetector
from promptweave.text.sanitize import sanitize_literal

#: The bot's replies read, newest last.
REPLY_WINDOW = 6
#: The replies the repeat and opening rules compare, and how often a reply or an opening must
#: occur among them.
REPEAT_WINDOW = 4
REPEAT_MIN = 2
#: The replies whose last characters the closing rule compares.
CLOSING_WINDOW = 3
#: A message key is cut at this many characters; shorter than the minimum, it is never compared.
KEY_CHARS = 80
KEY_MIN_CHARS = 2
#: From this length on, a key also matches a key it contains or is contained in.
CONTAINS_MIN_CHARS = 6
#: The longest quote of the message and of the earlier reply a repeat hint carries.
TRIGGER_CHARS = 40
PREVIOUS_CHARS = 120
#: A generic opening: the first characters before any punctuation, at least 3 of them.
GENERIC_OPENER_MIN = 3
GENERIC_OPENER_MAX = 4
OPENER_STOPS = frozenset("，,。！？!?~～…：:；;、()（）[]【】<>《》\"'“”‘’ ")
QUESTION_MARKS = frozenset("?？")


def utterance_key(text: str) -> str:
    """The key two utterances are compared by: whitespace removed, lower-cased, cut at
    :data:`KEY_CHARS`."""
    return "".join(text.split()).lower()[:KEY_CHARS]


def same_utterance(key: str, other: str) -> bool:
    """Whether ``other`` is the utterance of ``key`` again: equal, or (``key`` of
    :data:`CONTAINS_MIN_CHARS` characters or more) one contains the other."""
    if len(key) < KEY_MIN_CHARS or len(other) < KEY_MIN_CHARS:
        return False
    if key == other:
        return True
    return len(key) >= CONTAINS_MIN_CHARS and (key in other or other in key)


def bot_replies(context: RenderContext, history: Sequence[HistoryEntry]) -> list[str]:
    """The bot's last replies, oldest first: its messages in the group's recent messages, else
    the assistant rows of the history."""
    bot = context.turn.bot.id
    replies = [m.text.strip() for m in context.turn.recent_messages if m.sender_id == bot]
    if not any(replies):
        replies = [row.content.strip() for row in history if row.role == "assistant"]
    return [reply for reply in replies if reply][-REPLY_WINDOW:]


def previous_answer(context: RenderContext, history: Sequence[HistoryEntry]) -> str:
    """What the bot answered when the current message was said before: the newest match in the
    history (the first assistant row after the matching user row), else in the group's recent
    messages (the bot's message right after the matching one, or quoting it); ``""`` when none."""
    key = utterance_key(context.turn.message.text)
    if len(key) < KEY_MIN_CHARS:
        return ""
    rows = list(history)
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if row.role != "user" or not same_utterance(key, utterance_key(row.content)):
            continue
        following = rows[index + 1] if index + 1 < len(rows) else None
        if following is not None and following.role == "assistant" and following.content.strip():
            return following.content.strip()
    bot = context.turn.bot.id
    current_id = context.turn.message.id
    messages = list(context.turn.recent_messages)
    for index in range(len(messages) - 1, -1, -1):
        said = messages[index]
        if said.sender_id == bot or (current_id is not None and said.id == current_id):
            continue
        if said.time >= context.turn.message.time or not same_utterance(
            key, utterance_key(said.text)
        ):
            continue
        for later in messages[index + 1 :]:
            quoting = said.id is not None and later.reply_to == said.id
            if (
                later.sender_id == bot
                and later.text.strip()
                and (quoting or later is messages[index + 1])
            ):
                return later.text.strip()
    return ""


@functools.cache
def _injection_detector() -> InjectionDetector:
    """Built on first use: a hint quotes a member's line or the bot's reply only when it does
    not look like a prompt injection (the same line is in the history, but a hint is advice)."""
    return InjectionDetector("")


def repeat_hint(
    texts: WordingHintTexts,
    context: RenderContext,
    history: Sequence[HistoryEntry],
    replies: list[str],
) -> WordingHint | None:
    previous = previous_answer(context, history) if texts.repeat_same_message else ""
    looks_injected = _injection_detector()
    if previous and not (looks_injected(context.turn.message.text) or looks_injected(previous)):
        trigger = quote_user_text(context.turn.message.text, TRIGGER_CHARS)
        text = texts.repeat_same_message.replace("{trigger}", trigger)
        text = text.replace("{previous}", quote_user_text(previous, PREVIOUS_CHARS))
        return WordingHint(kind="repeat", text=text, reason="same_message")
    if not texts.repeat_own_reply:
        return None
    recent = replies[-REPEAT_WINDOW:]
    keys = [utterance_key(reply) for reply in recent]
    best: tuple[int, int] | None = None  # (count, index of its newest occurrence)
    for index, key in enumerate(keys):
        count = sum(1 for other in keys if same_utterance(key, other))
        if count >= REPEAT_MIN and (best is None or count >= best[0]):
            best = (count, index)
    if best is None or looks_injected(recent[best[1]]):
        return None  # a hint never quotes what looks like an injection
    count, index = best
    text = texts.repeat_own_reply.replace(
        "{previous}", quote_user_text(recent[index], PREVIOUS_CHARS)
    )
    text = text.replace("{count}", str(count))
    return WordingHint(kind="repeat", text=text, reason=f"same_reply x{count}")


def classify_opener(texts: WordingHintTexts, reply: str) -> str:
    """How ``reply`` opens: the label of an ``opener_classes`` family, one of the
    ``opener_words``, else its first 3–4 characters before any punctuation (with a Chinese
    character among them); ``""`` when none of these."""
    plain = reply.strip()
    for label, starts in texts.opener_classes.items():
        if any(start and plain.startswith(start) for start in starts):
            return label
    for word in texts.opener_words:
        if word and plain.startswith(word):
            return word
    prefix = ""
    for char in plain:
        if char in OPENER_STOPS or len(prefix) >= GENERIC_OPENER_MAX:
            break
        prefix += char
    if len(prefix) < GENERIC_OPENER_MIN or not any("\u4e00" <= c <= "\u9fff" for c in prefix):
        return ""
    return prefix


def opening_hint(texts: WordingHintTexts, replies: list[str]) -> WordingHint | None:
    if not texts.opening:
        return None
    counts = Counter(
        opener for reply in replies[-REPEAT_WINDOW:] if (opener := classify_opener(texts, reply))
    )
    sticky = [opener for opener, count in counts.items() if count >= REPEAT_MIN]
    if not sticky:
        return None
    named = "、".join(sanitize_literal(opener, 12) for opener in sticky)
    return WordingHint(
        kind="opening", text=texts.opening.replace("{openers}", named), reason=f"openers {named}"
    )


def closing_hint(texts: WordingHintTexts, replies: list[str]) -> WordingHint | None:
    recent = replies[-CLOSING_WINDOW:]
    if len(recent) < CLOSING_WINDOW:
        return None
    endings = {reply[-1] for reply in recent}
    if len(endings) != 1:
        return None
    ending = endings.pop()
    if ending in QUESTION_MARKS:
        template = texts.closing_question or texts.closing
    else:
        template = texts.closing
    if not template:
        return None
    return WordingHint(
        kind="closing",
        text=template.replace("{ending}", sanitize_literal(ending, 2)),
        reason=f"ending {ending} x{CLOSING_WINDOW}",
    )


def scene_tone(texts: WordingHintTexts, context: RenderContext) -> str:
    """The scene of the turn: ``greeting``, ``praise``, ``agreement`` or ``""``."""
    text = context.turn.message.text.strip()
    short = 0 < len(text) <= context.config.routing.short_social_chars
    if short and any(word and word in text for word in texts.greeting_words):
        return "greeting"
    if short and any(word and word in text for word in texts.praise_words):
        return "praise"
    policy = context.turn_policy
    if policy.social_action == "ack" and policy.reply_target != "emotion":
        return "agreement"
    return ""


def scene_tone_hint(texts: WordingHintTexts, context: RenderContext) -> WordingHint | None:
    scene = scene_tone(texts, context)
    text = texts.scene_tones.get(scene, "") if scene else ""
    if not text:
        return None
    return WordingHint(kind="scene_tone", text=text, reason=scene)


def _formatted(context: RenderContext) -> WordingHintTexts:
    """The pack's texts with ``{persona}`` and ``{self}`` filled, before anything is quoted into
    them."""
    texts, fill = context.persona.wording_hints, context.persona.format
    return attrs.evolve(
        texts,
        repeat_same_message=fill(texts.repeat_same_message),
        repeat_own_reply=fill(texts.repeat_own_reply),
        opening=fill(texts.opening),
        closing=fill(texts.closing),
        closing_question=fill(texts.closing_question),
        scene_tones={scene: fill(text) for scene, text in texts.scene_tones.items()},
    )


@hookimpl
def collect_wording_hints(
    context: RenderContext, history: Sequence[HistoryEntry]
) -> list[WordingHint] | None:
    """The built-in hints of the turn, in the order repeat, opening, closing, scene tone. A
    silent turn gets none."""
    if context.turn_policy.reply_target == "silent":
        return None
    texts = _formatted(context)
    replies = bot_replies(context, history)
    found = [
        repeat_hint(texts, context, history, replies),
        opening_hint(texts, replies),
        closing_hint(texts, replies),
        scene_tone_hint(texts, context),
    ]
    return [hint for hint in found if hint is not None] or None
