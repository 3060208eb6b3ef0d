"""The inline SVG charts of the replay report (``docs/replay.md``): a stacked bar of a request's
characters per part against the budget, and the prefix reuse of every request across the replay.

The charts are drawn in Python so the page needs no script library and no network. Every label
that comes from the replay (section ids, reasons, group ids) is escaped, and every mark carries a
``<title>`` so a browser shows what it stands for on hover.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from html import escape

import attrs

__all__ = [
    "BAR_WIDTH",
    "MESSAGE_KINDS",
    "BarPart",
    "ReusePoint",
    "chars_bar_svg",
    "conversation_colours",
    "part_colour",
    "prefix_reuse_svg",
]

#: Width in pixels of the longer of a request's bar and its budget.
BAR_WIDTH = 300
_BAR_HEIGHT = 14

#: The message kinds a request's characters are counted under, in the order a request holds
#: them: the ambient excerpt, the summary row, the history, the wording hints, the current
#: message, its sidecar.
MESSAGE_KINDS = ("ambient", "summary", "history", "wording_hints", "current", "sidecar")

# The built-in sections take the colour family of their volatility (static blue, profile
# purple, retrieval green, turn amber), so the cacheable head of a bar reads as one block.
_SECTION_COLOURS = {
    "injection_guard": "#1f4e79",
    "persona": "#2e75b6",
    "identity": "#5b9bd5",
    "group_expression": "#7030a0",
    "behavior_reference": "#a16ad1",
    "memory": "#1b5e20",
    "knowledge": "#2e7d32",
    "relationship": "#43a047",
    "person_facts": "#66bb6a",
    "mid_term": "#9ccc65",
    "group_timeline": "#e65100",
    "reply_shape": "#f57c00",
    "turn_policy": "#ffa000",
    "current_time": "#ffc107",
    "tool_context": "#ffd54f",
}
# Sections a plugin adds get a neutral colour picked by a stable hash of their id.
_PLUGIN_SECTION_COLOURS = ("#8d6e63", "#a1887f", "#78909c", "#90a4ae", "#bcaaa4", "#6d8f8a")
_KIND_COLOURS = {
    "ambient": "#00838f",
    "summary": "#6a1b9a",
    "history": "#c62828",
    "wording_hints": "#795548",
    "current": "#ad1457",
    "sidecar": "#f06292",
}
_CONVERSATION_COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")


def part_colour(key: str) -> str:
    """The fill colour of a bar part: ``system:<section id>`` or a message kind."""
    if key in _KIND_COLOURS:
        return _KIND_COLOURS[key]
    section = key.removeprefix("system:")
    if section in _SECTION_COLOURS:
        return _SECTION_COLOURS[section]
    return _PLUGIN_SECTION_COLOURS[zlib.crc32(section.encode()) % len(_PLUGIN_SECTION_COLOURS)]


@attrs.frozen(kw_only=True)
class BarPart:
    """One part of a request's characters.

    :param key: ``system:<section id>`` for a system-prompt section, else a message kind.
    :param label: what the hover title calls it.
    :param chars: its characters.
    """

    key: str
    label: str
    chars: int


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def chars_bar_svg(parts: Sequence[BarPart], budget: int) -> str:
    """A stacked horizontal bar of ``parts`` with a vertical line at ``budget``.

    One pixel scale serves the bar and the line, so a request over its budget runs past the line.
    Parts of zero characters are left out; a negative budget reads as none (SVG refuses a
    negative width).
    """
    budget = max(budget, 0)
    shown = [part for part in parts if part.chars > 0]
    total = sum(part.chars for part in shown)
    scale = BAR_WIDTH / max(budget, total, 1)
    width = BAR_WIDTH + 4
    # The track shows the budget left unused.
    marks = [
        f'<rect class="track" x="0" y="3" width="{_number(budget * scale)}" '
        f'height="{_BAR_HEIGHT}" fill="#eeeeee"/>'
    ]
    x = 0.0
    for part in shown:
        span = part.chars * scale
        marks.append(
            f'<rect class="part" data-part="{escape(part.key)}" data-chars="{part.chars}" '
            f'x="{_number(x)}" y="3" width="{_number(span)}" height="{_BAR_HEIGHT}" '
            f'fill="{part_colour(part.key)}"><title>{escape(part.label)}: {part.chars:,} chars'
            "</title></rect>"
        )
        x += span
    line_x = _number(budget * scale)
    marks.append(
        f'<line class="budget" data-chars="{budget}" x1="{line_x}" x2="{line_x}" y1="0" '
        f'y2="{_BAR_HEIGHT + 6}" stroke="#212121" stroke-width="2">'
        f"<title>budget: {budget:,} chars</title></line>"
    )
    return (
        f'<svg class="chars-bar" width="{width}" height="{_BAR_HEIGHT + 6}" '
        f'viewBox="0 0 {width} {_BAR_HEIGHT + 6}" role="img" '
        f'aria-label="{total:,} of {budget:,} chars">{"".join(marks)}</svg>'
    )


@attrs.frozen(kw_only=True)
class ReusePoint:
    """The prefix reuse of one request.

    :param request: the request's number in the replay, from 1.
    :param reuse: the share of its bytes that repeat the previous request of its conversation.
    :param conversation: the conversation's label (a group, or a private chat).
    :param anchor: the id of the timeline row the point links to.
    :param detail: the rest of the hover title (the message, where the prefix broke).
    """

    request: int
    reuse: float
    conversation: str
    anchor: str
    detail: str


_CHART_WIDTH = 1080
_CHART_HEIGHT = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 12, 30


def _tick_step(last: int) -> int:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if last / step <= 12:
            return step
    return last // 10


def prefix_reuse_svg(
    points: Sequence[ReusePoint], *, requests: int, median: float | None = None
) -> str:
    """A line chart of prefix reuse: x is the request number (1 to ``requests``), y 0 to 100%.

    One line per conversation, since reuse is measured against that conversation's previous
    request; every point links to its timeline row. ``median`` adds a dashed line.
    """
    plot_width = _CHART_WIDTH - _LEFT - _RIGHT
    plot_height = _CHART_HEIGHT - _TOP - _BOTTOM

    def x_of(request: int) -> float:
        if requests <= 1:
            return _LEFT + plot_width / 2
        return _LEFT + (request - 1) / (requests - 1) * plot_width

    def y_of(reuse: float) -> float:
        return _TOP + (1 - min(max(reuse, 0.0), 1.0)) * plot_height

    marks = []
    for percent in (0, 25, 50, 75, 100):
        y = _number(y_of(percent / 100))
        marks.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_width}" y1="{y}" y2="{y}" '
            f'stroke="#e0e0e0"/><text x="{_LEFT - 6}" y="{y}" text-anchor="end" '
            f'dominant-baseline="middle">{percent}%</text>'
        )
    step = _tick_step(max(requests, 1))
    for request in sorted({1, *range(step, requests + 1, step)}):
        marks.append(
            f'<text x="{_number(x_of(request))}" y="{_CHART_HEIGHT - 10}" '
            f'text-anchor="middle">{request}</text>'
        )
    if median is not None:
        y = _number(y_of(median))
        marks.append(
            f'<line class="median" x1="{_LEFT}" x2="{_LEFT + plot_width}" y1="{y}" y2="{y}" '
            f'stroke="#616161" stroke-dasharray="6 4"><title>median: {median:.1%}</title></line>'
        )
    by_conversation: dict[str, list[ReusePoint]] = {}
    for point in points:
        by_conversation.setdefault(point.conversation, []).append(point)
    colours = conversation_colours(list(by_conversation))
    for conversation, series in by_conversation.items():
        colour = colours[conversation]
        coordinates = " ".join(
            f"{_number(x_of(p.request))},{_number(y_of(p.reuse))}" for p in series
        )
        marks.append(
            f'<polyline class="reuse-line" data-conversation="{escape(conversation)}" '
            f'points="{coordinates}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{escape(conversation)}</title></polyline>"
        )
        marks.extend(
            f'<a href="#{escape(point.anchor)}"><circle class="reuse-point" '
            f'data-request="{point.request}" data-reuse="{point.reuse}" '
            f'cx="{_number(x_of(point.request))}" cy="{_number(y_of(point.reuse))}" r="4" '
            f'fill="{colour}"><title>request {point.request} · {escape(conversation)} · '
            f"{point.reuse:.1%} reused · {escape(point.detail)}</title></circle></a>"
            for point in series
        )
    return (
        f'<svg class="reuse-chart" width="{_CHART_WIDTH}" height="{_CHART_HEIGHT}" '
        f'viewBox="0 0 {_CHART_WIDTH} {_CHART_HEIGHT}" role="img" '
        f'aria-label="prefix reuse per request">{"".join(marks)}</svg>'
    )


def conversation_colours(conversations: Sequence[str]) -> Mapping[str, str]:
    """The line colour of each conversation, in the order :func:`prefix_reuse_svg` assigns."""
    return {
        conversation: _CONVERSATION_COLOURS[number % len(_CONVERSATION_COLOURS)]
        for number, conversation in enumerate(dict.fromkeys(conversations))
    }
