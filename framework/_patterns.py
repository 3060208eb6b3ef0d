"""Regular expressions compiled the first time they are used (``docs/performance.md#start-up``).

Compiling a pattern runs Python's own pattern parser and compiler, and a long alternation of
Chinese words costs a millisecond or more; compiled at import, the patterns of the learners, of
error messages and of file formats a command never reads were a tenth of ``promptweave render``.
A module constant ``lazy_pattern(...)`` is used like the compiled pattern (``.search``,
``.sub``, ``.pattern``…, never passed to ``re.sub`` or tested with ``isinstance``); it compiles
on its first attribute read and from then on hands out the compiled pattern's own methods.
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["lazy_pattern"]

#: What a pattern is used for; each is copied onto the stand-in once compiled, so a later read
#: is a plain attribute read.
_ATTRIBUTES = (
    "search",
    "match",
    "fullmatch",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _LazyPattern:
    """Stands for ``re.compile(pattern, flags)`` until an attribute is read."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            # copy, pickle and the like probe for special names: no compiling for them.
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        vars(self).update({attribute: getattr(compiled, attribute) for attribute in _ATTRIBUTES})
        return getattr(compiled, name)

    def __repr__(self) -> str:
        pattern, flags = self._source
        return f"lazy_pattern({pattern!r}, {flags!r})"


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done when the result is first used."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))
