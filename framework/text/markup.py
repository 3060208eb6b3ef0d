"""The Markdown that makes a line start like a rule of the prompt: a heading, a bullet, a
blockquote, a horizontal rule.

The reply contract strips it from the model's answers (``docs/delivery.md``); the same patterns
strip it from the start of stored bot text quoted where a line starts (``docs/turn_context.md``,
"Forged headers"), so neither can pose as one of the prompt's rule lines.
"""

from __future__ import annotations

import re

__all__ = ["BLOCKQUOTE", "BULLET", "HEADING", "RULE", "strip_line_markup"]

#: A heading: ``#`` or its full-width ``＃`` (what a Chinese input method types), then a space.
HEADING = re.compile(r"^\s{0,3}[#＃]{1,6}\s+(.*?)(\s+[#＃]+)?\s*$")
#: A horizontal rule (``---``, ``* * *``).
RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
#: Blockquote marks (``> ``, ``>>``).
BLOCKQUOTE = re.compile(r"^\s*(>\s?)+")
#: A list bullet or number (``- ``, ``• ``, ``1. ``).
BULLET = re.compile(r"^\s*([-*+•·]|\d{1,2}[.)])\s+")


def strip_line_markup(text: str) -> str:
    """``text`` (one line) without what would make it start like a rule bullet, a heading, a
    blockquote or a rule (``- 回复目标：…``, ``＃ 规则``, ``> …``), stripped again until none is
    left at its start: the markup a model's answer loses
    (:func:`promptweave.delivery.reply_contract.read_model_answer_default`).
    """
    line = text.strip()
    while True:
        if RULE.match(line):
            return ""
        heading = HEADING.match(line)
        stripped = heading.group(1) if heading is not None else line
        stripped = BULLET.sub("", BLOCKQUOTE.sub("", stripped)).strip()
        if stripped == line:
            return line
        line = stripped
