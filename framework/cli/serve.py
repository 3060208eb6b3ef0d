"""``promptweave serve``: the dashboard over a bot's store (``docs/dashboard.md``)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import click

from promptweave.cli.common import config_option, load_config, now_option, store_option
from promptweave.cli.problems import input_error

__all__ = ["serve"]

log = logging.getLogger("promptweave.cli")

#: The address the dashboard listens on unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


@click.command()
@store_option
@config_option
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port to listen on."
)
@click.option(
    "--admin-token",
    envvar="PROMPTWEAVE_DASHBOARD_TOKEN",
    default=None,
    help="Token the actions (forget) need; without one the dashboard is read-only "
    "(also $PROMPTWEAVE_DASHBOARD_TOKEN).",
)
@click.option(
    "--poll-s",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0.2),
    help="How often an open page asks for what changed.",
)
@now_option("The time 'today' is read at (default: the clock), ISO 8601 with its UTC offset.")
def serve(
    store: Path | None,
    config_path: Path | None,
    host: str,
    port: int,
    admin_token: str | None,
    poll_s: float,
    now: dt.datetime | None,
) -> None:
    """Serve the dashboard of a bot's SQLite store: its groups, timelines, requests, spend and
    what it learned."""
    try:
        import uvicorn

        from promptweave.serve.app import Dashboard, DashboardError, create_app
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"the dashboard needs {exc.name}: pip install 'promptweave[serve]'"
        ) from exc
    config = load_config(config_path)
    path = store or config.resolve_path(config.store.path)
    settings: dict[str, object] = {"config": config, "admin_token": admin_token or None}
    if now is not None:
        settings["clock"] = lambda: now
    try:
        dashboard = Dashboard.open(Path(path), poll_s=poll_s, **settings)
    except DashboardError as exc:
        raise input_error(exc) from exc
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning(
            "the dashboard listens on %s: anyone who reaches it reads every group's messages",
            host,
        )
    mode = "actions need the admin token" if admin_token else "read-only"
    click.echo(f"promptweave dashboard of {path} on http://{host}:{port}/ ({mode})", err=True)
    uvicorn.run(create_app(dashboard), host=host, port=port, log_level="warning")
