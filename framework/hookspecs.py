"""Every hook a promptweave plugin can implement.

Hooks are grouped by phase. Contribution hooks receive a ``register`` callback, so the core knows
which plugin contributed what and can refuse a duplicate with an error naming both plugins.
Each hook is mirrored in ``docs/plugin_hooks.md`` under a heading that is its exact signature.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from framework.context import RenderContext
    from framework.decision import RouteContext
    from framework.records import (
        DecisionRule,
        PhrasePool,
        Retriever,
        Section,
        SectionOverride,
    )

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "promptweave"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -------------------------------------------------------------------------
# Start-up: contributions, collected once when the plugin manager is built
# -------------------------------------------------------------------------


@hookspec
def register_sections(register: Callable[[Section], None]) -> None:
    """Contribute system-prompt sections.

    Runs once at start-up, for every plugin, built-ins first. Call ``register`` once per section.
    The built-in plugins register the fifteen documented sections in their canonical order.

    :param register: ``register(section)``; raises
        :class:`framework.errors.DuplicateRegistrationError` when the id is taken and
        ``section.replace`` is false, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_retrievers(register: Callable[[Retriever], None]) -> None:
    """Contribute retrievers, each feeding items to one section.

    Runs once at start-up. The retrievers of a turn run concurrently, each within its timeout;
    one that raises or times out is left out and traced.

    :param register: ``register(retriever)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_decision_rules(register: Callable[[DecisionRule], None]) -> None:
    """Contribute routing rules for the ``gate``, ``necessity`` or ``decide`` stage.

    Runs once at start-up. Within a stage, rules run by ascending ``order``; the first match wins.

    :param register: ``register(rule)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_low_engagement_pools(register: Callable[[PhrasePool], None]) -> None:
    """Contribute phrase pools for the low-engagement exit.

    Runs once at start-up.

    :param register: ``register(pool)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_persona_packs(register: Callable[[str, Path], None]) -> None:
    """Make persona packs available by name (``persona_pack = "NAME"`` in ``promptweave.toml``).

    Runs once at start-up. The built-in plugin registers ``default``.

    :param register: ``register(name, path)``; ``path`` is the pack's TOML file. A duplicate name
        raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


# -------------------------------------------------------------------------
# Per turn: assembly
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def override_section(
    section_id: str,
    text: str,
    bot_id: str,
    group_id: str,
    context: RenderContext,
) -> SectionOverride | None:
    """Override one section's text for one bot in one group.

    Runs for every section of every group-chat turn, after the section rendered and before it is
    sanitized. Never runs for a private chat. The built-in implementation reads the overrides file
    of ``promptweave.toml`` and is ``trylast``, so any other plugin's answer wins.

    Stops at first non-None result.

    :param section_id: the section's id, for example ``"persona"``.
    :param text: the section's rendered text (``""`` when it rendered nothing).
    :param bot_id: the bot's account id.
    :param group_id: the group's id.
    :param context: the turn's render context. When sections are only listed
        (``promptweave sections``), a preview context whose message is empty.
    :returns: a :class:`framework.SectionOverride`, or ``None`` to leave the section as it is.
    """


# -------------------------------------------------------------------------
# Per turn: routing
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def decide_with_model(context: RouteContext) -> str | None:
    """Ask a model what to do with the current message.

    Runs once per turn in the ``decide`` stage, only when ``[routing] model_decision = true`` and
    the turn passed the gates and the reply-necessity score, and only when no required tool intent
    already decided it. The answer must be one JSON object in the shape of
    :data:`framework.routing.MODEL_ANSWER_FORMAT`; it is validated strictly. An invalid answer
    falls back to the decide rules (reason ``invalid_model_response``), and so does a hook that
    raises (reason ``model_request_failed``). No built-in implements it.

    Stops at first non-None result.

    :param context: the turn's route context: the turn, its signals, the quote candidates, the
        reply-necessity score.
    :returns: the model's raw answer, or ``None`` when this plugin has no model to ask (the decide
        rules then decide).
    """
