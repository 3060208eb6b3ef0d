"""The text output of ``promptweave render`` (``docs/cli.md``): the blocks that explain a turn.

Columns are aligned on the widest value; on a terminal, headings, statuses and the decision are
coloured (:mod:`promptweave.cli.style`), and piped output is the same text, plain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import click

from promptweave.cli.common import StoreSource
from promptweave.cli.problems import configured_file_problem, report_lines
from promptweave.cli.style import ACTION_COLOURS, coloured, heading, status
from promptweave.prompt.rendered import RenderedTurn
from promptweave.providers.exchange import ProviderRequest
from promptweave.turn_context.context import TurnContext

__all__ = ["echo_text"]


def echo_text(
    result: RenderedTurn,
    context: TurnContext,
    request: ProviderRequest,
    *,
    given: Mapping[str, Sequence[Any]],
    store: StoreSource,
    budget_unit: str,
    threshold_tokens: int,
) -> None:
    """Every block of the text format, in the documented order.

    :param given: the items the turn file carried, per section.
    :param store: the store the retrievers searched.
    """
    click.echo(heading("system prompt"))
    for line in result.system_prompt.split("\n"):
        # A section starts with its 【header】 line: make the sections easy to find.
        click.echo(coloured(line, None, bold=True) if line.startswith("【") else line)
    click.echo("\n" + heading("messages"))
    for message in result.messages:
        # A wording hint says so: it is advice to the model, not something the user said.
        label = f" ({message.source})" if message.source.startswith("wording_hint:") else ""
        click.echo(coloured(f"--- {message.role}{label} ---", "magenta"))
        click.echo(message.content)
    if result.trace.get("degraded"):
        click.echo(coloured(f"\n(degraded: {result.trace['degraded']})", "yellow"))
    echo_budget(
        result.trace["budget"],
        budget_unit,
        context.trace["preflight"],
        threshold_tokens,
        context.trace["budget"],
    )
    echo_wording_hints(result.trace["wording_hints"])
    click.echo("\n" + heading("decision"))
    decision = result.decision.trace()
    click.echo(
        coloured(json.dumps(decision, ensure_ascii=False), ACTION_COLOURS.get(decision["action"]))
    )
    echo_route_trace(result.trace["route"])
    click.echo("\n" + heading("turn context"))
    click.echo(json.dumps(context.trace["system_prompt"], ensure_ascii=False))
    for note in context.notes:
        click.echo(f"note: {note}")
    if request.prefix is not None:
        click.echo("\n" + heading("prefix"))
        click.echo(json.dumps(request.prefix.to_json(), ensure_ascii=False))
    echo_sections(result.trace["sections"])
    echo_retrieval(result, given, store)
    echo_stages(turn_stages(result, context, request))


def echo_wording_hints(hints: Mapping[str, Any]) -> None:
    """One line per wording hint, sent or trimmed by the budget, and one per plugin that failed
    (``docs/messages.md``, wording hints)."""
    click.echo("\n" + heading("wording hints"))
    rows = [("sent", hint) for hint in hints["sent"]] + [
        ("trimmed", hint) for hint in hints["trimmed"]
    ]
    if not rows and not hints["failures"]:
        click.echo("(none)")
    kind_width = max((len(hint["kind"]) for _, hint in rows), default=0)
    plugin_width = max((len(hint["plugin"]) for _, hint in rows), default=0)
    for state, hint in rows:
        click.echo(
            f"{status(state, 7)}  {hint['kind']:<{kind_width}}  {hint['plugin']:<{plugin_width}}  "
            f"{hint['chars']:>4} chars  {hint['reason']}".rstrip()
        )
    for failure in hints["failures"]:
        click.echo(coloured(f"failed: plugin {failure['plugin']!r}: {failure['error']}", "red"))


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
    click.echo("\n" + heading("sections"))
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
            f"{entry['id']:<{id_width}}  {status(entry['status'], status_width)}  "
            f"{entry['chars']:>5} chars  {entry['plugin']:<{plugin_width}}{extra}".rstrip()
        )
    for error, number in errors.items():
        count = sum(1 for entry in entries if entry.get("error") == error)
        where = "every section" if count == len(entries) else f"{count} sections"
        problem = report_lines([configured_file_problem(error)])[0]
        click.echo(f"[{number}] {problem} ({where})")


def echo_retrieval(
    result: RenderedTurn, given: Mapping[str, Sequence[Any]], store: StoreSource
) -> None:
    """The query, the store searched, what the turn file gave, then each retriever's outcome
    and hits (``docs/retrieval.md``, "The trace")."""
    retrieval = result.trace["retrieval"]
    click.echo("\n" + heading("retrieval"))
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
            outcome = entry["status"]
            if "reason" in entry:
                error = f": {entry['error']}" if "error" in entry else ""
                outcome += f" ({entry['reason']}{error})"
            hits = entry["hits"]
            rows.append(
                (
                    section_id,
                    entry["retriever"],
                    outcome,
                    _count(len(hits), "hit"),
                    f"{entry['duration_ms']:.1f} ms",
                    hits,
                )
            )
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for section_id, source, outcome, count, milliseconds, hits in rows:
        click.echo(
            f"{section_id:<{widths[0]}}  {source:<{widths[1]}}  {status(outcome, widths[2])}  "
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
    click.echo("\n" + heading("budget"))
    dropped = _counted(budget["dropped"])
    cut = ["current message"] if budget["current_cut"] else []
    click.echo(f"total: {_measured(budget, unit, trimmed=bool(dropped or cut))}")
    if dropped or cut:
        click.echo(f"  dropped: {dropped or 'none'}")
        click.echo(f"  cut: {', '.join(cut) or 'none'}")
    if preflight["estimated"]:
        basis = preflight.get("tokens_basis", "estimated")
        estimate = f"{preflight['tokens']} / {threshold} tokens ({basis})"
    else:
        estimate = f"threshold {threshold} tokens"
    click.echo(f"preflight: {preflight['outcome']}, {estimate}")
    for number, step in enumerate(preflight["passes"], 1):
        click.echo(
            f"  pass {number}: {step['messages_before']} -> {step['messages_after']} messages, "
            f"{step['tokens_before']} -> {step['tokens_after']} tokens "
            f"({preflight.get('tokens_basis', 'estimated')})"
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
    click.echo("\n" + heading("stages"))
    for name, milliseconds in durations.items():
        label = f"  {name}" if "." in name else name
        click.echo(f"{label:<32} {milliseconds:>10.3f} ms")
    total = sum(ms for name, ms in durations.items() if "." not in name)
    click.echo(f"{'total':<32} {total:>10.3f} ms")
