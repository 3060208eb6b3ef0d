"""The plugin manager factory: load order, environment switches, entry points, errors."""

from __future__ import annotations

import sys
import types

import pluggy
import pytest

import promptweave.contrib
import promptweave.plugins.manager as plugins_module
from promptweave import PluginImportError, PluginValidationError, Section, hookimpl
from promptweave.plugins.manager import DEFAULT_PLUGINS, build_plugin_manager
from promptweave.plugins.registry import collect_registries

BUILTIN_NAMES = [dotted.rsplit(".", 1)[-1] for dotted in DEFAULT_PLUGINS]


class _FakeDist:
    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.version = version


class _FakeEntryPoint:
    def __init__(self, name: str, target, dist: _FakeDist) -> None:
        self.name = name
        self.value = f"{name}_module"
        self.dist = dist
        self._target = target

    def load(self):
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


def _section_plugin(section_id: str) -> types.ModuleType:
    module = types.ModuleType(f"{section_id}_module")

    @hookimpl
    def register_sections(register):
        register(
            Section(
                id=section_id, title=section_id, render=lambda c: section_id, after="current_time"
            )
        )

    module.register_sections = register_sections  # type: ignore[attr-defined]
    return module


@pytest.fixture(autouse=True)
def entry_points(monkeypatch):
    """Fake the distributions installed in the environment (as pluggy's own tests do)."""
    installed: list[_FakeEntryPoint] = []
    monkeypatch.setattr(
        plugins_module,
        "_installed_plugins",
        lambda env: plugins_module._Installed(own_version="0.1.0", entry_points=tuple(installed)),
    )
    return installed


def test_builtins_are_registered_like_plugins_in_order():
    manager = build_plugin_manager(environ={})
    assert list(manager.infos)[: len(BUILTIN_NAMES)] == BUILTIN_NAMES
    assert all(manager.infos[name].kind == "builtin" for name in BUILTIN_NAMES)
    assert manager.hooks_of("static_sections") == ["register_sections"]


def test_a_builtin_can_be_disabled_by_its_short_name():
    manager = build_plugin_manager(environ={"PROMPTWEAVE_DISABLE_PLUGINS": "turn_sections, x"})
    ids = [entry.item.id for entry in collect_registries(manager.pm).sections]
    assert "turn_sections" not in manager.infos
    assert "current_time" not in ids and "persona" in ids


def test_entry_points_are_loaded_with_their_distribution(entry_points):
    entry_points.append(
        _FakeEntryPoint(
            "acme", _section_plugin("acme_note"), _FakeDist("acme-promptweave", "1.2.3")
        )
    )
    manager = build_plugin_manager(environ={})
    info = manager.infos["acme"]
    assert (info.kind, info.distribution, info.version) == ("external", "acme-promptweave", "1.2.3")
    ids = [entry.item.id for entry in collect_registries(manager.pm).sections]
    assert ids[ids.index("current_time") + 1] == "acme_note"


def test_load_plugins_is_an_allowlist_of_distributions(entry_points):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme_note"), _FakeDist("acme-promptweave", "1.0"))
    )
    entry_points.append(
        _FakeEntryPoint(
            "other", _section_plugin("other_note"), _FakeDist("other-promptweave", "1.0")
        )
    )
    only_acme = build_plugin_manager(environ={"PROMPTWEAVE_LOAD_PLUGINS": "acme-promptweave"})
    assert "acme" in only_acme.infos and "other" not in only_acme.infos
    none = build_plugin_manager(environ={"PROMPTWEAVE_LOAD_PLUGINS": ""})
    assert not {"acme", "other"} & set(none.infos)
    assert set(BUILTIN_NAMES) <= set(none.infos)


def test_autoload_can_be_switched_off(entry_points):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme_note"), _FakeDist("acme-promptweave", "1.0"))
    )
    manager = build_plugin_manager(environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "acme" not in manager.infos


def test_disable_plugins_blocks_an_entry_point(entry_points):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme_note"), _FakeDist("acme-promptweave", "1.0"))
    )
    manager = build_plugin_manager(environ={"PROMPTWEAVE_DISABLE_PLUGINS": "acme"})
    assert "acme" not in manager.infos


def test_import_error_names_plugin_and_distribution_version(entry_points):
    entry_points.append(
        _FakeEntryPoint(
            "broken",
            ModuleNotFoundError("No module named 'numpyy'"),
            _FakeDist("broken-plugin", "0.4.1"),
        )
    )
    with pytest.raises(
        PluginImportError,
        match=r'Error importing plugin "broken" \(broken_module\) from distribution '
        r"broken-plugin 0\.4\.1: ModuleNotFoundError: No module named",
    ):
        build_plugin_manager(environ={})


def test_misspelled_hook_fails_at_start_up_naming_plugin_and_distribution(entry_points):
    typo = types.ModuleType("typo_module")

    @hookimpl
    def register_section(register):
        """Misspelled: register_sections."""

    typo.register_section = register_section  # type: ignore[attr-defined]
    entry_points.append(_FakeEntryPoint("typo", typo, _FakeDist("typo-plugin", "2.0")))
    with pytest.raises(
        PluginValidationError,
        match=r'plugin "typo" from distribution typo-plugin 2\.0: .*register_section',
    ):
        build_plugin_manager(environ={})
    # It is also a pluggy error, for code that catches that.
    assert issubclass(PluginValidationError, pluggy.PluginValidationError)


def test_load_plugins_allowlist_normalises_distribution_names(entry_points):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme_note"), _FakeDist("Acme_Promptweave", "1.0"))
    )
    manager = build_plugin_manager(environ={"PROMPTWEAVE_LOAD_PLUGINS": "acme-promptweave"})
    assert "acme" in manager.infos


def test_entry_point_named_like_a_loaded_plugin_is_an_error(entry_points):
    entry_points.append(
        _FakeEntryPoint("persona_packs", _section_plugin("x_note"), _FakeDist("x-plugin", "0.1"))
    )
    with pytest.raises(
        PluginImportError,
        match=r'plugin "persona_packs" from distribution x-plugin 0\.1 has the name '
        r"of the already loaded builtin plugin",
    ):
        build_plugin_manager(environ={})


def test_tryfirst_and_trylast_contributions_keep_the_builtin_chain(register_plugin):
    class Last:
        @hookimpl(trylast=True)
        def register_sections(self, register):
            register(
                Section(
                    id="persona",
                    title="p",
                    render=lambda c: "【新人格】",
                    replace=True,
                    volatility="static",
                )
            )
            register(Section(id="late_note", title="l", render=lambda c: "l"))

    class First:
        @hookimpl(tryfirst=True)
        def register_sections(self, register):
            register(
                Section(id="early_note", title="e", render=lambda c: "e", after="tool_context")
            )

    runtime = register_plugin(Last(), name="last")
    register_plugin(First(), name="first")
    ids = [entry.item.id for entry in runtime.registries.sections]
    assert ids[:3] == ["injection_guard", "persona", "identity"]
    assert runtime.registries.section("persona").plugin == "last"
    assert ids[-2:] == ["early_note", "late_note"]
    assert runtime.registries.section_warnings == ()


@pytest.fixture
def contrib_demo(tmp_path, monkeypatch):
    (tmp_path / "demo_notes.py").write_text(
        "from promptweave import Section, hookimpl\n\n"
        "@hookimpl\n"
        "def register_sections(register):\n"
        "    register(Section(id='demo_notes', title='demo', render=lambda c: '【演示】',\n"
        "                     after='tool_context'))\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(
        promptweave.contrib, "__path__", [*promptweave.contrib.__path__, str(tmp_path)]
    )
    yield "demo_notes"
    sys.modules.pop("promptweave.contrib.demo_notes", None)


def test_contrib_plugins_load_only_by_name(contrib_demo):
    assert contrib_demo not in build_plugin_manager(environ={}).infos
    manager = build_plugin_manager(environ={}, contrib=[contrib_demo])
    assert manager.infos[contrib_demo].kind == "contrib"
    assert plugins_module.available_contrib_plugins().count(contrib_demo) == 1


def test_unknown_contrib_plugin_is_an_error():
    with pytest.raises(PluginImportError, match="unknown contrib plugin 'nope'; available:"):
        build_plugin_manager(environ={}, contrib=["nope"])


def test_load_order_is_builtins_contrib_entry_points_extras(contrib_demo, entry_points):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme_note"), _FakeDist("acme-promptweave", "1.0"))
    )
    extra = _section_plugin("extra_note")
    manager = build_plugin_manager(environ={}, contrib=[contrib_demo], extra_plugins=[extra])
    kinds = [info.kind for info in manager.infos.values()]
    assert kinds == ["builtin"] * len(BUILTIN_NAMES) + ["contrib", "external", "extra"]


def test_trace_plugins_writes_hook_calls_to_stderr(capsys):
    manager = build_plugin_manager(environ={"PROMPTWEAVE_TRACE_PLUGINS": "1"})
    collect_registries(manager.pm)
    assert "register_sections" in capsys.readouterr().err


class _Measure:
    @hookimpl
    def measure_text(self, text: str) -> int:
        return 2 * len(text)


def test_trace_plugins_writes_each_implementation_called_through_the_door(capsys):
    manager = build_plugin_manager(
        environ={"PROMPTWEAVE_TRACE_PLUGINS": "1"}, extra_plugins=[_Measure()]
    )
    assert manager.hooks.measure_text("早上好") == 6
    err = capsys.readouterr().err
    assert "measure_text [hook]" in err
    assert "finish measure_text --> 6 [hook]" in err


def test_the_door_answers_the_same_untraced(capsys):
    manager = build_plugin_manager(environ={}, extra_plugins=[_Measure()])
    assert manager.hooks.measure_text("早上好") == 6
    assert "measure_text" not in capsys.readouterr().err


def test_an_unknown_name_to_disable_is_warned_about_with_a_suggestion(caplog):
    build_plugin_manager(environ={"PROMPTWEAVE_DISABLE_PLUGINS": "retriever, static_sections"})
    assert [record.getMessage() for record in caplog.records] == [
        "PROMPTWEAVE_DISABLE_PLUGINS names 'retriever', which is no plugin's name "
        "(did you mean 'retrievers'?); see promptweave plugins --all"
    ]


def test_names_of_entry_points_contrib_and_extras_may_be_disabled(entry_points, caplog):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme"), _FakeDist("acme-dist", "1.0"))
    )
    extra = _section_plugin("extra")
    build_plugin_manager(
        extra_plugins=[extra],
        environ={"PROMPTWEAVE_DISABLE_PLUGINS": f"acme,onebot,{extra.__name__}"},
    )
    assert caplog.records == []


def test_an_unknown_distribution_to_load_is_warned_about(entry_points, caplog):
    entry_points.append(
        _FakeEntryPoint("acme", _section_plugin("acme"), _FakeDist("acme-dist", "1.0"))
    )
    manager = build_plugin_manager(environ={"PROMPTWEAVE_LOAD_PLUGINS": "acme_dist,acme-dst"})
    assert "acme" in manager.infos
    assert [record.getMessage() for record in caplog.records] == [
        "PROMPTWEAVE_LOAD_PLUGINS names 'acme-dst', which is no installed distribution with "
        "promptweave plugins (did you mean 'acme-dist'?) (installed: acme-dist)"
    ]


def test_an_installed_plugin_passed_again_as_an_extra_is_a_clear_error(entry_points):
    plugin = _section_plugin("notice")
    entry_points.append(_FakeEntryPoint("notice", plugin, _FakeDist("notice-dist", "0.1")))
    with pytest.raises(PluginImportError) as raised:
        build_plugin_manager(extra_plugins=[plugin], environ={})
    assert str(raised.value) == (
        f"extra plugin {plugin!r} is already loaded as the external plugin 'notice' from "
        "distribution notice-dist 0.1; pass it as an extra only when it is not installed, or "
        "block the installed one with PROMPTWEAVE_DISABLE_PLUGINS=notice"
    )
    blocked = build_plugin_manager(
        extra_plugins=[plugin], environ={"PROMPTWEAVE_DISABLE_PLUGINS": "notice"}
    )
    assert blocked.infos[plugin.__name__].kind == "extra"
