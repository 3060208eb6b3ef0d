"""The built-in plugin ``learners`` and its hook ``register_learners``."""

from __future__ import annotations

from promptweave.builtin_plugins.learners import (
    EXPRESSION_CAP,
    FEEDBACK_CAP,
    PICKUP_CAP,
    TEACHING_CAP,
    record_outcomes,
    undo_outcomes,
)
from promptweave.plugins.manager import build_plugin_manager
from promptweave.plugins.registry import collect_registries


def test_hook_register_learners() -> None:
    manager = build_plugin_manager(environ={})
    registries = collect_registries(manager.pm)
    assert [
        (
            name,
            entry.plugin,
            entry.item.writes,
            dict(entry.item.caps),
            entry.item.min_batch,
            entry.item.interval_s,
        )
        for name, entry in registries.learners.items()
    ] == [
        (
            "expression_pairs",
            "learners",
            ("expression_pair",),
            {"expression_pair": EXPRESSION_CAP},
            20,
            300.0,
        ),
        ("rhythm", "learners", ("rhythm",), {"rhythm": 1}, 20, 300.0),
        ("pickups", "learners", ("pickup",), {"pickup": PICKUP_CAP}, 10, 60.0),
        ("teachings", "learners", ("teaching",), {"teaching": TEACHING_CAP}, 1, 5.0),
        ("negative_feedback", "learners", ("feedback",), {"feedback": FEEDBACK_CAP}, 1, 5.0),
        ("strategies", "strategy_learner", ("strategy",), {"strategy": 200}, 40, 1800.0),
        (
            "members",
            "member_learner",
            ("person_fact", "relationship"),
            {"person_fact": 400, "relationship": 200},
            20,
            600.0,
        ),
        ("group_events", "event_learner", ("group_event",), {"group_event": 100}, 30, 900.0),
    ]
    assert [name for name, entry in registries.learners.items() if entry.item.uses_model] == [
        "strategies",
        "members",
        "group_events",
    ]
    feedback = registries.learners["negative_feedback"].item
    assert (feedback.stored, feedback.forgotten) == (record_outcomes, undo_outcomes)


def test_a_disabled_learners_plugin_registers_nothing() -> None:
    manager = build_plugin_manager(
        disabled=["learners", "strategy_learner", "member_learner", "event_learner"], environ={}
    )
    assert collect_registries(manager.pm).learners == {}
