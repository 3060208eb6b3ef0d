"""The reply contract: read the model's raw answer into bubbles, a sticker intent, or silence.

Section ``reply_shape`` (``【回复形状与输出契约】``) tells the model: only the dialogue itself, one
bubble a line, no JSON, code blocks, stage directions or Markdown; an optional final ``[表情：…]``
line that is not sent; ``PASS`` alone when it should not reply. Models break each of these rules
now and then, so the reader enforces them (``docs/delivery.md``): it unwraps and strips what the
contract forbids, holds the bubbles to the shape, and sends nothing that repeats the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from typing import Any

from promptweave.delivery.outgoing import ModelAnswer
from promptweave.items import ReplyShape
from promptweave.text.markup import BLOCKQUOTE, BULLET, HEADING, RULE

__all__ = [
    "LEAK_RUN_CHARS",
    "MAX_ANSWER_CHARS",
    "QUOTABLE_HEADERS",
    "STICKER_MODES",
    "read_model_answer_default",
]

#: A run of this many characters (whitespace ignored) copied from the system prompt is a leak.
LEAK_RUN_CHARS = 24
#: The sections whose text the model may quote (``docs/sections.md``: learned expressions, behaviour
#: strategies, the four memory blocks, knowledge, relationship notes, person facts, old topics,
#: the group timeline and the quoted bot text, the current time, tool results), by a name their
#: header contains. Answering from a memory or a tool result word for word is grounding, not a
#: leak; the headers themselves still count as one.
QUOTABLE_HEADERS = (
    "群表达",
    "接话参考",
    "接话复盘",
    "用户明确教导",
    "已确认群事件",
    "相关 IP 知识",
    "相关群内记忆",
    "相关知识参考",
    "关系备注",
    "稳定偏好",
    "相关旧话题",
    "刚才的群聊",
    "刚才说",
    "当前时间",
    "工具上下文",
)
#: A copied run counts only with this many distinct characters ("哈哈哈…" is no leak).
_LEAK_RUN_DISTINCT = 8
#: Text past this length is not read (no chat answer is longer; a runaway generation is).
MAX_ANSWER_CHARS = 16000
STICKER_MODES = ("face", "drop")

# Control characters other than tab and LF, bidi overrides, zero-width space, BOM and lone
# surrogates. The zero-width joiner stays: it holds compound emoji together.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\u200b\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_LINE_BREAKS = re.compile("\r\n?|[\u0085\u2028\u2029]")
_WHITESPACE = re.compile(r"\s+")

_PASS = re.compile(r"^[\W_]*pass[\W_]*$", re.IGNORECASE)
_WHOLE_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")
# The JSON fields a model puts its reply in, most specific first.
_JSON_TEXT_KEYS = (
    "reply",
    "replies",
    "content",
    "text",
    "messages",
    "message",
    "bubbles",
    "answer",
    "response",
    "output",
)
_JSON_ACTION_KEYS = ("action", "decision")
_JSON_STICKER_KEYS = ("sticker", "表情")

# The intent is short and holds no bracket, so an unclosed marker fails fast.
_STICKER = re.compile(r"[\[［【]\s*表情\s*[：:]([^\[\]［］【】\n]{0,32})[\]］】]")

_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))+\)")
_BOLD = re.compile(r"\*\*(?=\S)(.{1,200}?)(?<=\S)\*\*|__(?=\S)(.{1,200}?)(?<=\S)__")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
# ``*x*`` may sit inside a word (CJK text has no spaces); ``_x_`` only between non-word characters.
_ITALIC = re.compile(
    r"(?<!\*)\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?!\*)|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)

# What a stage direction may contain: words (CJK or Latin) and light punctuation, never the
# symbols of a kaomoji such as (´・ω・`) or the digits of a real aside such as (UTC+8).
_ACTION = r"[\u4e00-\u9fffA-Za-z][\u4e00-\u9fffA-Za-z\s，,、·…。.!！~～?？：:；;'-]*"
_STAGE_LINE = re.compile(
    rf"^(?=.{{3,26}}$)(?:[（(]\s*{_ACTION}\s*[）)]|\*\s*{_ACTION}\s*\*|【\s*{_ACTION}\s*】)$"
)
_STAGE_LEADING = re.compile(
    r"^(?:[（(]\s*(?=.{1,12}[）)])"
    + _ACTION
    + r"\s*[）)]|\*(?=.{1,20}\*)"
    + _ACTION
    + r"\*|【(?=.{1,12}】)"
    + _ACTION
    + r"】)\s*(?=\S)"
)
_STAGE_TRAILING = re.compile(
    r"(?<=\S)\s*(?:[（(](?=.{1,8}[）)]\s*$)"
    + _ACTION
    + r"[）)]|\*(?=.{1,20}\*\s*$)"
    + _ACTION
    + r"\*|【(?=.{1,12}】\s*$)"
    + _ACTION
    + r"】)\s*$"
)

# A first line announcing the answer ("好的！以下是我的回复：", "Sure! Here's my answer:").
_PREAMBLE = re.compile(
    r"(以下是|下面是|如下|我的回复|我的回答|以下回复|here'?s\b|here is\b|below is\b|"
    r"my (reply|answer|response)\b)",
    re.IGNORECASE,
)
_ANSWER_LABEL = re.compile(r"^(回复|回答|答复|reply|answer|response)\s*[:：]\s*", re.IGNORECASE)

_HEADER_TOKEN = re.compile(r"^\s*(【[^】\n]{1,60}】)", re.MULTILINE)
#: The user-message marker line of the default persona pack (``【用户消息 — …】``).
_DEFAULT_USER_MARKER = re.compile(r"【用户消息[^】\n]*】")

_SENTENCE_ENDS = "。！？!?…~～"
_CLAUSE_BREAKS = "，,；;、：: "
_FULL_WIDTH_PUNCTUATION = "。！？，、；：…～）」』"


def read_model_answer_default(
    text: str,
    shape: ReplyShape,
    *,
    system_prompt: str = "",
    sticker_mode: str = "face",
    user_marker: str = "",
    quotable_headers: Collection[str] = QUOTABLE_HEADERS,
) -> ModelAnswer:
    """Read a model's raw answer by the contract of section ``reply_shape``.

    In order: a ``PASS`` alone means silence; an answer that repeats the prompt (a section header
    of ``system_prompt``, a run of :data:`LEAK_RUN_CHARS` characters of it, or the user-message
    marker) is not sent; an answer wrapped in a code fence or a JSON object is unwrapped; Markdown,
    fence lines, stage directions and an announcing first line are removed; ``[表情：…]`` lines come
    out as the sticker intent (the last one); every remaining non-empty line is a bubble, the last
    ones joined when there are more than ``shape.max_bubbles``, each cut to ``shape.max_chars`` at
    a punctuation mark where one is near. Nothing left means silence.

    :param text: the model's answer, as returned.
    :param shape: this turn's reply shape.
    :param system_prompt: the instructions the model saw (the system prompt, plus any section text
        sent in the user message's sidecar); empty skips the header and run checks.
    :param sticker_mode: ``face`` keeps the sticker intent; ``drop`` discards it.
    :param user_marker: the persona pack's user-message marker line; the default pack's
        ``【用户消息 — …】`` is recognised without it.
    :param quotable_headers: the blocks of the prompt under a header containing one of these
        names hold material the model may quote (memories, knowledge, the timeline, tool
        results): a run copied from them is no leak. Their headers still are.
    :returns: the bubbles and sticker intent, or a silent answer with its reason.
    :raises ValueError: for an unknown ``sticker_mode``.
    :raises TypeError: when ``text`` is not a string or ``shape`` not a :class:`ReplyShape`.
    """
    if sticker_mode not in STICKER_MODES:
        raise ValueError(f"sticker_mode must be one of {STICKER_MODES}, not {sticker_mode!r}")
    if not isinstance(text, str):
        raise TypeError(f"the model's answer must be text, not {type(text).__name__}")
    if not isinstance(shape, ReplyShape):
        raise TypeError(f"shape must be a ReplyShape, not {type(shape).__name__}")
    removed: list[str] = []
    raw = _normalise(text)
    if _PASS.match(raw):
        return ModelAnswer.silence("pass")
    prompt = _normalise(system_prompt)
    headers = set(_HEADER_TOKEN.findall(prompt))
    prompt_runs = _runs(prompt, quotable_headers)
    leak = _find_leak(raw, headers, prompt_runs, user_marker)
    if leak is not None:
        return ModelAnswer.silence("leak", (f"leak:{leak}",))

    body = _unwrap(raw, removed)
    if body is None:
        return ModelAnswer.silence("empty", tuple(removed))
    if body != raw:
        # A JSON string can spell a header with escapes (\u3010…) that only unwrapping reveals.
        leak = _find_leak(body, headers, prompt_runs, user_marker)
        if leak is not None:
            return ModelAnswer.silence("leak", (*removed, f"leak:{leak}"))
    lines, stickers = _clean_lines(body, removed)
    if any(_PASS.match(line) for line in lines):
        return ModelAnswer.silence("pass", tuple(removed))
    if lines and _is_preamble(lines[0]):
        del lines[0]
        removed.append("preamble")

    sticker = stickers[-1] if stickers else None
    if sticker is not None and sticker_mode == "drop":
        removed.append("sticker_dropped")
        sticker = None
    bubbles = _fit_to_shape(lines, shape, removed)
    if not bubbles and sticker is None:
        return ModelAnswer.silence("empty", tuple(removed))
    return ModelAnswer(bubbles=tuple(bubbles), sticker=sticker, removed=tuple(removed))


def _normalise(text: str) -> str:
    return _INVISIBLE.sub("", _LINE_BREAKS.sub("\n", text[:MAX_ANSWER_CHARS])).strip()


def _compact(text: str) -> str:
    return _WHITESPACE.sub("", text)


def _runs(prompt: str, quotable_headers: Collection[str]) -> str:
    """The prompt's blocks with whitespace removed, one a line, except the blocks under a
    quotable header: a run of :data:`LEAK_RUN_CHARS` characters (whitespace removed) is copied
    from the prompt when it is a substring of this text (a run holds no line break, so none
    spans two blocks). Searched, not cut into every window of the prompt: a chat answer has few
    windows, often none, and a prompt thousands."""
    return "\n".join(
        _compact(block)
        for header, block in _blocks(prompt)
        if not (header and any(name in header for name in quotable_headers))
    )


def _blocks(prompt: str) -> list[tuple[str, str]]:
    """The prompt cut at each section header: ``(header, text)``, ``""`` before the first."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in prompt.split("\n"):
        header = _HEADER_TOKEN.match(line)
        if header is not None:
            blocks.append((header.group(1), []))
        blocks[-1][1].append(line)
    return [(header, "\n".join(lines)) for header, lines in blocks]


def _find_leak(text: str, headers: set[str], prompt_runs: str, user_marker: str) -> str | None:
    """What of the prompt ``text`` repeats, or ``None``."""
    for header in sorted(headers):
        if header in text:
            return f"header {header}"
    compact = _compact(text)
    marker = _compact(user_marker)
    if (marker and marker in compact) or _DEFAULT_USER_MARKER.search(text):
        return "user_marker"
    for i in range(len(compact) - LEAK_RUN_CHARS + 1):
        window = compact[i : i + LEAK_RUN_CHARS]
        if len(set(window)) >= _LEAK_RUN_DISTINCT and window in prompt_runs:
            return f"run {window}"
    return None


def _unwrap(text: str, removed: list[str]) -> str | None:
    """Take the answer out of a whole-answer code fence and a JSON wrapper.

    :returns: the text inside, or ``None`` when a JSON wrapper held no text at all.
    """
    fence = _WHOLE_FENCE.match(text)
    if fence is not None:
        text = fence.group(1).strip()
        removed.append("code_fence")
    if text[:1] not in ("{", "["):
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(value, dict):
        removed.append("json_wrapper")
        if any(_is_pass_value(value.get(key)) for key in _JSON_ACTION_KEYS):
            return "PASS"
        texts = _json_texts(value)
        # A sticker field becomes the contract's own marker line, read like any other.
        texts += [
            f"[表情：{sticker.strip()}]"
            for key in _JSON_STICKER_KEYS
            if isinstance(sticker := value.get(key), str) and sticker.strip()
        ]
        return "\n".join(texts) if texts else None
    if isinstance(value, list):
        texts = _json_texts(value)
        if texts:
            removed.append("json_wrapper")
            return "\n".join(texts)
    return text


def _is_pass_value(value: Any) -> bool:
    return isinstance(value, str) and _PASS.match(value) is not None


def _json_texts(value: Any, depth: int = 0) -> list[str]:
    """The reply texts inside a JSON value (strings, lists of them, objects holding them)."""
    if depth > 4:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [text for item in value for text in _json_texts(item, depth + 1)]
    if isinstance(value, dict):
        for key in _JSON_TEXT_KEYS:
            if key in value:
                return _json_texts(value[key], depth + 1)
    return []


def _clean_lines(body: str, removed: list[str]) -> tuple[list[str], list[str]]:
    """Strip each line of what the contract forbids; collect the sticker intents."""
    lines: list[str] = []
    stickers: list[str] = []
    seen = dict.fromkeys(
        ("code_fence", "sticker_line", "markdown", "stage_direction", "label"), False
    )
    for raw_line in body.split("\n"):
        if _FENCE_LINE.match(raw_line):
            seen["code_fence"] = True
            continue
        line = raw_line.strip()
        markers = list(_STICKER.finditer(line))
        if markers:
            seen["sticker_line"] = True
            stickers += [m.group(1).strip() for m in markers if m.group(1).strip()]
            line = _STICKER.sub("", line).strip()
        line = _changed(_strip_markdown, line, seen, "markdown")
        line = _changed(_strip_stage_directions, line, seen, "stage_direction")
        # Italic markers go after stage directions: a line-edge *叹气* was an action, not emphasis.
        line = _changed(_strip_italic, line, seen, "markdown")
        line = _changed(_strip_label, line, seen, "label")
        if line:
            lines.append(line)
    for name, happened in seen.items():
        if happened and name not in removed:
            removed.append(name)
    return lines, stickers


def _changed(strip: Callable[[str], str], line: str, seen: dict[str, bool], name: str) -> str:
    stripped = strip(line).strip()
    if stripped != line:
        seen[name] = True
    return stripped


def _strip_markdown(line: str) -> str:
    if RULE.match(line):
        return ""
    heading = HEADING.match(line)
    if heading is not None:
        line = heading.group(1)
    line = BLOCKQUOTE.sub("", line)
    line = BULLET.sub("", line)
    line = _LINK.sub(r"\1", line)
    line = _INLINE_CODE.sub(r"\1", line)
    return _BOLD.sub(lambda m: m.group(1) or m.group(2), line)


def _strip_label(line: str) -> str:
    return _ANSWER_LABEL.sub("", line)


def _strip_italic(line: str) -> str:
    return _ITALIC.sub(lambda m: m.group(1) or m.group(2), line)


def _strip_stage_directions(line: str) -> str:
    if _STAGE_LINE.match(line):
        return ""
    line = _STAGE_LEADING.sub("", line)
    return _STAGE_TRAILING.sub("", line)


def _is_preamble(line: str) -> bool:
    return line.rstrip().endswith((":", "：")) and _PREAMBLE.search(line) is not None


def _fit_to_shape(lines: list[str], shape: ReplyShape, removed: list[str]) -> list[str]:
    """One bubble a line: the last lines joined down to ``max_bubbles``, each cut to
    ``max_chars``."""
    bubbles = list(lines)
    if len(bubbles) > shape.max_bubbles:
        keep = shape.max_bubbles - 1
        removed.append(f"merged:{len(bubbles)}->{shape.max_bubbles}")
        bubbles = [*bubbles[:keep], _join(bubbles[keep:])]
    fitted = []
    for number, bubble in enumerate(bubbles, 1):
        if len(bubble) > shape.max_chars:
            bubble = _cut(bubble, shape.max_chars)
            removed.append(f"cut:bubble {number}")
        if bubble:
            fitted.append(bubble)
    return fitted


def _join(lines: list[str]) -> str:
    """Join lines into one bubble: directly after full-width punctuation, else with a space."""
    joined = lines[0]
    for line in lines[1:]:
        joined += line if joined[-1] in _FULL_WIDTH_PUNCTUATION else " " + line
    return joined


def _cut(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, at a sentence end or a clause break when one
    lies in the second half, else hard."""
    if limit <= 0:
        return ""
    half = limit // 2
    head = text[:limit]
    end = max(head.rfind(mark) for mark in _SENTENCE_ENDS)
    if end + 1 >= max(half, 1):
        return head[: end + 1].rstrip()
    # A clause break may sit just past the limit: cutting before it still fits.
    brk = max(text[: limit + 1].rfind(mark) for mark in _CLAUSE_BREAKS)
    if brk >= max(half, 1):
        return text[:brk].rstrip()
    return head.rstrip()
