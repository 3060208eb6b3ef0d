"""Which retrieval a turn deserves: knowledge questions and event-like lines.

Whether a turn may read persistent memory at all is the routing decision's memory policy
(:func:`promptweave.decision.allows_persistent_memory`).

The word lists are data (tuples of strings), so a deployment can read them and the routing rules
can share them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from promptweave.text.scoring import normalize_query

__all__ = [
    "EVENT_WORDS",
    "KNOWLEDGE_QUESTION_WORDS",
    "looks_like_knowledge_question",
    "reads_as_event",
]

#: Words that make a message look like a question the knowledge documents may answer.
KNOWLEDGE_QUESTION_WORDS: tuple[str, ...] = (
    "怎么", "如何", "怎样", "什么是", "是什么", "啥是", "能不能", "可以吗", "咋整", "咋弄", "help", "faq",
    "清空", "开关", "配置", "绑定", "登录", "规则", "规定", "须知", "公告", "几点", "什么时候",
    "在哪", "哪里", "地点", "地方", "流程", "教程", "收费", "报名",
)  # fmt: skip

#: Words that make a recent group line read as an event (a plan, a change, a date).
EVENT_WORDS: tuple[str, ...] = (
    "今天", "明天", "后天", "今晚", "明晚", "周末", "下周", "周一", "周二", "周三", "周四",
    "周五", "周六", "周日", "点", "号", "约", "聚", "活动", "开会", "比赛", "考试", "上线",
    "发布", "生日", "搬家", "换到", "改到", "改成", "取消", "推迟", "提前", "报名", "集合",
    "订", "定了", "通知", "决定",
)  # fmt: skip

#: Shorter lines rarely carry an event worth remembering.
EVENT_MIN_CHARS = 6


def _contains_any(text: str, words: Iterable[str]) -> bool:
    folded = text.casefold()
    if isinstance(words, tuple):
        return words != () and _any_of(words).search(folded) is not None
    return any(word in folded for word in words)


@functools.lru_cache(maxsize=64)
def _any_of(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern finding any of ``words`` (a list given every turn is compiled once): a scan
    of the text instead of one per word."""
    return re.compile("|".join(map(re.escape, words)))


def looks_like_knowledge_question(
    text: str, words: Iterable[str] = KNOWLEDGE_QUESTION_WORDS
) -> bool:
    """``True`` when ``text`` (at least two characters) contains one of ``words``."""
    text = normalize_query(text)
    return len(text) >= 2 and _contains_any(text, words)


_EVENT_WORD = re.compile("|".join(re.escape(word.casefold()) for word in EVENT_WORDS))


def reads_as_event(text: str) -> bool:
    """``True`` when a group line reads as an event: long enough and naming a time or a plan."""
    return len(text.strip()) >= EVENT_MIN_CHARS and bool(_EVENT_WORD.search(text.casefold()))
