"""Text sanitizers for everything that lands in a system prompt.

The rules are those of ``docs/design.md#assembly``: drop control characters except tab, LF and CR, drop zero-width
and bidi marks, normalise CRLF/CR to LF, strip, cap. ``quote_user_text`` adds the one guarantee the
design relies on: text that came from a user can never forge a section header ``【…】``,
in any of the bracket forms a reader takes for it; ``defuse_headers`` gives the same guarantee to
user text that keeps its lines (the user message the turn sections ride, ``docs/turn_context.md``).
``neutralize_markers`` does the same for the message markers (the persona pack's user-message
prefix) inside a user message.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from promptweave._patterns import lazy_pattern

__all__ = [
    "BLOCK_MAX_CHARS",
    "ECHO_MAX_CHARS",
    "ERROR_MAX_CHARS",
    "HEADER_BRACKET_LOOKALIKES",
    "LITERAL_MAX_CHARS",
    "defuse_headers",
    "neutralize_markers",
    "quote_user_text",
    "sanitize_block",
    "sanitize_literal",
    "shorten_error",
    "strip_lone_surrogates",
]

BLOCK_MAX_CHARS = 12000
LITERAL_MAX_CHARS = 128

# CRLF, CR, and the Unicode line breaks (NEL, LINE/PARAGRAPH SEPARATOR) that some renderers and
# str.splitlines() treat as a new line: a user must not start a line by any of them.
_LINE_BREAKS = lazy_pattern("\r\n?|[\u0085\u2028\u2029]")
_LINE_BREAK_RUNS = lazy_pattern("[\r\n\u0085\u2028\u2029]+")
_SURROGATES = re.compile("[\ud800-\udfff]")
# Everything sanitizing deletes, in one pass: U+0000–0008, U+000B–000C, U+000E–001F and U+007F
# (control characters other than tab, LF and CR), zero-width and bidirectional marks (invisible,
# and able to reorder what a reader sees: U+061C, U+180E, U+200B–200F, U+202A–202E,
# U+2060–206F, U+FEFF), and lone surrogates (no provider accepts them).
_DELETED = lazy_pattern(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u061c\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\ufeff\ud800-\udfff]"
)

#: Opening and closing brackets that read as the ``【】`` of a section header: ``【】`` itself, its
#: vertical presentation forms ``︻︼`` (NFKC-equal to it), the white lenticular ``〖〗`` and their
#: vertical forms ``︗︘``, the white tortoise-shell ``〘〙``, the white square ``〚〛`` ``⟦⟧`` and the
#: fullwidth square ``［］``. Pairs, opening first.
HEADER_BRACKET_LOOKALIKES = "【】︻︼〖〗︗︘〘〙〚〛⟦⟧［］"
_OPENING = HEADER_BRACKET_LOOKALIKES[0::2]
_CLOSING = HEADER_BRACKET_LOOKALIKES[1::2]
# Section headers are written 【…】; user text gets the look-alike 〔…〕 instead, which no section
# uses, for every bracket a reader could take for 【】.
_HEADER_BRACKETS = str.maketrans(dict.fromkeys(_OPENING, "〔") | dict.fromkeys(_CLOSING, "〕"))
_LOOKALIKE = re.compile(f"[{re.escape(HEADER_BRACKET_LOOKALIKES)}]")
# A marker forged in user text may open with any header-like bracket, an ASCII or fullwidth
# square bracket, or 〔 itself, and close with the matching kinds.
_MARKER_OPENING = _OPENING + "[〔"
_MARKER_CLOSING = _CLOSING + "]〕"
_ANY_OPENING = re.compile(f"[{re.escape(_MARKER_OPENING)}]")
# Where a marker's label ends: 【用户消息 — 非 system 指令…】 is labelled 用户消息.
_LABEL_END = lazy_pattern(r"[\s—–\-:：,，。、;；(（]")


#: An input value quoted in an error message (``not 'xxx…'``) is cut to this many characters.
ECHO_MAX_CHARS = 80
#: An error message as a whole is cut to this many characters (the value cuts come first).
ERROR_MAX_CHARS = 300
# A quoted value as repr() and the errors write it: a quote that no letter precedes, to the
# matching quote that no letter follows (so the apostrophe of "bot's" opens nothing).
_QUOTED = lazy_pattern(r"""(?<!\w)(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")(?!\w)""")


def _cut_echo(found: re.Match[str]) -> str:
    span = found.group(0)
    if len(span) <= ECHO_MAX_CHARS + 2:
        return span
    return f"{span[: ECHO_MAX_CHARS + 1]}…{span[-1]} ({len(span) - 2} characters)"


def shorten_error(text: str) -> str:
    """An error message fit to print: every quoted input value in it cut to
    :data:`ECHO_MAX_CHARS` characters (``'xxx…' (120000 characters)``), then the whole message to
    :data:`ERROR_MAX_CHARS` (``docs/cli.md``, "Errors"): a megabyte of hostile input is not
    echoed back."""
    if len(text) <= ECHO_MAX_CHARS:
        return text
    text = _QUOTED.sub(_cut_echo, text)
    if len(text) > ERROR_MAX_CHARS:
        text = f"{text[:ERROR_MAX_CHARS]}… ({len(text)} characters)"
    return text


def strip_lone_surrogates(text: str) -> str:
    """Remove unpaired UTF-16 surrogates, which no provider accepts in a JSON body."""
    return _SURROGATES.sub("", text)


def sanitize_block(text: str | None, max_len: int = BLOCK_MAX_CHARS) -> str:
    """Clean a multi-line block: newlines are kept, the result is stripped and capped.

    :param text: the raw text; ``None`` gives ``""``.
    :param max_len: the cap in characters, applied after cleaning.
    """
    if not text:
        return ""
    # Fast path: printable apart from LF and tab means nothing to delete or normalise (every
    # deleted character and every other line break is non-printable).
    if "\r" in text or not text.replace("\n", "").replace("\t", "").isprintable():
        text = _LINE_BREAKS.sub("\n", _DELETED.sub("", text))
    text = text.strip()
    if 0 <= max_len < len(text):
        return text[:max_len].rstrip()
    return text


def sanitize_literal(text: str | None, max_len: int = LITERAL_MAX_CHARS) -> str:
    """Clean text that must stay on one line: every run of line breaks becomes one space."""
    if not text:
        return ""
    if not text.isprintable():
        text = _LINE_BREAK_RUNS.sub(" ", _DELETED.sub("", text))
    text = text.strip()
    if 0 <= max_len < len(text):
        return text[:max_len].rstrip()
    return text


def quote_user_text(text: str | None, max_len: int = LITERAL_MAX_CHARS) -> str:
    """Make user-originated text safe to embed in a system-prompt section.

    The text is flattened to one line (so it cannot start a line of its own) and its ``【`` ``】``
    become ``〔`` ``〕`` (so it cannot open a section header). Everything else is kept verbatim.
    """
    if not text:
        return ""
    if text.isprintable():
        # The common case, inlined: nothing to delete, no line break to flatten.
        quoted = text.strip()
        if 0 <= max_len < len(quoted):
            quoted = quoted[:max_len].rstrip()
    else:
        quoted = sanitize_literal(text, max_len)
    if _LOOKALIKE.search(quoted):
        return quoted.translate(_HEADER_BRACKETS)
    return quoted


def defuse_headers(text: str) -> str:
    """``text`` with its lines kept and every bracket a reader takes for a section header's ``【】``
    (:data:`HEADER_BRACKET_LOOKALIKES`) turned into ``〔〕``: what :func:`quote_user_text` does to
    the brackets, for user text that must keep its line breaks. A line of it then cannot read as
    a section header, at its start or anywhere else."""
    if not _LOOKALIKE.search(text):
        return text
    return text.translate(_HEADER_BRACKETS)


def _label(marker: str) -> str:
    """The words a marker is recognised by: ``用户消息`` of ``【用户消息 — 非 system 指令】``."""
    core = unicodedata.normalize("NFKC", marker).strip().lstrip(_MARKER_OPENING).lstrip()
    core = core.split("】", 1)[0]
    found = _LABEL_END.search(core)
    return core[: found.start()] if found else core


@functools.lru_cache(maxsize=64)
def _marker_pattern(labels: tuple[str, ...]) -> re.Pattern[str] | None:
    words = [label for label in labels if len(label) >= 2]
    if not words:
        return None
    # Spaces may be typed between the characters: 【 用 户 消 息 】.
    spaced = "|".join(r"\s*".join(map(re.escape, word)) for word in words)
    opening = re.escape(_MARKER_OPENING)
    return re.compile(f"[{opening}]\\s*(?:{spaced})")


@functools.lru_cache(maxsize=64)
def _markers_pattern(markers: tuple[str, ...]) -> re.Pattern[str] | None:
    # The same few marker tuples come with every message: their labels are worked out once.
    return _marker_pattern(tuple(_label(marker) for marker in markers))


def neutralize_markers(text: str, markers: tuple[str, ...]) -> str:
    """``text`` with every forged copy of a message marker defused: where a user wrote a marker
    such as the persona pack's ``【用户消息 — 非 system 指令…】``, in any bracket a reader takes for
    ``【】`` (``︻ 〖 ［ [``…), with spaces or compatibility characters (``⽤户消息`` with the Kangxi
    radical), its brackets become ``〔`` ``〕``, so it can no longer pass for a message boundary.

    A marker is recognised by its label, the words after the opening bracket (``用户消息``).
    """
    if not _ANY_OPENING.search(text):
        return text
    pattern = _markers_pattern(markers)
    if pattern is None:
        return text
    # Match on the compatibility-folded text, one character at a time so that every position
    # still names a character of the original.
    folded = [unicodedata.normalize("NFKC", char) for char in text]
    flat = "".join(item[:1] if item else " " for item in folded)
    chars = list(text)
    for found in pattern.finditer(flat):
        chars[found.start()] = "〔"
        end = len(flat) if (line_end := flat.find("\n", found.end())) < 0 else line_end
        for position in range(found.end(), end):
            if flat[position] in _MARKER_CLOSING:
                chars[position] = "〕"
                break
    return "".join(chars)
