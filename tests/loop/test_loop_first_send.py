"""The first bubble of a reply goes out before the turn's bookkeeping (``docs/bot.md``,
``docs/performance.md``): what the operator reads is still all there when the turn ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_support import RecordingTransport, event, make_loop

from promptweave import SubmitResult
from promptweave.loop import live
from promptweave.loop.events import OutcomeStatus


def test_the_spend_is_counted_after_the_bubbles_are_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = RecordingTransport()
    sends_when_counted: list[int] = []
    counting = live.reply_spend

    def reply_spend(*args: Any) -> Any:
        sends_when_counted.append(len(transport.calls))
        return counting(*args)

    monkeypatch.setattr(live, "reply_spend", reply_spend)
    loop, _ = make_loop("周六晚上七点")
    outcome = asyncio.run(loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport))
    assert outcome.status == OutcomeStatus.REPLIED
    assert sends_when_counted == [len(transport.calls)] and transport.calls
    tokens = outcome.trace["tokens"]
    assert tokens is not None and tokens["output_tokens"] > 0
    # The trace keeps its order: the spend right after the submission, as before.
    keys = list(outcome.trace)
    assert keys[keys.index("submit") + 1] == "tokens"
    assert list(outcome.stage_durations_ms)[-3:] == ["deliver", "spend", "total"]


def test_a_turn_without_a_reply_counts_its_spend_before_it_ends() -> None:
    loop, _ = make_loop(SubmitResult(sent=True, status="ok", text="PASS"))
    transport = RecordingTransport()
    outcome = asyncio.run(loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport))
    assert outcome.status == OutcomeStatus.SILENT and not transport.calls
    assert outcome.trace["tokens"] is not None
    assert "spend" not in outcome.stage_durations_ms


def test_a_tokenizer_that_hangs_after_the_send_is_cut_at_the_turns_deadline() -> None:
    import threading

    from promptweave import Config, hookimpl
    from promptweave.config import LoopConfig, RoutingConfig

    released = threading.Event()
    transport = RecordingTransport()

    class Hanging:
        """Counts at once until the reply is out, then hangs."""

        @hookimpl
        def count_tokens(self, text: str, config: Config) -> int:
            if transport.calls:
                released.wait(5)
            return 1

    config = Config(
        routing=RoutingConfig(low_engagement=False), loop=LoopConfig(turn_deadline_s=0.3)
    )
    loop, _ = make_loop("周六晚上七点", config=config, plugins=[Hanging()])
    try:
        outcome = asyncio.run(
            asyncio.wait_for(
                loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport), 3
            )
        )
    finally:
        released.set()
    assert outcome.status == OutcomeStatus.REPLIED and transport.calls
    assert outcome.trace["tokens"] is None
