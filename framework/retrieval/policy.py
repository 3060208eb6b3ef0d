"""Which retrieval a turn deserves: short social turns, knowledge questions, event-like lines.

The word lists are data (tuples of strings), so a deployment can read them and the routing rules
can share them.
"""

from __future__ import annotations

from collections.abc import Iterable

from framework.decision import Decision, SocialAction
from framework.retrieval.scoring import normalize_query
from framework.turn import Turn

__all__ = [
    "EVENT_WORDS",
    "KNOWLEDGE_QUESTION_WORDS",
    "QUESTION_OR_REQUEST_WORDS",
    "SHORT_SOCIAL_MAX_CHARS",
    "SOCIAL_ONLY_ACTIONS",
    "allows_persistent_memory",
    "has_question_or_request",
    "looks_like_knowledge_question",
    "reads_as_event",
]

#: A turn this short with no question or request is a short social turn (seed 004, 短社交话).
SHORT_SOCIAL_MAX_CHARS = 24

#: Words that make a message a question or a request the bot owes an answer to.
QUESTION_OR_REQUEST_WORDS: tuple[str, ...] = (
    "?", "？", "怎么", "如何", "为什么", "为啥", "吗", "么", "能不能", "可以吗", "帮我", "回我",
    "快回", "谁", "什么", "哪里", "哪儿", "哪", "咋", "怎样", "多少", "几", "有没有", "要不要",
    "会不会", "是不是", "能否", "继续", "再说", "刚才", "等等", "等下", "补一句", "先别",
    "告诉我", "推荐",
)  # fmt: skip

#: Social moves that never need persistent memory, whatever their length.
SOCIAL_ONLY_ACTIONS: frozenset[SocialAction] = frozenset(
    {SocialAction.ACK, SocialAction.AFFECTION, SocialAction.JOKE}
)

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
    return any(word in folded for word in words)


def has_question_or_request(text: str) -> bool:
    """``True`` when the message asks something or asks for something."""
    return _contains_any(text, QUESTION_OR_REQUEST_WORDS)


def allows_persistent_memory(turn: Turn, decision: Decision | None = None) -> bool:
    """Whether this turn may read persistent memory, relationship notes, person facts and old
    topics.

    A short social turn may not (seed 004, 短社交话的上下文裁剪): a greeting, an acknowledgement, a
    joke or a sigh has nothing to look up, and recalled memories would only pull the reply off
    course. That is a turn whose decision is a purely social move (ack, affection, joke) without
    a question or request, or whose text (mentions removed) is at most
    :data:`SHORT_SOCIAL_MAX_CHARS` characters with no question or request.

    :param turn: the turn.
    :param decision: the routing decision, when known.
    :returns: ``False`` for a short social turn.
    """
    text = normalize_query(turn.message.text)
    if has_question_or_request(text):
        return True
    if decision is not None and decision.social_action in SOCIAL_ONLY_ACTIONS:
        return False
    return len(text) > SHORT_SOCIAL_MAX_CHARS


def looks_like_knowledge_question(
    text: str, words: Iterable[str] = KNOWLEDGE_QUESTION_WORDS
) -> bool:
    """``True`` when ``text`` (at least two characters) contains one of ``words``."""
    text = normalize_query(text)
    return len(text) >= 2 and _contains_any(text, words)


def reads_as_event(text: str) -> bool:
    """``True`` when a group line reads as an event: long enough and naming a time or a plan."""
    return len(text.strip()) >= EVENT_MIN_CHARS and _contains_any(text, EVENT_WORDS)
