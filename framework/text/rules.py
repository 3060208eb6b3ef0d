"""Word lists and patterns the message sequence and the timeline apply to user text.

They are data, kept here in one place so a deployment can read, test and extend them: the
prompt-injection patterns (Chinese and English) that add the "ignore instructions above" line to a
user message, and the recognition questions that keep history images away from the current image.
Whether a turn is a short social remark is routing's call (``promptweave.text.routing_words``).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from promptweave.text.sanitize import sanitize_literal

__all__ = [
    "IMAGE_MARK",
    "INJECTION_PATTERNS",
    "RECOGNITION_QUESTION_WORDS",
    "InjectionDetector",
    "first_chars",
    "is_recognition_question",
]

#: Regular expressions (case-insensitive) of likely prompt injection. ``{persona}`` stands for the
#: persona's name, so "你现在是小织" is not an injection but "你现在是猫娘" is
#: (docs/design.md#the-message-sequence).
INJECTION_PATTERNS: tuple[str, ...] = (
    r"ignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|preceding)\s+"
    r"(?:instructions?|prompts?|rules?|messages?)",
    r"disregard\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|system)\b",
    r"forget\s+(?:all\s+)?(?:your|the)\s+(?:instructions?|rules?|prompt|persona)",
    r"\byou\s+are\s+now\b",
    r"\b(?:what|which)\s+(?:llm\s+|ai\s+|language\s+)?model\s+(?:are\s+you|is\s+this)",
    r"\byour\s+(?:underlying\s+)?model\b",
    r"(?:reveal|print|show|repeat|output|dump)\s+(?:me\s+)?(?:your|the)\s+"
    r"(?:system\s+prompt|instructions|initial\s+prompt)",
    r"\bsystem\s+prompt\b",
    r"\bdeveloper\s+mode\b",
    r"\bjailbreak",
    r"\bDAN\s+mode\b",
    r"忽略(?:掉)?(?:以上|上面|之前|前面|先前|所有|全部)(?:的|所有的)?(?:规则|指令|设定|提示|要求|内容)",
    r"无视(?:掉)?(?:系统|以上|上面|之前|前面|所有)(?:的)?(?:提示|规则|指令|设定)",
    r"切换(?:你的)?(?:角色|人格|身份|人设)",
    r"(?:输出|打印|复述|告诉我|显示|发我|泄露)(?:一下)?(?:你的)?(?:系统提示|提示词|system\s*prompt|初始设定)",
    r"你(?:是|用的是|背后是)(?:什么|哪个|哪家|啥)(?:大)?模型",
    r"开发者模式|调试模式|越狱|DAN\s*模式",
    r"忘(?:记|掉)(?:你的|之前的|所有的)?(?:设定|人设|规则|身份)",
    r"(?:你现在是|从现在起你是|扮演)(?!{persona})",
)

#: Questions about what an image shows; when the current message carries an image and asks one,
#: history images are not sent, so the model looks at the current image (docs/design.md#images).
RECOGNITION_QUESTION_WORDS: tuple[str, ...] = (
    "这是谁",
    "这是什么",
    "这是啥",
    "这啥",
    "这谁",
    "是谁啊",
    "谁啊这",
    "啥梗",
    "什么梗",
    "哪个梗",
    "出自哪",
    "出处",
    "哪部",
    "叫什么名字",
    "认识吗",
    "识别一下",
    "认一下",
    "图里是",
    "图上是",
)

#: How an image is shown wherever text stands for it: timeline lines, messages, summaries.
IMAGE_MARK = "[图片]"

INJECTION_SCAN_CHARS = 512


class InjectionDetector:
    """Tells whether user text looks like a prompt injection.

    :param persona_name: the persona's name, filled into ``{persona}`` of the patterns.
    :param patterns: the regular expressions; :data:`INJECTION_PATTERNS` by default.
    """

    def __init__(self, persona_name: str, patterns: Iterable[str] = INJECTION_PATTERNS) -> None:
        self.persona_name = persona_name
        self.patterns = tuple(patterns)

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """The patterns as one expression, compiled on first use: compiling it takes longer than
        a whole turn, and a detector built for text that never comes (a hint with nothing to
        quote) need not pay it (``docs/performance.md#start-up``)."""
        # "(?!{persona})" exempts the persona's own name; with no name there is nothing to exempt
        # (an empty lookahead would never match and hide every role switch).
        name = re.escape(self.persona_name)
        exempt = f"(?!{name})" if name else ""
        # One alternation scans the text once instead of once per pattern.
        alternation = "|".join(
            f"(?:{pattern.replace('(?!{persona})', exempt).replace('{persona}', name)})"
            for pattern in self.patterns
        )
        # A match can only start at a few characters ("i" of "ignore", "忽" of "忽略", ...); a
        # lookahead on them lets the engine pass every other position without trying each
        # alternative there, about ten times faster on ordinary chat text.
        starts = first_chars(alternation, re.IGNORECASE)
        if starts:
            members = "".join(re.escape(char) for char in sorted(starts))
            alternation = f"(?=[{members}])(?:{alternation})"
        return re.compile(alternation, re.IGNORECASE)

    def __call__(self, text: str) -> bool:
        """``True`` when the first 512 characters of ``text`` (on one line) match a pattern."""
        return self.pattern.search(sanitize_literal(text, INJECTION_SCAN_CHARS)) is not None


#: Ranges wider than this in a leading character class give up the first-character analysis.
_MAX_RANGE = 512


def first_chars(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """The characters a match of ``pattern`` can start with, or ``None`` when that cannot be told
    (a leading ``\\d``, ``.``, a negated class, a pattern that can match the empty string, ...).

    Zero-width assertions (``\\b``, lookaheads) are passed over, so the set may be larger than
    needed but never smaller. Under ``re.IGNORECASE`` the set holds the characters as written;
    a class built from it must be compiled with the same flag.
    """
    try:
        # The standard library's own pattern parser, the one re.compile uses.
        parser = importlib.import_module("re._parser")
        constants = importlib.import_module("re._constants")
        parsed = parser.parse(pattern, flags)
    except (ImportError, re.error):
        return None
    found, nullable = _Starts(constants).sequence(list(parsed))
    if found is None or nullable or not found:
        return None
    return frozenset(found)


class _Starts:
    """First-character analysis over the parse tree of :mod:`re`'s parser."""

    def __init__(self, constants: Any) -> None:
        self.c = constants
        self.zero_width = (constants.AT, constants.ASSERT, constants.ASSERT_NOT)
        self.repeats = tuple(
            getattr(constants, name)
            for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
            if hasattr(constants, name)
        )

    def sequence(self, items: Sequence[tuple[Any, Any]]) -> tuple[set[str] | None, bool]:
        """``(first characters, can match empty)`` of a sequence of parsed items."""
        found: set[str] = set()
        for op, av in items:
            if op in self.zero_width:
                continue
            chars, nullable = self.item(op, av)
            if chars is None:
                return None, False
            found |= chars
            if not nullable:
                return found, False
        return found, True

    def item(self, op: Any, av: Any) -> tuple[set[str] | None, bool]:
        c = self.c
        if op is c.LITERAL:
            return {chr(av)}, False
        if op is c.IN:
            chars: set[str] = set()
            for kind, value in av:
                if kind is c.LITERAL:
                    chars.add(chr(value))
                elif kind is c.RANGE and value[1] - value[0] < _MAX_RANGE:
                    chars.update(map(chr, range(value[0], value[1] + 1)))
                else:  # a negation or a category such as \s
                    return None, False
            return chars, False
        if op is c.BRANCH:
            union: set[str] = set()
            any_nullable = False
            for branch in av[1]:
                branch_chars, nullable = self.sequence(branch)
                if branch_chars is None:
                    return None, False
                union |= branch_chars
                any_nullable = any_nullable or nullable
            return union, any_nullable
        if op is c.SUBPATTERN:
            return self.sequence(av[-1])
        if op in self.repeats:
            low, _high, inner = av
            chars_inner, nullable = self.sequence(inner)
            return chars_inner, nullable or low == 0
        if op is getattr(c, "ATOMIC_GROUP", None):
            return self.sequence(av)
        return None, False  # ANY, NOT_LITERAL, GROUPREF, conditionals: anything may start a match


def is_recognition_question(text: str) -> bool:
    """``True`` when ``text`` asks what or who something (an image) is."""
    return any(word in text for word in RECOGNITION_QUESTION_WORDS)
