"""The ``promptweave`` command (``docs/cli.md``), in the style of ``llm`` and ``datasette``."""

from __future__ import annotations

# Imported first, before attrs: it installs the code cache (for attrs' own classes too) and
# pauses the collector until the modules below are loaded (``promptweave.cli.startup``).
import promptweave.cli.startup  # isort: split

import importlib
import logging
from pathlib import Path

import attrs
import click

from promptweave.cli.common import EchoHandler, build_runtime, config_option, echo_json, not_blank
from promptweave.cli.problems import configured_file_problem, report_lines
from promptweave.cli.render import render
from promptweave.cli.style import resolve_colour

__all__ = ["cli"]

log = logging.getLogger("promptweave.cli")

#: Subcommands whose modules are imported only when that command runs (or help lists it): they
#: bring the live loop, delivery, the routing batch and the data importer, which ``render``
#: never needs (``docs/performance.md``).
LAZY_COMMANDS = {
    "groups": ("promptweave.cli.groups", "groups"),
    "import": ("promptweave.cli.data", "import_data"),
    "learn": ("promptweave.cli.learn", "learn"),
    "learned": ("promptweave.cli.learn", "learned"),
    "replay": ("promptweave.cli.replay", "replay"),
    "route": ("promptweave.cli.route", "route"),
    "serve": ("promptweave.cli.serve", "serve"),
    "store": ("promptweave.cli.data", "store"),
}


class _LazyGroup(click.Group):
    """A group that imports some subcommands on first use (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module_name, attribute = LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{module_name}.{attribute} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup)
@click.version_option(package_name="promptweave")
@click.option(
    "--color/--no-color",
    "colour",
    default=None,
    help="Colour and align the text output (default: on a terminal, unless NO_COLOR is set).",
)
def cli(colour: bool | None) -> None:
    """Decide whether a chat bot answers, and weave exactly what the LLM receives."""
    click.get_current_context().color = resolve_colour(colour)
    # Library warnings (volatility inversions, sections that raised) go to stderr, once.
    logger = logging.getLogger("promptweave")
    handler = EchoHandler()
    logger.handlers = [handler]
    logger.propagate = False
    click.get_current_context().call_on_close(handler.report_repeats)
    promptweave.cli.startup.skip_the_last_collection()


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
    _check_hook_names(hooks, runtime.plugins.hook_names())
    rows = []
    hidden = 0
    for info in runtime.plugins.infos.values():
        implemented = runtime.plugins.hooks_of(info.name)
        if hooks and not set(hooks) & set(implemented):
            continue
        if info.kind == "builtin" and not show_all:
            hidden += 1
            continue
        rows.append({**attrs.asdict(info), "hooks": implemented})
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        version = f"{row['distribution']} {row['version'] or ''}".strip()
        click.echo(f"{row['name']}  [{row['kind']}]  {version}")
        click.echo(f"    hooks: {', '.join(row['hooks']) or '(none)'}")
    if not rows:
        click.echo(_no_plugins_hint(hooks, hidden), err=True)


def _check_hook_names(hooks: tuple[str, ...], known: list[str]) -> None:
    """``--hook`` names must be hooks: a typo would otherwise list nothing, successfully."""
    import difflib  # only to suggest a name

    for name in hooks:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            suggestion = f"; did you mean {close[0]!r}?" if close else ""
            raise click.BadParameter(
                f"no hook is named {name!r}{suggestion} (the hooks: docs/plugin_hooks.md)",
                param_hint="'--hook'",
            )


def _no_plugins_hint(hooks: tuple[str, ...], hidden: int) -> str:
    """What an empty listing means, and how to see more."""
    what = f"implementing {', '.join(hooks)} " if hooks else ""
    if hidden:
        return f"No plugin {what}besides the built-in ones ({hidden}); add --all to list them."
    return f"No plugin {what}is loaded."


@cli.command()
@click.option(
    "--bot", "bot_id", default="0", show_default=True, callback=not_blank, help="Bot account id."
)
@click.option(
    "--group",
    "group_id",
    default=None,
    callback=not_blank,
    help="Group id (omit for a private chat).",
)
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def sections(bot_id: str, group_id: str | None, as_json: bool, config_path: Path | None) -> None:
    """Show the effective section order for a bot and group, with overrides in force."""
    runtime = build_runtime(config_path)
    rows = [attrs.asdict(row) for row in runtime.list_sections(bot_id, group_id)]
    # Every section asks the same broken override source: say each problem once.
    errors = dict.fromkeys(error for row in rows if (error := row.pop("error")))
    for problem in report_lines(configured_file_problem(error) for error in errors):
        log.warning("overrides not applied: %s", problem)
    if as_json:
        echo_json(rows)
        return
    widths = {key: max(len(row[key]) for row in rows) for key in ("id", "volatility", "plugin")}
    for number, row in enumerate(rows, 1):
        override = f"  override: {row['override']}" if row["override"] else ""
        click.echo(
            f"{number:>2}. {row['id']:<{widths['id']}}  {row['volatility']:<{widths['volatility']}}"
            f"  {row['plugin']:<{widths['plugin']}}  {row['title']}{override}"
        )


cli.add_command(render)
promptweave.cli.startup.modules_loaded()
