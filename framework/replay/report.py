"""The replay report: one self-contained HTML page drawn from the records of a replay
(``promptweave replay LOG --report FILE.html``, ``docs/replay.md``).

:func:`render_report` takes the records exactly as the JSONL lines of ``--format jsonl`` decode:
one ``message`` object per incoming message, then the ``summary`` object. The page loads nothing:
its style, its one small script (the status filter) and its charts (inline SVG, drawn by
:mod:`promptweave.replay.report_charts`) are all inside it. The chat is hostile input, so every string
taken from a record is escaped; a field of the wrong type is shown as absent rather than failing
the whole report.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import attrs

from promptweave.errors import PromptweaveError
from promptweave.providers.cost import format_money
from promptweave.replay.report_charts import (
    MESSAGE_KINDS,
    BarPart,
    ReusePoint,
    chars_bar_svg,
    conversation_colours,
    part_colour,
    prefix_reuse_svg,
)
from promptweave.replay.report_learning import learning_html
from promptweave.replay.report_page import PAGE_TEMPLATE, summary_html

__all__ = ["ReportInputError", "render_report"]


class ReportInputError(PromptweaveError, ValueError):
    """A record given to :func:`render_report` is not a replay record."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


@attrs.frozen(kw_only=True)
class _Necessity:
    score: int
    threshold: int | None
    terms: tuple[tuple[str, int], ...]
    #: Why the score was not applied (``addressed``, ``follow_up``, ``required_tool_intent``).
    bypassed: str | None = None


@attrs.frozen(kw_only=True)
class _Row:
    """One message record, every field checked for its type."""

    index: int
    time: str | None
    message_id: str | None
    group_id: str | None
    sender_id: str
    sender_name: str
    text: str
    status: str
    action: str | None
    reason: str
    source: str | None
    delivery_style: str | None
    necessity: _Necessity | None
    bubbles: tuple[str, ...]
    quoted_message_id: str | None
    prefix_reuse: float | None
    prefix_break: str | None
    parts: tuple[BarPart, ...] | None
    budget: int
    usage: Mapping[str, Any]
    #: Why the model gave no answer: ``(cause, reason, fix)``.
    model_failure: tuple[str, str, str] | None = None
    #: What the turn's requests spent (``tokens`` of the record, ``docs/cost.md``).
    tokens: Mapping[str, Any] = attrs.field(factory=dict)
    #: ``(kind, text, trimmed)`` of each wording hint of the turn's messages.
    hints: tuple[tuple[str, str, bool], ...] = ()
    #: The turn's plugin faults, each in words (``where of plugin 'x' kind: detail``).
    faults: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return f"m-{self.index}"

    @property
    def conversation(self) -> str:
        if self.group_id is not None:
            return f"group {self.group_id}"
        return f"private {self.sender_id}"

    @classmethod
    def from_record(cls, position: int, record: Mapping[str, Any]) -> _Row:
        index = _int(record.get("index"))
        necessity = _mapping(record.get("necessity"))
        score = _int(necessity.get("score"))
        terms = tuple(
            (str(term.get("name")), points)
            for term in map(_mapping, _list(necessity.get("terms")))
            if (points := _int(term.get("points"))) is not None
        )
        chars = record.get("chars")
        return cls(
            index=position if index is None else index,
            time=_text(record.get("time")),
            message_id=_text(record.get("message_id")),
            group_id=_text(record.get("group_id")),
            sender_id=_text(record.get("sender_id")) or "",
            sender_name=_text(record.get("sender_name")) or "",
            text=_text(record.get("text")) or "",
            status=_text(record.get("status")) or "unknown",
            action=_text(record.get("action")),
            reason=_text(record.get("reason")) or "",
            source=_text(record.get("source")),
            delivery_style=_text(record.get("delivery_style")),
            necessity=None
            if score is None
            else _Necessity(
                score=score,
                threshold=_int(necessity.get("threshold")),
                terms=terms,
                bypassed=_text(necessity.get("bypassed")),
            ),
            bubbles=tuple(b for b in _list(record.get("bubbles")) if isinstance(b, str)),
            quoted_message_id=_text(record.get("quoted_message_id")),
            prefix_reuse=_float(record.get("prefix_reuse")),
            prefix_break=_text(record.get("prefix_break")),
            parts=_bar_parts(chars) if isinstance(chars, Mapping) else None,
            budget=_int(_mapping(chars).get("budget")) or 0,
            usage=_mapping(record.get("usage")),
            tokens=_mapping(record.get("tokens")),
            hints=_hints(_mapping(record.get("wording_hints"))),
            model_failure=_model_failure(_mapping(record.get("model_failure"))),
            faults=_faults(record.get("plugin_faults")),
        )


def _model_failure(found: Mapping[str, Any]) -> tuple[str, str, str] | None:
    cause, reason, fix = (_text(found.get(key)) for key in ("cause", "reason", "fix"))
    if cause is None or reason is None or fix is None:
        return None
    return cause, reason, fix


def _hints(found: Mapping[str, Any]) -> tuple[tuple[str, str, bool], ...]:
    """The wording hints of a record: ``(kind, text, trimmed)``, those sent first."""
    return tuple(
        (str(hint.get("kind")), str(hint.get("text", "")), trimmed)
        for key, trimmed in (("sent", False), ("trimmed", True))
        for hint in map(_mapping, _list(found.get(key)))
        if hint.get("kind")
    )


def _bar_parts(chars: Mapping[str, Any]) -> tuple[BarPart, ...]:
    """The parts of a request in the order it holds them: system sections, then messages."""
    system = [
        BarPart(key=f"system:{section}", label=f"{section} (system)", chars=count)
        for section, value in _mapping(chars.get("system")).items()
        if (count := _int(value)) is not None
    ]
    kinds = [
        BarPart(key=kind, label=f"{kind} (messages)", chars=count)
        for kind in MESSAGE_KINDS
        if (count := _int(chars.get(kind))) is not None
    ]
    return (*system, *kinds)


def _split(
    records: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], Mapping[str, Any] | None]:
    messages: list[Mapping[str, Any]] = []
    summary: Mapping[str, Any] | None = None
    for number, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ReportInputError(
                f"record {number} is a {type(record).__name__}, not a JSON object"
            )
        kind = record.get("type")
        if kind == "message":
            messages.append(record)
        elif kind == "summary":
            summary = record
        else:
            raise ReportInputError(
                f"record {number} has type {kind!r}; a replay record is 'message' or 'summary'"
            )
    return messages, summary


# -- the timeline ---------------------------------------------------------------------------


def _time_cell(row: _Row, previous_date: str | None) -> tuple[str, str | None]:
    if row.time is None:
        return "<td class='time'>—</td>", previous_date
    try:
        moment = dt.datetime.fromisoformat(row.time)
    except ValueError:
        return f"<td class='time'>{escape(row.time)}</td>", previous_date
    date = moment.date().isoformat()
    dated = f"<div class='date'>{date}</div>" if date != previous_date else ""
    return (
        f"<td class='time' title='{escape(row.time)}'>{dated}{moment:%H:%M:%S}</td>",
        date,
    )


def _necessity_html(necessity: _Necessity | None) -> str:
    if necessity is None:
        return "<div class='muted'>necessity not scored</div>"
    threshold = "?" if necessity.threshold is None else str(necessity.threshold)
    passed = necessity.threshold is not None and necessity.score >= necessity.threshold
    terms = "".join(
        f"<li><span class='term'>{escape(name)}</span>"
        f"<span class='points {'plus' if points >= 0 else 'minus'}'>{points:+d}</span></li>"
        for name, points in necessity.terms
    )
    body = f"<ul class='terms'>{terms}</ul>" if terms else "<div class='muted'>no terms</div>"
    # Below the threshold yet answered: say that the score was not applied, and why
    # (docs/routing.md, reply necessity).
    bypass = (
        f"<div class='bypass'>below the threshold, not applied: "
        f"{escape(_BYPASSES.get(necessity.bypassed, necessity.bypassed))}</div>"
        if necessity.bypassed is not None and not passed
        else ""
    )
    return (
        f"<details class='necessity'><summary>necessity "
        f"<b class='{'over' if passed else 'under'}'>{necessity.score}</b> / {threshold}"
        f"</summary>{body}</details>{bypass}"
    )


#: What each bypass of the necessity score means, for the report.
_BYPASSES = {
    "addressed": "the message addresses the bot (@, its name, a reply to it), which bypasses "
    "the score",
    "follow_up": "a follow-up of the bot's own reply bypasses the score",
    "required_tool_intent": "a required tool intent bypasses the score",
}


def _decision_cell(row: _Row) -> str:
    action = escape(row.action) if row.action is not None else "—"
    source = f" · {escape(row.source)}" if row.source else ""
    return (
        f"<td class='decision'><div class='action action-{action}'>{action}</div>"
        f"<div class='reason'>{escape(row.reason)}{source}</div>"
        f"{_necessity_html(row.necessity)}</td>"
    )


def _faults(value: object) -> tuple[str, ...]:
    """Each plugin fault of a record in words; anything not a fault's mapping is left out."""
    found = []
    for fault in map(_mapping, _list(value)):
        plugin, where, kind = (_text(fault.get(key)) for key in ("plugin", "where", "kind"))
        if plugin is None or where is None or kind is None:
            continue
        detail = _text(fault.get("detail"))
        found.append(f"{where} of plugin {plugin!r} {kind}" + (f": {detail}" if detail else ""))
    return tuple(found)


def _faults_html(row: _Row) -> str:
    if not row.faults:
        return ""
    listed = "".join(f"<li>{escape(fault)}</li>" for fault in row.faults)
    return f"<ul class='plugin-faults' title='plugin faults'>{listed}</ul>"


def _sent_cell(row: _Row) -> str:
    """What went out, and under it the turn's plugin faults (every cell ends in ``</td>``)."""
    html = _sent_html(row)
    return html[: -len("</td>")] + _faults_html(row) + "</td>"


def _sent_html(row: _Row) -> str:
    if row.status == "recorded":
        return "<td class='sent'><span class='muted'>the bot's own message, recorded</span></td>"
    if not row.bubbles:
        # silent, failed, dropped or rejected: the reason says why nothing went out
        failure = ""
        if row.model_failure is not None:
            cause, reason, fix = row.model_failure
            failure = (
                f"<div class='failure'>the model gave no answer ({escape(cause)}): "
                f"{escape(reason)}<br>fix: {escape(fix)}</div>"
            )
        return (
            f"<td class='sent'><span class='silence'>{escape(row.status)}: "
            f"{escape(row.reason)}</span>{failure}</td>"
        )
    tags = []
    if row.status == "phrase":
        tags.append("<span class='tag'>canned phrase</span>")
    if row.quoted_message_id is not None:
        tags.append(f"<span class='tag'>quotes #{escape(row.quoted_message_id)}</span>")
    elif row.delivery_style == "mention":
        tags.append("<span class='tag'>@ mention</span>")
    bubbles = "".join(f"<li>{escape(bubble)}</li>" for bubble in row.bubbles)
    return f"<td class='sent'>{''.join(tags)}<ol class='bubbles'>{bubbles}</ol></td>"


def _prompt_cell(row: _Row, request: int | None) -> str:
    if row.parts is None:
        return "<td class='prompt'><span class='muted'>no request</span></td>"
    total = sum(part.chars for part in row.parts)
    facts = [f"request {request}", f"{total:,} / {row.budget:,} chars"]
    facts += _token_facts(row)
    if row.prefix_reuse is None:
        reuse = "first request of its conversation"
    else:
        where = f", breaks at {escape(row.prefix_break)}" if row.prefix_break else ""
        reuse = f"prefix {row.prefix_reuse:.1%} reused{where}"
    return (
        f"<td class='prompt'>{chars_bar_svg(row.parts, row.budget)}"
        f"<div class='facts'>{' · '.join(facts)}</div><div class='facts'>{reuse}</div>"
        f"{_hints_html(row.hints)}</td>"
    )


def _token_facts(row: _Row) -> list[str]:
    """``1,218 prompt tokens (estimated)``, the cached and output tokens, the money; from the
    usage alone for a record made before the spend figures."""
    spent = row.tokens
    if not spent:
        prompt_tokens = _int(row.usage.get("prompt_tokens"))
        cached = _int(row.usage.get("cached_tokens"))
        facts = [] if prompt_tokens is None else [f"{prompt_tokens:,} prompt tokens (reported)"]
        return facts + ([] if cached is None else [f"{cached:,} cached (reported)"])
    basis = _mapping(spent.get("basis"))
    facts = []
    for key, label in (("prompt", "prompt tokens"), ("cached", "cached"), ("output", "output")):
        value = _int(spent.get(f"{key}_tokens"))
        if value is not None:
            facts.append(f"{value:,} {label} ({escape(str(basis.get(key, 'estimated')))})")
    cost, currency = _float(spent.get("cost")), _text(spent.get("currency"))
    if cost is not None and currency is not None:
        facts.append(escape(format_money(cost, currency)))
    return facts


def _hints_html(hints: Sequence[tuple[str, str, bool]]) -> str:
    """The turn's wording hints: their kinds (a trimmed one struck through), each text on
    demand."""
    if not hints:
        return ""
    kinds = ", ".join(
        f"<s title='trimmed by the budget'>{escape(kind)}</s>" if trimmed else escape(kind)
        for kind, _text, trimmed in hints
    )
    items = "".join(
        f"<li><span class='term'>{escape(kind)}{' (trimmed)' if trimmed else ''}</span> "
        f"{escape(text)}</li>"
        for kind, text, trimmed in hints
    )
    return (
        f"<details class='hints'><summary>wording hints: {kinds}</summary>"
        f"<ul class='terms'>{items}</ul></details>"
    )


def _timeline_html(rows: Sequence[_Row], requests: Mapping[int, int]) -> str:
    if not rows:
        return "<p class='empty'>No incoming messages in this replay.</p>"
    body = []
    previous_date: str | None = None
    for position, row in enumerate(rows):
        time_cell, previous_date = _time_cell(row, previous_date)
        group = escape(row.group_id) if row.group_id is not None else "private"
        body.append(
            f"<tr class='message status-{escape(row.status)}' id='{row.anchor}' "
            f"data-index='{row.index}' data-status='{escape(row.status)}'>"
            f"<td class='index'>{row.index}</td>{time_cell}<td class='group'>{group}</td>"
            f"<td class='sender'>{escape(row.sender_name)}"
            f"<div class='muted'>{escape(row.sender_id)}</div></td>"
            f"<td class='text'>{escape(row.text)}</td>{_decision_cell(row)}{_sent_cell(row)}"
            f"{_prompt_cell(row, requests.get(position))}</tr>"
        )
    return (
        "<table class='timeline'><thead><tr><th>#</th><th>time</th><th>group</th>"
        "<th>sender</th><th>message</th><th>decision</th><th>sent</th><th>prompt</th></tr>"
        f"</thead><tbody>{''.join(body)}</tbody></table>"
    )


def _filters_html(rows: Sequence[_Row]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    buttons = [
        f"<button type='button' data-filter='all' aria-pressed='true'>all {len(rows)}</button>"
    ]
    buttons.extend(
        f"<button type='button' data-filter='{escape(status)}' aria-pressed='false'>"
        f"{escape(status)} {count}</button>"
        for status, count in counts.items()
    )
    return f"<div class='filters'>{''.join(buttons)}</div>"


def _legend_html(rows: Sequence[_Row]) -> str:
    seen = {part.key for row in rows for part in row.parts or () if part.chars > 0}
    if not seen:
        return ""
    sections = dict.fromkeys(
        part.key for row in rows for part in row.parts or () if part.key.startswith("system:")
    )
    keys = [key for key in [*sections, *MESSAGE_KINDS] if key in seen]
    swatches = "".join(
        f"<span class='swatch'><i style='background:{part_colour(key)}'></i>"
        f"{escape(key.removeprefix('system:'))}</span>"
        for key in keys
    )
    return (
        "<div class='legend'>Request parts, in request order (system sections, then messages); "
        f"the black line is the budget: {swatches}</div>"
    )


def _reuse_html(
    rows: Sequence[_Row], requests: Mapping[int, int], summary: Mapping[str, Any]
) -> str:
    points = [
        ReusePoint(
            request=requests[position],
            reuse=row.prefix_reuse,
            conversation=row.conversation,
            anchor=row.anchor,
            detail=f"message {row.index}"
            + (f" · breaks at {row.prefix_break}" if row.prefix_break else ""),
        )
        for position, row in enumerate(rows)
        if position in requests and row.prefix_reuse is not None
    ]
    if not points:
        return (
            "<p class='empty'>No request had an earlier request of its conversation to "
            "compare with.</p>"
        )
    median = _float(_mapping(summary.get("prefix_reuse")).get("median"))
    colours = conversation_colours([point.conversation for point in points])
    legend = "".join(
        f"<span class='swatch'><i style='background:{colour}'></i>{escape(conversation)}</span>"
        for conversation, colour in colours.items()
    )
    chart = prefix_reuse_svg(points, requests=len(requests), median=median)
    return f"<div class='legend'>{legend}</div>{chart}"


def render_report(records: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """The replay report of ``records`` as one self-contained HTML page.

    :param records: the replay's records as its JSONL lines decode: ``message`` objects in order,
        then the ``summary`` object (a missing summary leaves the figures out).
    :param title: the page's title (escaped).
    :returns: the page; it references no file and no network address.
    :raises ReportInputError: a record is not an object, or its ``type`` is neither
        ``message`` nor ``summary``.
    """
    messages, summary = _split(records)
    rows = [_Row.from_record(position, record) for position, record in enumerate(messages)]
    requested = [position for position, row in enumerate(rows) if row.parts is not None]
    requests = {position: number for number, position in enumerate(requested, 1)}
    return PAGE_TEMPLATE.substitute(
        title=escape(title),
        summary=summary_html(summary),
        reuse=_reuse_html(rows, requests, summary or {}),
        learned=learning_html(summary),
        legend=_legend_html(rows),
        filters=_filters_html(rows),
        timeline=_timeline_html(rows, requests),
    )
