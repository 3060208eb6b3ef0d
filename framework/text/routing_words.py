"""Word lists and text predicates of routing, kept as data (``docs/design.md#the-routing-flow`` and
``docs/design.md#low-engagement-exit``).

Every predicate takes the *focus text*: the message with the bot's own @-mentions and CQ codes
removed (:func:`focus_text`). The lists are plain tuples so a plugin can read, extend or replace
them in rules of its own.
"""

from __future__ import annotations

import re
import unicodedata

from promptweave._patterns import lazy_pattern

__all__ = [
    "EMOTION_WORDS",
    "GENTLE_FORBIDDEN",
    "INCOMPLETE_TAILS",
    "OBLIGATION_WORDS",
    "REQUEST_WORDS",
    "SHORT_REACTIONS",
    "SHUT_UP_WORDS",
    "SPAM_CUES",
    "SPAM_WORDS",
    "VENT_ENDINGS",
    "cq_mentions",
    "cq_reply_id",
    "focus_text",
    "has_emotion_words",
    "has_reply_obligation",
    "has_request_words",
    "has_url",
    "is_bare_request",
    "is_deictic_question",
    "is_face_only",
    "is_gentle_phrase",
    "is_incomplete",
    "is_low_value_social",
    "is_noise",
    "is_short_reaction",
    "is_short_vent",
    "is_shut_up",
    "is_spam_text",
    "mentioned_names",
    "strip_trailing_punctuation",
]

#: A message containing any of these owes an answer (or ``?``/``？`` anywhere).
OBLIGATION_WORDS: tuple[str, ...] = (
    "怎么", "如何", "为什么", "为啥", "吗", "么", "能不能", "可以吗", "帮我", "回我", "快回",
    "谁", "什么", "哪里", "哪儿", "哪", "咋", "怎样", "多少", "几", "有没有", "要不要",
    "会不会", "是不是", "能否", "继续", "再说", "刚才", "等等", "等下", "补一句", "先别",
)  # fmt: skip

#: Words that ask the bot to do something.
REQUEST_WORDS: tuple[str, ...] = (
    "帮我", "帮忙", "麻烦", "请你", "能不能", "可不可以", "可以帮", "给我", "查一下", "查查",
    "搜一下", "推荐", "教我", "告诉我", "提醒我", "记一下", "算一下", "翻译", "讲讲",
    "说说", "介绍一下", "整理一下", "总结一下",
)  # fmt: skip

#: A short vent ends with one of these (then only punctuation, tildes or spaces).
VENT_ENDINGS: tuple[str, ...] = ("烦", "唉", "累", "难受", "没绷住", "服了", "崩溃")

#: Emotion words: a low-engagement phrase for such a message comes from the tangent pools.
EMOTION_WORDS: tuple[str, ...] = (
    "难绷", "绷", "破防", "麻了", "emo", "玉玉", "崩溃", "想死", "哭", "太惨", "无聊", "好烦",
    "烦死", "累", "心累", "焦虑", "离谱", "裂开", "烦", "气死", "要死", "好气",
)  # fmt: skip

#: Asking the bot to be quiet (only counts when the request is directed at the bot).
SHUT_UP_WORDS: tuple[str, ...] = (
    "闭嘴", "别说话", "别说了", "别吵", "安静点", "安静一点", "别插嘴", "少说两句", "住口",
    "别刷屏", "别回了", "不要说话", "退下", "shut up",
)  # fmt: skip

#: A message ending with one of these trails off: the speaker is not done yet.
INCOMPLETE_TAILS: tuple[str, ...] = (
    "你是", "我是", "那你", "然后", "所以", "因为", "但是", "而且", "就是", "如果", "还有",
)  # fmt: skip

#: ``我的``/``就是``-style fragments: a pronoun or connector plus 是/的/了 and nothing else.
_FRAGMENT_HEADS: tuple[str, ...] = (
    "我", "你", "他", "她", "它", "这", "那", "就", "还", "也", "都", "我们", "你们", "他们",
    "这就", "那就", "要是", "可是", "只是", "但是", "还是", "于是",
)  # fmt: skip

#: High-frequency short reactions (after normalising, see :func:`is_short_reaction`).
SHORT_REACTIONS: tuple[str, ...] = (
    "草", "笑死", "笑死我了", "确实", "确实确实", "好家伙", "牛", "牛啊", "牛逼", "nb", "tql",
    "绷不住了", "蚌埠住了", "啊这", "真的假的", "xswl", "太真实了", "懂了", "收到", "好的",
    "ok", "可以", "对", "对对", "对对对", "嗯", "嗯嗯", "是的", "离谱", "好耶", "乐", "典",
    "绝了", "无语", "6", "真实", "有道理", "6啊", "好活", "寄", "寄了", "针不戳",
)  # fmt: skip

#: Advertising and scam phrasing: any one of these makes a message spam. Matched in lower case.
#: Each entry is a phrase that ordinary group talk does not use (``tests/test_routing_spam.py``
#: holds both the adverts it must catch and the chat it must leave alone); a word that is only
#: suspicious next to a link belongs in :data:`SPAM_CUES`.
SPAM_WORDS: tuple[str, ...] = (
    # contact me elsewhere
    "加微信", "加v", "加vx", "加wx", "v信", "薇信", "威信", "加我好友领", "加q领", "私聊我领",
    "私聊我发", "私我领", "私聊领", "看我主页", "点我头像",
    # join a group for a reward
    "加群领", "进群领", "扫码进群", "扫码领", "扫码", "福利群", "红包群", "拉你进群",
    # free things
    "免费领取", "免费领", "领取免费", "免费会员", "免费送", "0元购", "零元购", "点击领取",
    "优惠券", "返利", "返现",
    # easy money
    "兼职日结", "日结", "刷单", "躺赚", "网赚", "稳赚", "日入过", "月入过万", "带你赚钱",
    "代理招募", "招代理", "代刷", "刷粉", "引流",
    # links and loans
    "点击链接", "代开发票", "低息贷款", "博彩", "菠菜",
)  # fmt: skip

#: Words of an advert that ordinary talk uses too: they make a message spam only next to a link
#: (:func:`has_url`). ``这个链接打不开 https://…`` is not spam; ``会员限时领 https://…`` is.
SPAM_CUES: tuple[str, ...] = (
    "免费", "领取", "领", "会员", "私聊", "加群", "进群", "福利", "优惠", "红包", "赚",
    "兼职", "代理", "注册", "邀请码", "限时", "秒杀", "折扣", "充值", "下载", "名额",
)  # fmt: skip

#: Characters a gentle canned phrase may not contain anywhere.
GENTLE_FORBIDDEN: tuple[str, ...] = ("？", "?", "！", "!", "。", ".", "[CQ:")

# "[^\[\]]" keeps each match from scanning past the next "[": linear even on "[CQ:[CQ:…".
_CQ = re.compile(r"\[CQ:[^\[\]]*\]")
_CQ_AT = re.compile(r"\[CQ:at,qq=([^,\[\]]+)[^\[\]]*\]")
_CQ_REPLY = re.compile(r"\[CQ:reply,(?:[^\[\]]*?,)?id=([^,\[\]]+)[^\[\]]*\]")
_CQ_FACE = lazy_pattern(r"\[CQ:(?:face|mface|sface|bface)[^\[\]]*\]")
_BRACKET_FACE = lazy_pattern(r"\[(?!图片\])[^\[\]\s]{1,6}\]")
_TEXT_MENTION = re.compile(r"@([^\s@，,：:。！!？?]+)")
_TAIL_MARKS = frozenset(",，。.!！?？~～…、")
_VENT = re.compile("(?:" + "|".join(map(re.escape, VENT_ENDINGS)) + r")[\s。！!？?~～…，,]*$")
_LAUGH = lazy_pattern(r"^(?:[哈h呵嘿嘻w]{2,}|2{1}3{2,}|6{1,}|六{2,}|1{1,})$")
_KEY_MASH = ("asdf", "sdfg", "dfgh", "qwer", "wert", "zxcv", "hjkl", "jkl", "uiop")
_BARE_REQUEST = re.compile(
    r"^(?:你|能|可以|麻烦)?(?:帮我|帮忙|给我|替我|帮帮我)?"
    r"(?:查|搜|找|看|翻译|算|问|弄|改|整理|总结|记|处理|安排)?"
    r"(?:一下|一下下|下|查|搜|找|看|看看)?(?:吧|呗|啊|呀|哈|嘛|好吗|行吗|可以吗)?$"
)
_BARE_REQUEST_PHRASES = ("帮个忙", "帮我个忙", "帮帮忙", "能帮我个忙吗", "帮我个忙呗")
_DEICTIC = re.compile(
    r"^(?:那个|这个|那|这|它|那玩意儿?|这玩意儿?|那件事|那东西|这东西|上次那个|刚才那个|之前那个)"
    r"(?:到底|又|该|要)?"
    r"(?:怎么弄|怎么办|怎么用|怎么搞|怎么整|咋弄|咋整|咋办|咋用|是啥|是什么|是啥意思|什么意思"
    r"|啥意思|呢|在哪|在哪儿|怎么样|行不行|好使吗|能用吗|弄好了吗|搞定了吗)$"
)
_QUESTION_PARTICLES = lazy_pattern(r"[吗呢嘛吧呀]+$")
#: One character 15 times or more in a row makes a message spam; shorter text cannot hold that.
_REPEAT = lazy_pattern(r"(.)\1{14,}")
_REPEAT_MIN_CHARS = 15
# Such a run holds two characters 7 apart at places that are multiples of 7 (15 in a row cover
# 7 consecutive starting places, one of them a multiple of 7, and the place 7 on): every 7th
# character, two equal in a row, is a cheap test the run needs, and the full scan comes after.
_REPEAT_STRIDE = 7
_PAIR = re.compile(r"(.)\1")
# A web address: a scheme, "www.", or a host under a common top-level domain. Each alternative
# is anchored on a fixed string, so the scan stays linear on long text.
_URL = re.compile(
    r"https?://|www\.|[a-z0-9-]\.(?:com|cn|net|org|top|xyz|cc|vip|me|io|ly|co|link|site|shop)\b"
)


#: The compiled alternation of each word list :func:`_contains_any` has seen, by the list's id;
#: the list itself is kept with it, so a list replaced at run time is compiled again.
_ALTERNATIONS: dict[int, tuple[tuple[str, ...], re.Pattern[str]]] = {}


def _contains_any(text: str, words: tuple[str, ...]) -> bool:
    """``any(word in text for word in words)``, as one regular-expression search (routing asks
    several word lists of every message)."""
    if not words:
        return False
    found = _ALTERNATIONS.get(id(words))
    if found is None or found[0] is not words:
        found = _ALTERNATIONS[id(words)] = (words, re.compile("|".join(map(re.escape, words))))
    return found[1].search(text) is not None


def _strip_tail(text: str) -> str:
    """``text`` without trailing whitespace and punctuation (a loop, not a ``[…]+$`` regex,
    which backtracks quadratically on long runs of punctuation)."""
    end = len(text)
    while end and (text[end - 1].isspace() or text[end - 1] in _TAIL_MARKS):
        end -= 1
    return text[:end]


def strip_trailing_punctuation(text: str) -> str:
    return _strip_tail(text)


def mentioned_names(text: str) -> tuple[str, ...]:
    """Names written as ``@name`` in the text (not CQ codes)."""
    if "@" not in text:
        return ()
    return tuple(_TEXT_MENTION.findall(_CQ.sub(" ", text)))


def cq_reply_id(raw: str) -> str | None:
    """The message id of the first ``[CQ:reply,id=…]`` code in a raw OneBot string."""
    found = _CQ_REPLY.search(raw)
    if found is None:
        return None
    return found.group(1).strip() or None


def cq_mentions(raw: str) -> tuple[str, ...]:
    """Account ids of ``[CQ:at,qq=…]`` codes in a raw OneBot string."""
    return tuple(_CQ_AT.findall(raw))


def focus_text(text: str, self_names: tuple[str, ...], *, keep_cq: bool = False) -> str:
    """The text routing reads: CQ codes (unless ``keep_cq``) and @-mentions of the bot removed,
    whitespace collapsed."""
    # Most messages hold neither a CQ code nor an "@": both substitutions are then no-ops.
    focused = text if keep_cq or "[CQ:" not in text else _CQ.sub(" ", text)
    if "@" in focused:
        for name in sorted(self_names, key=len, reverse=True):
            if name:
                focused = focused.replace(f"@{name}", " ")
    return " ".join(focused.split())


def _is_emoji(char: str) -> bool:
    category = unicodedata.category(char)
    return category in ("So", "Sk") or char in ("\u200d", "\ufe0f", "\ufe0e")


def is_face_only(text: str, raw: str = "") -> bool:
    """Only faces, stickers or emoji: ``[CQ:face…]``, ``[doge]``-style marks, emoji."""
    # Both face patterns start with "[": text without one has no face mark to remove.
    rest = _BRACKET_FACE.sub("", _CQ_FACE.sub("", text)) if "[" in text else text
    has_face = rest != text
    for char in rest:
        if char.isspace():
            continue
        if not _is_emoji(char):
            return False
        has_face = True
    # The raw message is searched last: any other character has already answered no.
    return has_face or bool(_CQ_FACE.search(raw))


def is_noise(text: str) -> bool:
    """A fragment with nothing to answer: punctuation only, a keyboard mash, one char repeated."""
    compact = "".join(text.split()).lower()
    if not compact:
        return False
    if not any(char.isalnum() for char in compact):
        return not any(_is_emoji(char) for char in compact)
    if compact.isascii() and compact.isalpha() and any(m in compact for m in _KEY_MASH):
        return True
    return (
        len(compact) >= 6
        and compact.count(compact[0]) == len(compact)
        and not _LAUGH.match(compact)
    )


def is_incomplete(text: str) -> bool:
    """An utterance that trails off (``然后``, ``因为，``) or a bare ``我是``-style fragment."""
    if "?" in text or "？" in text:
        return False
    core = _strip_tail(text)
    if not core:
        return False
    tails = tuple(INCOMPLETE_TAILS)
    # Most text ends with none of the tails: one call says so before the loop looks at each.
    if core.endswith(tails):
        for tail in tails:
            # "就是就是" agrees; "我想说的就是" trails off.
            if core.endswith(tail) and core.replace(tail, ""):
                return True
            if core == tail:
                return True
    return len(core) <= 3 and core[-1] in "是的了" and core[:-1] in _FRAGMENT_HEADS


def has_reply_obligation(text: str) -> bool:
    """A question or request the bot should not leave unanswered: a question mark, an
    :data:`OBLIGATION_WORDS` entry, or a trailing ``呢`` (``那明天呢``, ``你呢``), read as a
    question as :func:`is_gentle_phrase` reads it, except after ``的`` (``好的呢`` agrees)."""
    if "?" in text or "？" in text or _contains_any(text, OBLIGATION_WORDS):
        return True
    core = _strip_tail(text)
    return core.endswith("呢") and not core.endswith("的呢")


def has_request_words(text: str) -> bool:
    lowered = text.lower()
    return _contains_any(lowered, REQUEST_WORDS)


def is_low_value_social(text: str, max_chars: int = 24) -> bool:
    """Short talk that owes nothing: at most ``max_chars`` and no question or request."""
    stripped = text.strip()
    return 0 < len(stripped) <= max_chars and not has_reply_obligation(stripped)


def is_short_vent(text: str, max_chars: int = 24) -> bool:
    """A short sigh of frustration: ``又加班，烦``, ``唉``, ``服了~``."""
    stripped = text.strip()
    return 0 < len(stripped) <= max_chars and bool(_VENT.search(stripped))


def has_emotion_words(text: str) -> bool:
    lowered = text.lower()
    return _contains_any(lowered, EMOTION_WORDS)


def is_short_reaction(text: str) -> bool:
    """A high-frequency short reaction: ``哈哈哈``, ``草``, ``666``, ``确实``, ``绷不住了``."""
    compact = _strip_tail("".join(text.split())).lower()
    if not compact or len(compact) > 8:
        return False
    return compact in SHORT_REACTIONS or bool(_LAUGH.match(compact))


def has_url(text: str) -> bool:
    """Whether ``text`` holds a web address (``https://…``, ``www.…``, ``t.example.cn/x``)."""
    return _URL.search(text.lower()) is not None


def is_spam_text(text: str) -> bool:
    """Advertising phrasing (:data:`SPAM_WORDS`), a link next to an advert's words
    (:data:`SPAM_CUES`), or one character repeated 15 times or more."""
    lowered = text.lower()
    if _contains_any(lowered, SPAM_WORDS):
        return True
    if _URL.search(lowered) is not None and any(cue in lowered for cue in SPAM_CUES):
        return True
    return (
        len(text) >= _REPEAT_MIN_CHARS
        and _PAIR.search(text[::_REPEAT_STRIDE]) is not None
        and _REPEAT.search(text) is not None
    )


def is_shut_up(text: str) -> bool:
    lowered = text.lower()
    return _contains_any(lowered, SHUT_UP_WORDS)


def is_bare_request(text: str) -> bool:
    """A request with nothing to act on: ``帮我查一下``, ``你帮我``, ``帮个忙``."""
    core = _strip_tail(text)
    if core in _BARE_REQUEST_PHRASES:
        return True
    # The anchored pattern fails within a few characters on most text: it is tried first.
    return bool(core) and bool(_BARE_REQUEST.match(core)) and has_request_words(core)


def is_deictic_question(text: str) -> bool:
    """A question about ``那个``/``这个``/``它`` and nothing else: ``那个怎么弄``."""
    return bool(_DEICTIC.match(_strip_tail(text)))


#: Insults and swearing: a learned reply containing one never enters a phrase pool
#: (docs/design.md#low-engagement-exit, 脏样本不进池), however often the group says it.
ABUSIVE_WORDS: tuple[str, ...] = (
    "傻逼", "煞笔", "沙比", "傻b", "sb", "妈的", "他妈", "tmd", "你妈", "尼玛", "cnm", "nmsl",
    "草泥马", "操你", "滚", "智障", "脑残", "弱智", "废物", "去死", "贱", "狗东西",
)  # fmt: skip


def is_gentle_phrase(phrase: str, max_chars: int = 12) -> bool:
    """A canned phrase fit to send: short, no question or exclamation, no questioning particle,
    no insult."""
    stripped = phrase.strip()
    if not stripped or len(stripped) > max_chars:
        return False
    if any(mark in stripped for mark in GENTLE_FORBIDDEN):
        return False
    folded = stripped.casefold()
    if any(word in folded for word in ABUSIVE_WORDS):
        return False
    return not _QUESTION_PARTICLES.search(stripped)
