"""``promptweave import`` and ``promptweave store``: loading data into the SQLite store."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from promptweave.cli.common import (
    config_option,
    echo_json,
    load_config,
    not_blank,
    open_store,
    runtime_with_stores,
    store_option,
)
from promptweave.cli.problems import (
    Problem,
    config_error,
    input_error,
    require_file,
    shown_path,
)
from promptweave.cli.spend_lines import spend_lines
from promptweave.cli.store_spend import store_spend
from promptweave.errors import PromptweaveError, TurnFileError
from promptweave.store.retrieval_import import AUTO_KIND, KINDS, read_files
from promptweave.store.stores import Stores

__all__ = ["import_data", "store"]


def _group_scope(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--group ''`` is the private-chat scope; a group id of spaces is a typo."""
    if value and not value.strip():
        raise click.BadParameter(
            "must not be blank; give '' for the private-chat scope", param=param
        )
    return value


@click.command(name="import")
@click.argument("kind", type=click.Choice([*KINDS, AUTO_KIND]), metavar="KIND")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
@click.option(
    "--bot", "bot_id", default=None, callback=not_blank, help="Bot id of records that name none."
)
@click.option(
    "--group",
    "group_id",
    default=None,
    callback=_group_scope,
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

    KIND is one of memories, knowledge, relationships, person_facts, expression_pairs,
    rhythm_baselines, behavior_strategies, topic_summaries, or auto to tell each file's kind
    from its name (memories.jsonl, knowledge/*.md…); a directory imports every file in it.
    """
    missing = [Problem(file=str(path), text="no such file") for path in files if not path.exists()]
    if missing:
        raise input_error(missing)
    config = load_config(config_path, store)
    if not config.store.enabled:
        raise config_error([Problem(text="the store is disabled ([store] enabled = false)")])
    if config.store.backend == "memory":
        # With "redis" the retrieval data stays in the SQLite file at [store] path.
        raise config_error(
            [
                Problem(
                    text="the configured store is in memory; "
                    "give --store FILE to import into a SQLite file"
                )
            ]
        )
    try:
        # Validate every file before the store is opened: a bad file leaves no trace at all.
        batch = read_files(kind, list(files), bot_id=bot_id, group_id=group_id)
    except PromptweaveError as exc:
        raise input_error(exc) from exc
    retrieval = Stores.from_config(config).retrieval
    try:
        before = retrieval.counts()
        written = retrieval.write(batch)
        after = retrieval.counts()
    except PromptweaveError as exc:
        raise config_error(exc) from exc
    path = shown_path(config.resolve_path(config.store.path))
    read = ", ".join(_counted(written)) or "nothing"
    # The store updates a record it holds already (same text, same scope) in place: count only
    # the rows that are new, so importing the same files again says so.
    added = {name: after[name] - before.get(name, 0) for name in after}
    new = ", ".join(_counted(added))
    click.echo(f"read {read}")
    click.echo(f"new in {path}: {new or 'nothing (all of it was stored already)'}")


def _counted(counts: dict[str, int]) -> list[str]:
    """``15 memories``, ``2 knowledge documents``: the kinds with a count, in words."""
    names = {"knowledge": "knowledge documents"}
    return [
        f"{count} {names.get(name, name.replace('_', ' '))}"
        for name, count in counts.items()
        if count > 0
    ]


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
@click.argument("events_file", type=click.Path(path_type=Path))
@store_path_option
@click.option("--no-compress", is_flag=True, help="Do not compress long sessions while importing.")
@config_option
def store_import(
    events_file: Path, store_path: Path | None, no_compress: bool, config_path: Path | None
) -> None:
    """Record the events of EVENTS_FILE (JSON Lines: message and bot_reply events)."""
    # Check the config and the whole events file before the store is opened: a bad line leaves
    # no new file behind and nothing recorded. Both passes read the file a line at a time, so a
    # log of a million events takes no more memory than one of ten.
    require_file(events_file)
    # The event log brings the live loop's recording and session compression: only this command
    # needs them, so the others do not load them (docs/performance.md).
    from promptweave.replay.chat_log import MessageIndex, scan_events, stream_events

    path = _store_path(store_path, config_path)
    load_config(config_path)
    source = str(events_file)
    index = MessageIndex()
    try:
        try:
            count = scan_events(_lines(events_file), source=source, index=index)
        except TurnFileError as exc:
            raise input_error(exc) from exc
        runtime = runtime_with_stores(config_path, open_store(path, config_path, create=True))
        try:
            with _progress(count) as bar:
                report = stream_events(
                    runtime,
                    _lines(events_file),
                    source=source,
                    index=index,
                    compress=not no_compress,
                    progress=bar,
                )
        finally:
            runtime.close()
    finally:
        index.close()
    click.echo(
        f"{path}: {report.messages} messages, {report.replies} bot replies, "
        f"{report.skipped} skipped, {report.summaries} summaries written"
        + (f", {report.failed} failed" if report.failed else "")
    )
    if report.failed:
        raise config_error(
            [
                Problem(
                    file=shown_path(path),
                    text=f"{report.failed} events could not be stored (the store failed; "
                    "see the warnings above)",
                )
            ]
        )


def _lines(path: Path) -> Iterator[str]:
    """The lines of ``path``, read one at a time; bytes that are not UTF-8 name their line."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problem = f"not UTF-8 at column {exc.start + 1} (byte 0x{raw[exc.start]:02x})"
                raise TurnFileError(f"{path}:{number}", [problem]) from exc


@contextlib.contextmanager
def _progress(count: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal (standard error), nothing otherwise; yields its update."""
    stream = sys.stderr
    if not stream.isatty():
        yield lambda _done: None
        return
    with click.progressbar(length=count, label="importing", file=stream) as bar:
        yield bar.update


@store.command("stats")
@store_path_option
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
@config_option
def store_stats(store_path: Path | None, as_json: bool, config_path: Path | None) -> None:
    """Count the conversational rows, the retrieval data and the learned items, and show the
    schema versions."""
    path = _store_path(store_path, config_path)
    stores = open_store(path, config_path, create=False)
    database = stores.database
    if database is None or stores.retrieval is None:
        raise config_error([Problem(file=shown_path(path), text="not a SQLite store")])
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
    retrieval = stores.retrieval.counts()
    # What the learners learned, per kind (``promptweave learned list`` shows the items).
    learned = None if stores.learned is None else dict(sorted(stores.learned.counts().items()))
    versions = dict(
        connection.execute(
            "SELECT component, MAX(version) FROM schema_versions GROUP BY component"
        ).fetchall()
    )
    spend = store_spend(connection, load_config(config_path))
    if as_json:
        echo_json(
            {
                "path": str(path),
                "tables": counts,
                "retrieval": retrieval,
                **({} if learned is None else {"learned": learned}),
                "schema_versions": versions,
                "spend": spend,
            }
        )
        return
    click.echo(shown_path(path))
    blocks = [("conversation", counts), ("retrieval", retrieval)]
    if learned is not None:
        blocks.append(("learned", learned))
    for title, rows in blocks:
        click.echo(f"  {title}")
        for name, count in rows.items():
            click.echo(f"    {name:<20} {count:>8}")
        if not rows:
            click.echo("    (nothing yet)")
    for component, version in sorted(versions.items()):
        click.echo(f"  schema {component}: v{version}")
    for line in spend_lines(
        spend, unit="answers with usage", empty="no answer with the provider's usage"
    ):
        click.echo(f"  {line}")
    if spend["without_usage"]:
        click.echo(f"    answers without usage (not priced): {spend['without_usage']}")
    if spend["cached_not_reported"]:
        click.echo(
            f"    answers whose provider reported no cached tokens (priced as uncached): "
            f"{spend['cached_not_reported']}"
        )
