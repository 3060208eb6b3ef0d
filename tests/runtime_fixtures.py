"""Fixtures shared by the stage folders that need stores or a whole runtime: the test Redis server,
and a runtime on each backend.

Not a conftest: a folder's ``conftest.py`` imports the ones its tests ask for, so a run of a folder
that tests no store opens none, and each folder's conftest says what its tests build.

The Redis fixtures use the server at ``$PROMPTWEAVE_TEST_REDIS_URL``, each test under a key prefix
of its own that is deleted afterwards. Without the variable they are skipped, and the run ends with
one line per skip reason; with ``PROMPTWEAVE_REQUIRE_REDIS=1`` (CI) a missing or unreachable server
fails them, and any skipped test fails the run.
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from promptweave import Config, Promptweave, Stores

if TYPE_CHECKING:
    from promptweave.contrib.redis_store import RedisNamespace

from base_support import Clock, redis_config, sqlite_config

__all__ = [
    "BACKENDS",
    "REDIS_URL_ENV",
    "REQUIRE_REDIS_ENV",
    "memory_runtime",
    "redis_namespace",
    "redis_prefix",
    "redis_runtime",
    "redis_url",
    "runtime",
    "sqlite_runtime",
]

REDIS_URL_ENV = "PROMPTWEAVE_TEST_REDIS_URL"
REQUIRE_REDIS_ENV = "PROMPTWEAVE_REQUIRE_REDIS"
#: The store backends every backend-parametrised fixture runs on.
BACKENDS = ("memory", "sqlite", "redis")


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


# -- a whole runtime: for tests of a whole turn, or of a stage reached only through the runtime ----


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


@pytest.fixture
def redis_runtime(redis_url: str, redis_prefix: str, clock: Clock) -> Iterator[Promptweave]:
    runtime = Promptweave.from_config(redis_config(redis_url, redis_prefix), clock=clock)
    assert runtime.stores.unavailable is None
    yield runtime
    runtime.close()


@pytest.fixture(params=BACKENDS)
def runtime(request: pytest.FixtureRequest) -> Promptweave:
    """A runtime on each backend: the behaviour must not depend on the store."""
    return request.getfixturevalue(f"{request.param}_runtime")
