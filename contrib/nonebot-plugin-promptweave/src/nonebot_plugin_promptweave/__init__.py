"""nonebot-plugin-promptweave: promptweave's NoneBot2 integration as a NoneBot plugin
distribution (``docs/bot.md``).

Loading it loads ``promptweave.contrib.nonebot`` (the plugin that carries each message through
promptweave's live loop) and nonebot-plugin-localstore, whose data folder for this plugin holds the
SQLite store unless ``PROMPTWEAVE_STORE`` (NoneBot's ``.env``) or ``[store] path``
(``promptweave.toml``) names another place.
"""

from __future__ import annotations

from nonebot import require
from nonebot.plugin import PluginMetadata

require("nonebot_plugin_localstore")
require("promptweave.contrib.nonebot")

import nonebot_plugin_localstore as localstore  # noqa: E402

from promptweave.contrib import nonebot as integration  # noqa: E402

__all__ = ["DATA_DIR"]

#: This plugin's data folder (nonebot-plugin-localstore's), where the SQLite store goes.
DATA_DIR = localstore.get_plugin_data_dir()
integration.use_data_dir(DATA_DIR)

__plugin_meta__ = PluginMetadata(
    name="promptweave",
    description="QQ group chat through promptweave: when to answer, what the model sees, "
    "paced bubbles, and what it learns of each group",
    usage=integration.USAGE,
    type="application",
    homepage=integration.HOMEPAGE,
    config=integration.PluginConfig,
    supported_adapters={"~onebot.v11"},
)
