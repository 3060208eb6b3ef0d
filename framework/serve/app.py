"""The dashboard's web application (``docs/dashboard.md``): FastAPI routes over
:class:`promptweave.store.dashboard_reads.DashboardReads`, pages rendered by Jinja2 with
autoescaping.

:func:`create_app` builds the application for ``promptweave serve``; :func:`mount` puts the same
application under a path of another FastAPI application (NoneBot's, in the NoneBot plugin). The
pages only read, unless an admin token is given: then forgetting a learned item is allowed to a
request that carries it (``Authorization: Bearer TOKEN``). A custom header, not a form field or a
cookie, so no other site can make a browser send it.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates

import promptweave.serve.views as views
from promptweave.config import Config
from promptweave.errors import PromptweaveError
from promptweave.store.dashboard_reads import DashboardReads
from promptweave.store.learned_sqlite import SQLiteLearnedStore
from promptweave.store.routing_state_sqlite import SQLiteRoutingState
from promptweave.store.sqlite import STORE_ERRORS, SQLiteDatabase
from promptweave.store.stores import Stores

__all__ = ["Dashboard", "DashboardError", "create_app", "mount"]

#: Rows of a timeline page, items of a learned page, groups of the groups page.
PAGE_SIZE = 50

#: What a page may load: its own script and style, nothing from the network, nothing inline; a
#: hostile text that got past the escaping still could not run.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

#: The files under ``/static/``: the page's style and its one script, package data.
STATIC_FILES = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}


class DashboardError(PromptweaveError):
    """The dashboard cannot open its store."""


@attrs.define(kw_only=True)
class Dashboard:
    """What the dashboard's pages read and do.

    :param database: the store (already migrated).
    :param config: the configuration: the bots' time zones, the per-group settings, the prices.
    :param admin_token: the token the actions need; ``None``: read-only, no action at all.
    :param poll_s: how often an open page asks for what changed.
    :param clock: the time "today" is read at.
    """

    database: SQLiteDatabase
    config: Config = attrs.field(factory=Config)
    admin_token: str | None = None
    poll_s: float = 2.0
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    reads: DashboardReads = attrs.field(init=False)
    learned: SQLiteLearnedStore = attrs.field(init=False)
    routing: SQLiteRoutingState = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.reads = DashboardReads(self.database)
        self.learned = SQLiteLearnedStore(self.database)
        # The run-time switches the groups page shows: a primary-key read a group, on the
        # connection the other reads use.
        self.routing = SQLiteRoutingState(self.database)

    @classmethod
    def open(cls, path: Path, **settings: Any) -> Dashboard:
        """Open the SQLite store at ``path`` (migrated as the bot migrates it on start).

        :raises DashboardError: there is no store at ``path`` or it cannot be opened.
        """
        if not path.is_file():
            raise DashboardError(f"no store at {path} (give the SQLite file the bot writes)")
        database = SQLiteDatabase(path)
        try:
            Stores.migrate(database)
        except STORE_ERRORS as exc:
            raise DashboardError(f"cannot open the store {path}: {exc}") from exc
        return cls(database=database, **settings)

    def allows(self, authorization: str | None) -> bool:
        """Whether a request with this ``Authorization`` header may act."""
        if self.admin_token is None or authorization is None:
            return False
        scheme, _, token = authorization.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(
            token.strip().encode(), self.admin_token.encode()
        )


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("promptweave.serve", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["segment"] = lambda value: quote(str(value), safe="")
    environment.filters["number"] = lambda value: f"{value:,}" if isinstance(value, int) else value
    return environment


def _key(value: str | None) -> tuple[float, int] | None:
    """A timeline page key ``TIME:SEQ``."""
    if not value:
        return None
    time, _, seq = value.rpartition(":")
    try:
        return float(time), int(seq)
    except ValueError:
        raise HTTPException(status_code=400, detail=f"not a page key: {value!r}") from None


def create_app(dashboard: Dashboard) -> FastAPI:
    """The dashboard's application over ``dashboard``."""
    app = FastAPI(title="promptweave dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(env=_environment())
    static = {
        name: (importlib.resources.files("promptweave.serve") / "static" / name).read_bytes()
        for name in STATIC_FILES
    }

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        fragment = request.query_params.get("fragment") == "1"
        return templates.TemplateResponse(
            request,
            name,
            {
                "base": request.scope.get("root_path", "").rstrip("/"),
                "fragment": fragment,
                "poll_ms": int(dashboard.poll_s * 1000),
                "actions": dashboard.admin_token is not None,
                **context,
            },
        )

    def zone(bot_id: str) -> dt.tzinfo:
        found: dt.tzinfo = views.zone_of(dashboard.config, bot_id)
        return found

    @app.get("/", response_class=HTMLResponse)
    def groups(request: Request, page_number: int = 0) -> HTMLResponse:
        scopes = dashboard.reads.scopes()
        shown = scopes[page_number * PAGE_SIZE : (page_number + 1) * PAGE_SIZE]
        return page(
            request,
            "groups.html",
            rows=views.group_rows(
                dashboard.reads, dashboard.routing, dashboard.config, dashboard.clock(), shown
            ),
            page_number=page_number,
            more=len(scopes) > (page_number + 1) * PAGE_SIZE,
            total=len(scopes),
        )

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        if name not in static:
            raise HTTPException(status_code=404, detail=f"no static file {name!r}")
        return Response(
            static[name],
            media_type=STATIC_FILES[name],
            headers={"Cache-Control": "max-age=300"},
        )

    @app.get("/live")
    def live() -> JSONResponse:
        turn, learned = dashboard.reads.version()
        return JSONResponse({"version": f"{turn}.{learned}"})

    @app.get("/groups/{bot_id}/{group_id}", response_class=HTMLResponse)
    def timeline(
        request: Request,
        bot_id: str,
        group_id: str,
        before: str | None = None,
        status: str | None = None,
    ) -> HTMLResponse:
        rows = dashboard.reads.timeline(
            bot_id, group_id, before=_key(before), status=status or None, limit=PAGE_SIZE + 1
        )
        entries = [views.timeline_entry(row, zone(bot_id)) for row in rows[:PAGE_SIZE]]
        return page(
            request,
            "timeline.html",
            bot_id=bot_id,
            group_id=group_id,
            entries=entries,
            status=status or "",
            before=before or "",
            next_key=entries[-1]["key"] if len(rows) > PAGE_SIZE else None,
            statuses=("replied", "phrase", "silent", "failed", "dropped"),
        )

    @app.get("/groups/{bot_id}/{group_id}/newer", response_class=HTMLResponse)
    def newer(
        request: Request, bot_id: str, group_id: str, after: str, status: str | None = None
    ) -> HTMLResponse:
        rows = dashboard.reads.timeline(
            bot_id, group_id, after=_key(after), status=status or None, limit=PAGE_SIZE
        )
        entries = [views.timeline_entry(row, zone(bot_id)) for row in rows]
        return page(
            request, "timeline_rows.html", bot_id=bot_id, group_id=group_id, entries=entries
        )

    @app.get("/turns/{seq}", response_class=HTMLResponse)
    def turn(request: Request, seq: int) -> HTMLResponse:
        row = dashboard.reads.turn(seq)
        if row is None:
            raise HTTPException(status_code=404, detail=f"no turn {seq} in the turn log")
        return page(
            request,
            "turn.html",
            bot_id=row.bot_id,
            group_id=row.group_id,
            turn=views.turn_page(dashboard.reads, row, zone(row.bot_id)),
        )

    @app.get("/groups/{bot_id}/{group_id}/learned", response_class=HTMLResponse)
    def learned(
        request: Request,
        bot_id: str,
        group_id: str,
        kind: str | None = None,
        member: str | None = None,
        offset: int = 0,
    ) -> HTMLResponse:
        shown = views.learned_page(
            dashboard.reads,
            bot_id,
            group_id,
            zone(bot_id),
            kind=kind or None,
            user_id=member if member is not None and member != "*" else None,
            offset=max(offset, 0),
            limit=PAGE_SIZE,
        )
        return page(
            request,
            "learned.html",
            bot_id=bot_id,
            group_id=group_id,
            opted_out=dashboard.config.learning.opted_out(bot_id, group_id),
            member=member if member is not None else "*",
            **shown,
        )

    @app.post("/groups/{bot_id}/{group_id}/learned/forget")
    async def forget(request: Request, bot_id: str, group_id: str) -> JSONResponse:
        if dashboard.admin_token is None:
            raise HTTPException(
                status_code=403,
                detail="the dashboard is read-only: start it with an admin token to forget",
            )
        if not dashboard.allows(request.headers.get("authorization")):
            raise HTTPException(status_code=401, detail="a valid admin token is needed")
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not all(
            isinstance(body.get(name), str) and body[name] for name in ("kind", "key")
        ):
            raise HTTPException(status_code=400, detail="give the item's kind and key as JSON")
        try:
            forgotten = dashboard.learned.forget(
                bot_id, group_id, kind=body["kind"], key=body["key"]
            )
        except STORE_ERRORS as exc:
            raise HTTPException(
                status_code=503, detail=f"the store cannot be written: {exc}"
            ) from exc
        if not forgotten:
            raise HTTPException(status_code=404, detail="no such item (already forgotten?)")
        return JSONResponse({"forgotten": [item.key for item in forgotten]})

    @app.get("/spend", response_class=HTMLResponse)
    def spend(
        request: Request, days: int = 30, bot: str | None = None, group: str | None = None
    ) -> HTMLResponse:
        days = min(max(days, 1), 366)
        scope = (bot, group) if bot and group else None
        return page(
            request,
            "spend.html",
            scope=scope,
            **views.spend_page(
                dashboard.reads, dashboard.config, dashboard.clock(), days=days, scope=scope
            ),
        )

    return app


def mount(
    app: FastAPI,
    path: str,
    *,
    store: Path,
    config: Config | None = None,
    admin_token: str | None = None,
    poll_s: float = 2.0,
) -> Dashboard:
    """Serve the dashboard of the SQLite store ``store`` under ``path`` of ``app`` (NoneBot's
    FastAPI application: ``nonebot.get_app()``).

    :raises DashboardError: the store cannot be opened.
    :returns: the dashboard mounted.
    """
    dashboard = Dashboard.open(
        store, config=config or Config(), admin_token=admin_token, poll_s=poll_s
    )
    app.mount("/" + path.strip("/"), create_app(dashboard))
    return dashboard
