"""Reading the Markdown pages the way GitHub renders them: prose lines, headings and anchors."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ROOT", "anchors", "headings", "prose_lines", "slug"]

ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> Iterator[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield line


def headings(path: Path) -> list[str]:
    """The text of every heading of the page at ``path``, in order."""
    return [
        match.group(2)
        for line in prose_lines(path.read_text(encoding="utf-8"))
        if (match := _HEADING.match(line))
    ]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    kept = "".join(
        char for char in text if char in "-_ " or unicodedata.category(char)[0] in ("L", "M", "N")
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of the page at ``path``; a repeated heading gets ``-1``, ``-2``… appended."""
    found: set[str] = set()
    for heading in headings(path):
        base = slug(heading)
        candidate, counter = base, 0
        while candidate in found:
            counter += 1
            candidate = f"{base}-{counter}"
        found.add(candidate)
    return found
