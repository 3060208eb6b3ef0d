"""What each dashboard page shows, shaped for its template from the store's rows
(``docs/dashboard.md``). Everything here is data: the templates escape every string, since every
text of a chat (a nickname, a message, a learned reply) is user-controlled.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from promptweave.config import BotConfig, Config
from promptweave.serve.groups_info import money_for, no_price_words, priced_model, settings_in_force
from promptweave.store.dashboard_reads import DailyRow, DashboardReads, TimelineRow
from promptweave.store.routing_state import RoutingState

__all__ = [
    "SPEND_KIND",
    "bypass_in_words",
    "group_rows",
    "learned_page",
    "spend_page",
    "timeline_entry",
    "turn_page",
    "zone_of",
]

#: The learned items that keep what learning spent (``promptweave.learning.budget``): shown on
#: the spend page, not among what was learned.
SPEND_KIND = "spend"

#: What each bypass of the reply-necessity score means (``docs/routing.md``).
_BYPASSES = {
    "addressed": "addressed to the bot (an @, its name or a reply to it): "
    "the reply-necessity score is not applied",
    "follow_up": "a follow-up to the bot's own recent reply: the reply-necessity score is not applied",
    "required_tool_intent": "asks for a tool the bot must run: "
    "the reply-necessity score is not applied",
}

_TRIGGERS = {
    "mention": "@-mentions the bot (or replies to it)",
    "alias": "names the bot",
    "followup": "follows up the bot's reply",
    "ambient": "not addressed to the bot",
}


def zone_of(config: Config, bot_id: str) -> dt.tzinfo:
    """The bot's time zone (``[bots."ID"] timezone``), the one its days are counted in."""
    name = (config.bots.get(bot_id) or BotConfig()).timezone
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC


def _when(timestamp: float | None, zone: dt.tzinfo) -> str:
    if timestamp is None:
        return ""
    return dt.datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M:%S")


def _rate(cached: int, prompt: int) -> str:
    return f"{100 * cached / prompt:.0f}%" if prompt else "—"


def bypass_in_words(necessity: Mapping[str, Any] | None) -> str:
    """The necessity score said in words: its bypass, or the score against its threshold."""
    if not necessity:
        return "no reply-necessity score (decided before it)"
    bypassed = necessity.get("bypassed")
    if bypassed:
        return _BYPASSES.get(str(bypassed), f"score not applied: {bypassed}")
    score, threshold = necessity.get("score"), necessity.get("threshold")
    verdict = (
        "goes on"
        if isinstance(score, int) and isinstance(threshold, int) and score >= threshold
        else "stays silent"
    )
    return f"score {score} against threshold {threshold}: {verdict}"


# -- groups -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Totals:
    """Turns and tokens summed over daily rows."""

    turns: int = 0
    replies: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    @property
    def hit_rate(self) -> str:
        return _rate(self.cached_tokens, self.prompt_tokens)

    @classmethod
    def of(cls, rows: Iterable[DailyRow]) -> Totals:
        found = list(rows)
        return cls(
            turns=sum(row.turns for row in found),
            replies=sum(row.turns for row in found if row.status in ("replied", "phrase")),
            requests=sum(row.requests for row in found),
            prompt_tokens=sum(row.prompt_tokens for row in found),
            cached_tokens=sum(row.cached_tokens for row in found),
            output_tokens=sum(row.output_tokens for row in found),
        )


def group_rows(
    reads: DashboardReads,
    routing: RoutingState | None,
    config: Config,
    now: dt.datetime,
    scopes: Sequence[tuple[str, str]],
) -> list[dict[str, Any]]:
    """One row per (bot, group) of ``scopes``: today's messages, decisions, replies and spend in
    the bot's time zone, the money at :func:`promptweave.serve.groups_info.priced_model`, the
    settings in force with the run-time switch of ``routing``."""
    rows = []
    model = priced_model(config)
    for bot_id, group_id in scopes:
        today = now.astimezone(zone_of(config, bot_id)).date().isoformat()
        daily = reads.day(bot_id, group_id, today)
        totals = Totals.of(daily)
        decisions: dict[tuple[str, str], int] = defaultdict(int)
        for row in daily:
            decisions[(row.action or row.status, row.reason or "—")] += row.turns
        money = money_for(
            config,
            prompt_tokens=totals.prompt_tokens,
            cached_tokens=totals.cached_tokens,
            output_tokens=totals.output_tokens,
        )
        rows.append(
            {
                "bot_id": bot_id,
                "group_id": group_id,
                "today": today,
                "totals": totals,
                "decisions": sorted(decisions.items(), key=lambda item: (-item[1], item[0])),
                "money": money or no_price_words(config),
                "priced": money is not None,
                "model": model,
                "settings": settings_in_force(config, routing, bot_id, group_id),
            }
        )
    return rows


# -- a group's timeline -----------------------------------------------------------------------


def timeline_entry(row: TimelineRow, zone: dt.tzinfo) -> dict[str, Any]:
    """One message of the timeline with its decision and what was sent."""
    record = row.record
    decision = record.get("decision") or {}
    necessity = record.get("necessity")
    terms = [term for term in (necessity or {}).get("terms", []) if isinstance(term, Mapping)]
    sends = [send for send in record.get("sends", []) if isinstance(send, Mapping)]
    failed = [send for send in sends if not send.get("ok")]
    submit = record.get("submit") if isinstance(record.get("submit"), Mapping) else None
    return {
        "seq": row.seq,
        "key": f"{row.time!r}:{row.seq}",
        "when": _when(row.time, zone),
        "message_id": row.message_id,
        "sender_id": str(record.get("sender_id", "")),
        "sender_name": str(record.get("sender_name", "")),
        "text": str(record.get("text", "")),
        "images": record.get("images") or 0,
        "trigger": _TRIGGERS.get(str(record.get("trigger")), ""),
        "status": row.status,
        "action": row.action or "—",
        "reason": row.reason or "—",
        "rule": decision.get("source") or "",
        "stage": record.get("stage") or "",
        "delivery_style": decision.get("delivery_style") or "",
        "necessity": necessity,
        "necessity_words": bypass_in_words(necessity),
        "terms": terms,
        "bubbles": [str(bubble) for bubble in record.get("bubbles", [])],
        "phrase": record.get("phrase"),
        "failed_sends": failed,
        "submit": submit,
        "deadline": record.get("deadline"),
        "error": record.get("error"),
        "has_request": "request" in record,
        "usage": record.get("usage"),
        "notes": [str(note) for note in record.get("notes", [])],
    }


def _break_label(prefix: Mapping[str, Any] | None) -> str | None:
    if not prefix:
        return None
    label = prefix.get("first_difference")
    return str(label) if label else None


def turn_page(reads: DashboardReads, row: TimelineRow, zone: dt.tzinfo) -> dict[str, Any]:
    """One turn in full: the timeline entry, then its request: each section with its text, size,
    plugin and override, the messages, and where the cached prefix broke."""
    entry = timeline_entry(row, zone)
    record = row.record
    found = record.get("request")
    request: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    sections = [section for section in record.get("sections", []) if isinstance(section, Mapping)]
    texts = reads.texts([str(section["text"]) for section in sections if section.get("text")])
    prefix = request.get("prefix") if isinstance(request.get("prefix"), Mapping) else None
    broke_at = _break_label(prefix)
    shown_sections = []
    for section in sections:
        label = f"section {section.get('id')}"
        shown_sections.append(
            {
                **section,
                "text": texts.get(str(section.get("text", "")), ""),
                "cache_break": broke_at == label,
            }
        )
    messages = []
    for message in request.get("messages", []):
        if not isinstance(message, Mapping):
            continue
        label = f"message {message.get('index')} ({message.get('role')})"
        messages.append({**message, "cache_break": broke_at == label})
    marked = any(item["cache_break"] for item in (*shown_sections, *messages))
    return {
        **entry,
        "sections": shown_sections,
        "messages": messages,
        "api": request.get("api"),
        "model": request.get("model"),
        "request_bytes": request.get("bytes"),
        "prefix": prefix,
        "break_label": broke_at,
        "break_elsewhere": broke_at if broke_at and not marked else None,
        "chars": record.get("chars"),
        "durations": record.get("durations_ms") or {},
    }


# -- what was learned -------------------------------------------------------------------------


def _score(fields: Mapping[str, Any], count: int) -> str:
    for key in ("score", "weight", "affinity", "confidence"):
        value = fields.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{key} {value:g}, seen {count}×"
    return f"seen {count}×"


def learned_page(
    reads: DashboardReads,
    bot_id: str,
    group_id: str,
    zone: dt.tzinfo,
    *,
    kind: str | None,
    user_id: str | None,
    offset: int,
    limit: int,
) -> dict[str, Any]:
    """A page of the scope's learned items with the messages each came from."""
    kinds, members = reads.learned_counts(bot_id, group_id)
    kinds.pop(SPEND_KIND, None)
    items = reads.learned_items(
        bot_id,
        group_id,
        kind=kind,
        user_id=user_id,
        exclude_kinds=(SPEND_KIND,),
        offset=offset,
        limit=limit + 1,
    )
    more = len(items) > limit
    items = items[:limit]
    sources = reads.messages(
        bot_id,
        group_id,
        [str(i) for item in items for i in item["source_message_ids"] if isinstance(i, str)],
    )
    shown = []
    for item in items:
        fields = item["fields"] if isinstance(item["fields"], Mapping) else {}
        shown.append(
            {
                **item,
                "fields": sorted((str(key), _field_text(value)) for key, value in fields.items()),
                "score": _score(fields, item["count"]),
                "learned": _when(item["learned_at"], zone),
                "updated": _when(item["updated_at"], zone),
                "sources": [
                    {
                        "id": message_id,
                        **sources.get(str(message_id), {}),
                        "when": _when(sources.get(str(message_id), {}).get("time"), zone),
                    }
                    for message_id in item["source_message_ids"]
                ],
            }
        )
    return {
        "kinds": kinds,
        "members": members,
        "items": shown,
        "more": more,
        "kind": kind,
        "user_id": user_id,
        "offset": offset,
        "limit": limit,
    }


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(_field_text(item) for item in value)
    return str(value)


# -- spend ------------------------------------------------------------------------------------


def _learning_by_day(
    reads: DashboardReads, scopes: Sequence[tuple[str, str]], config: Config, since: str
) -> dict[tuple[str, str, str], dict[str, int]]:
    found: dict[tuple[str, str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for bot_id, group_id in scopes:
        zone = zone_of(config, bot_id)
        for item in reads.learned_items(bot_id, group_id, kind=SPEND_KIND, limit=1000):
            fields = item["fields"] if isinstance(item["fields"], Mapping) else {}
            hour = fields.get("hour")
            if not isinstance(hour, str):
                continue
            try:
                day = dt.datetime.fromisoformat(hour).astimezone(zone).date().isoformat()
            except ValueError:
                continue
            if day < since:
                continue
            bucket = found[(bot_id, group_id, day)]
            for key in ("calls", "prompt_tokens", "cached_tokens", "output_tokens"):
                value = fields.get(key, 0)
                if isinstance(value, int) and not isinstance(value, bool):
                    bucket[key] += value
    return found


#: The chart's drawing area, in SVG user units.
CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM = 960, 220, 64, 28


def _chart(days: Sequence[str], series: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """Stacked bars per day (``series``: name → one value per day), in SVG coordinates."""
    totals = [sum(values[index] for values in series.values()) for index in range(len(days))]
    top = max(totals, default=0) or 1
    slot = (CHART_WIDTH - CHART_LEFT) / max(len(days), 1)
    bar = max(min(slot * 0.7, 40), 2)
    plot_height = CHART_HEIGHT - CHART_BOTTOM - 10
    bars = []
    for index, day in enumerate(days):
        x = CHART_LEFT + index * slot + (slot - bar) / 2
        base = float(CHART_HEIGHT - CHART_BOTTOM)
        for name, values in series.items():
            value = values[index]
            height = plot_height * value / top
            if value:
                bars.append(
                    {
                        "x": round(x, 1),
                        "y": round(base - height, 1),
                        "width": round(bar, 1),
                        "height": round(height, 1),
                        "series": name,
                        "title": f"{day} {name}: {value:,}",
                    }
                )
            base -= height
    labels = [
        {"x": round(CHART_LEFT + index * slot + slot / 2, 1), "text": day[5:]}
        for index, day in enumerate(days)
        if len(days) <= 16 or index % max(len(days) // 12, 1) == 0
    ]
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "baseline": CHART_HEIGHT - CHART_BOTTOM,
        "top_label": f"{top:,}",
        "bars": bars,
        "labels": labels,
        "series": list(series),
    }


def spend_page(
    reads: DashboardReads,
    config: Config,
    now: dt.datetime,
    *,
    days: int,
    scope: tuple[str, str] | None,
) -> dict[str, Any]:
    """The turns' tokens against learning's, the cache hit rate, and the charts of both over
    the days shown: for one group, a row per day; for every group, a row per group (its own
    page has its days)."""
    first = (now - dt.timedelta(days=days - 1)).astimezone(dt.UTC).date().isoformat()
    scopes = [scope] if scope is not None else reads.scopes()
    rows = reads.days(first, bot_id=scope[0], group_id=scope[1]) if scope else reads.days(first)
    turns: dict[tuple[str, str, str], list[DailyRow]] = defaultdict(list)
    for row in rows:
        if row.group_id:
            turns[(row.bot_id, row.group_id, row.day)].append(row)
    learning = _learning_by_day(reads, scopes, config, first)
    keys = sorted(set(turns) | set(learning), key=lambda key: (key[2], key[0], key[1]))
    days_table = [_spend_row(key, turns.get(key, ()), learning.get(key, {})) for key in keys]
    if scope is not None:
        table = days_table[::-1]
    else:
        merged_turns: dict[tuple[str, str, str], list[DailyRow]] = defaultdict(list)
        merged_learning: dict[tuple[str, str, str], dict[str, int]] = defaultdict(
            lambda: defaultdict(int)
        )
        for (bot_id, group_id, _day), found in turns.items():
            merged_turns[(bot_id, group_id, "")] += found
        for (bot_id, group_id, _day), learned in learning.items():
            for name, value in learned.items():
                merged_learning[(bot_id, group_id, "")][name] += value
        table = [
            _spend_row(key, merged_turns.get(key, ()), merged_learning.get(key, {}))
            for key in sorted(set(merged_turns) | set(merged_learning))
        ]
    all_days = sorted({shown["day"] for shown in days_table})
    by_day: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for shown in days_table:
        bucket = by_day[shown["day"]]
        turns_total: Totals = shown["turns"]
        bucket["turns cached"] += turns_total.cached_tokens
        bucket["turns uncached"] += turns_total.prompt_tokens - turns_total.cached_tokens
        bucket["turns output"] += turns_total.output_tokens
        learned_row = shown["learning"]
        bucket["learning"] += learned_row["prompt_tokens"] + learned_row["output_tokens"]
        bucket["prompt"] += turns_total.prompt_tokens
        bucket["cached"] += turns_total.cached_tokens
    names = ("turns cached", "turns uncached", "turns output", "learning")
    chart = _chart(all_days, {name: [by_day[day][name] for day in all_days] for name in names})
    rates = [
        {
            "day": day,
            "rate": (by_day[day]["cached"] / by_day[day]["prompt"])
            if by_day[day]["prompt"]
            else None,
        }
        for day in all_days
    ]
    return {
        "rows": table,
        "per_day": scope is not None,
        "chart": chart,
        "rates": _rate_chart(rates),
        "days": days,
        "first": first,
    }


def _spend_row(
    key: tuple[str, str, str], turns: Iterable[DailyRow], learned: Mapping[str, int]
) -> dict[str, Any]:
    return {
        "bot_id": key[0],
        "group_id": key[1],
        "day": key[2],
        "turns": Totals.of(turns),
        "learning": {
            "calls": learned.get("calls", 0),
            "prompt_tokens": learned.get("prompt_tokens", 0),
            "cached_tokens": learned.get("cached_tokens", 0),
            "output_tokens": learned.get("output_tokens", 0),
        },
    }


def _rate_chart(rates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The cache hit rate per day as a polyline (0 % at the bottom, 100 % at the top)."""
    slot = (CHART_WIDTH - CHART_LEFT) / max(len(rates), 1)
    plot_height = CHART_HEIGHT - CHART_BOTTOM - 10
    points = []
    for index, rate in enumerate(rates):
        if rate["rate"] is None:
            continue
        x = CHART_LEFT + index * slot + slot / 2
        y = CHART_HEIGHT - CHART_BOTTOM - plot_height * float(rate["rate"])
        points.append(
            {
                "x": round(x, 1),
                "y": round(y, 1),
                "title": f"{rate['day']}: {100 * rate['rate']:.0f}%",
            }
        )
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "baseline": CHART_HEIGHT - CHART_BOTTOM,
        "points": points,
        "polyline": " ".join(f"{point['x']},{point['y']}" for point in points),
    }
