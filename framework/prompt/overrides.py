"""The section-overrides file: replace, append to or disable sections for one bot in one group.

Format (``docs/configuration.md``)::

    [bots."10001".groups."20001".sections.persona]
    mode = "replace"          # replace | append | disable
    content = "【核心人格】…"

Content is sanitized and capped at :data:`MAX_OVERRIDE_CONTENT_CHARS`. A malformed file raises
:class:`promptweave.errors.ConfigError` naming the file and the bad key path.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import attrs

from promptweave._convert import load_toml, structure
from promptweave.plugins.contributions import OverrideMode, SectionOverride
from promptweave.text.sanitize import sanitize_block

__all__ = [
    "MAX_OVERRIDE_CONTENT_CHARS",
    "OverridesFile",
    "load_overrides_file",
    "reload_overrides_file",
]

MAX_OVERRIDE_CONTENT_CHARS = 12000


@attrs.frozen(kw_only=True)
class _SectionEntry:
    mode: OverrideMode
    content: str = ""


@attrs.frozen(kw_only=True)
class _GroupScope:
    sections: dict[str, _SectionEntry] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class _BotScope:
    groups: dict[str, _GroupScope] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class OverridesFile:
    """Parsed overrides, looked up by bot, group and section."""

    bots: dict[str, _BotScope] = attrs.field(factory=dict)

    @classmethod
    def from_file(cls, path: Path) -> OverridesFile:
        """Parse ``path``; raise :class:`promptweave.errors.ConfigError` when it is malformed."""
        return structure(load_toml(path), cls, str(path))

    def covers(self, bot_id: str, group_id: str) -> bool:
        """Whether the file overrides any section of ``bot_id`` in ``group_id``."""
        bot = self.bots.get(bot_id)
        group = bot.groups.get(group_id) if bot is not None else None
        return group is not None and bool(group.sections)

    def modes(self, bot_id: str, group_id: str) -> dict[str, str]:
        """The mode of each section the file overrides for ``bot_id`` in ``group_id``."""
        bot = self.bots.get(bot_id)
        group = bot.groups.get(group_id) if bot is not None else None
        return {} if group is None else {name: e.mode for name, e in group.sections.items()}

    def lookup(self, bot_id: str, group_id: str, section_id: str) -> SectionOverride | None:
        """The override for one section in one scope, content sanitized; ``None`` when absent."""
        bot = self.bots.get(bot_id)
        group = bot.groups.get(group_id) if bot is not None else None
        entry = group.sections.get(section_id) if group is not None else None
        if entry is None:
            return None
        content = sanitize_block(entry.content, MAX_OVERRIDE_CONTENT_CHARS)
        return SectionOverride(mode=entry.mode, content=content)


@lru_cache(maxsize=16)
def _load_cached(path: Path, _mtime_ns: int, _size: int) -> OverridesFile:
    return OverridesFile.from_file(path)


def load_overrides_file(path: Path) -> OverridesFile:
    """Load ``path``, re-reading it only when it changed on disk (edits apply on the next turn)."""
    try:
        stat = os.stat(path)
    except OSError:
        return OverridesFile.from_file(path)  # raises a ConfigError naming the file
    return _load_cached(path, stat.st_mtime_ns, stat.st_size)


def reload_overrides_file(path: Path) -> OverridesFile:
    """Read ``path`` again now, whatever was read before (an edit that kept the file's size and
    modification time included): what the NoneBot plugin's reload command does
    (``docs/groups.md``)."""
    _load_cached.cache_clear()
    return load_overrides_file(path)
