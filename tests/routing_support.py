"""Helpers for the routing tests: a runtime with in-memory stores, and turns from compact fields."""

from __future__ import annotations

import random
from typing import Any

from promptweave import Bot, Config, Promptweave, Turn
from promptweave._convert import structure
from promptweave.cli.route_batch import BASE_TIME, CompactCase, RouteDefaults
from promptweave.config import RoutingConfig, StoreConfig

__all__ = ["BASE_TIME", "TEST_BOT", "make_runtime", "make_turn"]

#: The bot of the routing tests' compact turns (the default persona pack's 小织, alias 织织).
TEST_BOT = Bot(id="10001", name="小织", aliases=("织织",))

NO_AUTOLOAD = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def make_runtime(
    seed: int = 0, *, extra_plugins: tuple[object, ...] = (), **routing: Any
) -> Promptweave:
    """The built-in plugins, in-memory stores, a seeded random source."""
    config = Config(store=StoreConfig(backend="memory"), routing=RoutingConfig(**routing))
    return Promptweave.from_config(
        config,
        environ=NO_AUTOLOAD,
        extra_plugins=extra_plugins,
        strict=True,
        rng=random.Random(seed),
    )


def make_turn(text: str, **fields: Any) -> Turn:
    """A turn in the compact route-file format (``docs/routing.md``)."""
    fields.pop("expect", None)
    case = structure({"text": text, **fields}, CompactCase, "test")
    return case.to_turn(1, RouteDefaults(bot=TEST_BOT))
