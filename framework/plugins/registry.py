"""Collect what plugins contribute through the ``register_*`` hooks, knowing who gave what.

Each contribution hook is called plugin by plugin (in pluggy's call order reversed, so built-ins,
registered first, contribute first), with a ``register`` callback bound to that plugin. A clash is
never resolved silently: the error names both plugins.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs
import pluggy

from promptweave.errors import (
    DuplicateRegistrationError,
    PlacementError,
    PluginRegistrationError,
)
from promptweave.plugins.contributions import (
    DecisionRule,
    Learner,
    PhrasePool,
    Retriever,
    RuleStage,
    Section,
    Tool,
)
from promptweave.plugins.door import REGISTER_DEADLINE_S, Hooks

__all__ = ["Registered", "Registries", "collect_registries", "order_sections"]

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Registered(Generic[T]):
    """A contribution and the name of the plugin that gave it."""

    item: T
    plugin: str


@attrs.frozen(kw_only=True)
class Registries:
    """Everything the plugins contributed, with the sections in their effective order."""

    sections: tuple[Registered[Section], ...]
    section_warnings: tuple[str, ...]
    retrievers: dict[str, Registered[Retriever]]
    decision_rules: dict[str, Registered[DecisionRule]]
    pools: dict[str, Registered[PhrasePool]]
    persona_packs: dict[str, Registered[Path]]
    tools: dict[str, Registered[Tool]] = attrs.field(factory=dict)
    learners: dict[str, Registered[Learner]] = attrs.field(factory=dict)

    def rules_for(self, stage: RuleStage | str) -> tuple[Registered[DecisionRule], ...]:
        """The rules of one stage, by ascending ``order``, registration order breaking ties."""
        return self._rules_by_stage.get(RuleStage(stage), ())

    @functools.cached_property
    def _rules_by_stage(self) -> dict[RuleStage, tuple[Registered[DecisionRule], ...]]:
        # The registries never change once collected, so each stage is sorted once.
        ordered = sorted(self.decision_rules.values(), key=lambda rule: rule.item.effective_order)
        by_stage: dict[RuleStage, tuple[Registered[DecisionRule], ...]] = {}
        for stage in RuleStage:
            by_stage[stage] = tuple(rule for rule in ordered if rule.item.stage is stage)
        return by_stage

    def section(self, section_id: str) -> Registered[Section] | None:
        return next((entry for entry in self.sections if entry.item.id == section_id), None)


def _collect_named(
    contributions: Iterator[tuple[str, Callable[..., Any]]],
    kind: str,
    record: type[Retriever] | type[PhrasePool] | type[Tool] | type[Learner],
) -> dict[str, Registered[Any]]:
    collected: dict[str, Registered[Any]] = {}
    for plugin_name, caller in contributions:

        def register(item: Any, _plugin: str = plugin_name) -> None:
            if not isinstance(item, record):
                raise PluginRegistrationError(
                    f"plugin {_plugin!r} registered {item!r}, which is not a "
                    f"promptweave.{record.__name__}"
                )
            name = item.name
            if name in collected:
                raise DuplicateRegistrationError(
                    f"{kind} {name!r} registered by plugin {_plugin!r} is already registered "
                    f"by plugin {collected[name].plugin!r}"
                )
            collected[name] = Registered(item=item, plugin=_plugin)

        caller(register=register)
    return collected


def _collect_sections(hooks: Hooks) -> list[Registered[Section]]:
    sections: list[Registered[Section]] = []
    replaced_by: dict[str, str] = {}
    for plugin_name, caller in hooks.register_sections():

        def register(section: Section, _plugin: str = plugin_name) -> None:
            if not isinstance(section, Section):
                raise PluginRegistrationError(
                    f"plugin {_plugin!r} registered {section!r}, which is not a promptweave.Section"
                )
            index = next(
                (i for i, entry in enumerate(sections) if entry.item.id == section.id), None
            )
            if index is None:
                if section.replace:
                    raise PlacementError(
                        f"plugin {_plugin!r} replaces section {section.id!r}, "
                        "which no plugin registered"
                    )
                sections.append(Registered(item=section, plugin=_plugin))
                return
            holder = sections[index].plugin
            if not section.replace:
                raise DuplicateRegistrationError(
                    f"section {section.id!r} registered by plugin {_plugin!r} is already "
                    f"registered by plugin {holder!r} (pass replace=True to replace it)"
                )
            if section.id in replaced_by:
                raise DuplicateRegistrationError(
                    f"section {section.id!r} is replaced by both plugin "
                    f"{replaced_by[section.id]!r} and plugin {_plugin!r}"
                )
            replaced_by[section.id] = _plugin
            original = sections[index].item
            if section.after is None and section.before is None:
                # A replacement without a placement of its own takes the original's place.
                section = attrs.evolve(section, after=original.after, before=original.before)
            sections[index] = Registered(item=section, plugin=_plugin)

        caller(register=register)
    return sections


def order_sections(
    sections: list[Registered[Section]],
) -> tuple[tuple[Registered[Section], ...], tuple[str, ...]]:
    """Resolve relative placement and report volatility inversions.

    Sections without ``after``/``before`` keep their registration order: the built-ins form the
    canonical chain that way. A section with ``after=X`` goes right after X (after any section that
    asked for X earlier); ``before=X`` goes right before X.

    :returns: the ordered sections and one warning per placement that puts a less volatile section
        after a more volatile one.
    :raises PlacementError: an anchor names no registered section, or anchors form a cycle.
    """
    known = {entry.item.id for entry in sections}
    for entry in sections:
        anchor = entry.item.after or entry.item.before
        if anchor is not None and anchor not in known:
            raise PlacementError(
                f"section {entry.item.id!r} of plugin {entry.plugin!r} is placed relative to "
                f"{anchor!r}, which no plugin registered"
            )
    ordered = [
        entry for entry in sections if entry.item.after is None and entry.item.before is None
    ]
    pending = [entry for entry in sections if entry not in ordered]
    # How many sections were already inserted after each anchor, to keep registration order.
    inserted_after: dict[str, int] = {}
    while pending:
        placed_ids = {entry.item.id for entry in ordered}
        ready = [
            entry for entry in pending if (entry.item.after or entry.item.before) in placed_ids
        ]
        if not ready:
            names = ", ".join(f"{e.item.id!r} (plugin {e.plugin!r})" for e in pending)
            raise PlacementError(f"sections placed relative to each other in a cycle: {names}")
        for entry in ready:
            anchor = entry.item.after or entry.item.before or ""
            position = next(i for i, e in enumerate(ordered) if e.item.id == anchor)
            if entry.item.after is not None:
                offset = inserted_after.get(anchor, 0) + 1
                inserted_after[anchor] = offset
                ordered.insert(position + offset, entry)
            else:
                ordered.insert(position, entry)
            pending.remove(entry)
    warnings: list[str] = []
    most_volatile: Registered[Section] | None = None
    for entry in ordered:
        if (
            most_volatile is not None
            and entry.item.volatility.rank < most_volatile.item.volatility.rank
        ):
            warnings.append(
                f"section {entry.item.id!r} ({entry.item.volatility.value}, plugin "
                f"{entry.plugin!r}) comes after {most_volatile.item.id!r} "
                f"({most_volatile.item.volatility.value}): this shortens the cacheable prefix"
            )
        if most_volatile is None or entry.item.volatility.rank > most_volatile.item.volatility.rank:
            most_volatile = entry
    return tuple(ordered), tuple(warnings)


def collect_registries(
    pm: pluggy.PluginManager,
    *,
    deadline_s: float = REGISTER_DEADLINE_S,
    trusted: Callable[[str], bool] | None = None,
) -> Registries:
    """Call every contribution hook and build the registries.

    :param deadline_s: the longest one plugin's contribution hook may take; past it a
        :class:`promptweave.errors.PluginRegistrationError` names the plugin (0: unbounded).
    :param trusted: the plugins called on this thread without a bound (those shipped with
        promptweave); by default none is.
    """
    hooks = Hooks(pm=pm, register_deadline_s=deadline_s, trusted=trusted or (lambda plugin: False))
    sections, warnings = order_sections(_collect_sections(hooks))
    return Registries(
        sections=sections,
        section_warnings=warnings,
        retrievers=_collect_named(hooks.register_retrievers(), "retriever", Retriever),
        decision_rules=_collect_rules(hooks),
        pools=_collect_named(hooks.register_low_engagement_pools(), "phrase pool", PhrasePool),
        persona_packs=_collect_named_packs(hooks),
        tools=_collect_named(hooks.register_tools(), "tool", Tool),
        learners=_collect_named(hooks.register_learners(), "learner", Learner),
    )


def _collect_rules(hooks: Hooks) -> dict[str, Registered[DecisionRule]]:
    """Decision rules by name; ``replace=True`` replaces a rule, keeping its order unless the
    replacement gives one. Replacing a rule twice, or an unknown one, is an error."""
    collected: dict[str, Registered[DecisionRule]] = {}
    replaced_by: dict[str, str] = {}
    for plugin_name, caller in hooks.register_decision_rules():

        def register(rule: DecisionRule, _plugin: str = plugin_name) -> None:
            if not isinstance(rule, DecisionRule):
                raise PluginRegistrationError(
                    f"plugin {_plugin!r} registered {rule!r}, which is not a promptweave.DecisionRule"
                )
            held = collected.get(rule.name)
            if held is None:
                if rule.replace:
                    raise DuplicateRegistrationError(
                        f"plugin {_plugin!r} replaces decision rule {rule.name!r}, "
                        "which no plugin registered"
                    )
                collected[rule.name] = Registered(item=rule, plugin=_plugin)
                return
            if not rule.replace:
                raise DuplicateRegistrationError(
                    f"decision rule {rule.name!r} registered by plugin {_plugin!r} is already "
                    f"registered by plugin {held.plugin!r} (pass replace=True to replace it)"
                )
            if rule.name in replaced_by:
                raise DuplicateRegistrationError(
                    f"decision rule {rule.name!r} is replaced by both plugin "
                    f"{replaced_by[rule.name]!r} and plugin {_plugin!r}"
                )
            replaced_by[rule.name] = _plugin
            if rule.order is None:
                rule = attrs.evolve(rule, order=held.item.order)
            # A replacement keeps the replaced rule's place in registration order (ties).
            collected[rule.name] = Registered(item=rule, plugin=_plugin)

        caller(register=register)
    return collected


def _collect_named_packs(hooks: Hooks) -> dict[str, Registered[Path]]:
    collected: dict[str, Registered[Path]] = {}
    for plugin_name, caller in hooks.register_persona_packs():

        def register(name: str, path: Path, _plugin: str = plugin_name) -> None:
            if not isinstance(name, str) or not isinstance(path, str | Path):
                raise PluginRegistrationError(
                    f"plugin {_plugin!r} registered persona pack {name!r} at {path!r}: expected "
                    "a name and a path"
                )
            if name in collected:
                raise DuplicateRegistrationError(
                    f"persona pack {name!r} registered by plugin {_plugin!r} is already "
                    f"registered by plugin {collected[name].plugin!r}"
                )
            collected[name] = Registered(item=Path(path), plugin=_plugin)

        caller(register=register)
    return collected
