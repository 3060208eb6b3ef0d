"""The observation worker: bounded, in order, a full queue drops and counts
(``promptweave.plugins.observers``)."""

from __future__ import annotations

import logging
import threading

import pytest

from promptweave.plugins.observers import Observations

#: Long enough to drain a few observations on a loaded machine; never a bound of the test.
DRAIN_S = 30.0


def test_observations_reach_every_observer_in_order() -> None:
    seen: list[tuple[str, int]] = []
    observations = Observations()
    calls = [
        ("first", lambda number: seen.append(("first", number))),
        ("second", lambda number: seen.append(("second", number))),
    ]
    for number in range(3):
        assert observations.submit("observe_message_recorded", calls, number=number)
    assert observations.close(DRAIN_S)
    assert seen == [(name, number) for number in range(3) for name in ("first", "second")]


def test_nothing_is_queued_without_an_observer() -> None:
    observations = Observations()
    assert not observations.submit("observe_message_recorded", [], number=1)
    assert observations.wait(0)


def test_a_full_queue_drops_the_observation_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    entered, released = threading.Event(), threading.Event()
    seen: list[int] = []

    def observe(number: int) -> None:
        entered.set()
        released.wait(DRAIN_S)
        seen.append(number)

    observations = Observations(queue_max=1, call_timeout_s=DRAIN_S)
    caplog.set_level(logging.WARNING, logger="promptweave")
    calls = [("slow", observe)]
    try:
        assert observations.submit("observe_message_recorded", calls, number=1)
        assert entered.wait(DRAIN_S)  # the dispatcher is in the first call
        assert observations.submit("observe_message_recorded", calls, number=2)  # waits
        assert not observations.submit("observe_message_recorded", calls, number=3)
        assert observations.dropped == 1
        assert any(
            "observation queue is full" in record.getMessage() and "dropped" in record.getMessage()
            for record in caplog.records
        )
    finally:
        released.set()
    assert observations.close(DRAIN_S)
    assert seen == [1, 2]


def test_an_observer_that_returns_after_hanging_is_called_again() -> None:
    released = threading.Event()
    seen: list[int] = []

    def observe(number: int) -> None:
        if number == 1:
            released.wait(DRAIN_S)
        seen.append(number)

    observations = Observations(call_timeout_s=0.05)
    calls = [("moody", observe)]
    observations.submit("observe_message_recorded", calls, number=1)
    assert observations.wait(DRAIN_S)
    assert [fault.kind for fault in observations.faults] == ["hung"]
    assert observations.hung() == [("moody", "hook observe_message_recorded")]
    released.set()
    while observations.hung():  # the hung call returns
        released.wait(0.01)
    observations.submit("observe_message_recorded", calls, number=2)
    assert observations.close(DRAIN_S)
    assert seen == [1, 2]
