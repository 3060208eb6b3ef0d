"""What every stage's tests share: the repository's paths, the bot and group most tests speak for, a
clock moved by hand, and the configurations of the SQLite and Redis stores.

pytest puts ``tests/`` on ``sys.path`` (``pythonpath`` in ``pyproject.toml``), so the tests import
these by name: ``from base_support import BOT, GROUP, T0``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import attrs

from promptweave import Bot, ChatMessage, Config
from promptweave.config import StoreConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"
#: The tests' data files: recorded expectations and hand-written inputs.
DATA = ROOT / "tests" / "data"
CST = dt.timezone(dt.timedelta(hours=8))
SHANGHAI = CST
T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=SHANGHAI)
BOT = Bot(id="10001", name="小织", aliases=("织织",), peer_bot_ids=("10002",))
GROUP = "20001"
NONEBOT_CONFIG = ROOT / "tests" / "data" / "nonebot.toml"

#: ``message(sender, text, minute=…)``: the ``message`` fixture's builder.
MessageFactory = Callable[..., ChatMessage]


@attrs.define
class Clock:
    """A clock tests move by hand."""

    now: dt.datetime = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> dt.datetime:
        self.now += dt.timedelta(seconds=seconds)
        return self.now


def sqlite_config(path: Path, **sections: object) -> Config:
    return attrs.evolve(Config(), store=StoreConfig(path=str(path)), **sections)


def redis_config(url: str, prefix: str, **sections: object) -> Config:
    store = StoreConfig(backend="redis", url=url, prefix=prefix)
    return attrs.evolve(Config(), store=store, **sections)
