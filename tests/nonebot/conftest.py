"""Fixtures of the NoneBot plugin's tests: every test here runs in the NoneBot session
(``nonebot_support.nonebot_started``, shared through the root conftest), and ``app`` is nonebug's
test app."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from loop_support import ScriptedModel
from nonebug import App

from promptweave import BotLoop, Config, Promptweave, Stores
from promptweave.config import DeliveryConfig, LoopConfig, ProviderConfig, RoutingConfig

__all__ = ["app", "use_loop"]


@pytest.fixture(autouse=True)
def _in_the_nonebot_session(nonebot_started: None) -> None:
    """Start NoneBot (once per run) before any test of this folder."""


@pytest.fixture
def app(nonebot_started: None) -> App:
    """nonebug's test app: define a test case with it and run it."""
    return App()


@pytest.fixture
def use_loop() -> Iterator[Any]:
    """Swap the plugin's loop for one on in-memory stores with a scripted model."""
    import promptweave.contrib.nonebot as plugin

    opened = plugin._state.loop
    made: list[BotLoop] = []

    def install(
        *answers: Any,
        routing: RoutingConfig | None = None,
        plugins: tuple[object, ...] = (),
        seed: int = 3,
        provider: ProviderConfig | None = None,
    ) -> ScriptedModel:
        model = ScriptedModel(answers=list(answers) or ["好的"])
        config = Config(
            routing=routing or RoutingConfig(low_engagement=False),
            delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
            loop=LoopConfig(turn_deadline_s=10),
            provider=provider or ProviderConfig(),
        )
        runtime = Promptweave.from_config(
            config,
            contrib=["onebot", "group_tools"],
            extra_plugins=[model, *plugins],
            stores=Stores.in_memory(),
            rng=random.Random(seed),
        )
        plugin._state.loop = BotLoop(runtime=runtime, fallback_names=("小织",))
        made.append(plugin._state.loop)
        return model

    yield install
    plugin._state.loop = opened
    for loop in made:
        loop.runtime.close()
