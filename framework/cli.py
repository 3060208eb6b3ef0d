"""The ``promptweave`` command (``docs/cli.md``), in the style of ``llm`` and ``datasette``."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from framework.config import Config
from framework.errors import PromptweaveError, TurnFileError
from framework.routing.batch import confusion_table, decide_cases, load_route_file
from framework.runtime import Promptweave
from framework.turnfile import load_turn_file

__all__ = ["cli"]


def _runtime(config_path: Path | None, seed: int | None = None) -> Promptweave:
    try:
        rng = None if seed is None else random.Random(seed)
        return Promptweave.from_config(Config.discover(config_path), rng=rng)
    except PromptweaveError as exc:
        raise click.ClickException(str(exc)) from exc


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="promptweave.toml to use (default: $PROMPTWEAVE_CONFIG, else ./promptweave.toml).",
)


@click.group()
@click.version_option(package_name="promptweave")
def cli() -> None:
    """Decide whether a chat bot answers, and weave exactly what the LLM receives."""


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@click.option("--hook", "hooks", multiple=True, help="Only plugins implementing this hook.")
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def plugins(
    show_all: bool, hooks: tuple[str, ...], as_json: bool, config_path: Path | None
) -> None:
    """List the loaded plugins and the hooks they implement."""
    runtime = _runtime(config_path)
    rows = []
    for info in runtime.plugins.infos.values():
        implemented = runtime.plugins.hooks_of(info.name)
        if info.kind == "builtin" and not show_all:
            continue
        if hooks and not set(hooks) & set(implemented):
            continue
        rows.append({**attrs.asdict(info), "hooks": implemented})
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        version = f"{row['distribution']} {row['version'] or ''}".strip()
        click.echo(f"{row['name']}  [{row['kind']}]  {version}")
        click.echo(f"    hooks: {', '.join(row['hooks']) or '(none)'}")


@cli.command()
@click.option("--bot", "bot_id", default="0", show_default=True, help="Bot account id.")
@click.option("--group", "group_id", default=None, help="Group id (omit for a private chat).")
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def sections(bot_id: str, group_id: str | None, as_json: bool, config_path: Path | None) -> None:
    """Show the effective section order for a bot and group, with overrides in force."""
    runtime = _runtime(config_path)
    rows = [attrs.asdict(row) for row in runtime.list_sections(bot_id, group_id)]
    errors = sorted({row.pop("error") for row in rows if row.get("error")})
    for problem in errors:
        click.echo(f"warning: overrides not applied: {problem}", err=True)
    for warning in runtime.registries.section_warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        _echo_json(rows)
        return
    for number, row in enumerate(rows, 1):
        override = f"  override: {row['override']}" if row["override"] else ""
        click.echo(
            f"{number:>2}. {row['id']:<20} {row['volatility']:<9} {row['plugin']:<20} "
            f"{row['title']}{override}"
        )


@cli.command()
@click.argument("turn_file", type=click.Path(path_type=Path))
@click.option("--bot", "bot_id", default=None, help="Override the turn's bot id.")
@click.option("--group", "group_id", default=None, help="Override the turn's group id.")
@click.option(
    "--format",
    "output_format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json"]),
    help="Output format.",
)
@click.option("--seed", type=int, default=None, help="Seed the random source (quote, shape).")
@config_option
def render(
    turn_file: Path,
    bot_id: str | None,
    group_id: str | None,
    output_format: str,
    seed: int | None,
    config_path: Path | None,
) -> None:
    """Assemble one turn from TURN_FILE and print the system prompt, messages and trace."""
    try:
        turn = load_turn_file(turn_file)
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if bot_id is not None:
        turn = attrs.evolve(turn, bot=attrs.evolve(turn.bot, id=bot_id))
    if group_id is not None:
        turn = attrs.evolve(turn, group_id=group_id)
    result = _runtime(config_path, seed).render(turn)
    if output_format == "json":
        _echo_json(result.to_json())
        return
    click.echo("==== system prompt ====")
    click.echo(result.system_prompt)
    click.echo("\n==== messages ====")
    for message in result.messages:
        click.echo(f"--- {message.role} ---")
        click.echo(message.content)
    click.echo("\n==== decision ====")
    click.echo(json.dumps(result.decision.trace(), ensure_ascii=False))
    _echo_route_trace(result.trace["route"])
    click.echo("\n==== sections ====")
    for entry in result.trace["sections"]:
        extra = "".join(f"  {key}={entry[key]}" for key in ("override", "error") if key in entry)
        click.echo(
            f"{entry['id']:<20} {entry['status']:<9} {entry['chars']:>5} chars  "
            f"{entry['plugin']}{extra}"
        )


def _echo_route_trace(route: dict[str, Any]) -> None:
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


@cli.command()
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

    Lines are whole turns (the turn-file format) or compact messages; see docs/routing.md.
    The routing state is in memory and starts empty, so a run is reproducible.
    """
    try:
        cases = load_route_file(route_file)
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    results = decide_cases(_runtime(config_path), cases, seed=seed, stream=stream)
    for result in results:
        if as_json:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False))
            continue
        trace = result.decision.trace()
        phrase = result.decision.low_engagement_phrase
        mark = {True: "ok", False: "MISMATCH", None: ""}[result.matched]
        click.echo(
            "\t".join(
                [
                    result.case.id,
                    f"{trace['action']}/{trace['social_action']}/{trace['delivery_style']}",
                    trace["source"],
                    trace["reason"],
                    f"phrase={phrase}" if phrase else "",
                    mark,
                ]
            ).rstrip()
        )
    if confusion:
        click.echo(confusion_table(results), err=as_json)
