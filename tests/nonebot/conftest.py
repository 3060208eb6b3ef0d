"""The NoneBot session of the ``promptweave.contrib.nonebot`` plugin's tests, under nonebug.

nonebug's pytest plugin is switched off for the whole run (``-p no:nonebug`` in pyproject.toml):
its session fixtures are autouse, so loaded as a plugin they would start NoneBot for a run of any
folder. Imported here, they serve this folder's tests alone, and NoneBot starts at the first of
them.
"""

from __future__ import annotations

import pytest
from base_support import NONEBOT_CONFIG
from nonebug import NONEBOT_INIT_KWARGS
from nonebug.fixture import _nonebot_init, nonebug_app, nonebug_init

__all__ = ["_nonebot_init", "after_nonebot_init", "nonebug_app", "nonebug_init"]


def pytest_configure(config: pytest.Config) -> None:
    # nonebug's session fixture calls nonebot.init(**these).
    config.stash[NONEBOT_INIT_KWARGS] = {
        "driver": "~fastapi",
        "promptweave_config": str(NONEBOT_CONFIG),
        "nickname": ["小织"],
        "log_level": "WARNING",
    }


@pytest.fixture(scope="session", autouse=True)
async def after_nonebot_init(_nonebot_init: None) -> None:
    """Load the plugin after ``nonebot.init`` and before nonebug starts the driver's lifespan, so
    its start-up hook (opening the promptweave loop) runs."""
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter

    nonebot.get_driver().register_adapter(Adapter)
    nonebot.load_plugin("promptweave.contrib.nonebot")
