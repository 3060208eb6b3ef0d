"""The plugin manager finds a module plugin's hooks in its namespace: the same ones pluggy's own
lookup finds (``promptweave.plugins.manager._PluggyManager``)."""

from __future__ import annotations

import importlib
import types

import pluggy

from promptweave.plugins import hookspecs
from promptweave.plugins.manager import DEFAULT_PLUGINS, _PluggyManager

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT_NAME)


def _odd_module() -> types.ModuleType:
    module = types.ModuleType("odd_plugin")

    @hookimpl
    def section_definitions() -> list[object]:
        return []

    class Holder:
        @staticmethod
        @hookimpl
        def retrieval_sources() -> list[object]:
            return []

    module.section_definitions = section_definitions  # type: ignore[attr-defined]
    module.retrievers = Holder.retrieval_sources  # type: ignore[attr-defined]
    module.static = staticmethod(section_definitions)  # type: ignore[attr-defined]
    module.bound = types.MethodType(section_definitions, object())  # type: ignore[attr-defined]
    module.constant = 3  # type: ignore[attr-defined]
    module.marked_class = hookimpl(type("Marked", (), {}))  # type: ignore[attr-defined]
    module.__doc__ = "a module"
    return module


def test_the_hooks_found_are_the_ones_pluggy_finds() -> None:
    ours = _PluggyManager(hookspecs.PROJECT_NAME)
    theirs = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    plugins = [importlib.import_module(dotted) for dotted in DEFAULT_PLUGINS]
    found = 0
    for plugin in [*plugins, _odd_module()]:
        for name in dir(plugin):
            expected = theirs.parse_hookimpl_opts(plugin, name)
            assert ours.parse_hookimpl_opts(plugin, name) == expected, (plugin, name)
            found += expected is not None
    assert found > 20
    specs = 0
    for name in dir(hookspecs):
        expected_spec = theirs.parse_hookspec_opts(hookspecs, name)
        assert ours.parse_hookspec_opts(hookspecs, name) == expected_spec, name
        specs += expected_spec is not None
    assert specs > 20
