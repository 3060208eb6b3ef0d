"""The live loop and the learner stage: learning starts with the first event, runs every
``[learning] tick_s`` off the event loop, and stops with the loop (``docs/learning.md``)."""

from __future__ import annotations

import asyncio

from loop_support import GROUP, RecordingTransport, event, make_loop

from promptweave import Config
from promptweave.config import LearningConfig, LoopConfig, RoutingConfig


def _config(**learning: object) -> Config:
    return Config(
        routing=RoutingConfig(low_engagement=False),
        loop=LoopConfig(turn_deadline_s=5.0),
        learning=LearningConfig(
            tick_s=0.01, learners={"teachings": {"min_batch": 1, "interval_s": 0}}, **learning
        ),  # type: ignore[arg-type]
    )


async def _chat(enabled: bool = True) -> tuple[list[str], list[str]]:
    loop, _model = make_loop(config=_config(enabled=enabled))
    transport = RecordingTransport()
    await loop.handle(event("小织记住，我叫阿蒙不叫阿猛", addressed=True), transport)
    for _ in range(200):
        if any(run.learner == "teachings" for run in loop.runtime.learning.runs):
            break
        await asyncio.sleep(0.01)
    await loop.stop_learning()
    await asyncio.sleep(0.2)  # a run in progress finishes in its thread
    stopped = len(loop.runtime.learning.runs)
    await asyncio.sleep(0.1)
    assert len(loop.runtime.learning.runs) == stopped  # nothing runs once stopped
    learned = loop.runtime.stores.learned
    assert learned is not None
    items = [str(i.fields["text"]) for i in learned.items("10001", GROUP, kind="teaching")]
    runs = [run.learner for run in loop.runtime.learning.runs]
    await loop.aclose()
    loop.runtime.close()
    return items, runs


def test_the_live_loop_learns_in_the_background_and_stops_when_told() -> None:
    items, runs = asyncio.run(_chat())
    assert "teachings" in runs
    assert len(items) == 1 and items[0].endswith("说：我叫阿蒙不叫阿猛")


def test_with_learning_off_the_loop_starts_no_learner() -> None:
    items, runs = asyncio.run(_chat(enabled=False))
    assert (items, runs) == ([], [])
