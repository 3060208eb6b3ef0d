"""``promptweave import`` and ``promptweave store``: loading data into the SQLite store."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from framework.cli.common import (
    config_option,
    echo_json,
    load_config,
    open_store,
    runtime_with_stores,
    store_option,
)
from framework.errors import PromptweaveError, TurnFileError
from framework.store.retrieval_import import AUTO_KIND, KINDS, read_files
from framework.store.stores import Stores

__all__ = ["import_data", "store"]


@click.command(name="import")
@click.argument("kind", type=click.Choice([*KINDS, AUTO_KIND]))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
@click.option("--bot", "bot_id", default=None, help="Bot id of records that name none.")
@click.option(
    "--group",
    "group_id",
    default=None,
    help="Group id of records that name none ('' for the private-chat scope).",
)
@config_option
def import_data(
    kind: str,
    files: tuple[Path, ...],
    store: Path | None,
    bot_id: str | None,
    group_id: str | None,
    config_path: Path | None,
) -> None:
    """Load retrieval data of KIND from FILES into the store, all or nothing.

    KIND is one of the data kinds, or 'auto' to tell each file's kind from its name
    (memories.jsonl, knowledge/*.md…); a directory imports every file in it.
    """
    config = load_config(config_path, store)
    if not config.store.enabled:
        raise click.ClickException("the store is disabled ([store] enabled = false)")
    if config.store.backend == "memory":
        # With "redis" the retrieval data stays in the SQLite file at [store] path.
        raise click.ClickException(
            "the configured store is in memory; give --store FILE to import into a SQLite file"
        )
    try:
        # Validate every file before the store is opened: a bad file leaves no trace at all.
        batch = read_files(kind, list(files), bot_id=bot_id, group_id=group_id)
        written = Stores.from_config(config).retrieval.write(batch)
    except PromptweaveError as exc:
        raise click.ClickException(str(exc)) from exc
    path = config.resolve_path(config.store.path)
    summary = ", ".join(f"{count} {name}" for name, count in written.items() if count) or "nothing"
    click.echo(f"imported {summary} into {path}")


@click.group()
def store() -> None:
    """Load and inspect the conversational store (docs/store.md)."""


store_path_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite store file (default: [store] path of the config).",
)


def _store_path(store_path: Path | None, config_path: Path | None) -> Path:
    if store_path is not None:
        return store_path
    config = load_config(config_path)
    return config.resolve_path(config.store.path)


@store.command("import")
@click.argument("events_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_path_option
@click.option("--no-compress", is_flag=True, help="Do not compress long sessions while importing.")
@config_option
def store_import(
    events_file: Path, store_path: Path | None, no_compress: bool, config_path: Path | None
) -> None:
    """Record the events of EVENTS_FILE (JSON Lines: message and bot_reply events)."""
    # Check the config and the whole events file before the store is opened: a bad line leaves
    # no new file behind and nothing recorded.
    # The event log brings the live loop's recording and session compression: only this command
    # needs them, so the others do not load them (docs/performance.md).
    from framework.loop.event_log import read_events, record_events

    path = _store_path(store_path, config_path)
    load_config(config_path)
    try:
        with events_file.open(encoding="utf-8") as handle:
            events = read_events(handle, source=str(events_file))
    except TurnFileError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except UnicodeDecodeError as exc:
        click.echo(f"Error: {events_file}: not UTF-8: {exc}", err=True)
        sys.exit(2)
    runtime = runtime_with_stores(config_path, open_store(path, config_path, create=True))
    try:
        report = record_events(runtime, events, compress=not no_compress)
    finally:
        runtime.close()
    click.echo(
        f"{path}: {report.messages} messages, {report.replies} bot replies, "
        f"{report.skipped} skipped, {report.summaries} summaries written"
        + (f", {report.failed} failed" if report.failed else "")
    )
    if report.failed:
        click.echo(
            f"Error: {report.failed} events could not be stored (the store failed; see the log)",
            err=True,
        )
        sys.exit(1)


@store.command("stats")
@store_path_option
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def store_stats(store_path: Path | None, as_json: bool, config_path: Path | None) -> None:
    """Count the rows of each conversational table and show the schema versions."""
    path = _store_path(store_path, config_path)
    database = open_store(path, config_path, create=False).database
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
        echo_json({"path": str(path), "tables": counts, "schema_versions": versions})
        return
    click.echo(str(path))
    for table, count in counts.items():
        click.echo(f"  {table:<20} {count:>10}")
    for component, version in sorted(versions.items()):
        click.echo(f"  schema {component}: v{version}")
