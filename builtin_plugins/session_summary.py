"""Built-in plugin ``session_summary``: the offline defaults of session compression.

``summarize_session`` writes an extractive summary with no LLM call: the turns are cut into clauses,
each clause is scored by how many other turns share its character pairs (the topic thread) plus a
bonus for preferences, plans and the bot's promises, and the best clauses are kept in chronological
order, labelled ``对方`` (the user) and ``你`` (the bot), within the length limit. Small talk,
fillers and instruction-like clauses are left out (``docs/design.md#long-session-compression``).
``describe_image`` keeps the ``[图片]`` placeholder. Both are ``trylast``: any plugin that answers
(an LLM summarizer, a vision describer) wins.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

from promptweave import SessionTurn, hookimpl
from promptweave._patterns import lazy_pattern
from promptweave.text.rules import IMAGE_MARK, InjectionDetector

CLAUSE_MAX_CHARS = 40
CLAUSE_MIN_CHARS = 4
SIMILAR_CLAUSE_OVERLAP = 0.5

_CLAUSE_SPLIT = lazy_pattern(r"[。！？!?；;\n]+|(?<=[，,])\s*")
_IMAGE_MARK = lazy_pattern(re.escape(IMAGE_MARK))

#: Small talk that carries no topic.
FILLERS = frozenset(
    {
        "哈哈",
        "哈哈哈",
        "哈哈哈哈",
        "嗯嗯",
        "好的",
        "好滴",
        "行吧",
        "确实",
        "笑死",
        "草",
        "www",
        "hhh",
    }
)
#: Words that mark what a user wants, plans or is (kept in a summary).
USER_CUES = (
    "喜欢",
    "不喜欢",
    "讨厌",
    "想要",
    "打算",
    "准备",
    "计划",
    "在学",
    "在做",
    "最近",
    "考试",
    "面试",
    "工作",
    "生日",
    "叫我",
    "别叫",
    "记住",
    "以后",
)
#: Words that mark what the bot promised or concluded.
BOT_CUES = ("答应", "下次", "我会", "记得", "提醒", "约好", "说好", "结论", "建议")


@functools.cache
def _built() -> tuple[re.Pattern[str], InjectionDetector]:
    """The word-character pattern and the injection detector, built on first use: a summary is
    written after a delivery, never while ``promptweave render`` starts (``docs/performance.md``)."""
    return re.compile(r"[\w\u4e00-\u9fff]"), InjectionDetector("")


def _bigrams(text: str) -> set[str]:
    word_chars = _built()[0]
    chars = [ch for ch in text if word_chars.match(ch)]
    return {a + b for a, b in itertools.pairwise(chars)}


def _similar(pairs: set[str], other: set[str]) -> bool:
    """Near-duplicate clauses (the same sentence with another number) are kept once."""
    if not pairs or not other:
        return pairs == other
    return len(pairs & other) / len(pairs | other) >= SIMILAR_CLAUSE_OVERLAP


def _clauses(content: str) -> list[str]:
    text = _IMAGE_MARK.sub("", content)
    injection = _built()[1]
    found = []
    for part in _CLAUSE_SPLIT.split(text):
        clause = part.strip(" ，,、~～…").strip()
        if len(clause) < CLAUSE_MIN_CHARS or clause in FILLERS or injection(clause):
            continue
        found.append(clause[:CLAUSE_MAX_CHARS])
    return found


def speaker_of(turn: SessionTurn) -> str:
    """How a summary names a turn's speaker: ``你`` for the bot's, ``对方`` for the user's."""
    return "你" if turn.role == "assistant" else "对方"


def extractive_summary(
    turns: Sequence[SessionTurn], previous_summary: str | None, max_chars: int
) -> str | None:
    """The summary of ``turns`` as described in this module's docstring; ``None`` when no clause
    is worth keeping."""
    lines = [(speaker_of(turn), turn.content) for turn in turns]
    return extractive_summary_of_lines(lines, previous_summary, max_chars)


def extractive_summary_of_lines(
    lines: Sequence[tuple[str, str]], previous_summary: str | None, max_chars: int
) -> str | None:
    """:func:`extractive_summary` over ``(speaker, text)`` pairs, the speaker ``你`` or
    ``对方``: what the offline learning model answers for a summary (``model_summary``)."""
    units: list[tuple[int, str, str]] = []  # (position, speaker, clause)
    for position, (speaker, content) in enumerate(lines):
        units += [(position, speaker, clause) for clause in _clauses(content)]
    frequency: Counter[str] = Counter()
    for _speaker, content in lines:
        frequency.update(_bigrams(content))
    scored = []
    for index, (position, speaker, clause) in enumerate(units):
        pairs = _bigrams(clause)
        thread = math.log1p(sum(frequency[pair] - 1 for pair in pairs) / (len(pairs) or 1))
        cues = BOT_CUES if speaker == "你" else USER_CUES
        bonus = 0.5 * sum(1 for cue in cues if cue in clause)
        recency = 0.2 * position / max(1, len(lines))
        # The user's own words carry the topic thread; the bot's lines only add promises.
        weight = 1.0 if speaker == "对方" else 0.6
        scored.append((weight * (1.0 + thread + bonus) + recency, index))
    chosen: set[int] = set()
    chosen_pairs: list[set[str]] = []
    used = 0
    carried = (previous_summary or "").strip()
    if carried:
        carried = carried[: max_chars // 3]
        used = len(carried) + 1
    for _score, index in sorted(scored, key=lambda item: (-item[0], item[1])):
        clause = units[index][2]
        pairs = _bigrams(clause)
        cost = len(clause) + 4
        if used + cost > max_chars or any(_similar(pairs, seen) for seen in chosen_pairs):
            continue
        chosen.add(index)
        chosen_pairs.append(pairs)
        used += cost
    if not chosen:
        return carried or None
    parts: list[str] = [carried] if carried else []
    last_speaker = None
    for index in sorted(chosen):
        _position, speaker, clause = units[index]
        parts.append(f"{speaker}：{clause}" if speaker != last_speaker else clause)
        last_speaker = speaker
    return "；".join(parts)[:max_chars]


@hookimpl(trylast=True)
def summarize_session(
    bot_id: str,
    group_id: str | None,
    user_id: str,
    turns: Sequence[SessionTurn],
    previous_summary: str | None,
    max_chars: int,
) -> str | None:
    return extractive_summary(turns, previous_summary, max_chars)


@hookimpl(trylast=True)
def describe_image(url: str, bot_id: str, group_id: str | None) -> str | None:
    return IMAGE_MARK
