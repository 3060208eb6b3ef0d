"""The observation hooks in the live loop: what they receive, and that they stay off the turn's
path (``docs/plugin_hooks.md``, "After the fact: observation")."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from typing import Any

import pytest
from loop_support import BOT, GROUP, AlwaysPhrase, Certain, RecordingTransport, event, make_loop

from promptweave import (
    ChatMessage,
    Config,
    InjectedSource,
    MemoryItem,
    ReplyInjection,
    Retriever,
    Section,
    hookimpl,
)
from promptweave.config import LoopConfig
from promptweave.loop.events import OutcomeStatus

#: Long enough to drain a few observations on a loaded machine; never a bound of the test.
DRAIN_S = 30.0


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Observer:
    """Keeps every observation it is told."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str | None, ChatMessage]] = []
        self.replies: list[dict[str, Any]] = []

    @hookimpl
    def observe_message_recorded(self, bot_id, group_id, message):
        self.messages.append((bot_id, group_id, message))

    @hookimpl
    def observe_reply_delivered(self, bot_id, group_id, text, message_id, answering, injection):
        self.replies.append(
            {
                "bot_id": bot_id,
                "group_id": group_id,
                "text": text,
                "message_id": message_id,
                "answering": answering,
                "injection": injection,
            }
        )


class Weather:
    """A section and a retriever with known texts, to find in the injection."""

    @hookimpl
    def register_sections(self, register):
        register(
            Section(
                id="weather",
                title="【天气】",
                render=lambda context: "【天气】\n- 晴，8°C",
                after="current_time",
                volatility="turn",
            )
        )

    @hookimpl
    def register_retrievers(self, register):
        register(
            Retriever(
                name="board_games",
                feeds="memory",
                persistent=False,
                retrieve=lambda query: [
                    MemoryItem(kind="group_memory", text="群里周六常去格子桌游吧", id="m-17")
                ],
            )
        )


def _drain(loop: Any) -> None:
    assert loop.runtime.plugins.hooks.observations.wait(DRAIN_S)


def test_hook_observe_message_recorded() -> None:
    observer = Observer()
    loop, _model = make_loop("好的", plugins=[observer])
    first = event("今天好冷", message_id="7001")
    second = event("小织 周末有什么活动吗？", addressed=True, message_id="7002")

    async def run() -> None:
        await loop.handle(first, RecordingTransport())
        await loop.handle(second, RecordingTransport())

    asyncio.run(run())
    _drain(loop)

    assert [(bot, group, message.id) for bot, group, message in observer.messages] == [
        (BOT, GROUP, "7001"),
        (BOT, GROUP, "7002"),
    ]
    assert observer.messages[1][2] == second.message
    loop.runtime.close()


def test_a_message_recorded_twice_is_observed_once() -> None:
    observer = Observer()
    loop, _model = make_loop("好的", plugins=[observer])
    again = event("今天好冷", message_id="7001")

    async def run() -> None:
        await loop.handle(again, RecordingTransport())
        await loop.handle(again, RecordingTransport())

    asyncio.run(run())
    _drain(loop)
    assert [message.id for _bot, _group, message in observer.messages] == ["7001"]


def test_hook_observe_reply_delivered() -> None:
    observer = Observer()
    loop, _model = make_loop("周六晚上七点有桌游局\n在格子桌游吧", plugins=[Weather(), observer])
    question = event("小织 周末有什么活动吗？", addressed=True, message_id="7001")

    outcome = asyncio.run(loop.handle(question, RecordingTransport()))
    _drain(loop)

    assert outcome.status == OutcomeStatus.REPLIED
    assert [
        (reply["bot_id"], reply["group_id"], reply["text"], reply["message_id"])
        for reply in observer.replies
    ] == [
        (BOT, GROUP, "周六晚上七点有桌游局", "9001"),
        (BOT, GROUP, "在格子桌游吧", "9002"),
    ]
    assert all(reply["answering"] == question.message for reply in observer.replies)
    injection = observer.replies[0]["injection"]
    assert isinstance(injection, ReplyInjection)
    assert observer.replies[1]["injection"] == injection
    sections = [source.section for source in injection.sections]
    assert sections[sections.index("current_time") + 1] == "weather"
    assert InjectedSource(section="weather", text_hash=_sha("【天气】\n- 晴，8°C")) in (
        injection.sections
    )
    assert all(source.retriever == "" for source in injection.sections)
    assert (
        InjectedSource(
            section="memory",
            retriever="board_games",
            id="m-17",
            text_hash=_sha("群里周六常去格子桌游吧"),
            preview="群里周六常去格子桌游吧",
        )
        in injection.retrieved
    )
    loop.runtime.close()


def test_a_phrase_is_observed_with_an_empty_injection() -> None:
    observer = Observer()
    config = Config(loop=LoopConfig(turn_deadline_s=5.0))
    loop, _model = make_loop(config=config, plugins=[AlwaysPhrase(), observer])
    loop.runtime.rng = Certain()  # type: ignore[assignment]
    loop.runtime.router = loop.runtime._build_router()

    outcome = asyncio.run(loop.handle(event("哈哈哈", message_id="7001"), RecordingTransport()))
    _drain(loop)

    assert outcome.status == OutcomeStatus.PHRASE
    assert [(reply["text"], reply["message_id"]) for reply in observer.replies] == [
        (outcome.bubbles[0], "9001")
    ]
    assert observer.replies[0]["injection"] == ReplyInjection()
    loop.runtime.close()


def test_an_observer_that_raises_is_traced_and_the_others_still_observe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Raises:
        @hookimpl
        def observe_message_recorded(self, bot_id, group_id, message):
            raise RuntimeError("the analytics sink is down")

    observer = Observer()
    loop, _model = make_loop("好的", plugins=[observer, Raises()])
    name = loop.runtime.plugins.pm.get_name(
        next(p for p in loop.runtime.plugins.pm.get_plugins() if isinstance(p, Raises))
    )
    caplog.set_level(logging.WARNING, logger="promptweave")

    outcome = asyncio.run(
        loop.handle(event("小织 在吗", addressed=True, message_id="7001"), RecordingTransport())
    )
    _drain(loop)

    assert outcome.status == OutcomeStatus.REPLIED
    assert [message.id for _bot, _group, message in observer.messages] == ["7001"]
    faults = list(loop.runtime.plugins.hooks.observations.faults)
    assert [(f.plugin, f.where, f.kind) for f in faults] == [
        (name, "hook observe_message_recorded", "raised")
    ]
    assert "the analytics sink is down" in faults[0].detail
    assert any(
        record.name == "promptweave" and "observe_message_recorded" in record.getMessage()
        for record in caplog.records
    )
    loop.runtime.close()


def test_an_observer_that_hangs_never_holds_up_a_turn(caplog: pytest.LogCaptureFixture) -> None:
    entered = threading.Event()
    released = threading.Event()

    class Sleeps:
        @hookimpl
        def observe_message_recorded(self, bot_id, group_id, message):
            entered.set()
            released.wait(5.0)  # sleeps 5 s unless the test lets it go

    observer = Observer()
    loop, _model = make_loop("好的", "好的", plugins=[observer, Sleeps()])
    observations = loop.runtime.plugins.hooks.observations
    observations.call_timeout_s = 0.05
    name = loop.runtime.plugins.pm.get_name(
        next(p for p in loop.runtime.plugins.pm.get_plugins() if isinstance(p, Sleeps))
    )
    caplog.set_level(logging.WARNING, logger="promptweave")
    try:

        async def run() -> list[Any]:
            first = await loop.handle(
                event("小织 在吗", addressed=True, message_id="7001"), RecordingTransport()
            )
            # The turn's outcome is here while the observer is still asleep.
            assert not released.is_set()
            second = await loop.handle(
                event("小织 还在吗", addressed=True, message_id="7002"), RecordingTransport()
            )
            return [first, second]

        outcomes = asyncio.run(run())
        _drain(loop)

        assert [o.status for o in outcomes] == [OutcomeStatus.REPLIED, OutcomeStatus.REPLIED]
        assert entered.is_set() and not released.is_set()
        # The other observer heard both messages; the sleeping one was left behind, then skipped.
        assert [message.id for _bot, _group, message in observer.messages] == ["7001", "7002"]
        assert [(f.plugin, f.kind) for f in observations.faults] == [
            (name, "hung"),
            (name, "skipped"),
        ]
        assert any(
            record.name == "promptweave"
            and name in record.getMessage()
            and "hung" in record.getMessage()
            for record in caplog.records
        )
    finally:
        released.set()
    loop.runtime.close()
