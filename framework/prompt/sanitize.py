"""Text sanitizers for everything that lands in a system prompt.

The rules are those of ``docs/design.md#assembly``: drop control characters except tab, LF and CR,
drop zero-width and bidi marks, normalise CRLF/CR to LF, strip, cap. ``quote_user_text`` adds the
one guarantee the design relies on: text that came from a user can never forge a section header
``【…】``.
"""

from __future__ import annotations

import re

__all__ = [
    "BLOCK_MAX_CHARS",
    "LITERAL_MAX_CHARS",
    "quote_user_text",
    "sanitize_block",
    "sanitize_literal",
    "strip_lone_surrogates",
]

BLOCK_MAX_CHARS = 12000
LITERAL_MAX_CHARS = 128

# CRLF, CR, and the Unicode line breaks (NEL, LINE/PARAGRAPH SEPARATOR) that some renderers and
# str.splitlines() treat as a new line: a user must not start a line by any of them.
_LINE_BREAKS = re.compile("\r\n?|[\u0085\u2028\u2029]")
_LINE_BREAK_RUNS = re.compile("[\r\n\u0085\u2028\u2029]+")
_SURROGATES = re.compile("[\ud800-\udfff]")
# Everything sanitizing deletes, in one pass: U+0000–0008, U+000B–000C, U+000E–001F and U+007F
# (control characters other than tab, LF and CR), zero-width and bidirectional marks (invisible,
# and able to reorder what a reader sees: U+061C, U+180E, U+200B–200F, U+202A–202E,
# U+2060–206F, U+FEFF), and lone surrogates (no provider accepts them).
_DELETED = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u061c\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\ufeff\ud800-\udfff]"
)

# Section headers are written 【…】; user text gets the look-alike 〔…〕 instead, which no section uses.
_HEADER_BRACKETS = str.maketrans({"【": "〔", "】": "〕"})


def _cut(text: str, max_len: int) -> str:
    if max_len >= 0 and len(text) > max_len:
        return text[:max_len].rstrip()
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
    return _cut(text.strip(), max_len)


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
    if "【" in quoted or "】" in quoted:
        return quoted.translate(_HEADER_BRACKETS)
    return quoted
