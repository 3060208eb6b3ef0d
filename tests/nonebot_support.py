"""The NoneBot session of the ``promptweave.contrib.nonebot`` plugin's tests, as nonebug would start
it, but only for the tests that ask for it.

nonebug's own pytest plugin is switched off (``-p no:nonebug`` in pyproject.toml): its session
fixtures are autouse, so they would start NoneBot in a run of any folder. :func:`nonebot_started`
does what they do, once per run, at the first test that needs it: ``tests/nonebot/`` (all of it)
and the docs test that imports the plugin's module to check the names the docs give. The root
conftest imports it, so the two share one session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from base_support import NONEBOT_CONFIG

__all__ = ["NONEBOT_INIT", "nonebot_started"]

#: What ``nonebot.init`` is given.
NONEBOT_INIT = {
    "driver": "~fastapi",
    "promptweave_config": str(NONEBOT_CONFIG),
    "nickname": ["小织"],
    "log_level": "WARNING",
}


@pytest.fixture(scope="session")
async def nonebot_started(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[None]:
    """NoneBot initialised, the OneBot v11 adapter registered, the plugin loaded, and the driver's
    lifespan running; the plugin is loaded before the lifespan starts, so its start-up hook
    (opening the promptweave loop) runs. nonebot-plugin-localstore, which the plugin's
    distribution brings, keeps its folders in a temporary directory, never the user's."""
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter
    from nonebot.matcher import matchers
    from nonebug.fixture import lifespan_ctx
    from nonebug.provider import NoneBugProvider

    localstore = tmp_path_factory.mktemp("localstore")
    nonebot.init(
        **NONEBOT_INIT,
        localstore_data_dir=str(localstore / "data"),
        localstore_cache_dir=str(localstore / "cache"),
        localstore_config_dir=str(localstore / "config"),
    )
    matchers.set_provider(NoneBugProvider)
    nonebot.get_driver().register_adapter(Adapter)
    nonebot.load_plugin("promptweave.contrib.nonebot")
    async with lifespan_ctx():
        yield
