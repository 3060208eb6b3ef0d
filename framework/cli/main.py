"""The ``promptweave`` command (``docs/cli.md``), in the style of ``llm`` and ``datasette``."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import attrs
import click

from framework._convert import load_json
from framework.cli.common import (
    EchoHandler,
    build_runtime,
    config_option,
    echo_json,
    store_option,
)
from framework.cli.data import import_data, store
from framework.cli.render import (
    echo_budget,
    echo_retrieval,
    echo_route_trace,
    echo_stages,
    turn_stages,
)
from framework.conversation.state import conversation_key
from framework.errors import TurnFileError
from framework.providers.prefix import canonical_json
from framework.providers.records import ProviderRequest, ProviderSpec
from framework.providers.request import build_provider_request
from framework.runtime import Promptweave
from framework.turn import Turn, load_turn_file
from framework.turn_context.context import TurnContext, build_turn_context

__all__ = ["cli"]

#: ``render --format`` values that print a provider request body, and the API each names.
REQUEST_FORMATS = {
    "openai": "openai_chat",
    "responses": "openai_responses",
    "anthropic": "anthropic",
}


def _not_blank(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An id option may be left out, but not given blank (a private chat is no ``--group``)."""
    if value is not None and not value.strip():
        raise click.BadParameter("must not be blank; leave the option out instead", param=param)
    return value


@click.group()
@click.version_option(package_name="promptweave")
def cli() -> None:
    """Decide whether a chat bot answers, and weave exactly what the LLM receives."""
    # Library warnings (volatility inversions, sections that raised) go to stderr, once.
    logger = logging.getLogger("promptweave")
    logger.handlers = [EchoHandler()]
    logger.propagate = False


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@click.option("--hook", "hooks", multiple=True, help="Only plugins implementing this hook.")
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def plugins(
    show_all: bool, hooks: tuple[str, ...], as_json: bool, config_path: Path | None
) -> None:
    """List the loaded plugins and the hooks they implement."""
    runtime = build_runtime(config_path)
    rows = []
    for info in runtime.plugins.infos.values():
        implemented = runtime.plugins.hooks_of(info.name)
        if info.kind == "builtin" and not show_all:
            continue
        if hooks and not set(hooks) & set(implemented):
            continue
        rows.append({**attrs.asdict(info), "hooks": implemented})
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        version = f"{row['distribution']} {row['version'] or ''}".strip()
        click.echo(f"{row['name']}  [{row['kind']}]  {version}")
        click.echo(f"    hooks: {', '.join(row['hooks']) or '(none)'}")


@cli.command()
@click.option(
    "--bot", "bot_id", default="0", show_default=True, callback=_not_blank, help="Bot account id."
)
@click.option(
    "--group",
    "group_id",
    default=None,
    callback=_not_blank,
    help="Group id (omit for a private chat).",
)
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def sections(bot_id: str, group_id: str | None, as_json: bool, config_path: Path | None) -> None:
    """Show the effective section order for a bot and group, with overrides in force."""
    runtime = build_runtime(config_path)
    rows = [attrs.asdict(row) for row in runtime.list_sections(bot_id, group_id)]
    errors = sorted({error for row in rows if (error := row.pop("error"))})
    for problem in errors:
        click.echo(f"warning: overrides not applied: {problem}", err=True)
    if as_json:
        echo_json(rows)
        return
    for number, row in enumerate(rows, 1):
        override = f"  override: {row['override']}" if row["override"] else ""
        click.echo(
            f"{number:>2}. {row['id']:<20} {row['volatility']:<9} {row['plugin']:<20} "
            f"{row['title']}{override}"
        )


@cli.command()
@click.argument("turn_file", type=click.Path(path_type=Path))
@click.option(
    "--bot", "bot_id", default=None, callback=_not_blank, help="Override the turn's bot id."
)
@click.option(
    "--group", "group_id", default=None, callback=_not_blank, help="Override the turn's group id."
)
@click.option(
    "--format",
    "output_format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json", *REQUEST_FORMATS]),
    help="Output format; openai, responses and anthropic print the exact request body.",
)
@click.option(
    "--previous",
    "previous_file",
    type=click.Path(path_type=Path),
    default=None,
    help="The conversation's previous turn (a turn file) or request body (JSON); report how much "
    "of this request is a byte-identical prefix of it.",
)
@click.option(
    "--no-retrieval",
    "no_retrieval",
    is_flag=True,
    help="Run no retriever: the sections get only the items the turn file carries.",
)
@store_option
@click.option("--seed", type=int, default=None, help="Seed the random source (quote, shape).")
@config_option
def render(
    turn_file: Path,
    bot_id: str | None,
    group_id: str | None,
    output_format: str,
    previous_file: Path | None,
    no_retrieval: bool,
    store: Path | None,
    seed: int | None,
    config_path: Path | None,
) -> None:
    """Assemble one turn from TURN_FILE and print the system prompt, messages and trace."""
    turn = _load_turn(turn_file, bot_id, group_id)
    runtime = build_runtime(config_path, store, seed, render=True)
    spec = ProviderSpec.from_config(
        runtime.config.provider, REQUEST_FORMATS.get(output_format, runtime.config.provider.api)
    )
    if previous_file is not None:
        _replay_previous(runtime, previous_file, turn, spec, bot_id, group_id, not no_retrieval)
    result = runtime.render(turn, retrieve=not no_retrieval)
    context = build_turn_context(runtime, turn, result)
    request = build_provider_request(runtime, context, spec)
    if output_format in REQUEST_FORMATS:
        click.echo(request.body_text())
        if request.prefix is not None:
            click.echo(f"prefix: {json.dumps(request.prefix.to_json())}", err=True)
        return
    if output_format == "json":
        echo_json(
            {
                **result.to_json(),
                "turn_context": {
                    **context.trace,
                    "stage_durations_ms": dict(context.stage_durations_ms),
                },
                "request": {
                    **request.trace,
                    "stage_durations_ms": dict(request.stage_durations_ms),
                },
            }
        )
        return
    click.echo("==== system prompt ====")
    click.echo(result.system_prompt)
    click.echo("\n==== messages ====")
    for message in result.messages:
        click.echo(f"--- {message.role} ---")
        click.echo(message.content)
    if result.trace.get("degraded"):
        click.echo(f"\n(degraded: {result.trace['degraded']})")
    echo_budget(
        result.trace["budget"],
        _budget_unit(runtime),
        context.trace["preflight"],
        runtime.config.turn_context.threshold_tokens,
        context.trace["budget"],
    )
    click.echo("\n==== decision ====")
    click.echo(json.dumps(result.decision.trace(), ensure_ascii=False))
    echo_route_trace(result.trace["route"])
    click.echo("\n==== turn context ====")
    click.echo(json.dumps(context.trace["system_prompt"], ensure_ascii=False))
    for note in context.notes:
        click.echo(f"note: {note}")
    if request.prefix is not None:
        click.echo("\n==== prefix ====")
        click.echo(json.dumps(request.prefix.to_json(), ensure_ascii=False))
    click.echo("\n==== sections ====")
    for entry in result.trace["sections"]:
        extra = "".join(f"  {key}={entry[key]}" for key in ("override", "error") if key in entry)
        click.echo(
            f"{entry['id']:<20} {entry['status']:<9} {entry['chars']:>5} chars  "
            f"{entry['plugin']}{extra}"
        )
    echo_retrieval(result)
    echo_stages(turn_stages(result, context, request))


def _budget_unit(runtime: Promptweave) -> str:
    """What the budget counts: characters, unless a plugin measures text (docs/messages.md)."""
    if runtime.plugins.pm.hook.measure_text.get_hookimpls():
        return "measure_text units"
    return "chars"


def _load_turn(path: Path, bot_id: str | None, group_id: str | None) -> Turn:
    try:
        turn = load_turn_file(path)
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if bot_id is not None:
        turn = attrs.evolve(turn, bot=attrs.evolve(turn.bot, id=bot_id))
    if group_id is not None:
        turn = attrs.evolve(turn, group_id=group_id)
    return turn


def _replay_previous(
    runtime: Promptweave,
    path: Path,
    turn: Turn,
    spec: ProviderSpec,
    bot_id: str | None,
    group_id: str | None,
    retrieve: bool,
) -> None:
    """Make ``path`` the conversation's previous request: render it if it is a turn file (so the
    conversation's system prompt and sent messages carry over), else take it as a body."""
    try:
        data = load_json(path, TurnFileError)
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if isinstance(data, dict) and "bot" in data and "message" in data:
        previous = _load_turn(path, bot_id, group_id)
        context: TurnContext = build_turn_context(
            runtime, previous, runtime.render(previous, retrieve=retrieve)
        )
        request: ProviderRequest = build_provider_request(runtime, context, spec)
        if context.conversation_key != conversation_key(turn):
            click.echo(
                f"warning: {path} is another conversation ({context.conversation_key}); "
                "its request is compared anyway",
                err=True,
            )
            runtime.conversations.remember_request(
                conversation_key(turn), spec.api.value, request.body_bytes()
            )
        return
    runtime.conversations.remember_request(
        conversation_key(turn), spec.api.value, canonical_json(data).encode()
    )


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
    # Only this command reads route files and tables the results (docs/performance.md).
    from framework.routing.batch import (
        confusion_table,
        decide_cases,
        default_route_bot,
        load_route_file,
    )

    runtime = build_runtime(config_path)
    try:
        cases = load_route_file(route_file, bot=default_route_bot(runtime.persona))
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    results = decide_cases(runtime, cases, seed=seed, stream=stream)
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


cli.add_command(import_data)
cli.add_command(store)
