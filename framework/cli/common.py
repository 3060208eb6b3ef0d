"""What the ``promptweave`` subcommands share: loading the config, building a runtime, opening
the store, the common options."""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from promptweave.cli.problems import Problem, config_error, input_error, shown_path
from promptweave.cli.style import coloured
from promptweave.config import Config
from promptweave.errors import PromptweaveError
from promptweave.runtime import Promptweave
from promptweave.store.routing_state import MemoryRoutingState
from promptweave.store.sqlite import STORE_ERRORS, SQLiteDatabase
from promptweave.store.stores import Stores

__all__ = [
    "EchoHandler",
    "StoreSource",
    "build_runtime",
    "config_option",
    "echo_json",
    "load_config",
    "not_blank",
    "now_option",
    "open_store",
    "render_store_source",
    "render_stores",
    "runtime_with_stores",
    "store_option",
]


def load_config(config_path: Path | None, store: Path | None = None) -> Config:
    """The config in force; ``store`` replaces its store with that SQLite file."""
    try:
        config = Config.discover(config_path)
    except PromptweaveError as exc:
        raise config_error(exc) from exc
    if store is not None:
        config = attrs.evolve(
            config, store=attrs.evolve(config.store, backend="sqlite", path=str(store.resolve()))
        )
    return config


def build_runtime(
    config_path: Path | None,
    store: Path | None = None,
    seed: int | None = None,
    *,
    render: bool = False,
) -> Promptweave:
    """A runtime for one command; no command but ``store`` and ``import`` writes a store.

    ``render`` reads the configured store if its file exists (or the --store file), keeping the
    routing state in memory; every other command works on empty in-memory stores.
    """
    config = load_config(config_path, store)
    stores = render_stores(config, explicit=store is not None) if render else Stores.in_memory()
    try:
        rng = None if seed is None else random.Random(seed)
        return Promptweave.from_config(config, rng=rng, stores=stores)
    except PromptweaveError as exc:
        raise config_error(exc) from exc


@attrs.frozen(kw_only=True)
class StoreSource:
    """Where ``render`` reads its state from, for the retrieval block.

    :param description: the store, as the retrieval block names it.
    :param has_data: ``False`` when there is no store to read: the built-in retrievers find
        nothing, and only what the turn file carries is shown.
    """

    description: str
    has_data: bool


def render_store_source(config: Config, *, explicit: bool) -> StoreSource:
    """What :func:`render_stores` opens for ``config``, described for the user."""
    if not config.store.enabled:
        return StoreSource(description="none ([store] enabled = false)", has_data=False)
    if config.store.backend == "memory":
        return StoreSource(
            description='empty, in memory ([store] backend = "memory")', has_data=False
        )
    path = config.resolve_path(config.store.path)
    if config.store.backend == "redis":
        retrieval = shown_path(path) if path.is_file() else "none"
        return StoreSource(description=f"redis, retrieval data {retrieval}", has_data=True)
    if path.is_file() or explicit:
        return StoreSource(description=shown_path(path), has_data=True)
    return StoreSource(description=f"none (no file {shown_path(path)})", has_data=False)


def render_stores(config: Config, *, explicit: bool) -> Stores:
    if config.store.backend == "memory" or not config.store.enabled:
        return Stores.from_config(config)
    if config.store.backend != "redis":
        path = config.resolve_path(config.store.path)
        if not path.is_file():
            if explicit:
                raise input_error([Problem(file=shown_path(path), text="no such file")])
            return Stores.in_memory(config)
    # Inspecting a turn must not change the deployment's state (quote candidates, cooldowns, the
    # last canned phrase): routing runs on a scratch state. Nor may reading the quoted bot text
    # change the bot-reply context's order of use (the SQLite and Redis contexts can be told so).
    stores = Stores.from_config(config)
    bot_replies: Any = stores.bot_replies
    if attrs.has(type(bot_replies)) and isinstance(
        getattr(bot_replies, "refresh_on_lookup", None), bool
    ):
        bot_replies = attrs.evolve(bot_replies, refresh_on_lookup=False)
    return attrs.evolve(stores, routing=MemoryRoutingState(), bot_replies=bot_replies)


def runtime_with_stores(config_path: Path | None, stores: Stores) -> Promptweave:
    try:
        return Promptweave.from_config(load_config(config_path), stores=stores)
    except PromptweaveError as exc:
        raise config_error(exc) from exc


def open_store(path: Path, config_path: Path | None, *, create: bool) -> Stores:
    """The SQLite stores of ``path``, migrated; an unusable file is a clean CLI error."""
    if not create and not path.is_file():
        raise input_error([Problem(file=shown_path(path), text="no such file")])
    config = load_config(config_path)
    database = SQLiteDatabase(path, synchronous=config.store.synchronous)
    try:
        Stores.migrate(database)
    except STORE_ERRORS as exc:
        raise config_error(
            [Problem(file=shown_path(path), text=f"not a usable SQLite store: {exc}")]
        ) from exc
    return Stores.sqlite(database, config)


def not_blank(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An id option may be left out, but not given blank (a private chat is no ``--group``)."""
    if value is not None and not value.strip():
        raise click.BadParameter("must not be blank; leave the option out instead", param=param)
    return value


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


class EchoHandler(logging.Handler):
    """Library warnings on standard error, each distinct one once: repeats are counted, and the
    count is printed when the command ends (:meth:`report_repeats`)."""

    def __init__(self) -> None:
        # Warnings and errors only: a library's info lines (what a learner learned, in a process
        # where something turned them on) are not a command's output.
        super().__init__(logging.WARNING)
        self.repeats: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{record.levelname.lower()}: {record.getMessage()}"
        if line in self.repeats:
            self.repeats[line] += 1
            return
        self.repeats[line] = 0
        level, _, message = line.partition(": ")
        click.echo(f"{coloured(level + ':', 'yellow', bold=True)} {message}", err=True)

    def report_repeats(self) -> None:
        for line, count in self.repeats.items():
            if count:
                again = "once more" if count == 1 else f"{count} more times"
                click.echo(f"{line} (repeated {again})", err=True)
        self.repeats.clear()


store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite store file to use instead of [store] of the config.",
)

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="promptweave.toml to use (default: $PROMPTWEAVE_CONFIG, else ./promptweave.toml).",
)


def _when(_ctx: click.Context, param: click.Parameter, value: str | None) -> dt.datetime | None:
    """``--now``: an ISO 8601 time with its UTC offset."""
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time", param=param) from None
    if moment.tzinfo is None:
        raise click.BadParameter(f"{value} has no UTC offset (add +08:00 or Z)", param=param)
    return moment


def now_option(help_text: str) -> Callable[[Any], Any]:
    """``--now ISO``: an ISO 8601 time with its UTC offset, for the commands that read "today"
    or run at a given time (``learn``, ``learned stats``, ``serve``)."""
    return click.option("--now", "now", default=None, callback=_when, metavar="ISO", help=help_text)
