"""The low-engagement exit: a short canned phrase instead of silence, without the LLM.

``docs/design.md#low-engagement-exit``: a PASS that was not addressed to the bot, or a necessity
skip of a high-frequency short reaction, rolls against a probability that falls as the bot has been
more present; on a hit, a phrase of at most 12 characters comes from the registered pools. Emotion
words select the tangent pools; the group's last phrase is never repeated right away.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence

import attrs

from promptweave.decision import LowEngagement, RouteContext
from promptweave.plugins.contributions import PhrasePool
from promptweave.plugins.door import log_failure
from promptweave.plugins.registry import Registered
from promptweave.plugins.watchdog import (
    PluginFault,
    PluginHungError,
    call_plugin,
    raised_fault,
    record_fault,
    type_name,
)
from promptweave.text.routing_words import is_gentle_phrase
from promptweave.turn import Turn

__all__ = ["PoolQuery", "emit_probability", "low_engagement_exit", "pick_phrase"]

log = logging.getLogger("promptweave.routing")

#: The most phrases one pool's ``phrases_for`` offers in one turn; the rest are not read.
POOL_PHRASES_MAX = 1000


@attrs.frozen(kw_only=True)
class PoolQuery:
    """What a :class:`promptweave.PhrasePool` is asked with.

    :param text: the focus text of the message.
    :param emotion: the message carries emotion words (``难绷``, ``破防``, ``麻了``, ``烦``…).
    :param bot_id: the bot.
    :param group_id: the group (``None`` in a private chat).
    :param turn: the whole turn, for pools that read more.
    :param learned_replies: the group's learned short replies: those of the expression pairs the
        turn carries, then the stored ones.
    """

    text: str
    emotion: bool
    bot_id: str
    group_id: str | None
    turn: Turn
    learned_replies: tuple[str, ...] = ()


def emit_probability(recent_bot_replies: int, table: Sequence[float]) -> float:
    """The chance of a phrase by recent bot replies: 0, 1–2, 3–4, 5 and more (``table``)."""
    count = max(0, recent_bot_replies)
    if count == 0:
        return table[0]
    if count <= 2:
        return table[1]
    if count <= 4:
        return table[2]
    return table[3]


def _phrases_offered(plugin: str, where: str, offered: object) -> list[str]:
    """The phrases of a ``phrases_for`` answer (at most :data:`POOL_PHRASES_MAX`); an answer that
    is not a sequence of strings is named as the wrong type (a text alone or a mapping is not:
    its characters or keys would each be a phrase)."""
    iterator = None
    if not isinstance(offered, str | bytes | Mapping):
        try:
            iterator = iter(offered)  # type: ignore[call-overload]
        except TypeError:
            iterator = None
    given: list[object] = (
        [] if iterator is None else list(itertools.islice(iterator, POOL_PHRASES_MAX))
    )
    wrong = next((type_name(p) for p in given if not isinstance(p, str)), None)
    if iterator is None or wrong is not None:
        record_fault(
            PluginFault(
                plugin=plugin,
                where=where,
                kind="wrong_type",
                detail=f"phrases_for returned {type_name(offered)}"
                + (f" holding {wrong}" if wrong else "")
                + ", expected strings; left out",
            )
        )
    return [p for p in given if isinstance(p, str)]


def _offered(entry: Registered[PhrasePool], query: PoolQuery, notes: list[str]) -> list[str]:
    pool = entry.item
    where = f"phrase pool {pool.name!r}"
    try:
        if pool.applies is not None:
            applies = call_plugin(entry.plugin, where, pool.applies, query)
            if not isinstance(applies, bool):
                # Anything but a yes or a no is no answer: the pool sits this one out, named.
                record_fault(
                    PluginFault(
                        plugin=entry.plugin,
                        where=where,
                        kind="wrong_type",
                        detail=f"applies returned {type_name(applies)}, expected bool; left out",
                    )
                )
                return []
            if not applies:
                return []
        phrases = list(pool.phrases)
        if pool.phrases_for is not None:
            offered = call_plugin(entry.plugin, where, pool.phrases_for, query)
            # Only text can be a phrase, and no more of it than a pool could mean.
            phrases += _phrases_offered(entry.plugin, where, offered)
    except Exception as exc:
        log_failure(log, exc, "phrase pool %r of plugin %r raised", pool.name, entry.plugin)
        if not isinstance(exc, PluginHungError):  # a hang or a skip is noted already
            # Its phrases can fail while they are read, after the call returned: named too.
            record_fault(raised_fault(entry.plugin, where, exc))
        notes.append(f"phrase pool {pool.name!r} raised {type(exc).__name__}: {exc}")
        return []
    return phrases


def pick_phrase(
    pools: Sequence[Registered[PhrasePool]],
    query: PoolQuery,
    *,
    last_phrase: str | None,
    max_chars: int,
    notes: list[str] | None = None,
) -> list[tuple[str, str]]:
    """The phrases the pools offer for ``query``: ``(phrase, pool)`` pairs, each phrase once, in
    pool registration order, without unfit phrases and without ``last_phrase`` (unless nothing
    else is left)."""
    problems = notes if notes is not None else []
    offered: dict[str, str] = {}
    for entry in pools:
        for phrase in _offered(entry, query, problems):
            phrase = phrase.strip()
            if phrase not in offered and is_gentle_phrase(phrase, max_chars):
                offered[phrase] = entry.item.name
    choices = [(phrase, pool) for phrase, pool in offered.items() if phrase != last_phrase]
    return choices or list(offered.items())


def low_engagement_exit(
    context: RouteContext,
    trigger: str,
    pools: Sequence[Registered[PhrasePool]],
    notes: list[str],
) -> LowEngagement:
    """Roll for the exit and, on a hit, pick a phrase and remember it for the group."""
    routing = context.config.routing
    probability = emit_probability(context.recent_bot_replies, routing.low_engagement_probabilities)
    roll = context.rng.random()
    signals = context.signals
    outcome = LowEngagement(
        trigger=trigger,
        recent_bot_replies=context.recent_bot_replies,
        probability=probability,
        roll=roll,
        emotion=signals.emotion,
    )
    if roll >= probability:
        return outcome
    group_id = context.group_id
    query = PoolQuery(
        text=signals.text,
        emotion=signals.emotion,
        bot_id=context.bot_id,
        group_id=group_id,
        turn=context.turn,
        learned_replies=_learned_replies(context),
    )
    last = None if group_id is None else context.state.last_phrase(context.bot_id, group_id)
    choices = pick_phrase(
        pools, query, last_phrase=last, max_chars=routing.phrase_max_chars, notes=notes
    )
    if not choices:
        return outcome
    phrase, pool = context.rng.choice(choices)
    if group_id is not None:
        context.state.note_phrase(context.bot_id, group_id, phrase)
    return attrs.evolve(outcome, phrase=phrase, pool=pool)


def _learned_replies(context: RouteContext) -> tuple[str, ...]:
    expression = context.turn.retrieved.group_expression
    given = [pair.reply for pair in expression.pairs] if expression is not None else []
    try:
        stored = list(context.learned_replies())
    except Exception:
        # The exit is a nicety: a store that fails here must not cost the turn its decision.
        log.warning("learned replies unavailable for the low-engagement exit", exc_info=True)
        stored = []
    return tuple(dict.fromkeys(reply.strip() for reply in [*given, *stored] if reply.strip()))
