"""Every hook a promptweave plugin can implement.

Hooks are grouped by phase. Contribution hooks receive a ``register`` callback, so the core knows
which plugin contributed what and can refuse a duplicate with an error naming both plugins.
Each hook is mirrored in ``docs/plugin_hooks.md`` under a heading that is its exact signature.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from framework.context import RenderContext
    from framework.records import (
        DecisionRule,
        PhrasePool,
        Retriever,
        Section,
        SectionOverride,
    )
    from framework.store.sessions import SessionTurn
    from framework.turn import ChatMessage

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


@hookspec(firstresult=True)
def measure_text(text: str) -> int | None:
    """Measure text for the request budget (``[budget] chars``).

    Runs for the system prompt and for every message of every turn, when the budget is applied.
    The default measure is the number of characters; a plugin can count tokens instead (then set
    the budget in tokens).

    Stops at first non-None result.

    :param text: the system prompt or one message's content.
    :returns: the length of ``text`` in the budget's unit, or ``None`` to leave it to the next
        plugin (and finally to ``len``).
    """


# -------------------------------------------------------------------------
# Incoming: platform adapters
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def parse_incoming(platform: str, payload: Any, bot_id: str) -> ChatMessage | None:
    """Turn a platform's incoming message into a :class:`framework.ChatMessage`.

    Runs when a bot calls :meth:`framework.Promptweave.parse_incoming`. The ``onebot`` contrib
    plugin handles ``platform="onebot"`` (OneBot v11 events, CQ-code strings, segment arrays).

    Stops at first non-None result.

    :param platform: the platform's name, for example ``"onebot"``.
    :param payload: what the platform delivered (an event mapping, a string, a segment list).
    :param bot_id: the receiving bot's account id (a mention of it addresses the bot).
    :returns: the message, or ``None`` when this plugin does not handle ``platform``.
    """


# -------------------------------------------------------------------------
# After delivery: session compression
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def summarize_session(
    bot_id: str,
    group_id: str | None,
    user_id: str,
    turns: Sequence[SessionTurn],
    previous_summary: str | None,
    max_chars: int,
) -> str | None:
    """Summarize the older turns of a long session into one short Chinese text.

    Runs in the background after a delivered reply, when the user's session holds
    ``[session] summary_threshold`` user turns and the cooldown has passed; the turns summarized are
    then replaced by one ``【此前对话摘要】`` row. The built-in ``session_summary`` plugin is
    ``trylast`` and works offline: an extractive summary with no LLM call.

    Stops at first non-None result.

    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param user_id: the user whose session it is.
    :param turns: the turns being replaced, oldest first; image placeholders are already described
        (see ``describe_image``) in their ``content``.
    :param previous_summary: the text of the summary these turns follow, if any.
    :param max_chars: the longest summary kept (longer text is cut).
    :returns: the summary text, or ``None`` to leave it to the next plugin; a blank result or one
        containing ``【此前对话摘要】`` is rejected and the session is left as it is.
    """


@hookspec(firstresult=True)
def describe_image(url: str, bot_id: str, group_id: str | None) -> str | None:
    """Describe an image of the session history, only when a summary needs it.

    Images in history are stored as placeholders with their URL; this runs for each such URL
    while a session is being summarized. The built-in ``session_summary`` plugin is ``trylast`` and
    returns the placeholder ``[图片]`` unchanged (nothing is downloaded).

    Stops at first non-None result.

    :param url: the image's URL.
    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :returns: a short description (shown as ``[图片：…]``), ``"[图片]"`` to keep the placeholder,
        or ``None`` to leave it to the next plugin.
    """
