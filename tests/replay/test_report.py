"""The replay report (``docs/replay.md``): one self-contained HTML page from a replay's records.

The unit tests read the page with the stdlib HTML parser; the Chromium tests load it in Debian's
headless ``chromium`` and check the screenshot, the DOM and the DevTools console.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import png
import pytest
import websockets
from report_support import (
    CHROMIUM,
    Element,
    chromium,
    chromium_or_skip,
    parse_html,
    realistic_records,
    screenshot,
    start_devtools,
    summarize,
)

from promptweave.replay.report import ReportInputError, render_report
from promptweave.replay.report_charts import BAR_WIDTH

# Markup, an entity, both quotes, and a placeholder of the page template.
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>&amp;\"' $timeline"


def _message(index: int, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "message",
        "index": index,
        "time": f"2026-11-29T20:{index:02d}:00+08:00",
        "message_id": str(1000 + index),
        "group_id": "20001",
        "sender_id": "30001",
        "sender_name": "小鱼",
        "text": f"第{index}条消息",
        "status": "silent",
        "action": "pass",
        "reason": "necessity_below_threshold",
        "source": "necessity",
        "delivery_style": "plain",
        "necessity": {"score": 10, "threshold": 50, "terms": [{"name": "length", "points": 10}]},
        "bubbles": [],
        "message_ids": [],
        "quoted_message_id": None,
        "prefix_reuse": None,
        "prefix_break": None,
        "request_bytes": None,
        "chars": None,
        "usage": None,
        "durations_ms": {"route": 1.0, "total": 1.5},
    }
    record.update(fields)
    return record


def _chars(system: Mapping[str, int], budget: int = 12000, **kinds: int) -> dict[str, Any]:
    counts = dict.fromkeys(("ambient", "summary", "history", "current", "sidecar"), 0)
    counts.update(kinds)
    return {"budget": budget, "system": dict(system), **counts}


def _replied(index: int, **fields: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "status": "replied",
        "action": "reply",
        "reason": "rule_reply_obligation",
        "source": "rule",
        "bubbles": ["好的", "马上"],
        "message_ids": ["1", "2"],
        "chars": _chars({"persona": 1000, "group_timeline": 600}, history=300, current=40),
        "request_bytes": 6000,
    }
    return _message(index, **{**defaults, **fields})


def _with_summary(messages: list[dict[str, Any]], model: str = "offline") -> list[dict[str, Any]]:
    return [*messages, summarize(messages, model=model, model_label=f"{model} label")]


def _rows(page: Element) -> list[Element]:
    return page.find_all("tr", "message")


def _floats(element: Element, *names: str) -> tuple[float, ...]:
    return tuple(float(element.attributes[name]) for name in names)


# -- the page as a whole ----------------------------------------------------------------------


def test_every_message_record_becomes_exactly_one_timeline_row() -> None:
    records = realistic_records()
    messages = [r for r in records if r["type"] == "message"]
    rows = _rows(parse_html(render_report(records, title="replay")))
    assert [row.attributes["data-index"] for row in rows] == [str(m["index"]) for m in messages]
    assert [row.attributes["data-status"] for row in rows] == [m["status"] for m in messages]


def test_page_references_no_file_and_no_network_address() -> None:
    page = parse_html(render_report(realistic_records(), title="replay"))
    elements = [
        element for tag in ("link", "a", "script", "img", "style") for element in page.find_all(tag)
    ]
    assert not [e for e in elements if "src" in e.attributes]
    hrefs = [e.attributes["href"] for e in elements if "href" in e.attributes]
    assert hrefs and all(href.startswith(("#", "data:")) for href in hrefs)
    style = "".join(e.all_text() for e in page.find_all("style"))
    assert "url(" not in style and "@import" not in style


def test_page_declares_utf8_and_a_chinese_font() -> None:
    text = render_report(realistic_records(), title="群聊回放")
    page = parse_html(text)
    assert any(meta.attributes.get("charset") == "utf-8" for meta in page.find_all("meta"))
    assert '"Noto Sans CJK SC"' in "".join(e.all_text() for e in page.find_all("style"))
    assert page.find_all("h1")[0].all_text() == "群聊回放"


def test_hostile_text_from_the_chat_stays_text() -> None:
    message = _replied(
        0,
        text=HOSTILE,
        sender_name=HOSTILE,
        sender_id='"><marquee>',
        group_id="<u>",
        reason="</td><script>alert(2)</script>",
        bubbles=[HOSTILE],
        necessity={"score": 60, "threshold": 50, "terms": [{"name": HOSTILE, "points": 60}]},
        prefix_reuse=0.5,
        prefix_break=HOSTILE,
        chars=_chars({'x" onmouseover="alert(3)': 500, "<svg onload=alert(4)>": 300}),
    )
    records = [*_with_summary([_replied(1, prefix_reuse=None), message])]
    records[-1]["silences"] = {HOSTILE: 1}
    text = render_report(records, title=HOSTILE)
    page = parse_html(text)
    assert len(page.find_all("script")) == 1  # the page's own filter script
    assert not [tag for tag in ("img", "marquee", "u") if page.find_all(tag)]
    handlers = [
        name
        for tag in ("rect", "svg", "td", "tr", "li", "circle", "title")
        for element in page.find_all(tag)
        for name in element.attributes
        if name.startswith("on")
    ]
    assert handlers == []
    row = _rows(page)[1]
    assert row.find_all("td", "text")[0].all_text() == HOSTILE
    assert row.find_all("td", "sender")[0].all_text() == HOSTILE + '"><marquee>'
    assert row.find_all("ol", "bubbles")[0].all_text() == HOSTILE
    assert page.find_all("title")[0].all_text() == HOSTILE


# -- the header ------------------------------------------------------------------------------


def test_offline_model_is_labelled_a_deterministic_stand_in_not_an_llm() -> None:
    page = parse_html(render_report(realistic_records(), title="replay"))
    header = page.find_all("header")[0]
    assert "offline stand-in (deterministic, not an LLM)" in header.all_text()
    notice = header.find_all("div", "notice")[0].all_text()
    assert "deterministic" in notice and "not an LLM" in notice


def test_a_real_model_gets_its_label_and_no_stand_in_notice() -> None:
    records = _with_summary([_replied(0)], model="openai")
    header = parse_html(render_report(records, title="replay")).find_all("header")[0]
    assert "openai label" in header.all_text()
    assert not header.find_all("div", "notice")


def test_header_shows_the_summary_figures() -> None:
    records = realistic_records()
    summary = records[-1]
    header = parse_html(render_report(records, title="replay")).find_all("header")[0]
    figures = {
        figure.find_all("div", "label")[0].all_text(): figure.find_all("div", "value")[0].all_text()
        for figure in header.find_all("div", "figure")
    }
    assert figures["messages"] == str(summary["messages"])
    assert figures["replies"] == str(summary["replies"])
    assert figures["follow-ups"] == str(summary["follow_ups"])
    assert figures["quotes"] == str(summary["quotes"])
    assert figures["tools"] == str(summary["tools"])
    assert figures["canned phrases"] == str(summary["phrases"])
    assert figures["silences"] == str(sum(summary["silences"].values()))
    chars = summary["chars_per_reply"]
    assert figures["chars per reply"] == f"{chars['p50']:,.0f} / {chars['p95']:,.0f}"
    reuse = summary["prefix_reuse"]
    assert figures["prefix reuse"] == f"{reuse['median']:.1%} / {reuse['min']:.1%}"
    assert figures["cached tokens"] == "—"
    silences = header.all_text()
    assert all(f"{reason}: {count}" in silences for reason, count in summary["silences"].items())
    stages = header.find_all("table", "stages")[0]
    assert [th.all_text() for th in stages.find_all("thead")[0].find_all("th")][1:] == [
        *[stage for stage in summary["stage_ms"] if stage != "total"],
        "total",
    ]


def test_header_shows_the_uncached_bytes_per_new_byte_and_the_servers_reuse() -> None:
    records = realistic_records()
    summary = dict(records[-1])
    summary["uncached_per_new_byte"] = {
        "median": 1.046,
        "summed": 1.104,
        "uncached_bytes": 2208,
        "new_bytes": 2000,
        "requests": 69,
    }
    summary["server_reuse"] = {
        "calls": 3,
        "reused_tokens": 5702,
        "evaluated_tokens": 2780,
        "share": 0.6723,
    }
    header = parse_html(render_report([*records[:-1], summary], title="replay")).find_all("header")[
        0
    ]
    figures = {
        figure.find_all("div", "label")[0].all_text(): figure.all_text()
        for figure in header.find_all("div", "figure")
    }
    assert "1.05 / 1.10" in figures["uncached per new byte"]
    assert "over 69 requests" in figures["uncached per new byte"]
    assert "67.2%" in figures["server reuse"]
    assert "5,702 prompt tokens reused, 2,780 evaluated, over 3 calls" in figures["server reuse"]


def test_a_summary_without_those_figures_shows_neither() -> None:
    records = realistic_records()
    summary = {
        key: value
        for key, value in records[-1].items()
        if key not in ("uncached_per_new_byte", "server_reuse")
    }
    header = parse_html(render_report([*records[:-1], summary], title="replay")).find_all("header")[
        0
    ]
    labels = {
        figure.find_all("div", "label")[0].all_text() for figure in header.find_all("div", "figure")
    }
    assert "uncached per new byte" not in labels and "server reuse" not in labels


def test_reported_cached_tokens_are_shown() -> None:
    records = _with_summary([_replied(0)], model="openai")
    records[-1]["cached_tokens"] = 12345
    header = parse_html(render_report(records, title="replay")).find_all("header")[0]
    assert "12,345" in header.all_text()


# -- the timeline ----------------------------------------------------------------------------


def test_row_shows_the_decision_and_the_necessity_terms_on_expand() -> None:
    necessity = {
        "score": 65,
        "threshold": 50,
        "terms": [{"name": "addressed", "points": 55}, {"name": "bystander", "points": -45}],
    }
    page = parse_html(render_report(_with_summary([_replied(0, necessity=necessity)]), title="t"))
    decision = _rows(page)[0].find_all("td", "decision")[0]
    assert decision.find_all("div", "action")[0].all_text() == "reply"
    assert decision.find_all("div", "reason")[0].all_text() == "rule_reply_obligation · rule"
    details = decision.find_all("details", "necessity")[0]
    assert details.find_all("summary")[0].all_text() == "necessity 65 / 50"
    assert [li.all_text() for li in details.find_all("li")] == ["addressed+55", "bystander-45"]


def test_silent_row_shows_its_reason_instead_of_bubbles() -> None:
    page = parse_html(
        render_report(_with_summary([_message(0, reason="shut_up_silence")]), title="t")
    )
    sent = _rows(page)[0].find_all("td", "sent")[0]
    assert sent.all_text() == "silent: shut_up_silence"
    assert not sent.find_all("ol")


def test_quoted_reply_names_the_quoted_message() -> None:
    record = _replied(0, delivery_style="quote", quoted_message_id="998")
    sent = _rows(parse_html(render_report(_with_summary([record]), title="t")))[0]
    assert "quotes #998" in sent.find_all("td", "sent")[0].all_text()


# -- the character bars ----------------------------------------------------------------------


def test_bar_parts_are_proportional_to_their_characters_and_share_the_budget_scale() -> None:
    chars = _chars(
        {"persona": 1200, "memory": 0, "group_timeline": 1800},
        budget=12000,
        summary=300,
        history=2400,
        current=300,
    )
    page = parse_html(render_report(_with_summary([_replied(0, chars=chars)]), title="t"))
    bar = _rows(page)[0].find_all("svg", "chars-bar")[0]
    parts = bar.find_all("rect", "part")
    assert [p.attributes["data-part"] for p in parts] == [
        "system:persona",
        "system:group_timeline",
        "summary",
        "history",
        "current",
    ]
    scale = BAR_WIDTH / 12000
    for part in parts:
        assert float(part.attributes["width"]) == pytest.approx(
            int(part.attributes["data-chars"]) * scale, abs=0.01
        )
    ends = [sum(_floats(p, "x", "width")) for p in parts]
    assert [float(p.attributes["x"]) for p in parts[1:]] == pytest.approx(ends[:-1], abs=0.01)
    budget = bar.find_all("line", "budget")[0]
    assert float(budget.attributes["x1"]) == pytest.approx(BAR_WIDTH)
    assert "persona (system): 1,200 chars" in parts[0].all_text()


def test_a_request_over_its_budget_runs_past_the_budget_line() -> None:
    chars = _chars({"persona": 3000}, budget=4000, history=2000)
    page = parse_html(render_report(_with_summary([_replied(0, chars=chars)]), title="t"))
    bar = page.find_all("svg", "chars-bar")[0]
    end = max(sum(_floats(p, "x", "width")) for p in bar.find_all("rect", "part"))
    assert end == pytest.approx(BAR_WIDTH, abs=0.01)
    assert float(bar.find_all("line", "budget")[0].attributes["x1"]) == pytest.approx(
        BAR_WIDTH * 4000 / 5000
    )


def test_negative_counts_draw_no_negative_widths() -> None:
    chars = _chars({"persona": -300, "identity": 200}, budget=-5, history=-1)
    page = parse_html(render_report(_with_summary([_replied(0, chars=chars)]), title="t"))
    bar = page.find_all("svg", "chars-bar")[0]
    assert [p.attributes["data-part"] for p in bar.find_all("rect", "part")] == ["system:identity"]
    assert all(float(r.attributes["width"]) >= 0 for r in bar.find_all("rect"))


def test_only_rows_with_a_request_get_a_bar() -> None:
    records = realistic_records()
    rows = _rows(parse_html(render_report(records, title="t")))
    with_bar = [bool(row.find_all("svg", "chars-bar")) for row in rows]
    assert with_bar == [r["chars"] is not None for r in records if r["type"] == "message"]


# -- the prefix reuse chart ------------------------------------------------------------------


def _chart_points(page: Element) -> list[Element]:
    return page.find_all("svg", "reuse-chart")[0].find_all("circle", "reuse-point")


def test_reuse_chart_has_one_point_per_request_with_a_previous_request() -> None:
    records = realistic_records()
    page = parse_html(render_report(records, title="t"))
    requested = [r for r in records if r["type"] == "message" and r["chars"] is not None]
    expected = [
        (str(number), str(r["prefix_reuse"]))
        for number, r in enumerate(requested, 1)
        if r["prefix_reuse"] is not None
    ]
    points = sorted(
        (p.attributes["data-request"], p.attributes["data-reuse"]) for p in _chart_points(page)
    )
    assert points == sorted(expected)
    assert all("reused" in p.find_all("title")[0].all_text() for p in _chart_points(page))


def test_reuse_chart_places_points_by_request_number_and_share() -> None:
    messages = [
        _replied(0),
        _replied(1, prefix_reuse=1.0, prefix_break=None),
        _replied(2, prefix_reuse=0.0, prefix_break="section persona"),
        _replied(3, prefix_reuse=0.5, prefix_break="section group_timeline"),
    ]
    page = parse_html(render_report(_with_summary(messages), title="t"))
    points = _chart_points(page)
    xs = [float(p.attributes["cx"]) for p in points]
    ys = [float(p.attributes["cy"]) for p in points]
    top, bottom = ys[0], ys[1]
    assert top < bottom
    assert ys[2] == pytest.approx((top + bottom) / 2, abs=0.02)
    # Four requests spread evenly: requests 2, 3 and 4 are one step apart.
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.02)
    grid = {
        text.all_text(): float(text.attributes["y"])
        for text in page.find_all("svg", "reuse-chart")[0].find_all("text")
        if text.all_text().endswith("%")
    }
    assert (grid["100%"], grid["0%"], grid["50%"]) == pytest.approx((top, bottom, ys[2]))
    line = page.find_all("polyline", "reuse-line")[0]
    assert line.attributes["points"].split() == [
        f"{p.attributes['cx']},{p.attributes['cy']}" for p in points
    ]
    links = [a.attributes["href"] for a in page.find_all("svg", "reuse-chart")[0].find_all("a")]
    assert links == ["#m-1", "#m-2", "#m-3"]


def test_reuse_chart_draws_one_line_per_conversation() -> None:
    messages = [
        _replied(0),
        _replied(1, group_id="20002"),
        _replied(2, prefix_reuse=0.8),
        _replied(3, group_id="20002", prefix_reuse=0.6),
        _replied(4, group_id=None, sender_id="30009"),
        _replied(5, group_id=None, sender_id="30009", prefix_reuse=0.9),
    ]
    page = parse_html(render_report(_with_summary(messages), title="t"))
    lines = page.find_all("polyline", "reuse-line")
    assert [line.attributes["data-conversation"] for line in lines] == [
        "group 20001",
        "group 20002",
        "private 30009",
    ]
    assert [len(line.attributes["points"].split()) for line in lines] == [1, 1, 1]


# -- edge cases ------------------------------------------------------------------------------


def test_no_records_gives_an_empty_page_that_says_so() -> None:
    page = parse_html(render_report([], title="empty"))
    assert not _rows(page)
    body = page.all_text()
    assert "No incoming messages in this replay." in body
    assert "This replay has no summary record." in body
    assert not page.find_all("svg")


def test_all_silent_replay_has_rows_but_no_bars_and_no_chart() -> None:
    records = _with_summary([_message(index) for index in range(5)])
    page = parse_html(render_report(records, title="silent"))
    assert len(_rows(page)) == 5
    assert not page.find_all("svg")
    assert (
        "No request had an earlier request of its conversation to compare with." in page.all_text()
    )


def test_a_single_message_gets_its_row_and_its_bar() -> None:
    page = parse_html(render_report(_with_summary([_replied(0)]), title="one"))
    assert len(_rows(page)) == 1
    assert len(page.find_all("svg", "chars-bar")) == 1
    assert not page.find_all("svg", "reuse-chart")


def test_a_single_comparable_request_sits_in_the_middle_of_the_chart() -> None:
    messages = [_replied(0, prefix_reuse=0.75)]
    page = parse_html(render_report(_with_summary(messages), title="one"))
    assert len(_chart_points(page)) == 1


def test_fields_of_the_wrong_type_are_shown_as_absent() -> None:
    record = _message(0)
    record.update(
        index="zero",
        time="yesterday",
        text=42,
        bubbles="not a list",
        necessity="high",
        chars="lots",
        prefix_reuse="most",
        usage=[1, 2],
    )
    page = parse_html(render_report([record, {"type": "summary", "messages": "many"}], title="t"))
    row = _rows(page)[0]
    assert row.attributes["data-index"] == "0"
    assert row.find_all("td", "time")[0].all_text() == "yesterday"
    assert "necessity not scored" in row.all_text()
    assert not page.find_all("svg")


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([["not", "an", "object"]], "record 0 is a list, not a JSON object"),
        ([_message(0), {"type": "turn"}], "record 1 has type 'turn'"),
        ([{"index": 0}], "record 0 has type None"),
    ],
)
def test_a_record_that_is_not_a_replay_record_is_a_clear_error(
    records: list[Any], message: str
) -> None:
    with pytest.raises(ReportInputError, match=message):
        render_report(records, title="t")


# -- in a real browser -----------------------------------------------------------------------


@pytest.fixture
def browser() -> Path:
    """Debian's headless Chromium."""
    return chromium_or_skip(CHROMIUM)


def test_missing_chromium_fails_when_required_and_skips_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "chromium"
    monkeypatch.setenv("PROMPTWEAVE_REQUIRE_CHROMIUM", "1")
    with pytest.raises(pytest.fail.Exception, match="is missing"):
        chromium_or_skip(missing)
    monkeypatch.delenv("PROMPTWEAVE_REQUIRE_CHROMIUM")
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        chromium_or_skip(missing)
    assert chromium_or_skip(tmp_path) == tmp_path


@pytest.fixture
def report_file(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    records = realistic_records()
    page = tmp_path / "report.html"
    page.write_text(render_report(records, title="两个群的一个晚上"), encoding="utf-8")
    return page, records


def _colours(shot: Path) -> tuple[int, int, Counter[int]]:
    """The width, height and pixel count per RGBA colour of the PNG at ``shot``."""
    width, height, rows, _ = png.Reader(filename=str(shot)).asRGBA8()
    colours: Counter[int] = Counter()
    for row in rows:
        colours.update(memoryview(bytes(row)).cast("I"))  # one RGBA pixel per int
    return width, height, colours


def test_report_screenshot_in_chromium_is_not_blank(
    browser: Path, report_file: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    page, _ = report_file
    shot = tmp_path / "report.png"
    screenshot(page, shot, profile=tmp_path / "profile")
    width, height, colours = _colours(shot)
    assert (width, height) == (1200, 1600)
    assert len(colours) > 200
    assert colours.most_common(1)[0][1] < 0.9 * width * height


def test_blank_check_sees_a_blank_page_as_blank(browser: Path, tmp_path: Path) -> None:
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><link rel='icon' href='data:,'>", encoding="utf-8")
    shot = tmp_path / "blank.png"
    screenshot(page, shot, profile=tmp_path / "profile")
    width, height, colours = _colours(shot)
    assert colours.most_common(1)[0][1] == width * height


def test_chromium_dom_holds_one_message_row_per_record(
    browser: Path, report_file: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    page, records = report_file
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    tree = parse_html(dom)
    messages = [r for r in records if r["type"] == "message"]
    rows = _rows(tree)
    assert [row.attributes["data-index"] for row in rows] == [str(m["index"]) for m in messages]
    texts = [row.find_all("td", "text")[0].all_text() for row in rows]
    assert texts == [m["text"] for m in messages]
    assert len(tree.find_all("script")) == 1


class _DevTools:
    """A Chrome DevTools Protocol session on one page target, keeping every event it sees."""

    def __init__(self, socket: websockets.ClientConnection) -> None:
        self.socket = socket
        self.events: list[dict[str, Any]] = []
        self._next_id = 0

    async def _receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await self.socket.recv())
        if "method" in message:
            self.events.append(message)
        return message

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        await self.socket.send(
            json.dumps({"id": self._next_id, "method": method, "params": params})
        )
        while True:
            message = await self._receive()
            if message.get("id") == self._next_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    async def wait_for(self, method: str) -> None:
        while not any(event["method"] == method for event in self.events):
            await self._receive()


async def _load_with_devtools(
    page: Path, profile: Path, expression: str
) -> tuple[list[dict[str, Any]], Any]:
    """Load ``page`` in headless Chromium under DevTools; the events seen and the value of
    ``expression`` evaluated after the load event."""
    process, port = start_devtools(profile)
    try:
        async with asyncio.timeout(120):
            pages: list[dict[str, Any]] = []
            while not pages:  # the first tab may be listed a moment after DevTools listens
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                    pages = [t for t in json.load(answer) if t["type"] == "page"]
                if not pages:
                    await asyncio.sleep(0.05)
            target = pages[0]
            async with websockets.connect(target["webSocketDebuggerUrl"], max_size=None) as socket:
                devtools = _DevTools(socket)
                for domain in ("Runtime", "Log", "Page", "Network"):
                    await devtools.call(f"{domain}.enable")
                await devtools.call("Page.navigate", url=page.as_uri())
                await devtools.wait_for("Page.loadEventFired")
                value = await devtools.call(
                    "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
                )
                return devtools.events, value["result"].get("value")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _problems(events: list[dict[str, Any]]) -> list[Any]:
    """Uncaught exceptions and error-level console or log messages among DevTools events."""
    return [
        event["params"]
        for event in events
        if event["method"] == "Runtime.exceptionThrown"
        or (
            event["method"] == "Runtime.consoleAPICalled"
            and event["params"]["type"] in ("error", "assert")
        )
        or (event["method"] == "Log.entryAdded" and event["params"]["entry"]["level"] == "error")
    ]


# Runs the page's filter script for real: the rows left visible after a click on "silent".
_FILTER_AND_FONT = """
(() => {
  document.querySelector("button[data-filter='silent']").click();
  const rows = [...document.querySelectorAll("tr.message")];
  const width = (family) => {
    const context = document.createElement("canvas").getContext("2d");
    context.font = `20px ${family}`;
    return context.measureText("promptweave 回放").width;
  };
  return {
    rows: rows.length,
    shown: rows.filter((row) => !row.hidden).map((row) => row.dataset.status),
    pressed: document.querySelector("button[aria-pressed='true']").dataset.filter,
    cjk_font_installed: width('"Noto Sans CJK SC", monospace') !== width("monospace"),
  };
})()
"""


def test_report_loads_in_chromium_without_console_errors_and_filters_rows(
    browser: Path, report_file: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    page, records = report_file
    events, value = asyncio.run(_load_with_devtools(page, tmp_path / "profile", _FILTER_AND_FONT))
    assert _problems(events) == []
    requested = {
        e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"
    }
    assert requested == {page.as_uri()}
    messages = [r for r in records if r["type"] == "message"]
    silent = [m["status"] for m in messages if m["status"] == "silent"]
    assert value == {
        "rows": len(messages),
        "shown": silent,
        "pressed": "silent",
        "cjk_font_installed": True,
    }


def test_console_error_check_catches_a_page_that_throws(browser: Path, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><meta charset='utf-8'><link rel='icon' href='data:,'>"
        "<script>console.error('broken'); undefined_function();</script>",
        encoding="utf-8",
    )
    events, _ = asyncio.run(_load_with_devtools(page, tmp_path / "profile", "1"))
    problems = _problems(events)
    assert any("broken" in json.dumps(p) for p in problems)
    assert any("undefined_function" in json.dumps(p) for p in problems)


def test_row_shows_the_wording_hints_under_the_prompt_bar() -> None:
    hints = {
        "sent": [
            {
                "kind": "repeat",
                "plugin": "wording_hints",
                "reason": "r",
                "text": "【同句重回】换说法",
            }
        ],
        "trimmed": [
            {"kind": "scene_tone", "plugin": "wording_hints", "reason": "g", "text": "<招呼>"}
        ],
    }
    page = parse_html(
        render_report(_with_summary([_replied(0, wording_hints=hints), _replied(1)]), title="t")
    )
    first, second = (row.find_all("td", "prompt")[0] for row in _rows(page))
    details = first.find_all("details", "hints")[0]
    assert details.find_all("summary")[0].all_text() == "wording hints: repeat, scene_tone"
    assert details.find_all("s")[0].all_text() == "scene_tone"  # trimmed by the budget
    assert [li.all_text() for li in details.find_all("li")] == [
        "repeat 【同句重回】换说法",
        "scene_tone (trimmed) <招呼>",
    ]
    assert second.find_all("details", "hints") == []
