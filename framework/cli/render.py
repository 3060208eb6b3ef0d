"""``promptweave render``: one turn from a turn file, as the LLM would receive it, and why."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import attrs
import click

from promptweave._convert import load_json
from promptweave.cli.common import (
    build_runtime,
    config_option,
    echo_json,
    not_blank,
    render_store_source,
    store_option,
)
from promptweave.cli.problems import PassRefused, Problem, input_error, require_file
from promptweave.cli.text_blocks import echo_text
from promptweave.decision import Decision, TurnAction
from promptweave.errors import TurnFileError
from promptweave.providers.exchange import ProviderRequest, ProviderSpec
from promptweave.providers.prefix import canonical_json
from promptweave.providers.request import build_provider_request
from promptweave.runtime import Promptweave
from promptweave.turn import Turn, load_turn_file
from promptweave.turn_context.context import TurnContext, build_turn_context
from promptweave.turn_context.conversation_state import conversation_key

__all__ = ["REQUEST_FORMATS", "render"]

log = logging.getLogger("promptweave.cli")

#: ``render --format`` values that print a provider request body, and the API each names.
REQUEST_FORMATS = {
    "openai": "openai_chat",
    "responses": "openai_responses",
    "anthropic": "anthropic",
}


@click.command()
@click.argument("turn_file", type=click.Path(path_type=Path))
@click.option(
    "--bot", "bot_id", default=None, callback=not_blank, help="Override the turn's bot id."
)
@click.option(
    "--group", "group_id", default=None, callback=not_blank, help="Override the turn's group id."
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
    "--pretty",
    is_flag=True,
    help="Indent the request body of openai, responses and anthropic (to read, not to send).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Print the request body of openai, responses and anthropic even when the routing "
    "decided to pass.",
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
    pretty: bool,
    force: bool,
    previous_file: Path | None,
    no_retrieval: bool,
    store: Path | None,
    seed: int | None,
    config_path: Path | None,
) -> None:
    """Assemble one turn from TURN_FILE and print the system prompt, messages and trace."""
    for flag, given in (("--pretty", pretty), ("--force", force)):
        if given and output_format not in REQUEST_FORMATS:
            raise click.UsageError(
                f"{flag} applies to --format {'/'.join(REQUEST_FORMATS)} only, not {output_format}"
            )
    turn = _load_turn(turn_file, bot_id, group_id)
    runtime = build_runtime(config_path, store, seed, render=True)
    source = render_store_source(runtime.config, explicit=store is not None)
    if (
        not source.has_data
        and runtime.config.store.enabled
        and not (turn.recent_messages or turn.history)
    ):
        log.warning(
            "%s: there is no store to read (store: %s) and the turn file gives no "
            "recent_messages or history: only the current message is sent; give --store FILE, "
            "or --config with the [store] that holds them",
            turn_file,
            source.description,
        )
    spec = ProviderSpec.from_config(
        runtime.config.provider, REQUEST_FORMATS.get(output_format, runtime.config.provider.api)
    )
    if previous_file is not None:
        _replay_previous(runtime, previous_file, turn, spec, bot_id, group_id, not no_retrieval)
    result = runtime.render(turn, retrieve=not no_retrieval)
    if output_format in REQUEST_FORMATS and not force:
        _refuse_a_silent_turn(turn_file, result.decision)
    context = build_turn_context(runtime, turn, result)
    request = build_provider_request(runtime, context, spec)
    if output_format in REQUEST_FORMATS:
        if pretty:
            echo_json(request.body)
        else:
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
    echo_text(
        result,
        context,
        request,
        given=turn.retrieved_items(),
        store=source,
        budget_unit=_budget_unit(runtime),
        threshold_tokens=runtime.config.turn_context.threshold_tokens,
    )


def _refuse_a_silent_turn(turn_file: Path, decision: Decision) -> None:
    """A request body is what a script sends to the model: for a turn the bot stays silent on
    (or answers with a canned phrase, without the model) there is none to send."""
    if decision.action is not TurnAction.PASS:
        return
    phrase = decision.low_engagement_phrase
    outcome = (
        f"the bot sends the canned phrase {phrase!r} without the model"
        if phrase
        else "the bot stays silent and sends nothing to the model"
    )
    raise PassRefused(
        [
            Problem(
                file=str(turn_file),
                text=f"the routing decided to pass ({decision.reason}): {outcome}; "
                "--force prints the request anyway",
            )
        ]
    )


def _budget_unit(runtime: Promptweave) -> str:
    """What the budget counts: characters, unless a plugin measures text (docs/messages.md)."""
    if runtime.plugins.hooks.implemented("measure_text"):
        return "measure_text units"
    return "chars"


def _load_turn(path: Path, bot_id: str | None, group_id: str | None) -> Turn:
    require_file(path)
    try:
        turn = load_turn_file(path)
    except TurnFileError as exc:
        raise input_error(exc) from exc
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
    require_file(path)
    try:
        data = load_json(path, TurnFileError)
    except TurnFileError as exc:
        raise input_error(exc) from exc
    if isinstance(data, dict) and "bot" in data and "message" in data:
        previous = _load_turn(path, bot_id, group_id)
        context: TurnContext = build_turn_context(
            runtime, previous, runtime.render(previous, retrieve=retrieve)
        )
        request: ProviderRequest = build_provider_request(runtime, context, spec)
        if context.conversation_key != conversation_key(turn):
            log.warning(
                "%s is another conversation (%s); its request is compared anyway",
                path,
                context.conversation_key,
            )
            runtime.conversations.remember_request(
                conversation_key(turn), spec.api.value, request.body_bytes()
            )
        return
    runtime.conversations.remember_request(
        conversation_key(turn), spec.api.value, canonical_json(data).encode()
    )
