"""The text output of ``promptweave render`` (``docs/cli.md``): the blocks that explain a turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from framework.cli.common import StoreSource
from framework.cli.problems import parse_problem, report_lines
from framework.prompt.rendered import RenderedTurn
from framework.providers.records import ProviderRequest
from framework.turn_context.context import TurnContext

__all__ = [
    "echo_budget",
    "echo_retrieval",
    "echo_route_trace",
    "echo_sections",
    "echo_stages",
    "turn_stages",
]


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


def echo_sections(entries: Sequence[Mapping[str, Any]]) -> None:
    """One line per section; an error (a broken override source fails every section alike) is
    printed once below the list and referred to by its number."""
    click.echo("\n==== sections ====")
    errors: dict[str, int] = {}
    for entry in entries:
        if "error" in entry:
            errors.setdefault(entry["error"], len(errors) + 1)
    id_width = max(len(entry["id"]) for entry in entries)
    status_width = max(len(entry["status"]) for entry in entries)
    plugin_width = max(len(entry["plugin"]) for entry in entries)
    for entry in entries:
        extra = f"  override={entry['override']}" if "override" in entry else ""
        if "error" in entry:
            extra += f"  error [{errors[entry['error']]}]"
        click.echo(
            f"{entry['id']:<{id_width}}  {entry['status']:<{status_width}}  "
            f"{entry['chars']:>5} chars  {entry['plugin']:<{plugin_width}}{extra}".rstrip()
        )
    for error, number in errors.items():
        count = sum(1 for entry in entries if entry.get("error") == error)
        where = "every section" if count == len(entries) else f"{count} sections"
        problem = report_lines([parse_problem(None, error)])[0]
        click.echo(f"[{number}] {problem} ({where})")


def echo_retrieval(
    result: RenderedTurn, given: Mapping[str, Sequence[Any]], store: StoreSource
) -> None:
    """The query, the store searched, what the turn file gave, then each retriever's outcome
    and hits (``docs/retrieval.md``, "The trace")."""
    retrieval = result.trace["retrieval"]
    click.echo("\n==== retrieval ====")
    if retrieval.get("skipped"):
        click.echo("skipped (--no-retrieval): the sections show the turn file's own items")
        return
    memory = "allowed" if retrieval["allow_persistent_memory"] else "skipped (short social turn)"
    click.echo(f"query: {retrieval['query']}")
    click.echo(f"persistent memory: {memory}")
    searched = "" if store.has_data else ": the built-in retrievers had no data to search"
    click.echo(f"store: {store.description}{searched}")
    rows: list[tuple[str, str, str, str, str, list[Mapping[str, Any]]]] = []
    for section_id, items in given.items():
        rows.append((section_id, "(turn file)", "given", _count(len(items), "item"), "", []))
    for section_id, entries in retrieval["sections"].items():
        for entry in entries:
            status = entry["status"]
            if "reason" in entry:
                error = f": {entry['error']}" if "error" in entry else ""
                status += f" ({entry['reason']}{error})"
            hits = entry["hits"]
            rows.append(
                (
                    section_id,
                    entry["retriever"],
                    status,
                    _count(len(hits), "hit"),
                    f"{entry['duration_ms']:.1f} ms",
                    hits,
                )
            )
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for section_id, source, status, count, milliseconds, hits in rows:
        click.echo(
            f"{section_id:<{widths[0]}}  {source:<{widths[1]}}  {status:<{widths[2]}}  "
            f"{count}  {milliseconds}".rstrip()
        )
        for hit in hits:
            click.echo(f"    {hit['score']:>6.3f}  {hit['text']}")


def _count(number: int, noun: str) -> str:
    """``  3 items``, `` 1 item ``: the number right-aligned and the noun padded, for a column."""
    return f"{number:>3} {noun if number == 1 else noun + 's':<{len(noun) + 1}}"


def echo_budget(
    budget: Mapping[str, Any],
    unit: str,
    preflight: Mapping[str, Any],
    threshold: int,
    sent: Mapping[str, Any],
) -> None:
    """What the budget trimmed from the rendered messages, what the preflight compression did at
    its token threshold, then what the budget trimmed from what the turn context sends
    (``docs/messages.md``, ``docs/turn_context.md``); ``sent`` is one line when it is the
    rendered total, untouched."""
    click.echo("\n==== budget ====")
    dropped = _counted(budget["dropped"])
    cut = ["current message"] if budget["current_cut"] else []
    click.echo(f"total: {_measured(budget, unit, trimmed=bool(dropped or cut))}")
    if dropped or cut:
        click.echo(f"  dropped: {dropped or 'none'}")
        click.echo(f"  cut: {', '.join(cut) or 'none'}")
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
    sent_dropped = _counted(
        [
            *["replayed sidecar"] * sent["sidecars_dropped"],
            *(["memory context"] if sent["memory_context"] == "dropped" else []),
            *["note"] * sent["notes_dropped"],
            *sent["dropped"],
        ]
    )
    sent_cut = [
        label
        for label, was_cut in (
            ("memory context", sent["memory_context"] == "cut"),
            ("note", sent["notes_cut"]),
            ("current message", sent["current_cut"]),
        )
        if was_cut
    ]
    trimmed = bool(sent_dropped or sent_cut)
    same = all(sent[key] == budget[key] for key in ("total", "system", "budget"))
    if same and not trimmed and sent["before"] == sent["total"]:
        click.echo("sent: the same as total")
        return
    click.echo(f"sent: {_measured(sent, unit, trimmed=trimmed)}")
    if trimmed:
        click.echo(f"  dropped: {sent_dropped or 'none'}")
        click.echo(f"  cut: {', '.join(sent_cut) or 'none'}")


def _measured(budget: Mapping[str, Any], unit: str, *, trimmed: bool) -> str:
    """``2124 / 2150 chars (system prompt 2068, before trimming 2226)``, or ``2226 / 12000 chars
    (system prompt 2068), nothing trimmed``."""
    limit = f" / {budget['budget']}" if budget["budget"] > 0 else ""
    unlimited = "" if limit else ", no budget ([budget] chars = 0)"
    if trimmed or budget["before"] != budget["total"]:
        sizes = f"(system prompt {budget['system']}, before trimming {budget['before']})"
        return f"{budget['total']}{limit} {unit} {sizes}{unlimited}"
    return f"{budget['total']}{limit} {unit} (system prompt {budget['system']}){unlimited}, nothing trimmed"


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
