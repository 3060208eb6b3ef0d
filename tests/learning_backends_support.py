"""Learning end to end on every store backend (``tests/learning/test_learning_*.py``): a place a
store lives (a SQLite file, a Redis prefix, in-memory stores) that runtimes are opened over again
(a restart, a second process), chats of several (bot, group) scopes with vocabularies of their
own, a model that answers at once, and what a learned item is when two runs are compared.

A scope's chat goes through a real :class:`promptweave.BotLoop`: each incoming message is
recorded, routed and (when addressed) answered, and the answer is delivered through a transport
whose message ids belong to that scope alone, so every id an item came from names its scope.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from base_support import Clock, redis_config, sqlite_config

from promptweave import (
    Bot,
    BotLoop,
    ChatMessage,
    Config,
    IncomingEvent,
    Promptweave,
    Stores,
    SubmitResult,
    Turn,
    hookimpl,
)
from promptweave.config import BotConfig, LearningConfig, LoopConfig, RoutingConfig
from promptweave.learning.stage import RunStatus
from promptweave.loop.events import TurnOutcome
from promptweave.store.learned import LearnedItem, LearnedStore, LearnerCursor

__all__ = [
    "BOTS",
    "LEARNERS",
    "T0",
    "InstantModel",
    "Line",
    "Scope",
    "ScopeTransport",
    "Site",
    "catch_up",
    "cursors",
    "event",
    "feed",
    "learned",
    "learning_config",
    "open_site",
    "shape",
    "turn",
]

T0 = dt.datetime(2026, 11, 28, 20, 0, tzinfo=dt.UTC)
#: The built-in learners (``docs/learning.md``, the built-in learners).
LEARNERS = ("expression_pairs", "rhythm", "pickups", "teachings", "negative_feedback")
#: The bot accounts the chats speak to: two bots of one deployment sharing group ids, and two
#: accounts whose ids would run together with a group id at a ``:``.
BOTS = {
    "10001": BotConfig(name="小织", aliases=("织织",)),
    "10003": BotConfig(name="小满"),
    "1": BotConfig(name="小织"),
    "1:2": BotConfig(name="小织"),
}
#: What the model answers every request with.
ANSWER = "好嘞收到"


@attrs.frozen
class Line:
    """One member's message of a chat: who, under what name, what; ``quotes`` is the index of
    the line (of the same chat) it quotes, ``quotes_reply`` that of the line whose bot answer it
    quotes."""

    sender: str
    name: str
    text: str
    quotes: int | None = None
    quotes_reply: int | None = None


@attrs.frozen
class Scope:
    """A (bot, group) and its chat; its message ids start with ``tag`` and the ids its bot
    delivers with ``base``."""

    bot_id: str
    group_id: str
    tag: str
    base: int
    lines: tuple[Line, ...]

    def message_id(self, index: int) -> str:
        return f"{self.tag}-{index}"


class InstantModel:
    """A ``submit_request_async`` plugin answering every request at once."""

    def __init__(self, answer: str = ANSWER) -> None:
        self.answer = answer

    @hookimpl
    def submit_request_async(self, request: Any, config: Config) -> Any:
        async def answer() -> SubmitResult:
            return SubmitResult(sent=True, status="ok", text=self.answer)

        return answer()


@attrs.define(eq=False)
class ScopeTransport:
    """A OneBot v11 transport of one scope: every message sent gets the next id of the scope's
    own range, kept in ``delivered`` (message id → index of the line it answered, or ``None``)."""

    base: int
    platform: str = "onebot.v11"
    delivered: list[str] = attrs.field(factory=list)
    _ids: Iterator[int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._ids = itertools.count(self.base)

    async def call_api(self, api: str, **params: Any) -> dict[str, int]:
        number = next(self._ids)
        self.delivered.append(str(number))
        return {"message_id": number}


def learning_config(
    *,
    tick_s: float = 5.0,
    min_batch: int | None = None,
    tables: Mapping[str, Mapping[str, Any]] | None = None,
    **settings: Any,
) -> LearningConfig:
    """``[learning]``; ``min_batch`` (with ``interval_s = 0``) is given to every built-in
    learner's table, then each of ``tables`` adds its keys to the learner's."""
    learners: dict[str, dict[str, Any]] = {name: {} for name in LEARNERS}
    if min_batch is not None:
        learners = {name: {"min_batch": min_batch, "interval_s": 0} for name in LEARNERS}
    for name, table in (tables or {}).items():
        learners[name] = {**learners.get(name, {}), **table}
    return LearningConfig(
        tick_s=tick_s, learners={k: v for k, v in learners.items() if v}, **settings
    )


@attrs.define(eq=False)
class Site:
    """Where one store lives; every :meth:`runtime` opens it again (what a restart or a second
    process does). In-memory stores are one object shared by the runtimes opened over them."""

    backend: str
    path: Path | None = None
    url: str = ""
    prefix: str = ""
    _memory: Stores | None = attrs.field(default=None, init=False)
    _opened: list[Promptweave] = attrs.field(factory=list, init=False)

    def config(self, learning: LearningConfig | None = None) -> Config:
        sections: dict[str, Any] = {
            "bots": BOTS,
            "routing": RoutingConfig(low_engagement=False),
            "loop": LoopConfig(turn_deadline_s=5.0),
            "learning": learning or learning_config(),
        }
        if self.backend == "sqlite":
            assert self.path is not None
            return sqlite_config(self.path, **sections)
        if self.backend == "redis":
            return redis_config(self.url, self.prefix, **sections)
        return attrs.evolve(Config(), **sections)

    def runtime(
        self,
        *,
        learning: LearningConfig | None = None,
        clock: Clock | None = None,
        answer: str = ANSWER,
    ) -> Promptweave:
        config = self.config(learning)
        stores = None
        if self.backend == "memory":
            if self._memory is None:
                self._memory = Stores.in_memory(config)
            stores = self._memory
        runtime = Promptweave.from_config(
            config, extra_plugins=[InstantModel(answer)], stores=stores, clock=clock or Clock(T0)
        )
        assert runtime.stores.unavailable is None
        self._opened.append(runtime)
        return runtime

    def close(self) -> None:
        for runtime in self._opened:
            runtime.close()
        self._opened.clear()


def open_site(request: pytest.FixtureRequest, backend: str, tmp_path: Path, name: str) -> Site:
    """A fresh store on ``backend`` (``name`` tells two of one test apart); on Redis, under a key
    prefix of the test's own (the ``redis_prefix`` fixture deletes it afterwards)."""
    if backend == "sqlite":
        return Site(backend, path=tmp_path / f"{name}.sqlite3")
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = f"{request.getfixturevalue('redis_prefix')}{name}:"
        return Site(backend, url=url, prefix=prefix)
    return Site(backend)


def event(scope: Scope, index: int, at: dt.datetime, transport: ScopeTransport) -> IncomingEvent:
    """Line ``index`` of the scope's chat as an incoming event; addressed when it starts with
    the bot's name, or quotes one of the bot's messages."""
    line = scope.lines[index]
    bot = BOTS[scope.bot_id]
    reply_to = None
    if line.quotes is not None:
        reply_to = scope.message_id(line.quotes)
    if line.quotes_reply is not None:
        reply_to = transport.delivered[_answers_before(scope, line.quotes_reply)]
    return IncomingEvent(
        platform="onebot",
        bot_id=scope.bot_id,
        group_id=scope.group_id,
        message=ChatMessage(
            id=scope.message_id(index),
            sender_id=line.sender,
            sender_name=line.name,
            text=line.text,
            time=at,
            addressed=line.text.startswith(bot.name) or line.quotes_reply is not None,
            reply_to=reply_to,
        ),
        sender_role="member",
    )


def _answers_before(scope: Scope, index: int) -> int:
    """How many of the scope's lines before ``index`` the bot answered (each addressed line is
    answered with one message)."""
    bot = BOTS[scope.bot_id]
    return sum(
        1
        for line in scope.lines[:index]
        if line.text.startswith(bot.name) or line.quotes_reply is not None
    )


def line_time(index: int) -> dt.datetime:
    """Every chat says line ``index`` at the same time: ten seconds apart."""
    return T0 + dt.timedelta(seconds=10 * index)


async def feed(
    loop: BotLoop,
    scopes: Sequence[Scope],
    transports: Mapping[str, ScopeTransport],
    indexes: Iterable[int],
    *,
    clock: Clock,
    pause_s: float = 0.0,
) -> list[TurnOutcome]:
    """Line by line, every scope's line at once (``asyncio.gather`` over ``loop.handle``),
    letting the loop's learning task run ``pause_s`` between lines."""
    outcomes: list[TurnOutcome] = []
    for index in indexes:
        clock.now = line_time(index)
        round_ = [
            loop.handle(
                event(scope, index, clock.now, transports[scope.tag]), transports[scope.tag]
            )
            for scope in scopes
            if index < len(scope.lines)
        ]
        outcomes += await asyncio.gather(*round_)
        if pause_s:
            await asyncio.sleep(pause_s)
    return outcomes


def catch_up(runtime: Promptweave, now: dt.datetime) -> None:
    """Run every learner until each has caught up with the group log, then what is due."""
    runs = runtime.learning.run_all(now)
    assert all(run.status in (RunStatus.LEARNED, RunStatus.NOTHING_NEW) for run in runs), [
        run.describe() for run in runs if run.status not in (RunStatus.LEARNED, "nothing_new")
    ]
    runtime.learning.run_due(now, threads=False)


def learned(store: LearnedStore | None, bot_id: str, group_id: str) -> list[LearnedItem]:
    """Everything learned of a scope, as ``promptweave learned list`` lists it (sorted)."""
    assert store is not None
    return sorted(store.items(bot_id, group_id), key=lambda item: (item.kind, item.key))


def shape(items: Iterable[LearnedItem]) -> list[dict[str, Any]]:
    """What two runs must agree on for each item: ``learned list --json`` without the times."""
    found = []
    for item in sorted(items, key=lambda item: (item.kind, item.key)):
        data = item.to_json()
        data.pop("learned_at")
        data.pop("updated_at")
        found.append(data)
    return found


def cursors(store: LearnedStore | None, scopes: Iterable[Scope]) -> dict[tuple[str, str], int]:
    """Every built-in learner's cursor position per (learner, scope tag)."""
    assert store is not None
    found: dict[tuple[str, str], int] = {}
    for scope in scopes:
        for name in LEARNERS:
            cursor: LearnerCursor = store.cursor(name, scope.bot_id, scope.group_id)
            found[(name, scope.tag)] = cursor.position
    return found


def turn(runtime: Promptweave, scope: Scope, sender: str, text: str, at: dt.datetime) -> Turn:
    """An addressed turn in the scope, as a member asks the bot something."""
    bot: Bot = runtime.bot_for(scope.bot_id)
    return Turn(
        bot=bot,
        group_id=scope.group_id,
        message=ChatMessage(
            id=f"{scope.tag}-ask-{int(at.timestamp())}",
            sender_id=sender,
            sender_name="提问的人",
            text=f"{bot.name} {text}",
            time=at,
            addressed=True,
        ),
        trigger="mention",
    )
