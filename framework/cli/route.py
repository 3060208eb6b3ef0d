"""``promptweave route``: many messages decided in one run, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import click

from promptweave.cli.common import build_runtime, config_option
from promptweave.cli.event_cases import load_route_input
from promptweave.cli.problems import input_error, require_file
from promptweave.cli.route_batch import CaseResult, confusion_table, decide_cases, default_route_bot
from promptweave.cli.style import (
    ACTION_COLOURS,
    STATUS_COLOURS,
    coloured,
    display_width,
    on_terminal,
    pad,
)
from promptweave.errors import TurnFileError

__all__ = ["echo_rows", "route"]


@click.command()
@click.argument("route_file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--confusion", is_flag=True, help="Print expected against decided actions for labelled lines."
)
@click.option("--seed", default=0, show_default=True, help="Random seed of lines without one.")
@click.option(
    "--stream", is_flag=True, help="Decide the lines as one conversation sharing routing state."
)
@config_option
def route(
    route_file: Path,
    as_json: bool,
    confusion: bool,
    seed: int,
    stream: bool,
    config_path: Path | None,
) -> None:
    """Decide every message of ROUTE_FILE (JSON Lines) and print one decision per line.

    Lines are whole turns (the turn-file format) or compact messages; see docs/routing.md. An
    event log (the format of 'store import') is read too: each message event is decided with the
    log's earlier messages and replies around it. The routing state is in memory and starts
    empty, so a run is reproducible.
    """
    require_file(route_file)
    runtime = build_runtime(config_path)
    try:
        cases = load_route_input(route_file, bot=default_route_bot(runtime.persona))
    except TurnFileError as exc:
        raise input_error(exc) from exc
    results = decide_cases(runtime, cases, seed=seed, stream=stream)
    if as_json:
        for result in results:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        echo_rows([_row(result) for result in results])
    if confusion:
        click.echo(confusion_table(results), err=as_json)


def _row(result: CaseResult) -> list[str]:
    """id, action/social action/delivery style, source, reason, canned phrase, label mark."""
    trace = result.decision.trace()
    phrase = result.decision.low_engagement_phrase
    return [
        result.case.id,
        f"{trace['action']}/{trace['social_action']}/{trace['delivery_style']}",
        trace["source"],
        trace["reason"],
        f"phrase={phrase}" if phrase else "",
        {True: "ok", False: "MISMATCH", None: ""}[result.matched],
    ]


def echo_rows(rows: list[list[str]]) -> None:
    """Tab-separated columns for pipes (``cut -f``, ``awk -F'\\t'``); on a terminal, aligned
    columns, the action and the label mark coloured."""
    if not on_terminal():
        for row in rows:
            click.echo("\t".join(row).rstrip())
        return
    widths = [max((display_width(row[column]) for row in rows), default=0) for column in range(6)]
    for row in rows:
        action = row[1].split("/", 1)[0]
        cells = [
            coloured(pad(cell, widths[column]), _colour(column, cell, action))
            for column, cell in enumerate(row)
        ]
        click.echo("  ".join(cells).rstrip())


def _colour(column: int, cell: str, action: str) -> str | None:
    if column == 1:
        return ACTION_COLOURS.get(action)
    if column == 5:
        return STATUS_COLOURS.get(cell)
    return None
