"""The text output of ``promptweave render`` (``docs/cli.md``): the blocks that explain a turn."""

from __future__ import annotations

from typing import Any

import click

from framework.rendered import RenderedTurn

__all__ = ["echo_retrieval", "echo_route_trace"]


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
