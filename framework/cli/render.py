"""The text output of ``promptweave render`` (``docs/cli.md``): the blocks that explain a turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from framework.prompt.rendered import RenderedTurn
from framework.providers.records import ProviderRequest
from framework.turn_context.context import TurnContext

__all__ = ["echo_budget", "echo_retrieval", "echo_route_trace", "echo_stages", "turn_stages"]


def echo_route_trace(route: dict[str, Any]) -> None:
    """The routing details under the compact decision: stage, necessity terms, exits, policy."""
    click.echo(f"stage: {route['stage']}")
    necessity = route["necessity"]
    if necessity is not None:
        terms = " ".join(f"{t['name']}{t['points']:+d}" for t in necessity["terms"]) or "(none)"
        bypass = f" (bypassed: {necessity['bypassed']})" if necessity["bypassed"] else ""
        click.echo(
            f"necessity: {necessity['score']} / {necessity['threshold']}{bypass}  terms: {terms}"
        )
    if route["reply_message_id"]:
        click.echo(f"quote target: {route['reply_message_id']}")
    low = route["low_engagement"]
    if low is not None:
        outcome = f"phrase {low['phrase']!r} from {low['pool']}" if low["phrase"] else "silent"
        click.echo(
            f"low engagement ({low['trigger']}): p={low['probability']} roll={low['roll']:.3f} "
            f"-> {outcome}"
        )
    memory = route["memory_policy"]
    click.echo(
        f"memory: persistent={'yes' if memory['read_persistent_memory'] else 'no'} "
        f"ambient_excerpt={'yes' if memory['include_ambient_excerpt'] else 'no'} "
        f"({memory['reason']})"
    )
    for note in route["notes"]:
        click.echo(f"note: {note}")


def echo_retrieval(result: RenderedTurn) -> None:
    retrieval = result.trace["retrieval"]
    if retrieval.get("skipped"):
        click.echo("\n==== retrieval ====")
        click.echo("skipped (--no-retrieval): the sections show the turn file's own items")
        return
    memory = "allowed" if retrieval["allow_persistent_memory"] else "skipped (short social turn)"
    click.echo("\n==== retrieval ====")
    click.echo(f"query: {retrieval['query']}")
    click.echo(f"persistent memory: {memory}")
    for section_id, entries in retrieval["sections"].items():
        for entry in entries:
            status = entry["status"]
            if "reason" in entry:
                status += f" ({entry['reason']}{': ' + entry['error'] if 'error' in entry else ''})"
            click.echo(
                f"{section_id:<20} {entry['retriever']:<20} {status:<12} "
                f"{len(entry['hits'])} hits  {entry['duration_ms']:.1f} ms"
            )
            for hit in entry["hits"]:
                click.echo(f"    {hit['score']:>6.3f}  {hit['text']}")


def echo_budget(
    budget: Mapping[str, Any],
    unit: str,
    preflight: Mapping[str, Any],
    threshold: int,
    sent: Mapping[str, Any],
) -> None:
    """What the budget trimmed from the rendered messages, what the preflight compression did at
    its token threshold, then what the budget trimmed from what the turn context sends
    (``docs/messages.md``, ``docs/turn_context.md``)."""
    click.echo("\n==== budget ====")
    click.echo(f"total: {_measured(budget, unit)}")
    click.echo(f"dropped: {_counted(budget['dropped']) or 'none'}")
    click.echo(f"cut: {'current message' if budget['current_cut'] else 'none'}")
    if preflight["estimated"]:
        estimate = f"{preflight['tokens']} / {threshold} tokens"
    else:
        estimate = f"threshold {threshold} tokens"
    click.echo(f"preflight: {preflight['outcome']}, {estimate}")
    for number, step in enumerate(preflight["passes"], 1):
        click.echo(
            f"  pass {number}: {step['messages_before']} -> {step['messages_after']} messages, "
            f"{step['tokens_before']} -> {step['tokens_after']} tokens"
            f"{'' if step['progress'] else ' (no progress)'}"
        )
    dropped = [
        *["replayed sidecar"] * sent["sidecars_dropped"],
        *(["memory context"] if sent["memory_context"] == "dropped" else []),
        *["note"] * sent["notes_dropped"],
        *sent["dropped"],
    ]
    cut = [
        label
        for label, was_cut in (
            ("memory context", sent["memory_context"] == "cut"),
            ("note", sent["notes_cut"]),
            ("current message", sent["current_cut"]),
        )
        if was_cut
    ]
    click.echo(f"sent: {_measured(sent, unit)}")
    click.echo(f"  dropped: {_counted(dropped) or 'none'}")
    click.echo(f"  cut: {', '.join(cut) or 'none'}")


def _measured(budget: Mapping[str, Any], unit: str) -> str:
    """``2124 / 2150 chars (system prompt 2068, before trimming 2226)``."""
    limit = f" / {budget['budget']}" if budget["budget"] > 0 else ""
    sizes = f"(system prompt {budget['system']}, before trimming {budget['before']})"
    unlimited = "" if limit else ", no budget ([budget] chars = 0)"
    return f"{budget['total']}{limit} {unit} {sizes}{unlimited}"


def _counted(sources: list[str]) -> str:
    """``history, history, ambient_excerpt`` as ``history ×2, ambient_excerpt``, first seen first."""
    counts: dict[str, int] = {}
    for source in sources:
        counts[source] = counts.get(source, 0) + 1
    return ", ".join(f"{source} ×{n}" if n > 1 else source for source, n in counts.items())


def turn_stages(
    result: RenderedTurn, context: TurnContext, request: ProviderRequest
) -> dict[str, float]:
    """Every stage's milliseconds, in the order the stages ran: the render, the turn context,
    the provider request."""
    return {
        **result.stage_durations_ms,
        **context.stage_durations_ms,
        **request.stage_durations_ms,
    }


def echo_stages(durations: Mapping[str, float]) -> None:
    """One line per stage, its parts (``retrieval.memory``) indented under it, then the sum of
    the top-level stages."""
    click.echo("\n==== stages ====")
    for name, milliseconds in durations.items():
        label = f"  {name}" if "." in name else name
        click.echo(f"{label:<32} {milliseconds:>10.3f} ms")
    total = sum(ms for name, ms in durations.items() if "." not in name)
    click.echo(f"{'total':<32} {total:>10.3f} ms")
