"""Shared fixtures: isolation from the developer's environment, example turns, a fixed clock,
runtimes on in-memory and SQLite stores, message builders."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from framework import Bot, ChatMessage, Config, Promptweave, Stores, Turn, load_turn_file
from framework.config import StoreConfig

pytest_plugins = ["framework.testing"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"
CST = dt.timezone(dt.timedelta(hours=8))


@pytest.fixture
def rich_turn() -> Turn:
    """The example turn that fills all fifteen sections."""
    return load_turn_file(EXAMPLES / "at_question.json")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's promptweave.toml, entry points or plugin env vars."""
    for name in (
        "PROMPTWEAVE_CONFIG",
        "PROMPTWEAVE_LOAD_PLUGINS",
        "PROMPTWEAVE_DISABLE_PLUGINS",
        "PROMPTWEAVE_TRACE_PLUGINS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.chdir(tmp_path)


SHANGHAI = dt.timezone(dt.timedelta(hours=8))
T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=SHANGHAI)
BOT = Bot(id="10001", name="小织", aliases=("织织",), peer_bot_ids=("10002",))
GROUP = "20001"


@attrs.define
class Clock:
    """A clock tests move by hand."""

    now: dt.datetime = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> dt.datetime:
        self.now += dt.timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def sqlite_config(path: Path, **sections: object) -> Config:
    return attrs.evolve(Config(), store=StoreConfig(path=str(path)), **sections)


@pytest.fixture
def sqlite_runtime(tmp_path: Path, clock: Clock) -> Iterator[Promptweave]:
    runtime = Promptweave.from_config(sqlite_config(tmp_path / "store.sqlite3"), clock=clock)
    yield runtime
    runtime.close()


@pytest.fixture
def memory_runtime(clock: Clock) -> Iterator[Promptweave]:
    runtime = Promptweave.from_config(Config(), stores=Stores.in_memory(), clock=clock)
    yield runtime
    runtime.close()


@pytest.fixture(params=["memory", "sqlite"])
def runtime(request: pytest.FixtureRequest) -> Promptweave:
    """A runtime on each backend: the behaviour must not depend on the store."""
    return request.getfixturevalue(f"{request.param}_runtime")


MessageFactory = Callable[..., ChatMessage]


@pytest.fixture
def message() -> MessageFactory:
    """``message(sender, text, minute=…)``: a group message with a fresh id."""
    ids = itertools.count(9000)

    def build(sender: str, text: str, *, minute: float = 0, **fields: object) -> ChatMessage:
        fields.setdefault("id", str(next(ids)))
        return ChatMessage(
            sender_id=sender,
            text=text,
            time=T0 + dt.timedelta(minutes=minute),
            **fields,
        )

    return build
