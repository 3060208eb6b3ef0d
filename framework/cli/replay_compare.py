"""``promptweave replay --compare``: one chat log replayed in both ``[turn_context] turn_sections``
modes, their figures side by side (``docs/cli.md``, ``docs/cost.md``, "Reading the figures")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from promptweave.config import Config
from promptweave.loop.live import BotLoop
from promptweave.providers.cost import format_money
from promptweave.providers.exchange import ProviderSpec
from promptweave.replay.learning import InjectionWatch, learning_state
from promptweave.replay.replayer import ReplayClock, ReplayLog, replay_events, summarize
from promptweave.runtime import Promptweave

__all__ = ["MODES", "compare_lines", "replay_mode"]

#: The modes compared, in the order of the columns.
MODES = ("system", "user")


def replay_mode(
    config: Config,
    turn_sections: str,
    *,
    runtime_for: Callable[[Config, ReplayClock, Sequence[object]], Promptweave],
    read_log: Callable[[Promptweave], ReplayLog],
    model: str,
    model_label: str,
    no_pause: Callable[[float], Any],
) -> dict[str, Any]:
    """Replay the log once in ``turn_sections`` mode, quietly; its summary, with the bytes of
    every request summed (``request_bytes``) and the mode (``turn_sections``).

    :param runtime_for: builds the replay's runtime from a config, the clock and extra plugins.
    :param read_log: reads the log (and imports its retrieval data) into a runtime.
    """
    config = attrs.evolve(
        config, turn_context=attrs.evolve(config.turn_context, turn_sections=turn_sections)
    )
    clock = ReplayClock()
    watch = InjectionWatch()
    runtime = runtime_for(config, clock, [watch])
    try:
        log = read_log(runtime)
        loop = BotLoop(
            runtime=runtime,
            spec=ProviderSpec.from_config(runtime.config.provider),
            sleep=no_pause,
            learn=False,
        )
        records = asyncio.run(replay_events(loop, clock, log.events, watch=watch))
        summary = summarize(
            records,
            model=model,
            model_label=model_label,
            learned=learning_state(runtime),
            prices=runtime.config.prices,
        )
    finally:
        runtime.close()
    summary["turn_sections"] = turn_sections
    summary["request_bytes"] = sum(r["request_bytes"] or 0 for r in records)
    return summary


def _p50(value: Mapping[str, float] | None) -> str:
    return "—" if value is None else f"{value['p50']:,.0f}"


def _per(spend: Mapping[str, Any], key: str, figure: str) -> str:
    part = spend.get(key)
    if not part:
        return "—"
    if figure == "cost":
        return format_money(part["cost"], spend["currency"])
    return f"{part[figure]:,.0f}"


def _rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    spend = summary.get("spend") or {}
    reuse = summary.get("prefix_reuse")
    basis = spend.get("basis", {})
    return [
        ("replies", f"{summary['replies']:,}"),
        ("requests", f"{spend.get('requests', 0):,}"),
        ("bytes sent, all requests", f"{summary['request_bytes']:,}"),
        ("characters sent per reply, p50", _p50(summary["chars_per_reply"])),
        (
            f"tokens sent per reply, p50 ({summary['tokens_basis']})",
            _p50(summary["tokens_per_reply"]),
        ),
        ("prefix reuse, median", "—" if reuse is None else f"{reuse['median']:.1%}"),
        (
            f"prompt tokens per reply ({basis.get('prompt', '—')})",
            _per(spend, "per_reply", "prompt_tokens"),
        ),
        (
            f"cached tokens per reply ({basis.get('cached', '—')})",
            _per(spend, "per_reply", "cached_tokens"),
        ),
        (
            f"output tokens per reply ({basis.get('output', '—')})",
            _per(spend, "per_reply", "output_tokens"),
        ),
        ("money per reply", _per(spend, "per_reply", "cost")),
        ("prompt tokens per 1,000 messages", _per(spend, "per_1000_messages", "prompt_tokens")),
        ("cached tokens per 1,000 messages", _per(spend, "per_1000_messages", "cached_tokens")),
        ("money per 1,000 messages", _per(spend, "per_1000_messages", "cost")),
    ]


def compare_lines(summaries: Sequence[Mapping[str, Any]], log_file: Path) -> list[str]:
    """The side-by-side table of the modes' summaries (in :data:`MODES` order)."""
    columns = [_rows(summary) for summary in summaries]
    labels = [label for label, _ in columns[0]]
    width = max(map(len, labels))
    values = [[value for _, value in column] for column in columns]
    widths = [max(len(mode), *map(len, column)) for mode, column in zip(MODES, values, strict=True)]
    spend = summaries[0].get("spend") or {}
    price = (
        f"money at the price of {spend.get('model')}"
        if spend.get("currency")
        else f"no price for {spend.get('model')} in [prices]"
    )
    lines = [
        f"== {log_file} in both turn_sections modes · model: {summaries[0]['model_label']} · "
        f"{price} ==",
        f"{'':<{width}}  "
        + "  ".join(f"{mode:>{w}}" for mode, w in zip(MODES, widths, strict=True)),
    ]
    for row, label in enumerate(labels):
        cells = "  ".join(f"{values[c][row]:>{w}}" for c, w in enumerate(widths))
        lines.append(f"{label:<{width}}  {cells}")
    return lines
