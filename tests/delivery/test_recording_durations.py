"""Recording and the background compression log how long they took on ``promptweave.stages``:
their return values are fixed (``record_message`` and ``record_bot_reply`` return ``bool``)."""

from __future__ import annotations

import datetime as dt
import logging
import re

import pytest
from base_support import BOT, GROUP, T0, MessageFactory

from promptweave import Promptweave, Turn
from promptweave.decision import DeliveryStyle
from promptweave.routing.quoting import Delivery

LATER = T0 + dt.timedelta(seconds=5)
#: ``<stage>: <ms> ms (<what was recorded>)``, as documented in docs/store.md.
STAGE_LINE = re.compile(r"^(?P<stage>[a-z_]+): (?P<ms>\d+\.\d{3}) ms \((?P<detail>.*)\)$")


@pytest.fixture
def stage_lines(caplog: pytest.LogCaptureFixture):
    """The stage lines logged so far, as ``[(stage, milliseconds, detail)]``."""

    def lines() -> list[tuple[str, float, str]]:
        found = []
        for record in caplog.records:
            if record.name != "promptweave.stages":
                continue
            match = STAGE_LINE.match(record.getMessage())
            assert match is not None, record.getMessage()
            found.append((match["stage"], float(match["ms"]), match["detail"]))
        return found

    with caplog.at_level(logging.DEBUG, logger="promptweave.stages"):
        yield lines


def test_recording_a_message_logs_its_duration(
    runtime: Promptweave, message: MessageFactory, stage_lines
) -> None:
    assert runtime.recorder.record_message(BOT.id, GROUP, message("30022", "今晚吃什么")) is True
    assert runtime.recorder.record_message(BOT.id, None, message("30022", "私聊")) is False
    (stage, ms, detail), (_, private_ms, private) = stage_lines()
    assert stage == "record_message" and ms >= 0 and private_ms >= 0
    assert detail == f"bot {BOT.id}, group {GROUP}: stored"
    assert private == f"bot {BOT.id}, group None: not stored"


def test_recording_a_reply_logs_its_duration_once_per_call(
    runtime: Promptweave, message: MessageFactory, stage_lines
) -> None:
    asked = message("30022", "@小织 在吗", addressed=True)
    for _ in range(2):
        stored = runtime.recorder.record_bot_reply(
            BOT.id, GROUP, "在的", message_id="r1", answering=asked, time=LATER
        )
        assert stored is True
    lines = [line for line in stage_lines() if line[0] == "record_bot_reply"]
    assert [detail for _, _, detail in lines] == [
        f"bot {BOT.id}, group {GROUP}: new, stored",
        f"bot {BOT.id}, group {GROUP}: repeated, stored",
    ]
    assert all(ms >= 0 for _, ms, _ in lines)


def test_noting_a_delivery_logs_its_duration(
    runtime: Promptweave, message: MessageFactory, stage_lines
) -> None:
    turn = Turn(bot=BOT, group_id=GROUP, message=message("30022", "@小织 在吗", addressed=True))
    assert (
        runtime.recorder.note_delivered(turn, Delivery(style=DeliveryStyle.PLAIN), at=LATER) is None
    )
    runtime.recorder.note_delivered(turn, Delivery(style=DeliveryStyle.PLAIN), at=LATER)
    assert [(stage, detail) for stage, _, detail in stage_lines()] == [
        ("note_delivered", f"bot {BOT.id}, group {GROUP}: new"),
        ("note_delivered", f"bot {BOT.id}, group {GROUP}: repeated"),
    ]


def test_a_compression_attempt_carries_and_logs_its_duration(
    memory_runtime: Promptweave, stage_lines
) -> None:
    result = memory_runtime.recorder.compress_session(BOT.id, GROUP, "30022", now=T0)
    assert result.reason == "below_threshold"
    assert isinstance(result.duration_ms, float) and result.duration_ms >= 0
    assert stage_lines() == [
        (
            "compress_session",
            result.duration_ms,
            f"bot {BOT.id}, group {GROUP}, user 30022: skipped below_threshold",
        )
    ]
