from __future__ import annotations

import pytest

from promptweave import DuplicateRegistrationError, PlacementError, Section, hookimpl
from promptweave.plugins.contributions import Volatility
from promptweave.plugins.registry import Registered, order_sections

BUILTIN_ORDER = [
    "injection_guard",
    "persona",
    "identity",
    "group_expression",
    "behavior_reference",
    "memory",
    "knowledge",
    "relationship",
    "person_facts",
    "mid_term",
    "group_timeline",
    "reply_shape",
    "turn_policy",
    "current_time",
    "tool_context",
]


def _section(section_id: str, **kwargs: object) -> Section:
    return Section(id=section_id, title=section_id, render=lambda context: section_id, **kwargs)


def _entry(section_id: str, plugin: str = "p", **kwargs: object) -> Registered[Section]:
    return Registered(item=_section(section_id, **kwargs), plugin=plugin)


def _ids(entries: tuple[Registered[Section], ...]) -> list[str]:
    return [entry.item.id for entry in entries]


def test_builtin_sections_follow_the_documented_order(promptweave_runtime) -> None:
    assert _ids(promptweave_runtime.registries.sections) == BUILTIN_ORDER
    assert promptweave_runtime.registries.section_warnings == ()


def test_after_places_right_after_anchor_and_keeps_registration_order() -> None:
    ordered, _ = order_sections(
        [
            _entry("a"),
            _entry("b"),
            _entry("x", after="a"),
            _entry("y", after="a"),
        ]
    )
    assert _ids(ordered) == ["a", "x", "y", "b"]


def test_before_places_right_before_anchor() -> None:
    ordered, _ = order_sections([_entry("a"), _entry("b"), _entry("x", before="b")])
    assert _ids(ordered) == ["a", "x", "b"]


def test_anchor_on_an_anchored_section_is_resolved() -> None:
    ordered, _ = order_sections([_entry("a"), _entry("y", after="x"), _entry("x", after="a")])
    assert _ids(ordered) == ["a", "x", "y"]


def test_unknown_anchor_is_rejected_naming_the_plugin() -> None:
    with pytest.raises(PlacementError, match=r"'x' of plugin 'acme'.*'nowhere'"):
        order_sections([_entry("a"), _entry("x", plugin="acme", after="nowhere")])


def test_cycle_is_rejected_naming_the_plugins() -> None:
    with pytest.raises(PlacementError, match=r"cycle.*'x' \(plugin 'one'\).*'y' \(plugin 'two'\)"):
        order_sections([_entry("a"), _entry("x", "one", after="y"), _entry("y", "two", after="x")])


def test_volatility_inversion_warns() -> None:
    _, warnings = order_sections(
        [
            _entry("t", volatility=Volatility.TURN),
            _entry("s", plugin="acme", volatility="static"),
        ]
    )
    assert len(warnings) == 1
    assert "'s' (static, plugin 'acme') comes after 't' (turn)" in warnings[0]


def test_section_rejects_both_anchors_and_self_anchor() -> None:
    with pytest.raises(ValueError, match="either after= or before="):
        _section("x", after="a", before="b")
    with pytest.raises(ValueError, match="relative to itself"):
        _section("x", after="x")
    with pytest.raises(ValueError, match="lowercase"):
        _section("Bad-Id")


class _Adds:
    def __init__(self, *sections: Section) -> None:
        self.sections = sections

    @hookimpl
    def register_sections(self, register):
        for section in self.sections:
            register(section)


def test_duplicate_section_id_names_both_plugins(register_plugin) -> None:
    with pytest.raises(
        DuplicateRegistrationError,
        match=r"'memory' registered by plugin 'acme' is already registered by "
        r"plugin 'retrieval_sections'",
    ):
        register_plugin(_Adds(_section("memory")), name="acme")


def test_replace_takes_the_original_place(register_plugin, rich_turn) -> None:
    runtime = register_plugin(
        _Adds(_section("memory", replace=True, volatility="retrieval")), name="acme"
    )
    assert _ids(runtime.registries.sections) == BUILTIN_ORDER
    entry = runtime.registries.section("memory")
    assert entry is not None and entry.plugin == "acme"
    result = runtime.render(rich_turn)
    assert [s.text for s in result.sections if s.id == "memory"] == ["memory"]


def test_two_plugins_replacing_one_section_is_an_error(register_plugin) -> None:
    register_plugin(_Adds(_section("persona", replace=True, volatility="static")), name="one")
    with pytest.raises(
        DuplicateRegistrationError, match="replaced by both plugin 'one' and plugin 'two'"
    ):
        register_plugin(_Adds(_section("persona", replace=True, volatility="static")), name="two")


def test_replacing_an_unknown_section_is_an_error(register_plugin) -> None:
    with pytest.raises(PlacementError, match="plugin 'acme' replaces section 'nothing'"):
        register_plugin(_Adds(_section("nothing", replace=True)), name="acme")


def test_failed_registration_leaves_the_runtime_unchanged(register_plugin, promptweave_runtime):
    with pytest.raises(DuplicateRegistrationError):
        register_plugin(_Adds(_section("memory")), name="acme")
    assert promptweave_runtime.plugins.pm.get_plugin("acme") is None
    assert _ids(promptweave_runtime.registries.sections) == BUILTIN_ORDER
