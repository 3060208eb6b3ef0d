"""One import package: the repository's three folders install as ``promptweave`` and nothing else.

``framework/`` is ``promptweave``, ``builtin_plugins/`` is ``promptweave.builtin_plugins`` and
``contrib/`` is ``promptweave.contrib`` (``docs/architecture.md``, "One import package"), so a
bot's own ``contrib`` package or ``framework.py`` can never shadow the framework's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from base_support import ROOT

import promptweave

#: The repository's folders and the import package each one is.
FOLDERS = {
    "framework": "promptweave",
    "builtin_plugins": "promptweave.builtin_plugins",
    "contrib": "promptweave.contrib",
}


def _setuptools() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        table: dict[str, object] = tomllib.load(file)["tool"]["setuptools"]
    return table


def _packages_in_the_tree() -> set[str]:
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            if relative.parts[:1] == ("examples",):
                continue  # contrib/examples/ holds example distributions, not promptweave
            if relative.parts and (ROOT / folder / relative.parts[0] / "pyproject.toml").is_file():
                continue  # a distribution of its own (contrib/nonebot-plugin-promptweave)
            found.add(".".join((package, *relative.parts)))
    return found


def test_the_folders_map_onto_one_import_package() -> None:
    assert _setuptools()["package-dir"] == {package: folder for folder, package in FOLDERS.items()}


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    assert sorted(_setuptools()["packages"]) == sorted(_packages_in_the_tree())  # type: ignore[call-overload]


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_no_folder_is_importable_under_its_own_name(name: str) -> None:
    assert importlib.util.find_spec(name) is None


def test_the_package_is_the_framework_folder() -> None:
    assert Path(promptweave.__file__).resolve().parent == ROOT / "framework"


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The file names inside a wheel built from a copy of the tracked files."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"),
            *("--wheel-dir", str(root / "dist"), str(source)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = (root / "dist").glob("promptweave-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_one_top_level_package(wheel_names: list[str]) -> None:
    tops = {name.split("/")[0] for name in wheel_names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"promptweave"}


def test_the_wheel_holds_the_plugins_and_the_persona_pack(wheel_names: list[str]) -> None:
    assert "promptweave/builtin_plugins/static_sections.py" in wheel_names
    assert "promptweave/builtin_plugins/persona_packs/default.toml" in wheel_names
    assert "promptweave/contrib/nonebot/__init__.py" in wheel_names
    assert "promptweave/py.typed" in wheel_names
    assert not [name for name in wheel_names if "/examples/" in name]
    assert not [name for name in wheel_names if "nonebot_plugin_promptweave" in name]


def test_a_bot_folder_with_its_own_contrib_and_framework_keeps_the_plugin(tmp_path: Path) -> None:
    """A NoneBot bot folder that has its own ``contrib`` package and a ``framework.py`` beside
    ``bot.py``: the plugin and ``from promptweave import …`` still load, and the bot's own modules
    stay the bot's."""
    (tmp_path / "contrib").mkdir()
    (tmp_path / "contrib" / "__init__.py").write_text('OWNER = "the bot"\n', encoding="utf-8")
    (tmp_path / "framework.py").write_text('OWNER = "the bot"\n', encoding="utf-8")
    (tmp_path / "bot.py").write_text(
        textwrap.dedent(
            """
            import contrib
            import framework
            import nonebot
            from promptweave import Section, hookimpl

            nonebot.init(driver="~none")
            plugin = nonebot.load_plugin("promptweave.contrib.nonebot")
            assert plugin is not None, "the plugin did not load"
            print(plugin.module_name, plugin.metadata.name, contrib.OWNER, framework.OWNER)
            print(Section.__module__, hookimpl.project_name)
            """
        ),
        encoding="utf-8",
    )
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "bot.py"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[-2:]
    assert first.startswith("promptweave.contrib.nonebot ")
    assert first.endswith(" the bot the bot")
    assert second == "promptweave.plugins.contributions promptweave"
