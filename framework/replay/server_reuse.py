"""The prompt tokens a model server did not evaluate again, as its log tells them
(``docs/replay.md``, "Prefix reuse").

llama-cpp-python's server reports no cached tokens in its responses; its log says, for each
request whose prompt starts like one it evaluated before,
``Llama.generate: 3615 prefix-match hit, remaining 1 prompt tokens to eval``. A replay given that
log (``promptweave replay --server-log``) reads the lines written while it ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PREFIX_HIT", "ServerLog", "prefix_hits", "server_reuse"]

#: One line of llama-cpp-python's log: the prompt tokens reused, and those evaluated.
PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")


def prefix_hits(text: str) -> list[tuple[int, int]]:
    """``(reused, evaluated)`` prompt tokens of each prefix-match line in ``text``, in order."""
    return [(int(reused), int(rest)) for reused, rest in PREFIX_HIT.findall(text)]


def server_reuse(hits: Sequence[tuple[int, int]]) -> dict[str, Any] | None:
    """The summary's ``server_reuse``: the calls that reused a prefix, the prompt tokens the
    server did not evaluate again, those it evaluated after them, and the reused share;
    ``None`` without a line."""
    if not hits:
        return None
    reused = sum(hit for hit, _ in hits)
    evaluated = sum(rest for _, rest in hits)
    return {
        "calls": len(hits),
        "reused_tokens": reused,
        "evaluated_tokens": evaluated,
        "share": round(reused / (reused + evaluated), 4) if reused + evaluated else 0.0,
    }


class ServerLog:
    """A server's log file, read from where it ended when the replay started."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size if path.is_file() else 0

    def hits(self) -> list[tuple[int, int]]:
        """The prefix-match lines written since the start."""
        if not self.path.is_file():
            return []
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            handle.seek(self.start)
            return prefix_hits(handle.read())
