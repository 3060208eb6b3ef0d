"""What every stage's tests share: the repository's paths, the bot and group most tests speak for, a
clock moved by hand, and the configurations of the SQLite and Redis stores.

pytest puts ``tests/`` on ``sys.path`` (``pythonpath`` in ``pyproject.toml``), so the tests import
these by name: ``from base_support import BOT, GROUP, T0``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import attrs

from promptweave import Bot, ChatMessage, Config
from promptweave.config import StoreConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "turns"

#: Python source that runs ``promptweave render`` of an example turn in the process it is given
#: to (``python -c``), its output swallowed: the start-up tests add what they count around it.
RENDER_SCRIPT = (
    "import contextlib, io, sys\n"
    "from promptweave.cli.main import cli\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    try:\n"
    "        cli(['render', 'examples/turns/at_question.json'], prog_name='promptweave')\n"
    "    except SystemExit as exit:\n"
    "        assert not exit.code, exit.code\n"
)
#: The tests' data files: recorded expectations and hand-written inputs.
DATA = ROOT / "tests" / "data"
CST = dt.timezone(dt.timedelta(hours=8))
SHANGHAI = CST
T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=SHANGHAI)
BOT = Bot(id="10001", name="小织", aliases=("织织",), peer_bot_ids=("10002",))
GROUP = "20001"
NONEBOT_CONFIG = ROOT / "tests" / "data" / "nonebot.toml"


def without_group_messages(name: str, directory: Path) -> Path:
    """The example turn file ``name`` with no group messages, written to ``directory``: for tests
    whose figures (lengths, budgets) are about another stage and should not move when the group
    timeline's lines do (those are the timeline's tests, ``tests/messages/``)."""
    turn = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    turn.pop("recent_messages", None)
    path = directory / f"{name}_without_group_messages.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    return path


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
