"""Split knowledge documents (Markdown or plain text) into searchable chunks.

A chunk never crosses a heading, holds whole paragraphs where they fit (at most ``max_chars``
characters), and is labelled ``title › heading`` so the knowledge section can show where a hit
comes from.
"""

from __future__ import annotations

from collections.abc import Iterator

from promptweave._patterns import lazy_pattern
from promptweave.store.retrieval import KnowledgeChunk, KnowledgeDocument

__all__ = ["CHUNK_MAX_CHARS", "chunk_document", "markdown_title"]

#: The longest chunk, in characters; a knowledge line shows at most 400.
CHUNK_MAX_CHARS = 360

_HEADING = lazy_pattern(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = lazy_pattern(r"(?<=[。！？!?；;])")
_LINK = lazy_pattern(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = lazy_pattern(r"(\*\*|__|`)")
_LIST_MARK = lazy_pattern(r"^\s*(?:[-*+]|\d+[.)])\s+")
_QUOTE_MARK = lazy_pattern(r"^\s*>\s?")


def _clean_line(line: str) -> str:
    line = _QUOTE_MARK.sub("", line)
    line = _LINK.sub(r"\1", line)
    line = _EMPHASIS.sub("", line)
    return line.strip()


def markdown_title(text: str) -> str:
    """The first level-1 heading of a Markdown text, or ``""``."""
    for line in text.splitlines():
        found = _HEADING.match(line)
        if found and len(found.group(1)) == 1:
            return _clean_line(found.group(2))
    return ""


def _sections(text: str, title: str) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(heading, paragraphs)`` per heading; the title heading itself is not repeated."""
    heading = ""
    paragraphs: list[str] = []
    current: list[str] = []
    in_fence = False

    def close_paragraph() -> None:
        if current:
            paragraphs.append(_join_wrapped(current))
            current.clear()

    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            close_paragraph()
            in_fence = not in_fence
            continue
        if in_fence:  # code keeps its lines and its characters
            if raw.strip():
                paragraphs.append(raw.rstrip())
            continue
        found = _HEADING.match(raw)
        if found:
            close_paragraph()
            if paragraphs:
                yield heading, paragraphs
            paragraphs = []
            name = _clean_line(found.group(2))
            heading = "" if name == title else name
            continue
        line = _clean_line(raw)
        if not line:
            close_paragraph()
            continue
        if _LIST_MARK.match(raw):
            close_paragraph()
            current.append(_LIST_MARK.sub("", line))
            close_paragraph()
            continue
        current.append(line)
    close_paragraph()
    if paragraphs:
        yield heading, paragraphs


def _join_wrapped(lines: list[str]) -> str:
    """Join the lines of one wrapped paragraph: Chinese joins directly, words with a space."""
    joined = lines[0]
    for line in lines[1:]:
        space = joined[-1:].isascii() and joined[-1:].isalnum() and line[:1].isascii()
        joined += (" " if space else "") + line
    return joined


def _pieces(paragraph: str, max_chars: int) -> Iterator[str]:
    if len(paragraph) <= max_chars:
        yield paragraph
        return
    buffer = ""
    for sentence in (s for s in _SENTENCE_END.split(paragraph) if s):
        while len(sentence) > max_chars:
            if buffer:
                yield buffer
                buffer = ""
            yield sentence[:max_chars]
            sentence = sentence[max_chars:]
        if len(buffer) + len(sentence) > max_chars:
            yield buffer
            buffer = ""
        buffer += sentence
    if buffer:
        yield buffer


def chunk_document(
    document: KnowledgeDocument, max_chars: int = CHUNK_MAX_CHARS
) -> list[KnowledgeChunk]:
    """Split ``document`` into chunks of at most ``max_chars`` characters.

    The document's title is ``document.title``, else its first level-1 heading, else its source.
    """
    title = document.title.strip() or markdown_title(document.text) or document.source
    chunks: list[KnowledgeChunk] = []
    for heading, paragraphs in _sections(document.text, title):
        label = f"{title} › {heading}" if heading else title
        buffer = ""
        for paragraph in paragraphs:
            for piece in _pieces(paragraph, max_chars):
                if buffer and len(buffer) + 1 + len(piece) > max_chars:
                    chunks.append(_chunk(document, label, buffer, len(chunks)))
                    buffer = ""
                buffer = f"{buffer}\n{piece}" if buffer else piece
        if buffer:
            chunks.append(_chunk(document, label, buffer, len(chunks)))
    return chunks


def _chunk(document: KnowledgeDocument, title: str, text: str, index: int) -> KnowledgeChunk:
    return KnowledgeChunk(
        bot_id=document.bot_id,
        group_id=document.group_id,
        source=document.source,
        title=title,
        text=text.strip(),
        index=index,
    )
