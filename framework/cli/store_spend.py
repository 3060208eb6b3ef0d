"""What the answers kept in a SQLite store spent (``promptweave store stats``, ``docs/cost.md``).

The store keeps, with each answer the bot delivered, the token usage the provider reported for it
(``session_turns.usage``), and the group log holds the messages the bot saw. Every token figure
here is therefore ``reported``: an answer without usage (the offline stand-in, a provider that
reports nothing) is counted apart and not priced, and one whose provider reported no cached
tokens counts them as 0 (also counted apart). The answers are priced at the row of
``[provider] model`` in the price table, since the store does not keep which model answered.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from promptweave.config import Config
from promptweave.providers.cost import price_for, spend_totals
from promptweave.providers.exchange import DEFAULT_MODELS, ProviderApi
from promptweave.text.tokens import REPORTED

__all__ = ["store_spend"]


def _row(usage: Mapping[str, Any]) -> dict[str, Any]:
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = min(int(usage.get("cached_tokens") or 0), prompt)
    written = min(int(usage.get("cache_creation_tokens") or 0), prompt - cached)
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "cache_write_tokens": written,
        "output_tokens": int(usage.get("output_tokens") or 0),
        "basis": dict.fromkeys(("prompt", "cached", "cache_write", "output"), REPORTED),
    }


def store_spend(connection: sqlite3.Connection, config: Config) -> dict[str, Any]:
    """The spend of the store's answers: in all, per reply and per 1,000 messages
    (:func:`promptweave.providers.cost.spend_totals`), and the same per group (``bot/group``).

    :returns: those figures with ``model``, ``answers`` (all the bot's answers),
        ``without_usage`` and ``cached_not_reported`` (answers counted apart, see above).
    """
    model = config.provider.model or DEFAULT_MODELS[ProviderApi(config.provider.api)]
    price = price_for(config, model)
    answers: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    without_usage = cached_not_reported = 0
    for bot_id, group_id, usage_text in connection.execute(
        "SELECT bot_id, group_id, usage FROM session_turns"
        " WHERE role = 'assistant' AND kind = 'turn' ORDER BY seq"
    ):
        scope = f"{bot_id}/{group_id}"
        counts[scope] = counts.get(scope, 0) + 1
        usage = json.loads(usage_text) if usage_text else None
        if not isinstance(usage, Mapping) or usage.get("prompt_tokens") is None:
            without_usage += 1
            continue
        if usage.get("cached_tokens") is None:
            cached_not_reported += 1
        answers.setdefault(scope, []).append(_row(usage))
    messages = dict(
        ((f"{bot_id}/{group_id}"), count)
        for bot_id, group_id, count in connection.execute(
            "SELECT bot_id, group_id, COUNT(*) FROM group_messages GROUP BY bot_id, group_id"
        )
    )
    everything = [row for rows in answers.values() for row in rows]
    totals = spend_totals(
        everything,
        price=price,
        messages=sum(messages.values()),
        answered=len(everything),
    )
    groups = {
        scope: spend_totals(
            answers.get(scope, []),
            price=price,
            messages=messages.get(scope, 0),
            answered=len(answers.get(scope, [])),
        )
        for scope in sorted(set(counts) | set(messages))
    }
    return {
        "model": model,
        "answers": sum(counts.values()),
        "without_usage": without_usage,
        "cached_not_reported": cached_not_reported,
        **totals,
        "groups": groups,
    }
