"""The dashboard's routes through FastAPI's test client, over the replayed weekend chat
(``docs/dashboard.md``)."""

from __future__ import annotations

import datetime as dt
import html
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from dashboard_support import (
    BOT,
    CONFIG,
    GROUP,
    HOSTILE_ADDRESSED,
    HOSTILE_NAME,
    HOSTILE_TEXT,
    NOW,
)
from fastapi import FastAPI
from fastapi.testclient import TestClient

from promptweave.config import (
    BotConfig,
    Config,
    GroupConfig,
    LearningConfig,
    ModelPrice,
    ProviderConfig,
)
from promptweave.providers.cost import format_money, price_for, price_tokens
from promptweave.providers.exchange import DEFAULT_MODELS, ProviderApi
from promptweave.serve.app import Dashboard, DashboardError, create_app, mount
from promptweave.store.routing_state import GroupSwitch
from promptweave.store.routing_state_sqlite import SQLiteRoutingState
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.store.turn_log_sqlite import SQLiteTurnLog, TurnLogEntry, unpack_record

TOKEN = "s3cret-admin-token"


def _client(store: Path, *, token: str | None = None) -> TestClient:
    dashboard = Dashboard.open(store, admin_token=token, clock=lambda: NOW)
    return TestClient(create_app(dashboard))


def _rows(store: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(store)) as connection:
        return connection.execute(sql, params).fetchall()


def test_every_group_message_the_loop_routed_is_in_the_turn_log(replayed_store: Path) -> None:
    routed = _rows(
        replayed_store,
        "SELECT COUNT(*) FROM group_messages WHERE bot_id = ? AND sender_id != ?",
        (BOT, BOT),
    )[0][0]
    logged = _rows(replayed_store, "SELECT COUNT(*) FROM turn_records")[0][0]
    assert logged == routed
    # The daily counts are the turn log summed.
    daily = _rows(replayed_store, "SELECT SUM(turns) FROM turn_daily")[0][0]
    assert daily == logged


def test_groups_page_counts_today_from_the_turn_log(replayed_store: Path) -> None:
    client = _client(replayed_store)
    page = client.get("/")
    assert page.status_code == 200
    today = NOW.date().isoformat()
    for (group_id,) in _rows(replayed_store, "SELECT DISTINCT group_id FROM turn_records"):
        turns, replies = _rows(
            replayed_store,
            "SELECT COUNT(*), SUM(status IN ('replied', 'phrase')) FROM turn_records"
            " WHERE group_id = ? AND day = ?",
            (group_id, today),
        )[0]
        row = re.search(rf'data-group="{group_id}">(.*?)</tr>', page.text, flags=re.DOTALL)
        assert row is not None, group_id
        assert f'messages-today">{turns:,}<' in row.group(1)
        assert f'replies">{replies:,}<' in row.group(1)
    assert "necessity_below_threshold" in page.text
    assert "no prices configured" in page.text
    assert "learning: on" in page.text


def test_timeline_shows_decisions_score_terms_and_bubbles(replayed_store: Path) -> None:
    client = _client(replayed_store)
    page = client.get(f"/groups/{BOT}/{GROUP}")
    assert page.status_code == 200
    keys = re.findall(r'data-key="([^"]+)"', page.text)
    assert len(keys) == 50
    newest = _rows(
        replayed_store,
        "SELECT seq FROM turn_records WHERE group_id = ? ORDER BY time DESC, seq DESC LIMIT 1",
        (GROUP,),
    )[0][0]
    assert keys[0].endswith(f":{newest}")
    # A silent turn's score against its threshold, an addressed one's bypass in words.
    assert "against threshold 50: stays silent" in page.text
    assert "the reply-necessity score is not applied" in page.text
    assert 'class="bubble"' in page.text
    # The next page starts where this one ended, and does not repeat it.
    older = client.get(f"/groups/{BOT}/{GROUP}", params={"before": keys[-1]})
    older_keys = re.findall(r'data-key="([^"]+)"', older.text)
    assert older_keys and not set(older_keys) & set(keys)
    assert "does not update live" in older.text


def test_timeline_filters_by_status(replayed_store: Path) -> None:
    client = _client(replayed_store)
    page = client.get(f"/groups/{BOT}/{GROUP}", params={"status": "replied"})
    statuses = set(re.findall(r'class="turn status-(\w+)"', page.text))
    assert statuses == {"replied"}


def test_newer_gives_the_turns_after_a_key_and_nothing_when_none(replayed_store: Path) -> None:
    client = _client(replayed_store)
    rows = _rows(
        replayed_store,
        "SELECT time, seq FROM turn_records WHERE group_id = ? ORDER BY time DESC, seq DESC"
        " LIMIT 3",
        (GROUP,),
    )
    after = f"{rows[2][0]!r}:{rows[2][1]}"
    newer = client.get(f"/groups/{BOT}/{GROUP}/newer", params={"after": after})
    assert re.findall(r'data-seq="(\d+)"', newer.text) == [str(rows[0][1]), str(rows[1][1])]
    newest = f"{rows[0][0]!r}:{rows[0][1]}"
    assert client.get(f"/groups/{BOT}/{GROUP}/newer", params={"after": newest}).text.strip() == ""
    assert client.get(f"/groups/{BOT}/{GROUP}", params={"before": "x"}).status_code == 400


def test_turn_page_shows_every_section_the_messages_and_the_cache_break(
    replayed_store: Path,
) -> None:
    client = _client(replayed_store)
    answered = [
        (seq, unpack_record(blob))  # type: ignore[arg-type]
        for seq, blob in _rows(
            replayed_store,
            "SELECT seq, record FROM turn_records WHERE status = 'replied' AND group_id = ?"
            " ORDER BY seq DESC",
            (GROUP,),
        )
    ]
    # A turn whose prefix broke inside the request (the group's first request has nothing to
    # compare with).
    seq, record = next(
        (seq, record)
        for seq, record in answered
        if (record["request"]["prefix"] or {}).get("first_difference")
    )
    page = client.get(f"/turns/{seq}")
    assert page.status_code == 200
    sections = re.findall(r'data-section="([^"]+)"', page.text)
    assert sections == [section["id"] for section in record["sections"]]
    for section in record["sections"]:
        if section["status"] == "rendered":
            (text,) = _rows(
                replayed_store, "SELECT text FROM turn_texts WHERE hash = ?", (section["text"],)
            )[0]
            first_line = str(text).splitlines()[0]
            assert (
                first_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                in page.text
            )
            assert f"{section['chars']:,} chars" in page.text
            assert f"plugin {section['plugin']}" in page.text
    messages = record["request"]["messages"]
    assert len(re.findall(r'class="message role-', page.text)) == len(messages)
    label = record["request"]["prefix"]["first_difference"]
    assert f'<b class="break-label">{label}</b>' in page.text
    assert page.text.count('class="cache-break"') == 1
    assert client.get("/turns/999999").status_code == 404


def test_hostile_texts_are_escaped_everywhere(replayed_store: Path) -> None:
    client = _client(replayed_store)
    timeline = client.get(f"/groups/{BOT}/{GROUP}").text
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in timeline
    assert "<script>document.title" not in timeline
    assert "<img" not in timeline
    assert "&lt;img src=x onerror=" in timeline
    # The addressed one was answered: the bubble echoing it is escaped too.
    seq = _rows(replayed_store, "SELECT seq FROM turn_records WHERE message_id = '777000002'")[0][0]
    turn = client.get(f"/turns/{seq}").text
    assert "<img" not in turn
    assert HOSTILE_NAME not in turn and HOSTILE_TEXT not in timeline
    assert HOSTILE_ADDRESSED not in turn
    assert (
        client.get(f"/groups/{BOT}/{GROUP}")
        .headers["content-security-policy"]
        .startswith("default-src 'none'")
    )


def test_learned_page_lists_kinds_members_and_source_messages(replayed_store: Path) -> None:
    client = _client(replayed_store)
    page = client.get(f"/groups/{BOT}/{GROUP}/learned")
    kinds = _rows(
        replayed_store,
        "SELECT kind, COUNT(*) FROM learned_items WHERE group_id = ? AND kind != 'spend'"
        " GROUP BY kind",
        (GROUP,),
    )
    assert kinds
    for kind, count in kinds:
        assert f"{kind} <b>{count}</b>" in page.text
    assert "spend <b>" not in page.text
    assert 'class="source"' in page.text
    assert "forget" not in re.sub(r"<script.*?</script>", "", page.text).split("<table", 1)[1]
    kind, count = kinds[0]
    one = client.get(f"/groups/{BOT}/{GROUP}/learned", params={"kind": kind})
    assert len(re.findall(r'<tr class="item"', one.text)) == min(int(count), 50)  # type: ignore[call-overload]
    assert set(re.findall(r'<tr class="item" data-kind="([^"]+)"', one.text)) == {kind}


def _count_items(store: Path, kind: str, key: str) -> object:
    return _rows(
        store,
        "SELECT COUNT(*) FROM learned_items WHERE bot_id = ? AND group_id = ? AND kind = ?"
        " AND key = ?",
        (BOT, GROUP, kind, key),
    )[0][0]


def test_forget_needs_the_admin_token(store: Path) -> None:
    url = f"/groups/{BOT}/{GROUP}/learned/forget"
    read_only = _client(store)
    assert 'id="admin-token"' not in read_only.get(f"/groups/{BOT}/{GROUP}/learned").text
    client = _client(store, token=TOKEN)
    page = client.get(f"/groups/{BOT}/{GROUP}/learned").text
    assert 'id="admin-token"' in page
    kind, key = re.findall(
        r'class="forget" data-url="[^"]+" data-kind="([^"]+)" data-key="([^"]+)"', page
    )[0]
    body = {"kind": kind, "key": key}
    refused = read_only.post(url, json=body)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["detail"]
    assert client.post(url, json=body).status_code == 401
    assert client.post(url, json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert _count_items(store, kind, key) == 1
    done = client.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert done.status_code == 200
    assert done.json() == {"forgotten": [key]}
    assert _count_items(store, kind, key) == 0
    assert f'data-key="{key}"' not in client.get(f"/groups/{BOT}/{GROUP}/learned").text
    again = client.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert again.status_code == 404
    bad = client.post(url, json={"kind": kind}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert bad.status_code == 400


def test_live_version_changes_when_a_turn_is_recorded(store: Path) -> None:
    client = _client(store)
    before = client.get("/live").json()["version"]
    assert client.get("/live").json()["version"] == before
    dashboard = Dashboard.open(store)
    SQLiteTurnLog(dashboard.database).record(
        [
            TurnLogEntry(
                bot_id=BOT,
                group_id=GROUP,
                message_id="new-1",
                time=NOW.timestamp(),
                day=NOW.date().isoformat(),
                status="silent",
                action="pass",
                reason="necessity_below_threshold",
                record={"sender_id": "30001", "text": "刚来"},
            )
        ]
    )
    assert client.get("/live").json()["version"] != before


def test_spend_page_sums_turns_and_learning_per_day(store: Path) -> None:
    dashboard = Dashboard.open(store)
    day = NOW.date().isoformat()
    SQLiteTurnLog(dashboard.database).record(
        [
            TurnLogEntry(
                bot_id=BOT,
                group_id=GROUP,
                message_id=f"spent-{number}",
                time=NOW.timestamp(),
                day=day,
                status="replied",
                action="reply",
                reason="rule_default_reply",
                prompt_tokens=1000,
                cached_tokens=750,
                output_tokens=20,
                requested=True,
            )
            for number in range(4)
        ]
    )
    prompt, cached, output = _rows(
        store,
        "SELECT SUM(prompt_tokens), SUM(cached_tokens), SUM(output_tokens) FROM turn_daily"
        " WHERE group_id = ? AND day = ?",
        (GROUP, day),
    )[0]
    client = _client(store)
    page = client.get("/spend", params={"bot": BOT, "group": GROUP, "days": 7}).text
    row = re.search(rf"<td>{day}</td>(.*?)</tr>", page, flags=re.DOTALL)
    assert row is not None
    assert f"{prompt:,} / {cached:,} / {output:,}" in row.group(1)
    assert f"{100 * cached / prompt:.0f}%" in row.group(1)  # type: ignore[operator]
    assert 'class="bar s-0"' in page  # the cached tokens drawn
    assert "<circle" in page  # the hit rate drawn
    learning_calls = re.findall(r'learning-tokens">([\d,]+) /', page)
    assert learning_calls and any(calls != "0" for calls in learning_calls)
    every = client.get("/spend").text
    assert "per day</a>" in every


def test_mounted_under_a_path_of_another_app(replayed_store: Path) -> None:
    host = FastAPI()
    mount(host, "/promptweave/", store=replayed_store, config=Config())
    client = TestClient(host)
    page = client.get("/promptweave/")
    assert page.status_code == 200
    assert 'href="/promptweave/static/dashboard.css"' in page.text
    assert f'href="/promptweave/groups/{BOT}/{GROUP}"' in page.text
    assert client.get("/promptweave/static/dashboard.js").status_code == 200
    assert client.get(f"/promptweave/groups/{BOT}/{GROUP}").status_code == 200


def test_a_missing_store_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(DashboardError, match="no store at"):
        Dashboard.open(tmp_path / "absent.sqlite3")


def test_groups_page_shows_the_settings_in_force(replayed_store: Path) -> None:
    config = Config(
        bots={BOT: BotConfig(timezone="Asia/Tokyo")},
        learning=LearningConfig(opt_out_groups=(f"{BOT}:{GROUP}",)),
    )
    dashboard = Dashboard.open(replayed_store, config=config, clock=lambda: NOW)
    client = TestClient(create_app(dashboard))
    row = re.search(rf'data-group="{GROUP}">(.*?)</tr>', client.get("/").text, flags=re.DOTALL)
    assert row is not None
    assert "time zone: Asia/Tokyo" in row.group(1)
    assert "learning: opted out" in row.group(1)
    learned = client.get(f"/groups/{BOT}/{GROUP}/learned").text
    assert "opted out of learning" in learned


def _group_row(page: str, group_id: str) -> str:
    row = re.search(rf'data-group="{group_id}">(.*?)</tr>', page, flags=re.DOTALL)
    assert row is not None, group_id
    return row.group(1)


def _spent(dashboard: Dashboard, group_id: str, *, prompt: int, cached: int, output: int) -> None:
    SQLiteTurnLog(dashboard.database).record(
        [
            TurnLogEntry(
                bot_id=BOT,
                group_id=group_id,
                message_id=f"priced-{group_id}-{number}",
                time=NOW.timestamp(),
                day=NOW.date().isoformat(),
                status="replied",
                action="reply",
                reason="rule_default_reply",
                prompt_tokens=prompt,
                cached_tokens=cached,
                output_tokens=output,
                requested=True,
            )
            for number in range(3)
        ]
    )


def test_groups_page_prices_each_groups_tokens_at_the_configured_model(store: Path) -> None:
    config = Config.from_file(CONFIG)
    dashboard = Dashboard.open(store, config=config, clock=lambda: NOW)
    _spent(dashboard, GROUP, prompt=1800, cached=1200, output=40)
    _spent(dashboard, "20002", prompt=900, cached=0, output=75)
    page = TestClient(create_app(dashboard)).get("/").text
    price = price_for(config, DEFAULT_MODELS[ProviderApi.OPENAI_CHAT])
    assert price is not None
    amounts = set()
    for (group_id,) in _rows(store, "SELECT DISTINCT group_id FROM turn_daily"):
        prompt, cached, output = _rows(
            store,
            "SELECT SUM(prompt_tokens), SUM(cached_tokens), SUM(output_tokens) FROM turn_daily"
            " WHERE bot_id = ? AND group_id = ? AND day = ?",
            (BOT, group_id, NOW.date().isoformat()),
        )[0]
        amount = price_tokens(price, prompt=prompt, cached=cached, output=output)  # type: ignore[arg-type]
        money = re.search(r'class="money">(.*?)</td>', _group_row(page, str(group_id)))
        assert money is not None
        assert (
            money.group(1)
            == f"{format_money(amount, price.currency)} <small>at gpt-4o-mini</small>"
        )
        amounts.add(amount)
    assert len(amounts) == 2 and 0 not in amounts  # each group its own figure
    assert "no prices configured" not in page


def test_groups_page_names_the_model_without_a_price(replayed_store: Path) -> None:
    other = Config(prices={"qwen2.5-7b": ModelPrice(input=0.1, output=0.2)})
    page = TestClient(
        create_app(Dashboard.open(replayed_store, config=other, clock=lambda: NOW))
    ).get("/")
    money = re.findall(r'class="money">(.*?)</td>', page.text)
    assert money and {html.unescape(shown) for shown in money} == {
        'no price for gpt-4o-mini (no [prices."gpt-4o-mini"])'
    }
    model = Config(provider=ProviderConfig(model="qwen2.5-7b"), prices=other.prices)
    priced = TestClient(
        create_app(Dashboard.open(replayed_store, config=model, clock=lambda: NOW))
    ).get("/")
    assert "<small>at qwen2.5-7b</small>" in priced.text


def _settings(row: str) -> dict[str, tuple[str, str]]:
    """Each setting of a group row: its value and its source."""
    return {
        html.unescape(name): (html.unescape(value), html.unescape(source))
        for name, value, source in re.findall(
            r'<div class="setting">(.*?): (.*?) <small class="source">(.*?)</small></div>', row
        )
    }


def test_groups_page_shows_a_group_switched_off_at_run_time_and_why(store: Path) -> None:
    dashboard = Dashboard.open(store, clock=lambda: NOW)
    client = TestClient(create_app(dashboard))
    before = _settings(_group_row(client.get("/").text, GROUP))
    assert before["taking part"] == ("on", "default")
    # Switched off by another connection (the bot, ``promptweave groups off``) while the page is
    # open.
    at = dt.datetime(2026, 12, 4, 21, 15, tzinfo=dt.UTC)
    SQLiteRoutingState(SQLiteDatabase(store)).set_switch(
        BOT, GROUP, GroupSwitch(enabled=False, by="chat:30001", at=at)
    )
    page = client.get("/").text
    after = _settings(_group_row(page, GROUP))
    assert after["taking part"] == (
        "off: group_switched_off (switched off by chat:30001 at 2026-12-04T21:15:00+00:00)",
        "the run-time switch",
    )
    # The other group is not switched.
    assert _settings(_group_row(page, "20002"))["taking part"] == ("on", "default")


def test_groups_page_shows_the_configured_threshold_and_quiet_hours_with_their_source(
    store: Path,
) -> None:
    config = Config(
        bots={
            BOT: BotConfig(
                deny_groups=("20002",),
                groups={
                    GROUP: GroupConfig(necessity_threshold=30, low_engagement=False),
                    "*": GroupConfig(quiet_hours=("23:30-07:30",), quiet_allow="none"),
                },
            )
        },
    )
    dashboard = Dashboard.open(store, config=config, clock=lambda: NOW)
    # A switch that turns the bot on over the configuration's deny list.
    SQLiteRoutingState(dashboard.database).set_switch(
        BOT, "20002", GroupSwitch(enabled=True, by="cli")
    )
    page = TestClient(create_app(dashboard)).get("/").text
    shown = _settings(_group_row(page, GROUP))
    table, every = f'[bots."{BOT}".groups."{GROUP}"]', f'[bots."{BOT}".groups."*"]'
    assert shown["reply-necessity threshold"] == ("30", table)
    assert shown["low-engagement phrases"] == ("off", table)
    assert shown["quiet hours"] == (
        "23:30-07:30 (Asia/Shanghai); nothing goes through",
        f"{every}; quiet_allow: {every}",
    )
    assert shown["time zone"] == ("Asia/Shanghai", "default")
    other = _settings(_group_row(page, "20002"))
    assert other["taking part"] == (
        "on (switched on by cli, over the configuration's group_denied)",
        "the run-time switch",
    )
    assert other["reply-necessity threshold"] == (
        str(config.routing.necessity_threshold),
        "[routing]",
    )
    assert other["low-engagement phrases"][1] == "[routing]"
