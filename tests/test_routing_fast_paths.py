"""The router's fast paths: what it works out once and reuses, and when it works it out again.

The decisions themselves are pinned by the other routing tests; these pin that each shortcut
keeps the behaviour of the long way (a third-party rule still bounded and named, a rule of a new
plugin seen, a cache dropped when what it was made from changes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from framework import DecisionRule, GateSkip, RouteContext, RuleStage, hookimpl
from framework.plugins import watchdog
from framework.routing import router as router_module
from tests.routing_support import make_runtime, make_turn


class Gate:
    """A third-party gate that notes the thread it runs on and skips ``跳过`` messages."""

    def __init__(self, name: str = "third_party_gate") -> None:
        self.name = name
        self.threads: list[str] = []

    def evaluate(self, context: RouteContext) -> GateSkip | None:
        self.threads.append(threading.current_thread().name)
        return GateSkip(reason=self.name) if "跳过" in context.signals.text else None

    @hookimpl
    def register_decision_rules(self, register: Callable[[DecisionRule], None]) -> None:
        register(DecisionRule(name=self.name, stage=RuleStage.GATE, evaluate=self.evaluate))


@pytest.fixture
def bounded_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The ``(plugin, where)`` of every rule call the router makes through ``call_plugin``."""
    calls: list[tuple[str, str]] = []

    def spy(plugin: str, where: str, fn: Callable[..., Any], /, *args: Any) -> Any:
        calls.append((plugin, where))
        return watchdog.call_plugin(plugin, where, fn, *args)

    monkeypatch.setattr(router_module, "call_plugin", spy)
    return calls


def test_built_in_rules_are_called_directly_and_a_third_party_rule_through_the_watchdog(
    bounded_calls: list[tuple[str, str]],
) -> None:
    gate = Gate()
    runtime = make_runtime()
    try:
        runtime.add_plugin(gate, name="third_party")
        decision = runtime.decide(make_turn("今天先跳过吧大家", group_id="g1"))
    finally:
        runtime.close()
    assert decision.reason == "third_party_gate"
    assert bounded_calls == [("third_party", "decision rule 'third_party_gate'")]
    # Bounded: handed to a stage worker, not run on the routing thread.
    assert [name.startswith("promptweave-stage") for name in gate.threads] == [True]


def test_every_built_in_rule_still_runs_when_called_directly(
    bounded_calls: list[tuple[str, str]],
) -> None:
    runtime = make_runtime()
    try:
        decision = runtime.decide(make_turn("@小织 周末去哪里玩比较好？", group_id="g1"))
    finally:
        runtime.close()
    assert bounded_calls == []
    assert decision.necessity is not None
    assert {term.name for term in decision.necessity.terms} >= {"addressed", "obligation"}


def test_a_plugin_added_or_removed_later_changes_the_rules_the_router_runs(
    bounded_calls: list[tuple[str, str]],
) -> None:
    runtime = make_runtime()
    turn = make_turn("今天先跳过吧大家", group_id="g1")
    try:
        before = runtime.decide(turn)
        runtime.add_plugin(Gate(), name="third_party")
        added = runtime.decide(turn)
        runtime.remove_plugin("third_party")
        removed = runtime.decide(turn)
    finally:
        runtime.close()
    assert before.reason != "third_party_gate" and removed.reason == before.reason
    assert added.reason == "third_party_gate"
    assert bounded_calls == [("third_party", "decision rule 'third_party_gate'")]


def test_a_router_given_other_registries_resolves_their_rules_again(
    bounded_calls: list[tuple[str, str]],
) -> None:
    first, second = make_runtime(), make_runtime()
    try:
        second.add_plugin(Gate("other_gate"), name="other")
        router = first.router
        turn = make_turn("今天先跳过吧大家", group_id="g1")
        assert router.route(turn, turn.message.time).reason != "other_gate"
        router.registries = second.registries
        assert router.route(turn, turn.message.time).reason == "other_gate"
    finally:
        first.close()
        second.close()
    assert bounded_calls == [("other", "decision rule 'other_gate'")]


def test_a_router_trusts_no_plugin_unless_told() -> None:
    runtime = make_runtime()
    try:
        router = router_module.Router(
            registries=runtime.registries,
            config=runtime.config,
            state=runtime.stores.routing,
            rng=runtime.rng,
        )
        assert runtime.router.trusted("routing_rules")
    finally:
        runtime.close()
    assert not router.trusted("routing_rules")
