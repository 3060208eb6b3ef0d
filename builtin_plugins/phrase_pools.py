"""Built-in plugin ``phrase_pools``: the canned phrases of the low-engagement exit.

``docs/design.md#low-engagement-exit``: a gentle pool, the group's own short phrases when known, an
emoji fallback, and, for messages with emotion words, a tangent pool of clean one-liners that change
the subject lightly. Every phrase is at most 12 characters with no question or exclamation mark;
offensive lines never enter a pool.
"""

from __future__ import annotations

from collections.abc import Callable

from promptweave import PhrasePool, PoolQuery, hookimpl
from promptweave.text.routing_words import is_gentle_phrase

#: Soft, all-purpose acknowledgements.
GENTLE_POOL = (
    "哈哈", "嗯嗯", "确实", "不意外", "有道理", "好家伙", "懂了", "记下了", "原来如此", "也是",
    "可以可以", "收到", "学到了", "有点东西", "稳", "好耶",
)  # fmt: skip

#: Light changes of subject for messages that carry an emotion (难绷, 破防, 麻了, 烦, 累…).
EMOTION_TANGENT_POOL = (
    "阴完了", "没绷住", "休息会", "先躺会儿", "出去走走", "喝杯奶茶压压惊", "摸鱼时间到", "今天就到这",
    "睡一觉就好了", "给你递杯水", "麻了麻了",
)  # fmt: skip

#: Always offered, whatever the message.
EMOJI_FALLBACK_POOL = ("😄😄😄", "哈哈哈哈", "（（", "（", "www")

#: At most this many of the group's own phrases are offered.
GROUP_PHRASES_MAX = 16


def group_phrases(query: PoolQuery) -> list[str]:
    """The group's own short replies, from its learned expression pairs, fit to send as is."""
    found = [reply for reply in query.learned_replies if is_gentle_phrase(reply)]
    return found[:GROUP_PHRASES_MAX]


def _calm(query: PoolQuery) -> bool:
    return not query.emotion


def _emotional(query: PoolQuery) -> bool:
    return query.emotion


@hookimpl
def register_low_engagement_pools(register: Callable[[PhrasePool], None]) -> None:
    register(PhrasePool(name="group_phrases", applies=_calm, phrases_for=group_phrases))
    register(PhrasePool(name="gentle", phrases=GENTLE_POOL, applies=_calm))
    register(PhrasePool(name="emotion_tangent", phrases=EMOTION_TANGENT_POOL, applies=_emotional))
    register(PhrasePool(name="emoji_fallback", phrases=EMOJI_FALLBACK_POOL))
