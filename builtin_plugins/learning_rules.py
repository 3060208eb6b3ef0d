"""The text rules of the built-in learners (``builtin_plugins/learners.py``), kept pure: what a
line of group talk is worth learning, what a teaching says, what a rejection blames.

Every function takes text (and word lists) and returns text or a verdict; none reads a store or
the clock, so the learners that call them repeat exactly in a replay (``docs/learning.md``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from promptweave._patterns import lazy_pattern
from promptweave.text.routing_words import (
    focus_text,
    has_url,
    is_shut_up,
    strip_trailing_punctuation,
)

__all__ = [
    "COMMAND_PREFIXES",
    "FUNCTION_CHARS",
    "NEGATIVE_WORDS",
    "OFFENSIVE_WORDS",
    "PREVIEW_CHARS",
    "QUESTION_ENDINGS",
    "TEACHING_PATTERNS",
    "blacklist_phrases",
    "clean_text",
    "compile_patterns",
    "expression_line",
    "is_command",
    "is_question",
    "longest_common_phrase",
    "lower_median",
    "named_first",
    "negative_hits",
    "score_entries",
    "strip_address",
    "teaching_fact",
    "teaching_subject",
]

#: A line starting with one of these is a command to some bot, not talk.
COMMAND_PREFIXES: tuple[str, ...] = ("/", "!", "！", ".", "#")

#: Slurs and insults: a line containing one is never learned as an expression, and in a
#: rejected reply each one shared with an ambient source is blacklisted. Matched case-folded,
#: as substrings (so only words that ordinary talk does not contain).
OFFENSIVE_WORDS: tuple[str, ...] = (
    "傻逼", "傻b", "傻比", "傻叉", "煞笔", "沙比", "妈的", "他妈", "你妈", "尼玛", "tmd", "cnm",
    "nmsl", "草泥马", "操你", "肏", "妈逼", "狗日", "狗东西", "智障", "脑残", "弱智", "废物",
    "去死", "死全家", "贱人", "贱货", "婊子", "杂种", "畜生", "人渣", "垃圾人", "滚蛋", "滚犊子",
    "低能", "神经病", "屌丝",
)  # fmt: skip

#: A member rejecting what the bot said. A shut-up word (``promptweave.text.routing_words.
#: SHUT_UP_WORDS``) alone counts only in a line that quotes the bot's reply: routing answers the
#: rest.
NEGATIVE_WORDS: tuple[str, ...] = (
    "不可以", "不行", "别这样", "下头", "别说了", "不许", "不准", "好烦你", "你好烦", "闭嘴",
    "别学", "不要学", "别乱说", "乱说", "胡说", "瞎说", "不好笑", "难听", "恶心", "过分",
    "住口", "别发了", "不要这样",
)  # fmt: skip

#: Characters removed before two texts are compared for a shared phrase: function words that
#: every sentence shares.
FUNCTION_CHARS = "的了吗呢吧啊呀哦嗯"

#: A message ending with one of these (before trailing punctuation) asks; it teaches nothing.
QUESTION_ENDINGS: tuple[str, ...] = ("吗", "么", "呢", "谁", "什么", "哪", "哪里", "几")

#: The longest preview of a reply, a reaction or a source kept in an item.
PREVIEW_CHARS = 120

#: The default ``[learning.learners.teachings] patterns``: regular expressions searched in an
#: addressed message once the bot's name is stripped from its start; one that matches makes it a
#: teaching. They cover 「记住…」「记得…」「记一下…」「以后…」「我叫X(不叫Y)」「叫我X」: a fact
#: said to the bot without a cue (「第二章是实验部分」) is talk, not a teaching.
TEACHING_PATTERNS: tuple[str, ...] = (
    r"^.{0,6}?(?:记住|记得|记一下)",
    r"^以后.",
    r"^我叫.",
    r"^叫我.",
)

_CQ = lazy_pattern(r"\[CQ:[^\[\]]*\]")
# [图片], [doge], [表情]: a bracketed mark of at most six characters.
_MARK = lazy_pattern(r"\[[^\[\]\s]{1,6}\]")
_LEAD_PUNCT = " \t\r\n,，.。:：;；、!！?？~～…-—@"
_NAME = lazy_pattern(
    r"^(?:以后)?(?:我叫|叫我)(?P<name>[^，,。！!？?\s]+?)(?:[，, ]*不叫(?P<not>\S+))?$"
)
#: 记住/记得 this far into a message ends its address (``你可要记住…``); later, it is the fact's.
_LEAD_BEFORE_RECALL = 8
_HEAD_SPLIT = lazy_pattern(r"就是|是|叫|=")


def _is_emoji(char: str) -> bool:
    return unicodedata.category(char) in ("So", "Sk") or char in ("\u200d", "\ufe0f", "\ufe0e")


def clean_text(text: str) -> str:
    """``text`` without CQ codes, bracketed marks (``[图片]``, ``[doge]``) and emoji, its
    whitespace collapsed."""
    if "[" in text:
        text = _MARK.sub(" ", _CQ.sub(" ", text))
    text = "".join(char for char in text if not _is_emoji(char))
    return " ".join(text.split())


def is_command(text: str) -> bool:
    """A line addressed to some bot's command parser: it starts with one of
    :data:`COMMAND_PREFIXES`."""
    return text.lstrip().startswith(COMMAND_PREFIXES)


def _contains(text: str, words: Iterable[str]) -> bool:
    folded = text.casefold()
    return any(word and word.casefold() in folded for word in words)


def expression_line(
    text: str, *, has_images: bool, max_chars: int, offensive_words: Sequence[str]
) -> tuple[str, str]:
    """What an expression pair may keep of one line: ``(cleaned text, "")``, or ``("",
    reason)`` when the line is not learned: ``command``, ``link``, ``image`` (only an image),
    ``face`` (only faces or codes), ``too_long`` (over ``max_chars``), ``too_short`` (under 2
    characters), ``offensive``."""
    if is_command(text) or is_command(_CQ.sub("", text)):
        return "", "command"
    if has_url(text):
        return "", "link"
    cleaned = clean_text(text)
    if not cleaned:
        return "", "image" if has_images or "[图片]" in text else "face"
    if len(cleaned) > max_chars:
        return "", "too_long"
    if len(cleaned) < 2:
        return "", "too_short"
    if _contains(cleaned, offensive_words):
        return "", "offensive"
    return cleaned, ""


def lower_median(histogram: Mapping[str, int]) -> int:
    """The lower median of the values counted in ``histogram`` (value as a string → count);
    ``0`` when it is empty."""
    counted = sorted((int(value), count) for value, count in histogram.items() if count > 0)
    total = sum(count for _value, count in counted)
    if total == 0:
        return 0
    middle = (total - 1) // 2
    seen = 0
    for value, count in counted:
        seen += count
        if seen > middle:
            return value
    return counted[-1][0]  # pragma: no cover - the loop always returns


# -- teachings -------------------------------------------------------------------------------


def strip_address(text: str, names: Sequence[str]) -> str:
    """``text`` without its CQ codes, and without the bot's names (``@name`` or ``name``) and
    punctuation at its start."""
    text = focus_text(_CQ.sub(" ", text), tuple(names)).lstrip(_LEAD_PUNCT)
    ordered = sorted((n for n in names if n), key=len, reverse=True)
    stripped = True
    while stripped:
        stripped = False
        for name in ordered:
            if text.startswith(name):
                text = text[len(name) :].lstrip(_LEAD_PUNCT)
                stripped = True
    return text


def named_first(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` starts (after CQ codes, ``@`` and punctuation) with one of the bot's
    ``names``: 「小织记住…」 is said to the bot."""
    body = _CQ.sub(" ", text).lstrip(_LEAD_PUNCT)
    return any(name and body.startswith(name) for name in names)


def compile_patterns(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """The teaching patterns, compiled (:class:`re.error` for a bad one)."""
    return tuple(re.compile(pattern) for pattern in patterns)


def is_question(text: str) -> bool:
    """Holds ``?``/``？`` anywhere, or ends (before trailing punctuation) with 吗 or another of
    :data:`QUESTION_ENDINGS`."""
    stripped = text.rstrip()
    return (
        "?" in stripped
        or "？" in stripped
        or strip_trailing_punctuation(stripped).endswith(QUESTION_ENDINGS)
    )


def teaching_fact(text: str, names: Sequence[str], patterns: Sequence[re.Pattern[str]]) -> str:
    """The fact a message addressed to the bot teaches, or ``""`` when it teaches nothing: the
    address stripped (:func:`strip_address`), it must match one of ``patterns`` and be neither a
    question nor a shut-up request; the fact is what follows 记住/记得 (when it comes within the
    first few characters), without
    leading punctuation and trailing marks, at most :data:`PREVIEW_CHARS` characters."""
    body = strip_address(text, names)
    if not body or is_question(body) or is_shut_up(body):
        return ""
    if not any(pattern.search(body) for pattern in patterns):
        return ""
    for word in ("记住", "记得", "记一下"):
        at = body.find(word)
        if 0 <= at <= _LEAD_BEFORE_RECALL:
            body = body[at + len(word) :]
            break
    fact = strip_trailing_punctuation(body.strip(_LEAD_PUNCT))
    if len(fact) < 2:
        return ""
    return fact[:PREVIEW_CHARS]


def _normalised(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum())


def teaching_subject(fact: str, teacher_id: str) -> str:
    """What a teaching is about: ``name:<teacher>`` for 我叫X / 叫我X, else the fact's head (the
    text before its first 是/叫/就是/=), or the whole fact, lower-cased without spaces and
    punctuation. A later teaching of the same subject replaces the earlier one."""
    if _NAME.match(fact):
        return f"name:{teacher_id}"
    parts = _HEAD_SPLIT.split(fact, maxsplit=1)
    head = _normalised(parts[0]) if len(parts) == 2 else ""
    return head or _normalised(fact) or fact


# -- negative feedback -----------------------------------------------------------------------


def negative_hits(text: str, words: Sequence[str]) -> tuple[list[str], bool]:
    """The negative words ``text`` contains, and whether it is only a shut-up request (every
    word found is one, or none is found but the text asks the bot to be quiet)."""
    folded = text.casefold()
    hits = [word for word in words if word and word.casefold() in folded]
    only_shut_up = all(is_shut_up(word) for word in hits) and (bool(hits) or is_shut_up(text))
    return hits, only_shut_up


def score_entries(
    sources: Sequence[Mapping[str, Any]], scores: Mapping[str, float], *, per_type: int
) -> list[dict[str, Any]]:
    """One score entry per injected source (``{"type", "id", "delta", "preview"}``), its delta
    from ``scores`` by source type (0 for a type not listed), at most ``per_type`` of each type,
    previews cut to :data:`PREVIEW_CHARS`."""
    entries: list[dict[str, Any]] = []
    taken: dict[str, int] = {}
    for source in sources:
        kind = str(source.get("type", ""))
        if taken.get(kind, 0) >= per_type:
            continue
        taken[kind] = taken.get(kind, 0) + 1
        entries.append(
            {
                "type": kind,
                "id": str(source.get("id", "")),
                "delta": float(scores.get(kind, 0.0)),
                "preview": str(source.get("preview", ""))[:PREVIEW_CHARS],
            }
        )
    return entries


def _bare(text: str) -> str:
    return "".join(
        char
        for char in text
        if char not in FUNCTION_CHARS
        and not char.isspace()
        and not unicodedata.category(char).startswith(("P", "S"))
    )


def longest_common_phrase(reply: str, preview: str, *, minimum: int = 2) -> str:
    """The longest substring shared by ``reply[:120]`` and ``preview`` once function words
    (:data:`FUNCTION_CHARS`), punctuation, symbols and spaces are removed from both; the first
    in ``reply`` of equal length; ``""`` when shorter than ``minimum``."""
    a, b = _bare(reply[:PREVIEW_CHARS]), _bare(preview[:PREVIEW_CHARS])
    best_len, best_end = 0, 0
    previous = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        current = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                current[j] = previous[j - 1] + 1
                if current[j] > best_len:
                    best_len, best_end = current[j], i
        previous = current
    return a[best_end - best_len : best_end] if best_len >= minimum else ""


def blacklist_phrases(
    reply: str,
    sources: Sequence[Mapping[str, Any]],
    risk_words: Sequence[str],
    *,
    limit: int,
) -> list[str]:
    """The phrases one rejected reply blacklists: for each ambient source in order, every risk
    word found in both the reply and the source's preview, then the longest phrase they share
    (:func:`longest_common_phrase`); each once, at most ``limit``. Other source types blacklist
    nothing."""
    phrases: list[str] = []
    folded_reply = reply.casefold()
    for source in sources:
        if source.get("type") != "ambient":
            continue
        preview = str(source.get("preview", ""))[:PREVIEW_CHARS]
        folded_preview = preview.casefold()
        for word in risk_words:
            folded = word.casefold()
            if folded and folded in folded_reply and folded in folded_preview:
                phrases.append(word)
        shared = longest_common_phrase(reply, preview)
        if shared:
            phrases.append(shared)
    return list(dict.fromkeys(phrases))[:limit]
