"""The report's "What was learned" section, from the summary's ``learning`` object
(:func:`promptweave.replay.learning.learning_summary`, ``docs/replay.md``).

Per group: the learned items the store held at the end of the replay (kind, the learned fields,
count, the messages they came from, when first learned), the learner runs that failed, and the
first answered turn whose prompt carried a learned item of each kind, linked to its row of the
timeline. Every string is escaped; a field of the wrong type is shown as absent.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from html import escape
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["ITEM_KEYS", "learning_html"]

#: The keys of a learned item's JSON that are its scope and provenance; the rest are its fields.
ITEM_KEYS = frozenset(
    {
        "kind",
        "bot_id",
        "group_id",
        "user_id",
        "key",
        "count",
        "learner",
        "source_message_ids",
        "learned_at",
        "updated_at",
    }
)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object, absent: str = "—") -> str:
    """``value`` as escaped text: a string as it is, anything else JSON-encoded."""
    if value is None:
        return absent
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return escape(text)


def _when(value: object, zone: dt.tzinfo | None) -> str:
    """A time of the summary in the bot's zone (``learned_at`` is kept in UTC)."""
    if not isinstance(value, str):
        return "—"
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return escape(value)
    if zone is not None and moment.tzinfo is not None:
        moment = moment.astimezone(zone)
    return f"<span title='{escape(value)}'>{moment:%m-%d %H:%M:%S}</span>"


def _turn(index: object, time: object, zone: dt.tzinfo | None) -> str:
    if not isinstance(index, int) or isinstance(index, bool):
        return "—"
    return f"<a href='#m-{index}'>#{index}</a> {_when(time, zone)}"


def _first_html(entries: list[Any], zone: dt.tzinfo | None) -> str:
    rows = []
    for entry in map(_mapping, entries):
        reached = entry.get("index")
        where = (
            f"first in the prompt of {_turn(reached, entry.get('time'), zone)} "
            f"(<span class='reason'>{_str(entry.get('id'))}</span>)"
            if reached is not None
            else "<span class='empty'>no answered turn's prompt carried one</span>"
        )
        rows.append(
            f"<li><b>{_str(entry.get('kind'))}</b> in {_str(entry.get('section'))}: {where}</li>"
        )
    return f"<ul class='first-in-prompt'>{''.join(rows)}</ul>" if rows else ""


def _failures_html(failures: list[Any], zone: dt.tzinfo | None) -> str:
    if not failures:
        return ""
    rows = "".join(
        f"<tr><td>{_str(f.get('learner'))}</td><td>{_str(f.get('runs'))}</td>"
        f"<td>{_turn(f.get('first_index'), f.get('first_time'), zone)}</td>"
        f"<td class='reason'>{_str(f.get('error'))}</td></tr>"
        for f in map(_mapping, failures)
    )
    return (
        "<table class='learned failures'><caption>Learner runs that failed</caption>"
        "<thead><tr><th>learner</th><th>runs</th><th>first</th><th>error</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _fields_html(item: Mapping[str, Any]) -> str:
    fields = [(name, value) for name, value in item.items() if name not in ITEM_KEYS]
    return "".join(
        f"<div><span class='term'>{escape(str(name))}</span> {_str(value)}</div>"
        for name, value in fields
    )


def _items_html(items: list[Any], zone: dt.tzinfo | None) -> str:
    if not items:
        return "<p class='empty'>Nothing learned in this group.</p>"
    rows = "".join(
        f"<tr class='learned-item' data-kind='{_str(item.get('kind'))}'>"
        f"<td>{_str(item.get('kind'))}</td><td class='fields'>{_fields_html(item)}</td>"
        f"<td>{_str(item.get('count'))}</td>"
        f"<td class='ids'>{', '.join(_str(i) for i in _list(item.get('source_message_ids')))}</td>"
        f"<td>{_when(item.get('learned_at'), zone)}</td></tr>"
        for item in map(_mapping, items)
    )
    return (
        "<table class='learned items'><thead><tr><th>kind</th><th>learned</th><th>count</th>"
        "<th>from messages</th><th>learned at</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _spend_html(group: Mapping[str, Any]) -> str:
    """What learning spent in the group, per learner, beside what its turns spent."""
    per = _mapping(group.get("spend"))
    turns = _mapping(group.get("turns_spend"))
    if not per and not _count(turns.get("requests")):
        return ""
    rows = "".join(
        f"<tr><td>{_str(learner)}</td><td>{_count(_mapping(s).get('calls'))}</td>"
        f"<td>{_count(_mapping(s).get('invalid'))}</td>"
        f"<td>{_count(_mapping(s).get('prompt_tokens')):,}</td>"
        f"<td>{_count(_mapping(s).get('output_tokens')):,}</td>"
        f"<td>{_count(_mapping(s).get('cached_tokens')):,}</td></tr>"
        for learner, s in per.items()
    )
    if _count(turns.get("requests")):
        estimated = " (estimated)" if turns.get("estimated") is True else ""
        rows += (
            f"<tr class='turns'><td>the turns ({_count(turns.get('requests'))} requests)</td>"
            f"<td>{_count(turns.get('requests'))}</td><td>—</td>"
            f"<td>{_count(turns.get('prompt_tokens')):,}{estimated}</td>"
            f"<td>{_count(turns.get('output_tokens')):,}</td>"
            f"<td>{_count(turns.get('cached_tokens')):,}</td></tr>"
        )
    return (
        "<table class='learned spend'><caption>What learning spent, beside the turns"
        "</caption><thead><tr><th>who</th><th>model calls</th><th>invalid</th>"
        "<th>prompt tokens</th><th>output tokens</th><th>cached</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _zone(name: object) -> dt.tzinfo | None:
    """The bot's time zone the summary names, if it names a known one."""
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ValueError, ZoneInfoNotFoundError):
        return None


def learning_html(summary: Mapping[str, Any] | None) -> str:
    """The section's HTML (escaped) from the summary record, or a line saying why it is empty."""
    learning = _mapping(_mapping(summary).get("learning"))
    zone = _zone(_mapping(summary).get("timezone"))
    if not learning:
        return "<p class='empty'>The summary records nothing of learning.</p>"
    if learning.get("enabled") is not True:
        return f"<p class='empty'>Learning was off: {_str(learning.get('off'), 'unknown')}.</p>"
    runs = _mapping(learning.get("runs"))
    learners = ", ".join(_str(name) for name in _list(learning.get("learners")))
    counted = ", ".join(f"{_str(status)} {_str(n)}" for status, n in runs.items())
    parts = [f"<p class='muted'>Learners: {learners}. Runs: {counted or 'none'}.</p>"]
    model = learning.get("model")
    if isinstance(model, str):
        calls = ", ".join(
            f"{_str(status)} {_str(n)}"
            for status, n in _mapping(learning.get("model_calls")).items()
        )
        parts.append(
            f"<p class='muted'>Learning model: {_str(model)}. Calls: {calls or 'none'}.</p>"
        )
    elif learning.get("model_off"):
        parts.append(f"<p class='muted'>No learning model: {_str(learning.get('model_off'))}.</p>")
    skipped = _mapping(learning.get("skipped"))
    if skipped:
        rows = "".join(
            f"<li><b>{_str(name)}</b> did not run: {_str(why)}</li>"
            for name, why in skipped.items()
        )
        parts.append(f"<ul class='skipped-learners'>{rows}</ul>")
    problems = _list(learning.get("model_problems"))
    if problems:
        rows = "".join(
            f"<tr><td>{_str(c.get('task'))}</td><td>{_str(c.get('group_id'))}</td>"
            f"<td>{_str(c.get('status'))}</td><td>{_str(c.get('attempts'))}</td>"
            f"<td class='reason'>{_str(c.get('error'))}</td></tr>"
            for c in map(_mapping, problems)
        )
        parts.append(
            "<table class='learned model-problems'><caption>Model calls without a valid "
            "answer (nothing of them was stored)</caption><thead><tr><th>task</th><th>group</th>"
            "<th>status</th><th>attempts</th><th>why</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    for group in map(_mapping, _list(learning.get("groups"))):
        counts = ", ".join(
            f"{_str(n)} {_str(kind)}" for kind, n in _mapping(group.get("counts")).items()
        )
        parts.append(
            f"<div class='learned-group' data-group='{_str(group.get('group_id'))}'>"
            f"<h3>group {_str(group.get('group_id'))}</h3>"
            f"<p>{counts or 'nothing learned'}</p>"
            f"{_spend_html(group)}"
            f"{_first_html(_list(group.get('first_in_prompt')), zone)}"
            f"{_failures_html(_list(group.get('failures')), zone)}"
            f"{_items_html(_list(group.get('items')), zone)}</div>"
        )
    return "".join(parts)
