"""The ``promptweave`` command (``docs/cli.md``), in the style of ``llm`` and ``datasette``."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from framework.config import Config
from framework.errors import PromptweaveError, TurnFileError
from framework.runtime import Promptweave
from framework.store.sessions_sqlite import SESSION_MIGRATIONS
from framework.store.sqlite import SQLiteDatabase, StoreUnavailableError
from framework.store.stores import Stores
from framework.store_import import import_events
from framework.turnfile import load_turn_file

__all__ = ["cli"]


def _runtime(config_path: Path | None, stores: Stores | None = None) -> Promptweave:
    try:
        return Promptweave.from_config(Config.discover(config_path), stores=stores)
    except PromptweaveError as exc:
        raise click.ClickException(str(exc)) from exc


def _config(config_path: Path | None) -> Config:
    try:
        return Config.discover(config_path)
    except PromptweaveError as exc:
        raise click.ClickException(str(exc)) from exc


def _open_store(path: Path, config_path: Path | None, *, create: bool) -> Stores:
    """The SQLite stores of ``path``, migrated; an unusable file is a clean CLI error."""
    if not create and not path.is_file():
        raise click.ClickException(f"store file {path} does not exist")
    database = SQLiteDatabase(path)
    try:
        database.migrate(SESSION_MIGRATIONS)
    except (StoreUnavailableError, sqlite3.Error, OSError) as exc:
        raise click.ClickException(f"cannot open store {path}: {exc}") from exc
    return Stores.sqlite(database, _config(config_path))


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
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite store to read the group timeline, history and ambient excerpt from "
    "(default: none; only what the turn file carries).",
)
@config_option
def render(
    turn_file: Path,
    bot_id: str | None,
    group_id: str | None,
    output_format: str,
    store_path: Path | None,
    config_path: Path | None,
) -> None:
    """Assemble one turn from TURN_FILE and print the system prompt, messages and trace.

    Whatever the turn file leaves out (recent group messages, history, quoted bot text) is read
    from --store as it stood at the message's time.
    """
    try:
        turn = load_turn_file(turn_file)
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if bot_id is not None:
        turn = attrs.evolve(turn, bot=attrs.evolve(turn.bot, id=bot_id))
    if group_id is not None:
        turn = attrs.evolve(turn, group_id=group_id)
    stores = (
        _open_store(store_path, config_path, create=False) if store_path else Stores.in_memory()
    )
    result = _runtime(config_path, stores).render(turn)
    if output_format == "json":
        _echo_json(result.to_json())
        return
    click.echo("==== system prompt ====")
    click.echo(result.system_prompt)
    click.echo("\n==== messages ====")
    for message in result.messages:
        click.echo(f"--- {message.role} ---")
        click.echo(message.content)
    if result.trace.get("degraded"):
        click.echo(f"\n(degraded: {result.trace['degraded']})")
    click.echo("\n==== decision ====")
    click.echo(json.dumps(result.decision.trace(), ensure_ascii=False))
    click.echo("\n==== sections ====")
    for entry in result.trace["sections"]:
        extra = "".join(f"  {key}={entry[key]}" for key in ("override", "error") if key in entry)
        click.echo(
            f"{entry['id']:<20} {entry['status']:<9} {entry['chars']:>5} chars  "
            f"{entry['plugin']}{extra}"
        )


@cli.group()
def store() -> None:
    """Load and inspect the conversational store (docs/store.md)."""


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite store file (default: [store] path of the config).",
)


def _store_path(store_path: Path | None, config_path: Path | None) -> Path:
    if store_path is not None:
        return store_path
    config = _config(config_path)
    return config.resolve_path(config.store.path)


@store.command("import")
@click.argument("events_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@click.option("--no-compress", is_flag=True, help="Do not compress long sessions while importing.")
@config_option
def store_import(
    events_file: Path, store_path: Path | None, no_compress: bool, config_path: Path | None
) -> None:
    """Record the events of EVENTS_FILE (JSON Lines: message and bot_reply events)."""
    path = _store_path(store_path, config_path)
    runtime = _runtime(config_path, _open_store(path, config_path, create=True))
    try:
        with events_file.open(encoding="utf-8") as handle:
            report = import_events(
                runtime, handle, source=str(events_file), compress=not no_compress
            )
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    finally:
        runtime.close()
    click.echo(
        f"{path}: {report.messages} messages, {report.replies} bot replies, "
        f"{report.skipped} skipped, {report.summaries} summaries written"
    )


@store.command("stats")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def store_stats(store_path: Path | None, as_json: bool, config_path: Path | None) -> None:
    """Count the rows of each conversational table and show the schema versions."""
    path = _store_path(store_path, config_path)
    database = _open_store(path, config_path, create=False).database
    if database is None:
        raise click.ClickException(f"store file {path} is not a SQLite store")
    connection = database.connection()
    tables = (
        "group_messages",
        "session_turns",
        "session_summaries",
        "bot_reply_context",
        "feedback_phrases",
    )
    counts = {
        table: connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables
    }
    versions = dict(
        connection.execute(
            "SELECT component, MAX(version) FROM schema_versions GROUP BY component"
        ).fetchall()
    )
    if as_json:
        _echo_json({"path": str(path), "tables": counts, "schema_versions": versions})
        return
    click.echo(str(path))
    for table, count in counts.items():
        click.echo(f"  {table:<20} {count:>10}")
    for component, version in sorted(versions.items()):
        click.echo(f"  schema {component}: v{version}")
