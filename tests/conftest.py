"""What every test folder needs: isolation from the developer's environment, the Hypothesis
profiles, the pytest plugins, and the cheap builders used across stages (an example turn, a fixed
clock, group messages).

A stage's own fixtures are in its folder's ``conftest.py`` (``tests/<stage>/conftest.py``); the
stores and runtimes on each backend, and the test Redis server, are in ``runtime_fixtures`` and
imported by the folders whose tests use them. The NoneBot session (``nonebot_support``) is here
but starts only for the tests that ask for it (``tests/nonebot/``, and the docs test that imports
the plugin), so no other run starts NoneBot.

The fuzz properties (``tests/turn/test_fuzz.py``) run under a Hypothesis profile: ``default``, a few
examples each in a fixed order, so the ordinary run stays fast and repeats itself; ``ci``
(``pytest --hypothesis-profile=ci``, what ``.ci/run`` uses), many more and new ones each run.
Neither keeps a database of examples on disk: a failure prints the example and the
``@reproduce_failure`` line that replays it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import tempfile
from pathlib import Path

import pytest
from base_support import EXAMPLES, ROOT, T0, Clock, MessageFactory
from hypothesis import HealthCheck, settings
from nonebot_support import nonebot_started

from promptweave import ChatMessage, Turn, load_turn_file

__all__ = ["FUZZ_EXAMPLES", "clock", "message", "nonebot_started", "rich_turn"]

# pytester: tests/docs/ alone uses it, but pytest takes ``pytest_plugins`` from the root conftest
# only, and pytester's ``--runpytest`` option must exist when the command line is read.
pytest_plugins = ["promptweave.testing", "skip_summary", "pytester"]

# The command's caches (plugin discovery, generated code) of everything this run imports or starts
# go to a directory of its own, never to the developer's ~/.cache; each test then gets its own
# (``_isolated_environment``). Set before any test module imports the command.
_RUN_CACHE = tempfile.TemporaryDirectory(prefix="promptweave-test-cache-")
os.environ["PROMPTWEAVE_CACHE_DIR"] = _RUN_CACHE.name

#: Generated inputs per fuzz property: ``default`` keeps the ordinary run fast, ``ci`` digs.
FUZZ_EXAMPLES = {"default": 20, "ci": 500}
settings.register_profile(
    "default",
    max_examples=FUZZ_EXAMPLES["default"],
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci",
    max_examples=FUZZ_EXAMPLES["ci"],
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis loads the profile named by --hypothesis-profile itself; without one, ours.
    if not config.getoption("--hypothesis-profile", default=None):
        settings.load_profile("default")


def _examples_tree() -> dict[str, tuple[int, int]]:
    """Every file under ``examples/``: its size and modification time."""
    tree = {}
    for folder, _dirs, files in os.walk(ROOT / "examples"):
        for name in files:
            path = Path(folder, name)
            stat = path.stat()
            tree[str(path.relative_to(ROOT))] = (stat.st_size, stat.st_mtime_ns)
    return tree


_EXAMPLES_BEFORE = _examples_tree()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test that writes into the repository's ``examples/`` (a store opened beside an example
    config, say) fails the run: the examples are what a user copies, and a test's leftovers there
    would also feed the next run's tests."""
    after = _examples_tree()
    changed = sorted(
        name
        for name in _EXAMPLES_BEFORE.keys() | after.keys()
        if _EXAMPLES_BEFORE.get(name) != after.get(name)
    )
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"examples/ changed during the run: {', '.join(changed)}; a test wrote there "
                "(give its store a path under tmp_path)",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's promptweave.toml, entry points, plugin env vars or caches."""
    for name in (
        "PROMPTWEAVE_CONFIG",
        "PROMPTWEAVE_LOAD_PLUGINS",
        "PROMPTWEAVE_DISABLE_PLUGINS",
        "PROMPTWEAVE_TRACE_PLUGINS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    # The command's caches go to the test's own directory.
    monkeypatch.setenv("PROMPTWEAVE_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def rich_turn() -> Turn:
    """The example turn that fills all fifteen sections."""
    return load_turn_file(EXAMPLES / "at_question.json")


@pytest.fixture
def clock() -> Clock:
    return Clock()


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
