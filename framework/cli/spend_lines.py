"""The token and money figures as the text outputs print them (``docs/cost.md``, "Reading the
figures"): ``promptweave replay``'s summary and ``--compare``, ``promptweave store stats``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promptweave.providers.cost import format_money

__all__ = ["bases_text", "figure_row", "spend_lines"]


def _tokens(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def figure_row(figures: Mapping[str, Any] | None, currency: str | None) -> str:
    """``prompt 1,528 · cached 640 · output 31 · 0.000265 USD``, or ``—`` for nothing."""
    if not figures:
        return "—"
    return (
        f"prompt {_tokens(figures['prompt_tokens'])} · cached {_tokens(figures['cached_tokens'])}"
        f" · output {_tokens(figures['output_tokens'])} · "
        f"{format_money(figures['cost'], currency)}"
    )


def bases_text(basis: Mapping[str, str]) -> str:
    """``prompt estimated, cached estimated from the prefix, output reported``."""
    words = []
    for figure in ("prompt", "cached", "output"):
        how = basis[figure]
        if figure == "cached" and how == "estimated":
            how = "estimated from the prefix"
        words.append(f"{figure} {how}")
    return ", ".join(words)


def spend_lines(
    spend: Mapping[str, Any] | None,
    *,
    groups: bool = True,
    unit: str = "requests",
    empty: str = "no request reached a provider",
) -> list[str]:
    """The spend block: totals, per reply, per 1,000 messages, how each figure was found, and
    (with ``groups``) one line per group; ``unit`` names what ``requests`` counts, ``empty`` is
    the line when it is none."""
    if not spend or not spend["requests"]:
        return [f"spend: {empty}"]
    currency = spend["currency"]
    price = (
        f"at the price of {spend['model']}"
        if currency is not None
        else f"no price for {spend['model']} in [prices]"
    )
    lines = [
        f"spend ({spend['requests']} {unit}, {price}; tokens {bases_text(spend['basis'])}):",
        f"  in all: {figure_row(spend, currency)}",
        f"  per reply: {figure_row(spend['per_reply'], currency)}",
        f"  per 1,000 messages: {figure_row(spend['per_1000_messages'], currency)}",
    ]
    for fault, requests in spend.get("count_faults", {}).items():
        lines.append(f"  estimated instead of counted in {requests} requests: {fault}")
    if groups:
        for group_id, group in spend.get("groups", {}).items():
            lines.append(
                f"  group {group_id}: per reply {figure_row(group['per_reply'], currency)}; "
                f"per 1,000 messages {figure_row(group['per_1000_messages'], currency)}"
            )
    return lines
