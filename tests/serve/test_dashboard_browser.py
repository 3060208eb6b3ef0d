"""The dashboard in real headless Chromium (``docs/dashboard.md``): every page loads with the
replayed weekend chat and shows it, a hostile nickname and message stay text, a message the live
loop routes while the page is open arrives without a reload, and forgetting needs the token."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import attrs
import png
import pytest
from dashboard_browser import browser_page, serving
from dashboard_support import BOT, CONFIG, GROUP, HOSTILE_NAME, HOSTILE_TEXT, NOW
from report_support import chromium, chromium_or_skip, parse_html

from promptweave.config import Config
from promptweave.loop.events import IncomingEvent
from promptweave.loop.live import BotLoop
from promptweave.replay.replayer import ReplayTransport
from promptweave.runtime import Promptweave
from promptweave.serve.app import Dashboard, create_app
from promptweave.store.turn_log_sqlite import unpack_record
from promptweave.turn import ChatMessage

TOKEN = "browser-admin-token"


@pytest.fixture
def browser() -> Path:
    return chromium_or_skip()


@pytest.fixture
def served(browser: Path, store: Path) -> Iterator[str]:
    dashboard = Dashboard.open(store, admin_token=TOKEN, poll_s=0.2, clock=lambda: NOW)
    with serving(create_app(dashboard)) as base:
        yield base


def _rows(store: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(store)) as connection:
        return connection.execute(sql, params).fetchall()


def _colours(shot: Path) -> tuple[int, int, Counter[int]]:
    width, height, rows, _ = png.Reader(filename=str(shot)).asRGBA8()
    colours: Counter[int] = Counter()
    for row in rows:
        colours.update(memoryview(bytes(row)).cast("I"))
    return width, height, colours


def _texts(element: object, tag: str, css: str) -> list[str]:
    found = [e for e in element.find_all(tag) if css in e.attributes.get("class", "").split()]  # type: ignore[attr-defined]
    return [e.all_text().strip() for e in found]


def test_every_page_loads_with_the_chat_and_draws(served: str, store: Path, tmp_path: Path) -> None:
    replied = next(
        seq
        for seq, blob in _rows(
            store,
            "SELECT seq, record FROM turn_records WHERE status = 'replied' AND group_id = ?"
            " ORDER BY seq",
            (GROUP,),
        )
        if (unpack_record(blob)["request"]["prefix"] or {}).get("first_difference")  # type: ignore[arg-type]
    )
    newest_text = _rows(
        store,
        "SELECT message_id FROM turn_records WHERE group_id = ? ORDER BY time DESC, seq DESC"
        " LIMIT 1",
        (GROUP,),
    )[0][0]
    pages = {
        "groups": "/",
        "timeline": f"/groups/{BOT}/{GROUP}",
        "turn": f"/turns/{replied}",
        "learned": f"/groups/{BOT}/{GROUP}/learned",
        "spend": "/spend",
    }
    doms = {}
    for name, path in pages.items():
        profile = tmp_path / f"profile-{name}"
        doms[name] = parse_html(chromium("--dump-dom", served + path, profile=profile).stdout)
        shot = tmp_path / f"{name}.png"
        chromium("--hide-scrollbars", f"--screenshot={shot}", served + path, profile=profile)
        width, height, colours = _colours(shot)
        assert (width, height) == (1200, 1600)
        # Text, tables and charts in several colours, not a blank or an error page.
        assert len(colours) > 100, name
        assert colours.most_common(1)[0][1] < 0.95 * width * height, name

    groups = {
        row.attributes["data-group"]
        for row in doms["groups"].find_all("tr")
        if "group-row" in row.attributes.get("class", "")
    }
    expected = {str(g) for (g,) in _rows(store, "SELECT DISTINCT group_id FROM turn_records")}
    assert groups == expected

    turns = [
        r
        for r in doms["timeline"].find_all("tr")
        if "turn" in r.attributes.get("class", "").split()
    ]
    assert len(turns) == 50
    assert turns[0].attributes["data-message-id"] == newest_text

    sections = [
        li.attributes["data-section"]
        for li in doms["turn"].find_all("li")
        if "data-section" in li.attributes
    ]
    assert sections[:3] == ["injection_guard", "persona", "identity"]
    assert _texts(doms["turn"], "div", "cache-break") or _texts(doms["turn"], "p", "cache-break")

    kinds = _rows(
        store,
        "SELECT DISTINCT kind FROM learned_items WHERE group_id = ? AND kind != 'spend'",
        (GROUP,),
    )
    shown_kinds = {text.split()[0] for text in _texts(doms["learned"], "a", "kind")}
    assert shown_kinds == {str(kind) for (kind,) in kinds}

    bars = [e for e in doms["spend"].find_all("rect") if "bar" in e.attributes.get("class", "")]
    assert bars  # the learning's tokens, drawn in the page


def test_hostile_nickname_and_message_render_as_text(served: str, tmp_path: Path) -> None:
    with browser_page(tmp_path / "profile") as page:
        page.open(f"{served}/groups/{BOT}/{GROUP}")
        found = page.evaluate(
            """(() => {
              const row = document.querySelector('tr[data-message-id="777000001"]');
              const answered = document.querySelector('tr[data-message-id="777000002"]');
              return {
                title: document.title,
                images: document.querySelectorAll("img").length,
                scripts: Array.from(document.scripts).map(s => new URL(s.src).pathname),
                bold: row.querySelectorAll(".text b").length,
                name: row.querySelector(".sender .name").textContent,
                text: row.querySelector(".text").textContent,
                bubbles: Array.from(answered.querySelectorAll(".bubble")).map(b => b.textContent),
              };
            })()"""
        )
        assert found["title"] != "pwned" and "pwned" not in found["title"]
        assert found["images"] == 0
        assert found["scripts"] == ["/static/dashboard.js"]
        assert found["bold"] == 0
        assert found["name"] == HOSTILE_NAME
        assert found["text"] == HOSTILE_TEXT
        assert any("<img src=x" in bubble for bubble in found["bubbles"])
        assert page.problems() == []


def _live_event(text: str, message_id: str, at: dt.datetime) -> IncomingEvent:
    return IncomingEvent(
        platform="onebot",
        bot_id=BOT,
        group_id=GROUP,
        message=ChatMessage(
            sender_id="30045", sender_name="北风", text=text, time=at, id=message_id
        ),
    )


def _route_live(store: Path, *events: IncomingEvent) -> None:
    """Run ``events`` through the live loop of a bot writing to ``store``."""
    config = Config.from_file(CONFIG)
    config = attrs.evolve(
        config, store=attrs.evolve(config.store, backend="sqlite", path=str(store))
    )
    runtime = Promptweave.from_config(config)

    async def run() -> None:
        loop = BotLoop(runtime, learn=False, sleep=lambda _s: asyncio.sleep(0))
        for event in events:
            await loop.handle(event, ReplayTransport())
        await loop.aclose()

    try:
        asyncio.run(run())
    finally:
        runtime.stores.close()


def test_a_message_routed_while_the_page_is_open_arrives_without_reload(
    served: str, store: Path, tmp_path: Path
) -> None:
    later = NOW + dt.timedelta(hours=2)
    with browser_page(tmp_path / "profile") as page:
        page.open(f"{served}/groups/{BOT}/{GROUP}")
        page.evaluate("window.keptAcrossUpdates = 'still here'")
        page.wait_until("document.getElementById('live-status').textContent.startsWith('live')")
        _route_live(store, _live_event("有人吃宵夜吗", "live-0001", later))
        row = page.wait_until(
            """(() => {
              const row = document.querySelector('#timeline-rows tr');
              return row && row.dataset.messageId === 'live-0001'
                ? {text: row.querySelector('.text').textContent, fresh: row.classList.contains('fresh'),
                   status: row.querySelector('.status').textContent}
                : null;
            })()"""
        )
        assert row["text"] == "有人吃宵夜吗"
        assert row["fresh"] is True
        (status,) = _rows(store, "SELECT status FROM turn_records WHERE message_id = 'live-0001'")[
            0
        ]
        assert row["status"] == status
        assert page.evaluate("window.keptAcrossUpdates") == "still here"

        # The groups page too: its counts follow.
        page.open(f"{served}/")
        page.evaluate("window.keptAcrossUpdates = 'still here'")
        cell = f'tr[data-group="{GROUP}"] .messages-today'
        before = page.evaluate(f"document.querySelector('{cell}').textContent")
        page.wait_until("document.getElementById('live-status').textContent.startsWith('live')")
        # Counted on its own day: the page's "today" is NOW's day, so route one on that day.
        _route_live(store, _live_event("还有人在吗", "live-0002", NOW))
        after = page.wait_until(
            f"(() => {{ const text = document.querySelector('{cell}').textContent;"
            f" return text !== {before!r} ? text : null; }})()"
        )
        assert int(after.replace(",", "")) == int(before.replace(",", "")) + 1
        assert page.evaluate("window.keptAcrossUpdates") == "still here"
        assert page.problems() == []


def test_forget_in_the_browser_needs_the_admin_token(
    served: str, store: Path, tmp_path: Path
) -> None:
    with browser_page(tmp_path / "profile") as page:
        page.open(f"{served}/groups/{BOT}/{GROUP}/learned")
        kind, key = page.evaluate(
            "(() => { const b = document.querySelector('button.forget');"
            " return [b.dataset.kind, b.dataset.key]; })()"
        )
        click = f"document.querySelector('button.forget[data-key=\"{key}\"]').click()"
        page.evaluate("document.getElementById('admin-token').value = 'not the token'")
        page.evaluate(click)
        refused = page.wait_until(
            "(() => { const t = document.getElementById('forget-status').textContent;"
            " return t.startsWith('not forgotten') ? t : null; })()"
        )
        assert "401" in refused
        still = page.evaluate(f"!!document.querySelector('tr[data-key=\"{key}\"]')")
        assert still is True
        count = (
            "SELECT COUNT(*) FROM learned_items WHERE bot_id = ? AND group_id = ? AND kind = ?"
            " AND key = ?"
        )
        assert _rows(store, count, (BOT, GROUP, kind, key))[0][0] == 1

        page.evaluate(f"document.getElementById('admin-token').value = {TOKEN!r}")
        page.evaluate(click)
        page.wait_until(f"!document.querySelector('tr[data-key=\"{key}\"]')")
        assert page.evaluate("document.getElementById('forget-status').textContent") == (
            f"forgotten: {kind}"
        )
        assert _rows(store, count, (BOT, GROUP, kind, key))[0][0] == 0
        assert page.problems() == []


def test_a_read_only_dashboard_offers_no_action(browser: Path, store: Path, tmp_path: Path) -> None:
    dashboard = Dashboard.open(store, poll_s=0.2, clock=lambda: NOW)
    with serving(create_app(dashboard)) as base, browser_page(tmp_path / "profile") as page:
        page.open(f"{base}/groups/{BOT}/{GROUP}/learned")
        assert page.evaluate("document.querySelectorAll('button.forget').length") == 0
        assert page.evaluate("document.getElementById('admin-token')") is None
        kind, key = _rows(
            store, "SELECT kind, key FROM learned_items WHERE group_id = ? LIMIT 1", (GROUP,)
        )[0]
        status = page.evaluate(
            f"fetch('{base}/groups/{BOT}/{GROUP}/learned/forget', {{method: 'POST',"
            f" headers: {{'Content-Type': 'application/json', Authorization: 'Bearer x'}},"
            f" body: JSON.stringify({{kind: {kind!r}, key: {key!r}}})}}).then(r => r.status)"
        )
        assert status == 403
