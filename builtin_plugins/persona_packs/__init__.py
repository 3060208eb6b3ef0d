"""Built-in plugin ``persona_packs``: registers the default persona pack (``default.toml``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from promptweave import hookimpl

DEFAULT_PACK = Path(__file__).with_name("default.toml")


@hookimpl
def register_persona_packs(register: Callable[[str, Path], None]) -> None:
    register("default", DEFAULT_PACK)
