"""Colour for the text output of ``promptweave``: on a terminal only (``docs/cli.md``, "Colour").

Styles are added with :func:`click.style` and removed again by :func:`click.echo` whenever the
stream is not a terminal, so piped output is plain. ``--color`` / ``--no-color`` on the command
decide instead, and ``NO_COLOR`` (any value, https://no-color.org) turns colour off by default.
"""

from __future__ import annotations

import os
import sys
import unicodedata

import click

__all__ = [
    "ACTION_COLOURS",
    "STATUS_COLOURS",
    "coloured",
    "display_width",
    "heading",
    "on_terminal",
    "pad",
    "resolve_colour",
    "status",
]

#: The colour of a decision's action: answering is green, staying silent yellow.
ACTION_COLOURS = {"reply": "green", "pass": "yellow", "tool": "cyan", "follow_up": "cyan"}
#: The colour of a section's or a retriever's status.
STATUS_COLOURS = {
    "rendered": "green",
    "hit": "green",
    "given": "green",
    "ok": "green",
    "empty": "bright_black",
    "duplicate": "bright_black",
    "skipped": "yellow",
    "disabled": "yellow",
    "error": "red",
    "timeout": "red",
    "MISMATCH": "red",
}


def resolve_colour(flag: bool | None) -> bool | None:
    """What ``--color`` / ``--no-color`` (``flag``) and ``NO_COLOR`` leave for click to decide:
    ``None`` lets click colour a terminal only."""
    if flag is not None:
        return flag
    return False if os.environ.get("NO_COLOR") else None


def on_terminal() -> bool:
    """Whether standard output gets the terminal's form (aligned columns) rather than the form
    made for pipes: on a terminal, or when ``--color`` asks for the terminal's form anyway.
    ``--no-color`` and ``NO_COLOR`` only take the colour away."""
    context = click.get_current_context(silent=True)
    if context is not None and context.color:
        return True
    return sys.stdout.isatty()


def coloured(text: str, colour: str | None, *, bold: bool = False) -> str:
    """``text`` in ``colour``; click removes the style again on a stream that is no terminal."""
    if colour is None and not bold:
        return text
    return click.style(text, fg=colour, bold=bold)


def heading(title: str) -> str:
    """A block heading of ``render``: ``==== title ====``."""
    return coloured(f"==== {title} ====", "cyan", bold=True)


def status(text: str, width: int = 0) -> str:
    """A status word (``rendered``, ``hit``, ``skipped (reason)``…) coloured by its first word and
    padded to ``width`` outside the style, so columns stay aligned."""
    word = text.split(" ", 1)[0]
    if text.startswith(("skipped (error", "skipped (timeout")):
        word = "error"  # a retriever that failed, not one that had nothing to do
    return coloured(text, STATUS_COLOURS.get(word)) + " " * max(0, width - len(text))


def display_width(text: str) -> int:
    """The columns ``text`` takes on a terminal: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns."""
    return text + " " * max(0, width - display_width(text))
