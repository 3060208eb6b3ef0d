"""What the ``promptweave`` subcommands share: loading the config, building a runtime, opening
the store, the common options."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import attrs
import click

from framework.config import Config
from framework.errors import PromptweaveError
from framework.runtime import Promptweave
from framework.store.routing_state import MemoryRoutingState
from framework.store.sessions_sqlite import SESSION_MIGRATIONS
from framework.store.sqlite import STORE_ERRORS, SQLiteDatabase
from framework.store.stores import Stores

__all__ = [
    "EchoHandler",
    "build_runtime",
    "config_option",
    "echo_json",
    "load_config",
    "open_store",
    "render_stores",
    "runtime_with_stores",
    "store_option",
]


def load_config(config_path: Path | None, store: Path | None = None) -> Config:
    """The config in force; ``store`` replaces its store with that SQLite file."""
    try:
        config = Config.discover(config_path)
    except PromptweaveError as exc:
        raise click.ClickException(str(exc)) from exc
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
        raise click.ClickException(str(exc)) from exc


def render_stores(config: Config, *, explicit: bool) -> Stores:
    if config.store.backend == "memory" or not config.store.enabled:
        return Stores.from_config(config)
    if config.store.backend != "redis":
        path = config.resolve_path(config.store.path)
        if not path.is_file():
            if explicit:
                raise click.ClickException(f"store file {path} does not exist")
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
        raise click.ClickException(str(exc)) from exc


def open_store(path: Path, config_path: Path | None, *, create: bool) -> Stores:
    """The SQLite stores of ``path``, migrated; an unusable file is a clean CLI error."""
    if not create and not path.is_file():
        raise click.ClickException(f"store file {path} does not exist")
    config = load_config(config_path)
    database = SQLiteDatabase(path, synchronous=config.store.synchronous)
    try:
        database.migrate(SESSION_MIGRATIONS)
    except STORE_ERRORS as exc:
        raise click.ClickException(f"cannot open store {path}: {exc}") from exc
    return Stores.sqlite(database, config)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


class EchoHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"{record.levelname.lower()}: {record.getMessage()}", err=True)


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
