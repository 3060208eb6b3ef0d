"""The live loop's slots and stage timings when a message is routed in the caller's task
(``docs/bot.md``, "Ordering, bounds and failures")."""

from __future__ import annotations

import asyncio

import pytest
from loop_support import RecordingTransport, event, make_loop

from promptweave import Config, SubmitResult
from promptweave.config import LoopConfig, RoutingConfig
from promptweave.loop.events import OutcomeStatus
from promptweave.pipeline.stages import TurnPipeline

ONE_AT_A_TIME = Config(
    routing=RoutingConfig(low_engagement=False),
    loop=LoopConfig(max_in_flight=1, turn_deadline_s=5.0),
)


def test_silent_turns_give_their_slot_back() -> None:
    loop, model = make_loop("好的", config=ONE_AT_A_TIME)

    async def scenario() -> list[str]:
        transport = RecordingTransport()
        statuses = []
        for group in ("20001", "20002", "20003"):
            outcome = await loop.handle(event("今天食堂又是土豆烧鸡", group=group), transport)
            statuses.append(outcome.status)
        asked = await loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport)
        statuses.append(asked.status)
        return statuses

    # A slot kept by a silent turn would hold the question forever.
    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == [OutcomeStatus.SILENT] * 3 + [
        OutcomeStatus.REPLIED
    ]
    assert len(model.requests) == 1


def test_a_turn_that_speaks_keeps_its_slot_until_it_ends() -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def answer(request):  # type: ignore[no-untyped-def]
        order.append("model")
        await gate.wait()
        return SubmitResult(sent=True, status="ok", text="周六晚上七点")

    loop, _ = make_loop(answer, config=ONE_AT_A_TIME)

    async def scenario() -> list[str]:
        transport = RecordingTransport()
        asking = asyncio.create_task(
            loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport)
        )
        await asyncio.sleep(0.05)
        # Another group's message waits for the only slot, so it is routed after the reply.
        other = asyncio.create_task(
            loop.handle(event("今天食堂又是土豆烧鸡", group="20002"), transport)
        )
        await asyncio.sleep(0.05)
        order.append("other routed" if other.done() else "other waiting")
        gate.set()
        replied = await asking
        silent = await other
        order.append(f"{replied.status} then {silent.status}")
        return order

    assert asyncio.run(scenario()) == [
        "model",
        "other waiting",
        f"{OutcomeStatus.REPLIED} then {OutcomeStatus.SILENT}",
    ]


def test_a_fault_of_the_loop_while_routing_is_an_outcome_and_frees_the_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, _ = make_loop("好的", config=ONE_AT_A_TIME)
    decide = TurnPipeline.decide
    calls = []

    def broken_once(self, deadline=None):  # type: ignore[no-untyped-def]
        calls.append(self.turn.message.text)
        if len(calls) == 1:
            raise RuntimeError("a bug in routing")
        return decide(self, deadline)

    monkeypatch.setattr(TurnPipeline, "decide", broken_once)

    async def scenario() -> tuple[str, str, str]:
        transport = RecordingTransport()
        failed = await loop.handle(event("今天食堂又是土豆烧鸡"), transport)
        replied = await loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport)
        return failed.status, failed.reason, replied.status

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == (
        OutcomeStatus.FAILED,
        "loop_error",
        OutcomeStatus.REPLIED,
    )


def test_stage_timings_start_with_record_and_end_with_total() -> None:
    loop, _ = make_loop("周六晚上七点")

    async def scenario() -> tuple[list[str], list[str]]:
        transport = RecordingTransport()
        silent = await loop.handle(event("今天食堂又是土豆烧鸡"), transport)
        replied = await loop.handle(event("小织 周末有什么活动吗？", addressed=True), transport)
        return list(silent.stage_durations_ms), list(replied.stage_durations_ms)

    silent, replied = asyncio.run(scenario())
    assert silent == ["record", "route", "total"]
    assert replied == [
        "record",
        "route",
        "render",
        "turn_context",
        "request",
        "submit",
        "read",
        "deliver",
        "spend",
        "total",
    ]
