"""The frame of the replay report (``docs/replay.md``): the page template with its inline style
and script, and the header drawn from the replay's summary record.

The template is a :class:`string.Template` so the style sheet and script keep their braces;
:func:`promptweave.replay.report.render_report` fills it with escaped HTML only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from string import Template
from typing import Any

from promptweave.providers.cost import format_money

__all__ = ["PAGE_TEMPLATE", "summary_html"]

_OFFLINE_NOTICE = (
    "The answers in this replay come from the offline stand-in: a deterministic program that "
    "builds its bubbles from the turn's own content. It is not an LLM, and its answers say "
    "nothing about a real model's; the decisions, the requests and their costs are real. "
    "Replay with <code>--model openai</code> or <code>--model anthropic</code> for real answers."
)


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _count(value: object) -> str:
    number = _number(value)
    return "—" if number is None else f"{number:,.0f}"


def _percentiles(value: object, unit: str = "") -> str:
    if not isinstance(value, Mapping):
        return "—"
    p50, p95 = _number(value.get("p50")), _number(value.get("p95"))
    if p50 is None or p95 is None:
        return "—"
    return f"{p50:,.0f}{unit} / {p95:,.0f}{unit}"


def _figure(label: str, value: str, note: str = "") -> str:
    note_html = f"<div class='note'>{note}</div>" if note else ""
    return (
        f"<div class='figure'><div class='label'>{label}</div>"
        f"<div class='value'>{value}</div>{note_html}</div>"
    )


def _rejected_lines(summary: Mapping[str, Any]) -> str:
    """The log's lines the live loop would reject, each with why (``docs/replay.md``)."""
    lines = summary.get("rejected_lines")
    return "<br>".join(
        f"{escape(str(item.get('line')))}: {escape(str(item.get('reason')))}"
        for item in (lines if isinstance(lines, list) else ())
        if isinstance(item, Mapping)
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def spend_figures(spend: Mapping[str, Any]) -> list[str]:
    """The money and tokens of a reply and of 1,000 messages, each token figure with its basis
    (``docs/cost.md``, "Reading the figures")."""
    if not _number(spend.get("requests")):
        return []
    currency = spend.get("currency")
    basis = _mapping(spend.get("basis"))
    how = ", ".join(
        f"{key} {escape(str(basis.get(key)))}" for key in ("prompt", "cached", "output")
    )
    price = (
        f"at the price of {escape(str(spend.get('model')))}"
        if isinstance(currency, str)
        else f"no price for {escape(str(spend.get('model')))}"
    )
    figures = []
    for label, key in (("per reply", "per_reply"), ("per 1,000 messages", "per_1000_messages")):
        part = _mapping(spend.get(key))
        cost = _number(part.get("cost"))
        money = (
            "—" if cost is None or not isinstance(currency, str) else format_money(cost, currency)
        )
        note = (
            f"prompt {_count(part.get('prompt_tokens'))} · cached {_count(part.get('cached_tokens'))}"
            f" · output {_count(part.get('output_tokens'))} tokens; {how}; {price}"
        )
        figures.append(_figure(f"spend {label}", escape(money), note))
    return figures


def _by_reason(value: object) -> tuple[str, str]:
    counts = {
        str(reason): count
        for reason, raw in (value.items() if isinstance(value, Mapping) else ())
        if (count := _number(raw)) is not None
    }
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    listed = "<br>".join(f"{escape(reason)}: {count:,.0f}" for reason, count in ordered)
    return f"{sum(counts.values()):,.0f}", listed


def _stages_html(value: object) -> str:
    stages = {
        str(stage): (_number(figures.get("p50")), _number(figures.get("p95")))
        for stage, figures in (value.items() if isinstance(value, Mapping) else ())
        if isinstance(figures, Mapping)
    }
    if not stages:
        return ""
    # The whole turn reads best after the stages it is made of.
    if "total" in stages:
        stages["total"] = stages.pop("total")
    head = "".join(f"<th>{escape(stage)}</th>" for stage in stages)
    rows = "".join(
        f"<tr><th>{name}</th>"
        + "".join(
            f"<td>{'—' if figures[column] is None else f'{figures[column]:,.1f}'}</td>"
            for figures in stages.values()
        )
        + "</tr>"
        for column, name in enumerate(("p50", "p95"))
    )
    return (
        "<table class='stages'><caption>time per stage (ms)</caption>"
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )


def _model_failures_html(value: object) -> str:
    """Why the model gave no answer, per cause: how often, the first time's reason, the fix."""
    if not isinstance(value, Mapping):
        return ""
    items = [
        f"<li>the model gave no answer <b>{escape(str(cause))}</b> "
        f"{_count(seen.get('count'))} times (first at #{_count(seen.get('first'))}): "
        f"{escape(str(seen.get('reason')))}<br>fix: {escape(str(seen.get('fix')))}</li>"
        for cause, seen in value.items()
        if isinstance(seen, Mapping)
    ]
    if not items:
        return ""
    return f"<div class='notice failures' role='note'><ul>{''.join(items)}</ul></div>"


def summary_html(summary: Mapping[str, Any] | None) -> str:
    """The model label and the replay's figures, from its summary record (escaped)."""
    if summary is None:
        return (
            "<div class='model'>model: unknown</div>"
            "<p class='empty'>This replay has no summary record.</p>"
        )
    model = summary.get("model")
    label = summary.get("model_label")
    label_text = label if isinstance(label, str) and label else str(model or "unknown")
    model_html = f"<div class='model'>model: <b>{escape(label_text)}</b></div>"
    if model == "offline":
        model_html += f"<div class='notice' role='note'>{_OFFLINE_NOTICE}</div>"
    zone = summary.get("timezone")
    if isinstance(zone, str) and zone:
        model_html += f"<div class='model'>times in the bot's time zone, {escape(zone)}</div>"
    model_html += _model_failures_html(summary.get("model_failures"))
    silences, silence_reasons = _by_reason(summary.get("silences"))
    failed, failed_reasons = _by_reason(summary.get("failed"))
    recorded = _number(summary.get("recorded"))
    reuse = summary.get("prefix_reuse")
    reuse_value, reuse_note = "—", "no request to compare"
    if isinstance(reuse, Mapping):
        median, low = _number(reuse.get("median")), _number(reuse.get("min"))
        if median is not None and low is not None:
            reuse_value = f"{median:.1%} / {low:.1%}"
            reuse_note = f"median / min over {_count(reuse.get('requests'))} requests"
    cached = _number(summary.get("cached_tokens"))
    figures = [
        _figure(
            "messages",
            _count(summary.get("messages")),
            f"{recorded:,.0f} the bot's own" if recorded else "",
        ),
        _figure("replies", _count(summary.get("replies"))),
        _figure("follow-ups", _count(summary.get("follow_ups"))),
        _figure("quotes", _count(summary.get("quotes"))),
        _figure("tools", _count(summary.get("tools"))),
        _figure("canned phrases", _count(summary.get("phrases"))),
        _figure("silences", silences, silence_reasons),
        _figure("failed", failed, failed_reasons),
        _figure("rejected", _count(summary.get("rejected")), _rejected_lines(summary)),
        _figure("chars per reply", _percentiles(summary.get("chars_per_reply")), "p50 / p95"),
        _figure(
            "tokens per reply",
            _percentiles(summary.get("tokens_per_reply")),
            f"p50 / p95, {escape(str(summary.get('tokens_basis') or 'estimated'))}",
        ),
        *spend_figures(_mapping(summary.get("spend"))),
        _figure(
            "cached tokens",
            "—" if cached is None else f"{cached:,.0f}",
            "not reported by this model" if cached is None else "provider-reported, summed",
        ),
        _figure("prefix reuse", reuse_value, reuse_note),
        *_cache_figures(summary),
    ]
    return (
        f"{model_html}<div class='figures'>{''.join(figures)}</div>"
        f"{_stages_html(summary.get('stage_ms'))}"
    )


_STYLE = """
:root { color-scheme: light; --ink: #212121; --muted: #757575; --line: #e0e0e0; }
* { box-sizing: border-box; }
body {
  margin: 0; padding: 24px 28px; color: var(--ink); background: #fafafa;
  font: 14px/1.5 "Noto Sans", "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC",
    "Microsoft YaHei", system-ui, sans-serif;
}
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.model { color: var(--muted); }
.model b { color: var(--ink); }
.notice {
  margin: 8px 0 0; padding: 8px 12px; border-left: 4px solid #f57c00; background: #fff3e0;
  max-width: 980px;
}
.figures { display: grid; grid-template-columns: repeat(6, minmax(120px, 1fr)); gap: 10px;
  margin: 16px 0; }
.figure { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.figure .label { color: var(--muted); font-size: 12px; }
.figure .value { font-size: 20px; font-weight: 600; }
.figure .note { color: var(--muted); font-size: 12px; }
table.stages { border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
table.stages caption { text-align: left; color: var(--muted); padding: 4px 0; }
table.stages td, table.stages th { padding: 2px 10px; text-align: right; }
table.stages thead th { font-weight: 400; color: var(--muted); }
table.stages td { font-variant-numeric: tabular-nums; }
.legend { margin: 4px 0 8px; color: var(--muted); }
.swatch { display: inline-block; margin: 0 10px 2px 0; color: var(--ink); }
.swatch i { display: inline-block; width: 11px; height: 11px; margin-right: 4px;
  vertical-align: -1px; border-radius: 2px; }
svg text { font-size: 11px; fill: var(--muted); }
svg .reuse-point:hover { stroke: #000; stroke-width: 2; }
.filters button { font: inherit; margin: 0 6px 8px 0; padding: 2px 10px; border: 1px solid #bdbdbd;
  border-radius: 12px; background: #fff; cursor: pointer; }
.filters button[aria-pressed="true"] { background: #263238; color: #fff; border-color: #263238; }
table.timeline { border-collapse: collapse; width: 100%; background: #fff; }
table.timeline th { position: sticky; top: 0; background: #eceff1; text-align: left;
  padding: 6px 8px; font-weight: 600; }
table.timeline td { border-top: 1px solid var(--line); padding: 6px 8px; vertical-align: top; }
tr.message td:first-child { border-left: 4px solid transparent; }
tr.status-replied td:first-child { border-left-color: #2e7d32; }
tr.status-phrase td:first-child { border-left-color: #00838f; }
tr.status-failed td:first-child, tr.status-dropped td:first-child,
tr.status-rejected td:first-child { border-left-color: #c62828; }
tr.status-recorded { background: #f5f5f5; }
td.index, td.time, td.group { color: var(--muted); white-space: nowrap; }
td.time .date { font-size: 11px; }
td.text { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 260px; }
td.sender { white-space: nowrap; }
td.decision { min-width: 170px; }
.action { font-weight: 600; }
.action-reply, .action-follow_up, .action-tool { color: #2e7d32; }
.action-pass { color: var(--muted); }
.reason { font-family: ui-monospace, "Noto Sans Mono", monospace; font-size: 12px; }
details.necessity summary { cursor: pointer; color: var(--muted); }
details.necessity b.over { color: #2e7d32; }
details.necessity b.under { color: #c62828; }
ul.terms { margin: 2px 0; padding-left: 16px; font-size: 12px; }
ul.terms .term { display: inline-block; min-width: 120px; }
ul.terms .plus { color: #2e7d32; }
ul.terms .minus { color: #c62828; }
td.sent { max-width: 260px; }
ol.bubbles { margin: 0; padding-left: 18px; }
ol.bubbles li { white-space: pre-wrap; overflow-wrap: anywhere; }
.tag { display: inline-block; font-size: 11px; padding: 0 6px; margin: 0 4px 2px 0;
  border-radius: 8px; background: #e3f2fd; color: #0d47a1; }
.silence { color: var(--muted); font-style: italic; }
.bypass { color: var(--muted); font-size: 12px; }
.failure { color: #c62828; font-size: 12px; }
.muted { color: var(--muted); font-size: 12px; }
.facts { color: var(--muted); font-size: 12px; }
.empty { color: var(--muted); font-style: italic; }
h3 { font-size: 15px; margin: 16px 0 4px; }
table.learned { border-collapse: collapse; background: #fff; border: 1px solid var(--line);
  margin: 6px 0; }
table.learned caption { text-align: left; color: var(--muted); padding: 4px 0; }
table.learned th { background: #eceff1; text-align: left; padding: 4px 8px; font-weight: 600; }
table.learned td { border-top: 1px solid var(--line); padding: 4px 8px; vertical-align: top; }
table.learned td.fields { max-width: 520px; overflow-wrap: anywhere; }
table.learned td.fields .term { color: var(--muted); font-size: 12px; margin-right: 4px; }
table.learned td.ids { max-width: 220px; font-size: 12px; color: var(--muted);
  overflow-wrap: anywhere; }
table.failures td.reason { color: #c62828; }
ul.plugin-faults { color: #c62828; font-size: 12px; margin: 4px 0 0; padding-left: 16px; }
ul.first-in-prompt { margin: 4px 0; padding-left: 18px; }
"""

# The status filter is the page's only script; it reads and toggles the rows it finds.
_SCRIPT = """
(function () {
  var buttons = document.querySelectorAll(".filters button");
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      var wanted = button.getAttribute("data-filter");
      document.querySelectorAll("tr.message").forEach(function (row) {
        row.hidden = wanted !== "all" && row.getAttribute("data-status") !== wanted;
      });
      buttons.forEach(function (other) {
        other.setAttribute("aria-pressed", String(other === button));
      });
    });
  });
})();
"""

#: The page: ``$title``, ``$summary``, ``$reuse``, ``$learned``, ``$legend``, ``$filters``,
#: ``$timeline``.
PAGE_TEMPLATE = Template(
    "<!DOCTYPE html>\n<html lang='zh-CN'><head><meta charset='utf-8'>"
    "<meta name='viewport' content='width=device-width, initial-scale=1'>"
    # An empty icon keeps the browser from asking the file system for /favicon.ico.
    "<link rel='icon' href='data:,'>"
    "<title>$title</title><style>" + _STYLE + "</style></head><body>"
    "<header><h1>$title</h1>$summary</header>"
    "<section><h2>Prefix reuse per request</h2>"
    "<p class='muted'>Share of each request's bytes that repeat the start of the previous request "
    "of the same conversation: what a provider's prompt cache can serve.</p>$reuse</section>"
    "<section><h2>What was learned</h2>$learned</section>"
    "<section><h2>Chat timeline</h2>$legend$filters$timeline</section>"
    "<script>" + _SCRIPT + "</script></body></html>\n"
)


def _cache_figures(summary: Mapping[str, Any]) -> list[str]:
    """What of each request the provider had to process again, per byte that was new in it, and
    what a llama.cpp server said it reused (``docs/replay.md``, "Prefix reuse";
    ``docs/cost.md``)."""
    figures = []
    per_new = _mapping(summary.get("uncached_per_new_byte"))
    median, summed = _number(per_new.get("median")), _number(per_new.get("summed"))
    if median is not None and summed is not None:
        figures.append(
            _figure(
                "uncached per new byte",
                f"{median:.2f} / {summed:.2f}",
                "median / summed: the bytes not a prefix of the conversation's previous request, "
                f"per byte new in the request, over {_count(per_new.get('requests'))} requests",
            )
        )
    server = _mapping(summary.get("server_reuse"))
    reused, evaluated = (
        _number(server.get("reused_tokens")),
        _number(server.get("evaluated_tokens")),
    )
    if reused is not None and evaluated is not None:
        share = _number(server.get("share")) or 0.0
        figures.append(
            _figure(
                "server reuse",
                f"{share:.1%}",
                f"{reused:,.0f} prompt tokens reused, {evaluated:,.0f} evaluated, "
                f"over {_count(server.get('calls'))} calls, as the server's log says",
            )
        )
    return figures
