"""One test per hook: a plugin's contribution reaches the runtime, clashes name both plugins."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptweave import (
    Decision,
    DecisionRule,
    DuplicateRegistrationError,
    PhrasePool,
    Retriever,
    Section,
    hookimpl,
)
from promptweave.plugins.contributions import RuleStage


class _Contributes:
    """A plugin that contributes whatever it is given, through the named hook."""

    def __init__(self, **items):
        self.items = items

    @hookimpl
    def register_sections(self, register):
        for item in self.items.get("sections", ()):
            register(item)

    @hookimpl
    def register_retrievers(self, register):
        for item in self.items.get("retrievers", ()):
            register(item)

    @hookimpl
    def register_decision_rules(self, register):
        for item in self.items.get("rules", ()):
            register(item)

    @hookimpl
    def register_low_engagement_pools(self, register):
        for item in self.items.get("pools", ()):
            register(item)

    @hookimpl
    def register_persona_packs(self, register):
        for name, path in self.items.get("packs", ()):
            register(name, path)


def test_hook_register_sections(register_plugin, rich_turn):
    section = Section(
        id="weather",
        title="【天气】",
        render=lambda c: "【天气】\n- 晴，8°C",
        after="current_time",
        volatility="turn",
    )
    runtime = register_plugin(_Contributes(sections=[section]), name="weather")
    ids = [entry.item.id for entry in runtime.registries.sections]
    assert ids[ids.index("current_time") + 1] == "weather"
    assert runtime.registries.section("weather").plugin == "weather"
    assert "【当前时间】" in runtime.render(rich_turn).system_prompt.split("【天气】")[0]


def test_sections_must_be_section_records(register_plugin):
    with pytest.raises(TypeError, match=r"plugin .odd. registered .* not a promptweave\.Section"):
        register_plugin(_Contributes(sections=[{"id": "x"}]), name="odd")


def test_hook_register_retrievers(register_plugin):
    retriever = Retriever(
        name="vector_memory", feeds="memory", retrieve=lambda query: [], timeout_s=0.5
    )
    runtime = register_plugin(_Contributes(retrievers=[retriever]), name="vectors")
    entry = runtime.registries.retrievers["vector_memory"]
    assert (entry.item, entry.plugin) == (retriever, "vectors")
    clash = Retriever(name="vector_memory", feeds="memory", retrieve=lambda query: [])
    with pytest.raises(
        DuplicateRegistrationError,
        match="retriever 'vector_memory' registered by plugin 'other' is already "
        "registered by plugin 'vectors'",
    ):
        register_plugin(_Contributes(retrievers=[clash]), name="other")


def test_hook_register_decision_rules(register_plugin, rich_turn):
    def always_tool(route):
        return Decision(action="tool", reason="acme_tool")

    late = DecisionRule(
        name="late",
        stage="decide",
        order=200,
        evaluate=lambda route: Decision(action="pass", reason="late"),
    )
    early = DecisionRule(name="acme_tool", stage=RuleStage.DECIDE, order=10, evaluate=always_tool)
    runtime = register_plugin(_Contributes(rules=[late, early]), name="acme")
    assert [r.item.name for r in runtime.registries.rules_for(RuleStage.DECIDE)][:2] == [
        "acme_tool",
        "late",
    ]
    assert runtime.render(rich_turn).decision.reason == "acme_tool"
    assert runtime.registries.rules_for("decide") == runtime.registries.rules_for(RuleStage.DECIDE)
    with pytest.raises(DuplicateRegistrationError, match="decision rule 'late'"):
        register_plugin(_Contributes(rules=[late]), name="again")


def test_decision_rule_stage_is_validated():
    with pytest.raises(ValueError, match="'decision' is not a valid RuleStage"):
        DecisionRule(name="x", stage="decision", evaluate=lambda route: None)


def test_hook_register_low_engagement_pools(register_plugin):
    pool = PhrasePool(name="cats", phrases=["喵", "喵喵"], applies=lambda query: True)
    runtime = register_plugin(_Contributes(pools=[pool]), name="cats")
    assert runtime.registries.pools["cats"].item.phrases == ("喵", "喵喵")
    with pytest.raises(
        DuplicateRegistrationError,
        match=r"phrase pool 'cats' registered by plugin 'dogs'.*plugin 'cats'",
    ):
        register_plugin(_Contributes(pools=[pool]), name="dogs")


def test_hook_register_persona_packs(register_plugin, tmp_path: Path):
    runtime = register_plugin(_Contributes(packs=[("shop", tmp_path / "shop.toml")]), name="shop")
    assert runtime.registries.persona_packs["shop"].item == tmp_path / "shop.toml"
    assert runtime.registries.persona_packs["default"].plugin == "persona_packs"
    with pytest.raises(DuplicateRegistrationError, match="persona pack 'default'"):
        register_plugin(_Contributes(packs=[("default", tmp_path / "x.toml")]), name="clash")


@pytest.mark.parametrize("family", ["retrievers", "pools"])
def test_retrievers_and_pools_must_be_their_records(register_plugin, family):
    with pytest.raises(TypeError, match=r"plugin 'odd' registered \{'name': 'x'\}, which is not"):
        register_plugin(_Contributes(**{family: [{"name": "x"}]}), name="odd")


def test_the_door_has_a_method_for_every_hook():
    import inspect

    from promptweave.plugins import hookspecs
    from promptweave.plugins.door import Hooks

    hooks = sorted(
        name
        for name, spec in inspect.getmembers(hookspecs, inspect.isfunction)
        if getattr(spec, "promptweave_spec", None) is not None
    )
    # parse_incoming is the deprecated name of parse_event: its implementations answer through
    # Hooks.parse_message, never on their own.
    assert "parse_event" in hooks and "register_tools" in hooks
    missing = [name for name in hooks if name != "parse_incoming" and not hasattr(Hooks, name)]
    assert missing == []


def test_the_door_gives_each_contribution_hook_its_plugins_in_collection_order():
    from promptweave.plugins.manager import build_plugin_manager

    class Late:
        @hookimpl(trylast=True)
        def register_sections(self, register):
            pass

    class Early:
        @hookimpl(tryfirst=True)
        def register_sections(self, register):
            pass

    late, early = Late(), Early()
    manager = build_plugin_manager(environ={}, extra_plugins=[late, early])
    names = [name for name, _call in manager.hooks.register_sections()]
    assert names[0] == manager.pm.get_name(early)
    assert names[-1] == manager.pm.get_name(late)
    assert names.index("static_sections") < names.index("turn_sections")
    retrievers = [name for name, _call in manager.hooks.register_retrievers()]
    assert "retrievers" in retrievers and manager.pm.get_name(early) not in retrievers
