"""The ``nonebot-plugin-promptweave`` distribution (``contrib/nonebot-plugin-promptweave``),
installed for real with pip, then loaded in the NoneBot session by ``nonebot.load_plugin``
(``docs/bot.md``); its messages are answered through the integration it loads."""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nonebot
import pytest
from base_support import ROOT
from bot_process_support import install_distribution
from nonebot.adapters.onebot.v11 import Bot
from nonebug import App
from onebot_events import SELF_ID, at, group_message_json, parse, preprocess, text


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The distribution installed with pip into a fresh directory on ``sys.path``; the checkout
    stays untouched (pip builds from a copy)."""
    site = install_distribution(tmp_path_factory.mktemp("nonebot-plugin"))
    sys.path.insert(0, str(site))
    try:
        yield site
    finally:
        sys.path.remove(str(site))


@pytest.fixture(scope="module")
def loaded(plugin_site: Path, nonebot_started: None) -> Iterator[nonebot.plugin.Plugin]:
    """``nonebot.load_plugin("nonebot_plugin_promptweave")``, once: NoneBot refuses to load a
    plugin twice. The data folder it hands the integration is forgotten afterwards (the
    session's loop was opened without it). ``[tool.nonebot] plugins`` is tested in a real NoneBot
    process (``test_plugin_process.py``), since it would load the same plugin again here."""
    import promptweave.contrib.nonebot as integration

    before = integration._state.data_dir
    plugin = nonebot.load_plugin("nonebot_plugin_promptweave")
    assert plugin is not None
    try:
        yield plugin
    finally:
        integration._state.data_dir = before


def test_load_plugin_gives_the_plugin_with_complete_metadata(
    loaded: nonebot.plugin.Plugin,
) -> None:
    from promptweave.contrib.nonebot import HOMEPAGE, USAGE, PluginConfig

    meta = loaded.metadata
    assert meta is not None
    assert meta.name == "promptweave"
    assert meta.type == "application"
    assert meta.usage == USAGE
    for key in ("PROMPTWEAVE_CONFIG", "PROMPTWEAVE_BASE_URL", "PROMPTWEAVE_API_KEY"):
        assert key in meta.usage
    assert meta.config is PluginConfig
    assert meta.supported_adapters == {"~onebot.v11"}
    assert meta.homepage == HOMEPAGE


def test_the_homepage_is_the_repositorys_bot_guide_as_both_pyprojects_name_it(
    plugin_site: Path,
) -> None:
    from promptweave.contrib.nonebot import HOMEPAGE

    with (ROOT / "pyproject.toml").open("rb") as file:
        repository = tomllib.load(file)["project"]["urls"]["Repository"]
    assert f"{repository}/blob/main/docs/bot.md" == HOMEPAGE
    assert (ROOT / "docs" / "bot.md").is_file()
    installed = importlib.metadata.distribution("nonebot-plugin-promptweave")
    assert Path(str(installed.locate_file(""))).resolve() == plugin_site.resolve()
    urls = dict(url.split(", ", 1) for url in installed.metadata.get_all("Project-URL") or [])
    assert urls == {"Homepage": HOMEPAGE, "Repository": repository}
    assert installed.metadata["Name"] == "nonebot-plugin-promptweave"


def test_loading_it_loads_the_integration_and_localstore(loaded: nonebot.plugin.Plugin) -> None:
    names = {plugin.module_name for plugin in nonebot.get_loaded_plugins()}
    assert {"promptweave.contrib.nonebot", "nonebot_plugin_localstore"} <= names


def test_the_store_goes_into_localstores_data_folder_for_the_plugin(
    loaded: nonebot.plugin.Plugin,
) -> None:
    import nonebot_plugin_localstore as localstore
    import nonebot_plugin_promptweave

    import promptweave.contrib.nonebot as integration

    expected = localstore.BASE_DATA_DIR / "nonebot_plugin_promptweave"
    assert expected == nonebot_plugin_promptweave.DATA_DIR
    assert expected.is_dir()
    assert integration._state.data_dir == expected


async def test_through_the_loaded_distribution_an_at_question_is_answered(
    loaded: nonebot.plugin.Plugin, app: App, use_loop: Any
) -> None:
    from promptweave.contrib.nonebot import messages

    use_loop("周六晚上七点")
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(group_message_json(group_id=20001, segments=[at(SELF_ID), text(" 几点？")]))
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_call_api(
            "send_group_msg",
            {"group_id": 20001, "message": [{"type": "text", "data": {"text": "周六晚上七点"}}]},
            result={"message_id": 9301},
        )
