"""The discovery cache of the plugin manager: what a scan of the installed distributions finds is
reused while the import path and its metadata directories are unchanged, and scanned again as
soon as a distribution is installed, removed or its entry points edited (``docs/performance.md``)."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import importlib_metadata
import pytest

import promptweave.plugins.manager as manager
from promptweave.plugins.manager import build_plugin_manager


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory at the front of the import path, where tests install distributions."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    return directory


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[manager._Installed]:
    """Every scan of the installed distributions, in order."""
    done: list[manager._Installed] = []
    scan = manager._scan_installed

    def counted() -> manager._Installed:
        done.append(scan())
        return done[-1]

    monkeypatch.setattr(manager, "_scan_installed", counted)
    return done


def _env(tmp_path: Path) -> dict[str, str]:
    return {manager.ENV_CACHE_DIR: str(tmp_path / "cache")}


def _install(site: Path, name: str, version: str, points: str) -> Path:
    """A distribution as pip leaves it: a ``.dist-info`` directory with its entry points."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(points, encoding="utf-8")
    _touch_later(site)
    return info


def _touch_later(*paths: Path) -> None:
    """Move modification times a second on: file systems with coarse times must see a change."""
    for path in paths:
        later = path.stat().st_mtime_ns + 1_000_000_000
        os.utime(path, ns=(later, later))


def _found(installed: manager._Installed) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (
            entry_point.name,
            entry_point.value,
            None if entry_point.dist is None else entry_point.dist.name,
            None if entry_point.dist is None else entry_point.dist.version,
        )
        for entry_point in installed.entry_points
    ]


def test_a_second_start_reads_the_cache_instead_of_scanning(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    first = manager._installed_plugins(_env(tmp_path))
    second = manager._installed_plugins(_env(tmp_path))
    assert len(scans) == 1
    assert _found(second) == _found(first) == [("notice", "notice_mod", "notice", "1.2")]
    assert second.own_version == first.own_version == importlib_metadata.version("promptweave")
    assert isinstance(second.entry_points[0], manager._EntryPoint)


def test_installing_a_distribution_invalidates_the_cache(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    manager._installed_plugins(_env(tmp_path))
    _install(site, "other", "2.0", "[promptweave]\nother = other_mod:plugin\n")
    found = _found(manager._installed_plugins(_env(tmp_path)))
    assert len(scans) == 2
    assert sorted(found) == [
        ("notice", "notice_mod", "notice", "1.2"),
        ("other", "other_mod:plugin", "other", "2.0"),
    ]


def test_removing_a_distribution_invalidates_the_cache(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    info = _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    manager._installed_plugins(_env(tmp_path))
    for file in info.iterdir():
        file.unlink()
    info.rmdir()
    _touch_later(site)
    assert _found(manager._installed_plugins(_env(tmp_path))) == []
    assert len(scans) == 2


def test_editing_entry_points_in_place_invalidates_the_cache(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    info = _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    manager._installed_plugins(_env(tmp_path))
    points = info / "entry_points.txt"
    points.write_text("[promptweave]\nnotice = notice_mod:v2\n", encoding="utf-8")
    _touch_later(points)
    found = _found(manager._installed_plugins(_env(tmp_path)))
    assert found == [("notice", "notice_mod:v2", "notice", "1.2")]
    assert len(scans) == 2


def test_another_import_path_has_its_own_cache(
    site: Path, tmp_path: Path, scans: list[manager._Installed], monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    manager._installed_plugins(_env(tmp_path))
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry != str(site)])
    assert _found(manager._installed_plugins(_env(tmp_path))) == []
    assert len(scans) == 2


def test_a_damaged_cache_file_is_scanned_again_and_rewritten(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    _install(site, "notice", "1.2", "[promptweave]\nnotice = notice_mod\n")
    manager._installed_plugins(_env(tmp_path))
    (file,) = (tmp_path / "cache").iterdir()
    file.write_text('{"key": ', encoding="utf-8")
    assert _found(manager._installed_plugins(_env(tmp_path)))[0][0] == "notice"
    assert _found(manager._installed_plugins(_env(tmp_path)))[0][0] == "notice"
    assert len(scans) == 2


def test_an_empty_cache_directory_setting_turns_the_cache_off(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    env = {manager.ENV_CACHE_DIR: "", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    manager._installed_plugins(env)
    manager._installed_plugins(env)
    assert len(scans) == 2
    assert not (tmp_path / "xdg").exists()


def test_the_cache_lives_under_xdg_cache_home_by_default(
    site: Path, tmp_path: Path, scans: list[manager._Installed], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(manager.ENV_CACHE_DIR)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    manager._installed_plugins(env)
    manager._installed_plugins(env)
    assert len(scans) == 1
    assert [path.name for path in (tmp_path / "xdg" / "promptweave").iterdir()] == ["plugins.json"]
    assert (tmp_path / "xdg" / "promptweave").stat().st_mode & 0o077 == 0  # private to its user


def test_an_environ_that_does_not_name_the_cache_leaves_it_where_the_process_keeps_it(
    site: Path, tmp_path: Path, scans: list[manager._Installed], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(manager.ENV_CACHE_DIR, str(tmp_path / "process"))
    manager._installed_plugins({"PROMPTWEAVE_DISABLE_PLUGINS": "notice"})
    manager._installed_plugins({})
    assert len(scans) == 1
    assert [path.name for path in (tmp_path / "process").iterdir()] == ["plugins.json"]


def test_the_file_keeps_the_newest_scans_only(
    site: Path, tmp_path: Path, scans: list[manager._Installed], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager, "_CACHE_SCANS", 2)
    for name in ("first", "second", "third"):
        _install(site, name, "1.0", f"[promptweave]\n{name} = {name}_mod\n")
        manager._installed_plugins(_env(tmp_path))
    (file,) = (tmp_path / "cache").iterdir()
    assert len(json.loads(file.read_text(encoding="utf-8"))["scans"]) == 2
    assert len(scans) == 3
    # The newest is still there: asked again, nothing is scanned.
    manager._installed_plugins(_env(tmp_path))
    assert len(scans) == 3


def test_a_finder_the_cache_cannot_watch_turns_it_off(
    site: Path, tmp_path: Path, scans: list[manager._Installed], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Finder:
        """A meta path finder with distributions of its own, from nowhere on ``sys.path``."""

        def find_spec(self, *_args: object) -> None:
            return None

        def find_distributions(self, *_args: object) -> list[object]:
            return []

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    manager._installed_plugins(_env(tmp_path))
    manager._installed_plugins(_env(tmp_path))
    assert len(scans) == 2


def test_a_cached_entry_point_loads_what_importlib_metadata_loads(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("cached_ep_target")
    module.holder = types.SimpleNamespace(plugin=object())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cached_ep_target", module)
    for value in ("cached_ep_target", "cached_ep_target:holder.plugin"):
        cached = manager._EntryPoint(name="x", value=value, dist=None)
        real = importlib_metadata.EntryPoint(name="x", value=value, group="promptweave")
        assert cached.load() is real.load()
    with pytest.raises(ValueError, match="Invalid object reference"):
        manager._EntryPoint(name="x", value="not a reference!", dist=None).load()


def test_a_plugin_found_in_the_cache_is_loaded_like_a_scanned_one(
    site: Path, tmp_path: Path, scans: list[manager._Installed]
) -> None:
    (site / "cached_notice_plugin.py").write_text(
        "from promptweave import hookimpl\n\n@hookimpl\ndef register_sections(register):\n    pass\n",
        encoding="utf-8",
    )
    _install(site, "cached-notice", "3.1", "[promptweave]\ncached_notice = cached_notice_plugin\n")
    env = _env(tmp_path)
    built = [build_plugin_manager(environ=env) for _ in range(2)]
    assert len(scans) == 1
    for plugins in built:
        info = plugins.infos["cached_notice"]
        assert (info.kind, info.distribution, info.version) == ("external", "cached-notice", "3.1")
        assert plugins.hooks_of("cached_notice") == ["register_sections"]
    assert built[0].infos == built[1].infos


def test_without_a_home_directory_nothing_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert manager.cache_directory({}) is None
    assert manager.cache_directory({"XDG_CACHE_HOME": "/x"}) == Path("/x/promptweave")
