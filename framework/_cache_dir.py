"""Where promptweave keeps what it caches between runs (``docs/performance.md#start-up``).

A module of its own, importing nothing of promptweave: the ``promptweave`` command reads it before
any module that defines records (``promptweave.cli.startup``), and the plugin manager reads it
for its discovery cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["ENV_CACHE_DIR", "cache_directory"]

#: The cache directory; set but empty, no cache is read or written.
ENV_CACHE_DIR = "PROMPTWEAVE_CACHE_DIR"


def cache_directory(env: Mapping[str, str]) -> Path | None:
    """Where promptweave keeps what it caches between runs: ``PROMPTWEAVE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/promptweave``, else ``~/.cache/promptweave``; ``None`` (no cache) when
    ``PROMPTWEAVE_CACHE_DIR`` is set but empty, or there is no home directory."""
    configured = env.get(ENV_CACHE_DIR)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    base = env.get("XDG_CACHE_HOME", "").strip()
    if base:
        return Path(base) / "promptweave"
    try:
        return Path.home() / ".cache" / "promptweave"
    except RuntimeError:
        # No home directory (a container user without one, and no $HOME): nothing is cached.
        return None
