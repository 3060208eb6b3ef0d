"""An opt-in pytest plugin for testing promptweave plugins.

Enable it in a ``conftest.py``::

    pytest_plugins = ["promptweave.testing"]

then::

    def test_my_section(register_plugin, sample_turn):
        runtime = register_plugin(MyPlugin())
        assert "【我的段】" in runtime.render(sample_turn).system_prompt
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest

from promptweave.config import Config, StoreConfig
from promptweave.runtime import Promptweave
from promptweave.turn import Bot, ChatMessage, SpeakTrigger, Turn

__all__ = ["promptweave_runtime", "register_plugin", "sample_turn"]

#: Start-up settings for tests: no entry-point plugins, so what is installed does not leak in, and
#: nothing cached between runs (plugin discovery), so a test reads and writes no cache file.
TEST_ENVIRON = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1", "PROMPTWEAVE_CACHE_DIR": ""}


@pytest.fixture
def promptweave_runtime() -> Promptweave:
    """A fresh runtime with the built-in plugins only, in-memory stores and strict rendering."""
    config = Config(store=StoreConfig(backend="memory"))
    return Promptweave.from_config(config, environ=TEST_ENVIRON, strict=True)


@pytest.fixture
def register_plugin(
    promptweave_runtime: Promptweave,
) -> Iterator[Callable[..., Promptweave]]:
    """``register_plugin(plugin, name=None)`` registers a plugin for this test only.

    :returns: the runtime with the plugin registered; it is unregistered after the test.
    """
    registered: list[str] = []

    def register(plugin: object, name: str | None = None) -> Promptweave:
        registered.append(promptweave_runtime.add_plugin(plugin, name=name))
        return promptweave_runtime

    yield register
    for name in reversed(registered):
        promptweave_runtime.remove_plugin(name)


@pytest.fixture
def sample_turn() -> Turn:
    """A small group-chat turn: a member @-mentions the bot with a question."""
    return Turn(
        bot=Bot(id="10001", name="小织", aliases=("织织",)),
        group_id="20001",
        trigger=SpeakTrigger.MENTION,
        message=ChatMessage(
            id="501",
            sender_id="30017",
            sender_name="青柠汽水",
            text="@小织 今晚的桌游局几点开始？",
            addressed=True,
            time=dt.datetime(2026, 11, 28, 20, 41, tzinfo=dt.timezone(dt.timedelta(hours=8))),
        ),
    )
