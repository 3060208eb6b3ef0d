"""Shared fixtures: isolation from the developer's environment, example turns, a fixed clock,
runtimes on in-memory, SQLite and Redis stores, message builders.

The Redis tests use the server at ``$PROMPTWEAVE_TEST_REDIS_URL``, each under a key prefix of its
own that is deleted afterwards. Without the variable they are skipped, and the run ends with one
line per skip reason; with ``PROMPTWEAVE_REQUIRE_REDIS=1`` (CI) a missing or unreachable server
fails them, and any skipped test fails the run.

The fuzz properties (``tests/turn/test_fuzz.py``) run under a Hypothesis profile: ``default``, a few
examples each in a fixed order, so the ordinary run stays fast and repeats itself; ``ci``
(``pytest --hypothesis-profile=ci``, what ``.ci/run`` uses), many more and new ones each run.
Neither keeps a database of examples on disk: a failure prints the example and the
``@reproduce_failure`` line that replays it.
"""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest
from hypothesis import HealthCheck, settings

from promptweave import ChatMessage, Config, Promptweave, Stores, Turn, load_turn_file

if TYPE_CHECKING:
    from promptweave.contrib.redis_store import RedisNamespace

from base_support import (
    EXAMPLES,
    NONEBOT_CONFIG,
    T0,
    Clock,
    MessageFactory,
    redis_config,
    sqlite_config,
)

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


def _load_hypothesis_profile(config: pytest.Config) -> None:
    # Hypothesis loads the profile named by --hypothesis-profile itself; without one, ours.
    if not config.getoption("--hypothesis-profile", default=None):
        settings.load_profile("default")


@pytest.fixture
def rich_turn() -> Turn:
    """The example turn that fills all fifteen sections."""
    return load_turn_file(EXAMPLES / "at_question.json")


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
def clock() -> Clock:
    return Clock()


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


REDIS_URL_ENV = "PROMPTWEAVE_TEST_REDIS_URL"
REQUIRE_REDIS_ENV = "PROMPTWEAVE_REQUIRE_REDIS"


def _no_redis(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_REDIS_ENV) == "1":
        pytest.fail(f"{REQUIRE_REDIS_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason}: the Redis tests need a server (for example redis://localhost:6379/15)")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis server's URL, checked once to answer ``PING``."""
    url = os.environ.get(REDIS_URL_ENV, "")
    if not url:
        _no_redis(f"{REDIS_URL_ENV} is not set")
    try:
        redis = importlib.import_module("redis")
    except ImportError:
        _no_redis("the redis client is not installed")
    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"the Redis server at {REDIS_URL_ENV}={url} does not answer: {exc}")
    finally:
        client.close()
    return url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    from promptweave.contrib.redis_store import connect

    prefix = f"pwtest:{uuid.uuid4().hex}:"
    yield prefix
    client = connect(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def redis_namespace(redis_url: str, redis_prefix: str) -> Iterator[RedisNamespace]:
    from promptweave.contrib.redis_store import RedisNamespace, connect

    client = connect(redis_url)
    yield RedisNamespace(client, redis_prefix)
    client.close()


@pytest.fixture
def redis_runtime(redis_url: str, redis_prefix: str, clock: Clock) -> Iterator[Promptweave]:
    runtime = Promptweave.from_config(redis_config(redis_url, redis_prefix), clock=clock)
    assert runtime.stores.unavailable is None
    yield runtime
    runtime.close()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def runtime(request: pytest.FixtureRequest) -> Promptweave:
    """A runtime on each backend: the behaviour must not depend on the store."""
    return request.getfixturevalue(f"{request.param}_runtime")


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


# -- NoneBot2: the promptweave.contrib.nonebot plugin under nonebug (tests/nonebot/test_nonebot.py) ---------------------


def pytest_configure(config: pytest.Config) -> None:
    from nonebug import NONEBOT_INIT_KWARGS

    _load_hypothesis_profile(config)

    # nonebug's session fixture calls nonebot.init(**these).
    config.stash[NONEBOT_INIT_KWARGS] = {
        "driver": "~fastapi",
        "promptweave_config": str(NONEBOT_CONFIG),
        "nickname": ["小织"],
        "log_level": "WARNING",
    }


@pytest.fixture(scope="session", autouse=True)
async def after_nonebot_init(after_nonebot_init: None) -> None:
    """Load the plugin after ``nonebot.init`` and before nonebug starts the driver's lifespan, so
    its start-up hook (opening the promptweave loop) runs."""
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter

    nonebot.get_driver().register_adapter(Adapter)
    nonebot.load_plugin("promptweave.contrib.nonebot")
