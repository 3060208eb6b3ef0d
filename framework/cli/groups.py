"""``promptweave groups``: the per-group settings in force and the run-time switch of each group
(``docs/groups.md``), for an operator without a chat platform at hand."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import click

from promptweave.cli.common import config_option, echo_json, load_config, not_blank, open_store
from promptweave.cli.problems import Problem, config_error, input_error, shown_path
from promptweave.config import Config
from promptweave.errors import PromptweaveError
from promptweave.routing.group_control import EVERY_GROUP, GroupSettings, group_settings
from promptweave.store.routing_state import GroupSwitch, RoutingState
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores

__all__ = ["groups"]

#: Who a switch set by this command was set by.
CLI_AUTHOR = "cli"

_store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite store file the bot runs on (default: [store] of the config).",
)


def _open(
    config_path: Path | None, store_path: Path | None, *, create: bool
) -> tuple[Config, Stores | None, str]:
    """The config and the stores whose routing state the bot reads (``None``: the SQLite file does
    not exist yet and ``create`` is off, so no switch is set); a store in memory is refused (a
    switch there would be gone on exit)."""
    config = load_config(config_path, store_path)
    if not config.store.enabled or config.store.backend == "memory":
        why = (
            "the store is disabled ([store] enabled = false)"
            if not config.store.enabled
            else 'the configured store is in memory ([store] backend = "memory")'
        )
        raise input_error([Problem(text=f"no run-time switch to keep: {why}; give --store FILE")])
    if config.store.backend == "redis":
        try:
            return config, Stores.from_config(config), "redis"
        except PromptweaveError as exc:
            raise config_error(exc) from exc
    path = config.resolve_path(config.store.path)
    if not create and not path.is_file():
        return config, None, shown_path(path)
    return config, open_store(path, config_path, create=create), shown_path(path)


def _routing(stores: Stores, shown: str) -> RoutingState:
    if stores.routing is None:
        why = stores.unavailable or "the store keeps no routing state"
        raise input_error([Problem(file=shown, text=f"no routing state: {why}")])
    return stores.routing


def _known_groups(
    config: Config, stores: Stores | None, bot_id: str | None
) -> list[tuple[str, str]]:
    """Every (bot, group) the configuration names or the store has seen or switched."""
    found: set[tuple[str, str]] = set()
    for bot, settings in config.bots.items():
        named: Iterable[str] = (
            *settings.allow_groups,
            *settings.deny_groups,
            *(group for group in settings.groups if group != EVERY_GROUP),
        )
        found.update((bot, group) for group in named)
    if stores is None:
        return sorted(scope for scope in found if bot_id in (None, scope[0]))
    source = stores.group_log
    if source is not None and hasattr(source, "group_scopes"):
        found.update(source.group_scopes())
    if stores.routing is not None:
        found.update((bot, group) for bot, group, _switch in stores.routing.switches())
    return sorted(scope for scope in found if bot_id in (None, scope[0]))


def _state_words(settings: GroupSettings) -> str:
    if settings.switch is not None:
        switch = settings.switch
        by = f" by {switch.by}" if switch.by else ""
        at = f" at {switch.at.isoformat(timespec='seconds')}" if switch.at else ""
        state = "on " if switch.enabled else "off"
        over = (
            f", over the configuration's {settings.configured_reason}"
            if switch.enabled and not settings.configured
            else ""
        )
        return f"{state}  switched{by}{at}{over}"
    if settings.enabled:
        return "on   configuration"
    return f"off  configuration: {settings.reason}"


def _detail_words(settings: GroupSettings) -> str:
    parts = [f"threshold {settings.necessity_threshold}"]
    if not settings.low_engagement:
        parts.append("no canned phrases")
    elif settings.sources["low_engagement_probabilities"] != "routing":
        parts.append("phrases " + "/".join(f"{p:g}" for p in settings.low_engagement_probabilities))
    if settings.quiet_hours:
        spans = ", ".join(span.text for span in settings.quiet_hours)
        parts.append(f"quiet {spans} {settings.timezone} (allow {settings.quiet_allow})")
    if not settings.learn:
        parts.append("not learned from")
    parts.extend(settings.problems)
    return "; ".join(parts)


@click.group()
def groups() -> None:
    """Show the per-group settings in force, and switch the bot on or off in a group."""


@groups.command("list")
@_store_option
@click.option("--bot", "bot_id", default=None, callback=not_blank, help="Only this bot account.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a group.")
@config_option
def groups_list(
    store_path: Path | None, bot_id: str | None, as_json: bool, config_path: Path | None
) -> None:
    """Every group the configuration names or the store knows: on or off and why, and its reply
    frequency, quiet hours and learning."""
    config, stores, shown = _open(config_path, store_path, create=False)
    switches: dict[tuple[str, str], GroupSwitch] = {}
    try:
        scopes = _known_groups(config, stores, bot_id)
        if stores is not None:
            routing = _routing(stores, shown)
            switches = {(bot, group): switch for bot, group, switch in routing.switches(bot_id)}
    except STORE_ERRORS as exc:
        raise config_error([Problem(file=shown, text=f"the store cannot be read: {exc}")]) from exc
    finally:
        if stores is not None:
            stores.close()
    if stores is None and not as_json:
        click.echo(f"{shown} does not exist yet: no group is switched at run time", err=True)
    rows = [
        group_settings(config, bot, group, switch=switches.get((bot, group)))
        for bot, group in scopes
    ]
    if as_json:
        echo_json([row.to_json() for row in rows])
        return
    if not rows:
        click.echo(f"no group is configured or known in {shown}", err=True)
        return
    for row in rows:
        click.echo(f"{row.bot_id}:{row.group_id}  {_state_words(row)}")
        click.echo(f"    {_detail_words(row)}")


def _switch_command(name: str, enabled: bool | None, help_text: str) -> None:
    @groups.command(name, help=help_text)
    @_store_option
    @click.option("--bot", "bot_id", required=True, callback=not_blank, help="The bot account.")
    @click.option("--group", "group_id", required=True, callback=not_blank, help="The group.")
    @config_option
    def command(
        store_path: Path | None, bot_id: str, group_id: str, config_path: Path | None
    ) -> None:
        config, opened, shown = _open(config_path, store_path, create=True)
        assert opened is not None  # created when missing
        stores = opened
        switch = (
            None
            if enabled is None
            else GroupSwitch(enabled=enabled, by=CLI_AUTHOR, at=dt.datetime.now(dt.UTC))
        )
        try:
            _routing(stores, shown).set_switch(bot_id, group_id, switch)
        except STORE_ERRORS as exc:
            raise config_error(
                [Problem(file=shown, text=f"the store cannot be written: {exc}")]
            ) from exc
        finally:
            stores.close()
        settings = group_settings(config, bot_id, group_id, switch=switch)
        click.echo(f"{bot_id}:{group_id}  {_state_words(settings)} ({shown})")


_switch_command(
    "on",
    True,
    "Switch the bot on in a group, whatever the configuration says, until `groups reset`.",
)
_switch_command(
    "off",
    False,
    "Switch the bot off in a group (turns end as group_switched_off) until `groups on` or "
    "`groups reset`.",
)
_switch_command(
    "reset", None, "Remove the group's run-time switch: the configuration decides again."
)
