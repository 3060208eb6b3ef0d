"""Shared helpers of the turn-context and provider tests."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

import attrs

from promptweave import Config, Promptweave, Turn, load_turn_file
from promptweave.config import StoreConfig, TurnContextConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"
CST = dt.timezone(dt.timedelta(hours=8))
ENVIRON = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}

#: A real 1x1 PNG, so the fetcher's type sniffing sees a genuine image.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
PNG_DATA_URL = "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()


def make_runtime(*, extra_plugins: tuple[object, ...] = (), **turn_context: object) -> Promptweave:
    """A runtime with the built-in plugins only and in-memory stores."""
    config = Config(
        store=StoreConfig(backend="memory"),
        turn_context=TurnContextConfig(**turn_context),  # type: ignore[arg-type]
    )
    return Promptweave.from_config(
        config, environ=ENVIRON, strict=True, extra_plugins=extra_plugins
    )


def example_turn(name: str = "at_question") -> Turn:
    return load_turn_file(EXAMPLES / f"{name}.json")


def later(turn: Turn, minutes: int, text: str | None = None) -> Turn:
    """The same turn some minutes later (optionally with another text)."""
    message = attrs.evolve(
        turn.message,
        time=turn.message.time + dt.timedelta(minutes=minutes),
        text=turn.message.text if text is None else text,
    )
    return attrs.evolve(turn, message=message)
