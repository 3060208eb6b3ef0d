"""Replay records for the report tests, and headless Chromium to look at the page.

:func:`realistic_records` turns a scripted evening of two Chinese group chats and one
private chat (``tests/data/report_chat.jsonl``: replies, quotes, follow-ups, a tool call, canned
phrases, silences by gate and by score, a provider failure, the bot's own message, a hostile
message) into records of the replay's JSONL schema, with character counts and prefix reuse worked
out the way a replay measures them.

Run as a script to redraw the documentation's screenshot::

    PYTHONPATH=. python tests/report_support.py docs/images/replay-report.png
"""

from __future__ import annotations

import datetime as dt
import html.parser
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from promptweave.replay.replayer import summarize

__all__ = [
    "CHROMIUM",
    "HEADLESS",
    "Element",
    "chromium",
    "chromium_or_skip",
    "parse_html",
    "realistic_records",
    "screenshot",
    "start_devtools",
    "summarize",
]

#: Debian's ``chromium`` package (``.ci/run`` installs it).
CHROMIUM = Path("/usr/bin/chromium")

#: Flags every headless run takes: root needs ``--no-sandbox``; a private profile per run keeps
#: concurrent test processes apart.
HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600")

CHAT = Path(__file__).parent / "data" / "report_chat.jsonl"
START = dt.datetime(2026, 11, 29, 20, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=8)))
MODEL_LABEL = "offline stand-in (deterministic, not an LLM)"

_STATIC = {"injection_guard": 412, "persona": 1186, "identity": 158}
_TURN_TAIL = {"reply_shape": 366, "turn_policy": 214, "current_time": 38}
_REQUEST_STAGES = ("render", "turn_context", "request", "submit", "read", "deliver")
_KINDS = ("ambient", "summary", "history", "current", "sidecar")


def _retrieval(group: str | None, sender: str, turn: int) -> dict[str, int]:
    # What retrieval finds depends on the speaker, so a change of speaker breaks the prefix at
    # the retrieval sections, and a turn of the same speaker only at the group timeline.
    seed = sum(map(ord, f"{group}{sender}"))
    sections = {"group_expression": 236, "memory": 180 + seed % 7 * 40}
    if seed % 3 == 0:
        sections["knowledge"] = 520
    if seed % 2 == 0:
        sections["relationship"] = 96
        sections["person_facts"] = 88
    if turn > 6:
        sections["mid_term"] = 140
    return sections


def _system(group: str | None, sender: str, turn: int, tool: bool) -> dict[str, int]:
    sections = {**_STATIC, **_retrieval(group, sender, turn)}
    if group is not None:
        sections["group_timeline"] = min(2400, 320 + 180 * min(turn, 8))
    sections.update(_TURN_TAIL)
    if tool:
        sections["tool_context"] = 420
    return sections


def _decision(line: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The decision and delivery fields of a chat line's scripted outcome."""
    outcome = line["outcome"]
    bubbles = list(line.get("bubbles", ()))
    fields: dict[str, Any] = {
        "status": "replied" if bubbles else "silent",
        "action": {"tool": "tool", "follow_up": "follow_up", "silent": "pass"}.get(
            outcome, "reply"
        ),
        "reason": line.get("reason", ""),
        "source": line.get("source", "rule"),
        "delivery_style": line.get("style", "plain"),
        "bubbles": bubbles,
        "message_ids": [str(80000 + index * 4 + n) for n in range(len(bubbles))],
        "quoted_message_id": str(90000 + index - 1) if line.get("style") == "quote" else None,
    }
    if outcome == "tool":
        fields["reason"] = "required_tool_intent"
    elif outcome == "phrase":
        fields.update(status="phrase", action="pass")
    elif outcome == "model_pass":
        fields.update(reason="model_pass", source="model")
    elif outcome == "failed":
        fields["status"] = "failed"
    elif outcome == "recorded":
        fields.update(
            status="recorded", action=None, reason="self_sent", source=None, delivery_style=None
        )
    terms = line.get("terms", ())
    fields["necessity"] = (
        {
            "score": sum(points for _, points in terms),
            "threshold": 50,
            "terms": [{"name": name, "points": points} for name, points in terms],
        }
        if terms
        else None
    )
    return fields


def realistic_records(*, seed: int = 7) -> list[dict[str, Any]]:
    """The message records of the scripted chat (``tests/data/report_chat.jsonl``), then its
    summary record; ``seed`` draws the gaps between messages and the stage durations."""
    rng = random.Random(seed)
    lines = [json.loads(text) for text in CHAT.read_text(encoding="utf-8").splitlines()]
    records: list[dict[str, Any]] = []
    previous: dict[str, list[tuple[str, int]]] = {}
    spoken: Counter[tuple[str | None, str]] = Counter()
    turns: Counter[str | None] = Counter()
    moment = START
    for index, line in enumerate(lines):
        group, sender = line["group_id"], line["sender_id"]
        moment += dt.timedelta(seconds=rng.randint(8, 140))
        turns[group] += 1
        record: dict[str, Any] = {
            "type": "message",
            "index": index,
            "time": moment.isoformat(),
            "message_id": str(90000 + index),
            "group_id": group,
            "sender_id": sender,
            "sender_name": line["sender_name"],
            "text": line["text"],
            **_decision(line, index),
            "prefix_reuse": None,
            "prefix_break": None,
            "request_bytes": None,
            "chars": None,
            "usage": None,
        }
        durations = {
            "session": round(rng.uniform(0.3, 1.1), 3),
            "route": round(rng.uniform(0.4, 1.6), 3),
        }
        if line["outcome"] in ("reply", "follow_up", "tool", "model_pass", "failed"):
            system = _system(group, sender, turns[group], line["outcome"] == "tool")
            chars = {
                "budget": 12000,
                "system": system,
                "ambient": 0,
                "summary": 96 if spoken[(group, sender)] > 3 else 0,
                "history": min(3600, 118 * spoken[(group, sender)]),
                "current": 38 + len(line["text"]),
                "sidecar": 64 + 12 * rng.randint(0, 8),
            }
            spoken[(group, sender)] += 1
            parts = [(f"section {name}", count) for name, count in system.items()]
            parts += [(f"message {kind}", chars[kind]) for kind in _KINDS if chars[kind]]
            total = sum(count for _, count in parts)
            conversation = group or f"private:{sender}"
            earlier = previous.get(conversation)
            if earlier is not None:
                shared = 0
                for part, old in zip(parts, earlier, strict=False):
                    if part != old or part[0] == "section group_timeline":
                        record["prefix_break"] = part[0]
                        break
                    shared += part[1]
                record["prefix_reuse"] = round(shared / total, 4)
            previous[conversation] = parts
            record.update(chars=chars, request_bytes=total * 3 + 420)
            for stage in _REQUEST_STAGES:
                durations[stage] = round(rng.uniform(0.2, 9.0 if stage == "render" else 2.0), 3)
        durations["total"] = round(sum(durations.values()), 3)
        record["durations_ms"] = durations
        records.append(record)
    records.append(summarize(records, model="offline", model_label=MODEL_LABEL))
    return records


@attrs.define(eq=False)
class Element:
    """One element of a parsed page: its tag, attributes and content (elements and text)."""

    tag: str
    attributes: dict[str, str]
    content: list[Element | str] = attrs.Factory(list)

    @property
    def children(self) -> list[Element]:
        return [node for node in self.content if isinstance(node, Element)]

    def all_text(self) -> str:
        """The element's text with its descendants', in document order."""
        return "".join(node if isinstance(node, str) else node.all_text() for node in self.content)

    def find_all(self, tag: str, css_class: str | None = None) -> list[Element]:
        """Every descendant with ``tag`` (and ``css_class`` among its classes), in order."""
        found = []
        for child in self.children:
            classes = child.attributes.get("class", "").split()
            if child.tag == tag and (css_class is None or css_class in classes):
                found.append(child)
            found.extend(child.find_all(tag, css_class))
        return found


_VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "source", "wbr", "area", "col"})


class _TreeBuilder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element(tag="#document", attributes={})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag=tag, attributes={k: v or "" for k, v in attrs})
        self.open[-1].content.append(element)
        if tag not in _VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open[-1].content.append(Element(tag=tag, attributes={k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].content.append(data)


def parse_html(page: str) -> Element:
    """The element tree of ``page`` (the stdlib parser: scripts stay text, nothing runs)."""
    builder = _TreeBuilder()
    builder.feed(page)
    builder.close()
    return builder.root


def chromium(
    *arguments: str, profile: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium once with ``arguments`` and a throwaway profile at ``profile``."""
    return subprocess.run(
        [str(CHROMIUM), *HEADLESS, f"--user-data-dir={profile}", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        env={**os.environ, "HOME": str(profile)},
    )


def chromium_or_skip(path: Path = CHROMIUM) -> Path:
    """``path`` when it exists; else a skip, or a failure when ``PROMPTWEAVE_REQUIRE_CHROMIUM``
    is set (CI sets it, so the browser tests never go missing there)."""
    if not path.exists():
        if os.environ.get("PROMPTWEAVE_REQUIRE_CHROMIUM"):
            pytest.fail(f"PROMPTWEAVE_REQUIRE_CHROMIUM is set but {path} is missing")
        pytest.skip(f"{path} is absent (apt-get install chromium fonts-noto-cjk)")
    return path


def start_devtools(profile: Path, *, timeout: float = 120) -> tuple[subprocess.Popen[bytes], int]:
    """Headless Chromium on a blank tab under the DevTools protocol, with a throwaway profile at
    ``profile``: the process (the caller terminates it) and the DevTools port, once it listens."""
    profile.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            str(CHROMIUM),
            *HEADLESS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(profile)},
    )
    deadline = time.monotonic() + timeout
    port_file = profile / "DevToolsActivePort"
    while not port_file.exists() or not port_file.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError("chromium exited, or DevTools never listened")
        time.sleep(0.05)
    return process, int(port_file.read_text().split()[0])


def screenshot(page: Path, png: Path, *, profile: Path, height: int = 1600) -> None:
    """Take a screenshot, 1200 pixels wide, of the HTML file ``page`` into ``png``."""
    chromium(
        "--hide-scrollbars",
        # The last --window-size given wins over the one in HEADLESS.
        f"--window-size=1200,{height}",
        f"--screenshot={png}",
        page.resolve().as_uri(),
        profile=profile,
    )


def _main(arguments: Sequence[str]) -> None:
    from promptweave.replay.report import render_report

    target = Path(arguments[0])
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        page.write_text(
            render_report(realistic_records(), title="replay of two groups, one evening"),
            encoding="utf-8",
        )
        screenshot(page, target, profile=Path(scratch) / "profile", height=2200)


if __name__ == "__main__":
    _main(sys.argv[1:])
