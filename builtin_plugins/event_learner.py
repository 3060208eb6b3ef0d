"""Built-in plugin ``event_learner``: the plans and changes a group confirmed, learned by asking
the learning model (``docs/learning.md``, group events).

The learner ``group_events`` reads the group log for *candidates*: a member's line proposing or
announcing a plan or a change (a time word: 今天, 明天, 周六, 下周, 几点, 点半, 8号…, and a plan
word: 聚, 约, 去, 开, 改到, 取消, 集合, 活动, 桌游…) followed within ``confirm_window_s`` by
confirmations (好, 可以, 行, +1, 我去, 算我一个, 没问题, 定了, ok…) from at least
``min_confirmations`` other distinct members. A candidate still short of confirmations at the end of
a batch is kept in the learner's state, for the next run. Only when a candidate exists, the
learning model is asked once (task ``group_events``, the persona pack's
``[learning_prompts.group_events]``) with each candidate's window (the proposal and the following
lines, at most :data:`WINDOW_LINES`) and today's date.

An answered event is stored (kind ``group_event``, fields ``{text, date, confirmed_by}``, key
``item_key(date, normalized text)``, so an event learned again merges) only when its
``confirmed_by`` names at least ``min_confirmations`` distinct human members who spoke in the
batch (or in a kept candidate's window): ids the model invents are rejected. Its text always
holds its date (prefixed 「YYYY-MM-DD：」 when the model left it out); its source messages are the
proposal and the confirmers' lines of the window it came from. The memory section shows it under
【已确认群事件】 for a message that shares its terms.

The offline learning model answers with :func:`offline_group_events`, a rule over the payload's
text (documented there): a stand-in, not a model.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import attrs

from promptweave import hookimpl
from promptweave._patterns import lazy_pattern
from promptweave.builtin_plugins.learners import (
    _integer,
    _item,
    _number,
    _result,
    _skipped,
    _ts,
    _within,
    _words,
)
from promptweave.builtin_plugins.learning_rules import OFFENSIVE_WORDS, clean_text, is_command
from promptweave.builtin_plugins.member_learner import looks_private
from promptweave.builtin_plugins.model_tasks import default_pack, line_of, model_task
from promptweave.learning.model import answer_schema
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem, item_key
from promptweave.text.rules import InjectionDetector
from promptweave.turn import ChatMessage

__all__ = [
    "CONFIRM_WINDOW_S",
    "EVENT_CAP",
    "EVENT_CHARS",
    "MAX_EVENTS",
    "MIN_CONFIRMATIONS",
    "PROPOSAL_CHARS",
    "WINDOW_LINES",
    "EventAnswer",
    "EventsAnswer",
    "is_confirmation",
    "is_proposal",
    "learn_group_events",
    "offline_group_events",
    "resolve_date",
]

#: ``group_events.confirm_window_s``: confirmations count this long after the proposal.
CONFIRM_WINDOW_S = 1800.0
#: ``group_events.min_confirmations``: the distinct other members who must confirm.
MIN_CONFIRMATIONS = 2
#: The lines after the proposal sent with it.
WINDOW_LINES = 15
#: The most events one answer gives, and the longest text of one.
MAX_EVENTS = 5
EVENT_CHARS = 80
#: The longest proposal text the offline rule keeps.
PROPOSAL_CHARS = 60
#: The most group events kept per group.
EVENT_CAP = 100
#: The most candidates kept in the state awaiting confirmations.
OPEN_KEPT = 8

_TIME = lazy_pattern(
    r"今天|今晚|今早|明天|明晚|明早|后天|周[一二三四五六日天末]|下周|下星期|"
    r"星期[一二三四五六日天]|礼拜[一二三四五六日天]|几点|点半|几号|"
    r"\d{1,2}\s*[点:：]|[一二三四五六七八九十两]{1,3}点|\d{1,2}\s*号|[一二三四五六七八九十]{1,3}号"
)
_PLAN = lazy_pattern(
    r"聚|约|去|开|改到|改成|推迟|提前|取消|定了|集合|活动|桌游|见面|出发|组队|团建|吃饭|"
    r"火锅|烧烤|爬山|看电影|开黑|打球|露营|唱歌|开会"
)
_CONFIRM = lazy_pattern(
    r"好|可以|行|\+1|＋1|我去|我也去|一定去|算我一个|算我|没问题|定了|ok|同意|冲|来了|报名|参加",
    re.IGNORECASE,
)
_DECLINE = lazy_pattern(
    r"不行|不可以|不好|不去|去不了|没空|来不了|不了|算了|不一定|不确定|再说|吗|？|\?"
)
#: The longest line read as a confirmation.
CONFIRM_CHARS = 20
_DATE = lazy_pattern(r"^\d{4}-\d{2}-\d{2}$")
_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_NUMERALS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHANGE = lazy_pattern(r"改到|改成|推迟到|提前到|换到")


def is_proposal(text: str) -> bool:
    """A line holding both a time word and a plan word (the learner also leaves out a line
    addressed to a bot, and one that is itself a confirmation)."""
    return bool(_TIME.search(text)) and bool(_PLAN.search(text))


def is_confirmation(text: str) -> bool:
    """A short line (at most :data:`CONFIRM_CHARS` characters) holding a confirmation word and
    no refusal, doubt or question."""
    return (
        0 < len(text) <= CONFIRM_CHARS and bool(_CONFIRM.search(text)) and not _DECLINE.search(text)
    )


# -- the answer ------------------------------------------------------------------------------


def _text_check(_instance: Any, _attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise ValueError("text: blank")
    if len(value) > EVENT_CHARS:
        raise ValueError(f"text: over {EVENT_CHARS} characters")


def _date_check(_instance: Any, _attribute: attrs.Attribute[Any], value: str) -> None:
    if not _DATE.match(value):
        raise ValueError(f"date {value!r} is not YYYY-MM-DD")
    dt.date.fromisoformat(value)  # raises ValueError for 2026-02-30


def _confirmers_check(
    _instance: Any, _attribute: attrs.Attribute[Any], value: tuple[str, ...]
) -> None:
    if len(value) < MIN_CONFIRMATIONS:
        raise ValueError(f"confirmed_by: at least {MIN_CONFIRMATIONS} user ids, not {len(value)}")
    if not all(isinstance(uid, str) and uid.strip() for uid in value):
        raise ValueError("confirmed_by: a blank user id")


@attrs.frozen(kw_only=True)
class EventAnswer:
    """One confirmed event: its text (at most :data:`EVENT_CHARS`), its date (``YYYY-MM-DD``)
    and who confirmed it (at least :data:`MIN_CONFIRMATIONS` user ids)."""

    text: str = attrs.field(validator=_text_check)
    date: str = attrs.field(validator=_date_check)
    confirmed_by: tuple[str, ...] = attrs.field(validator=_confirmers_check)


@attrs.frozen(kw_only=True)
class EventsAnswer:
    """The answer of task ``group_events``: at most :data:`MAX_EVENTS` events."""

    events: tuple[EventAnswer, ...] = attrs.field(validator=attrs.validators.max_len(MAX_EVENTS))


#: The answer's JSON schema (strict-mode form).
SCHEMA = answer_schema(
    {
        "events": {
            "type": "array",
            "maxItems": MAX_EVENTS,
            "items": answer_schema(
                {
                    "text": {"type": "string", "description": f"at most {EVENT_CHARS} characters"},
                    "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                    "confirmed_by": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": MIN_CONFIRMATIONS,
                    },
                }
            ),
        }
    }
)


# -- dates -----------------------------------------------------------------------------------


def _number_of(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if text.startswith("十"):
        return 10 + _NUMERALS.get(text[1:], 0)
    if text.endswith("十"):
        return _NUMERALS.get(text[:-1], 0) * 10
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _NUMERALS.get(tens, 0) * 10 + _NUMERALS.get(ones, 0)
    return _NUMERALS.get(text)


_RELATIVE = lazy_pattern(
    r"(?P<day>今天|今晚|今早|明天|明晚|明早|后天)|"
    r"(?P<next>下周|下星期|下礼拜)(?P<nextday>[一二三四五六日天])?|"
    r"(?:周|星期|礼拜)(?P<weekday>[一二三四五六日天末])|"
    r"(?P<month>\d{1,2}|[一二三四五六七八九十]{1,3})\s*月\s*"
    r"(?P<mday>\d{1,2}|[一二三四五六七八九十]{1,3})\s*[号日]|"
    r"(?P<dom>\d{1,2}|[一二三四五六七八九十]{1,3})\s*号"
)


def resolve_date(text: str, today: dt.date) -> dt.date | None:
    """The date a line's relative words name, against ``today``: 今天/今晚 (today), 明天 (+1),
    后天 (+2), 周X / 星期X (the next such day, today included; 周末 is Saturday), 下周X (that
    day of next week; 下周 alone its Monday), M月N号, N号 (this month's, or next month's when
    passed). After 改到/改成/推迟到 the words that follow win. ``None`` when it names none."""
    change = _CHANGE.search(text)
    for part in (text[change.end() :], text) if change else (text,):
        match = _RELATIVE.search(part)
        if match is None:
            continue
        if match["day"]:
            offset = (
                0 if match["day"].startswith("今") else 1 if match["day"].startswith("明") else 2
            )
            return today + dt.timedelta(days=offset)
        if match["next"]:
            monday = today + dt.timedelta(days=7 - today.weekday())
            return monday + dt.timedelta(days=_WEEKDAYS.get(match["nextday"] or "一", 0))
        if match["weekday"]:
            target = 5 if match["weekday"] == "末" else _WEEKDAYS[match["weekday"]]
            return today + dt.timedelta(days=(target - today.weekday()) % 7)
        if match["month"]:
            month, day = _number_of(match["month"]), _number_of(match["mday"])
            return _valid(today.year, month, day, today)
        if match["dom"]:
            day = _number_of(match["dom"])
            found = _valid(today.year, today.month, day, None)
            if found is not None and found >= today:
                return found
            year, month = (
                (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
            )
            return _valid(year, month, day, None)
    return None


def _valid(year: int, month: int | None, day: int | None, today: dt.date | None) -> dt.date | None:
    if month is None or day is None:
        return None
    try:
        found = dt.date(year, month, day)
    except ValueError:
        return None
    if today is not None and found < today - dt.timedelta(days=180):
        return _valid(year + 1, month, day, None)
    return found


def _cleaned_proposal(text: str) -> str:
    return clean_text(text).strip(" ，,。.!！~～")[:PROPOSAL_CHARS]


def offline_group_events(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The offline learning model's answer to task ``group_events``: rules over the payload's
    text, not a model.

    Per window: the confirmers are the distinct members (not bots, not the proposer) whose lines
    after the proposal are confirmations (:func:`is_confirmation`); with at least
    :data:`MIN_CONFIRMATIONS` of them, the event is the proposal line cleaned (at most
    :data:`PROPOSAL_CHARS` characters), its date resolved from its relative words
    (:func:`resolve_date`) against the window's day (the proposal's date), else ``today``, and
    its text 「YYYY-MM-DD：<proposal>」. At most :data:`MAX_EVENTS`."""
    today = dt.date.fromisoformat(str(payload["today"]))
    events: list[dict[str, Any]] = []
    for window in payload.get("windows", ()):
        lines = [line for line in window.get("lines", ()) if isinstance(line, Mapping)]
        if not lines:
            continue
        proposal = lines[0]
        proposer = str(proposal.get("user_id", ""))
        confirmers: list[str] = []
        for line in lines[1:]:
            uid = str(line.get("user_id", ""))
            if line.get("bot") or uid == proposer or uid in confirmers:
                continue
            if is_confirmation(clean_text(str(line.get("text", "")))):
                confirmers.append(uid)
        if len(confirmers) < MIN_CONFIRMATIONS:
            continue
        text = _cleaned_proposal(str(proposal.get("text", "")))
        if not text:
            continue
        day = dt.date.fromisoformat(str(window.get("day") or today.isoformat()))
        date = (resolve_date(text, day) or today).isoformat()
        events.append(
            {"text": f"{date}：{text}"[:EVENT_CHARS], "date": date, "confirmed_by": confirmers}
        )
    return {"events": events[:MAX_EVENTS]}


# -- the learner -----------------------------------------------------------------------------


def _zone(batch: LearnerBatch) -> dt.tzinfo:
    bots = getattr(batch.config, "bots", None) or {}
    bot = bots.get(batch.bot_id)
    try:
        return ZoneInfo(bot.timezone) if bot is not None else dt.UTC
    except (KeyError, ValueError):
        return dt.UTC


def _self_label(batch: LearnerBatch) -> str:
    return (batch.persona or default_pack()).labels.self_label


def _candidates(
    batch: LearnerBatch, window_s: float, needed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    """The candidates with enough confirmations, the ones still open (for the state), and every
    human member who spoke (in the batch or a kept window)."""
    zone = _zone(batch)
    self_label = _self_label(batch)
    open_: list[dict[str, Any]] = [
        {**c, "lines": list(c["lines"]), "confirmers": dict(c["confirmers"])}
        for c in batch.state.get("open", ())
    ]
    speakers: set[str] = {
        str(line["user_id"]) for c in open_ for line in c["lines"] if not line.get("bot")
    }
    ready: list[dict[str, Any]] = []
    for logged in batch.messages:
        message: ChatMessage = logged.message
        ts = _ts(message)
        human = message.sender_id not in batch.bot_ids
        line = line_of(logged, batch.bot_ids, self_label)
        for candidate in list(open_):
            if not _within(ts, candidate["ts"], window_s):
                open_.remove(candidate)
            elif len(candidate["lines"]) <= WINDOW_LINES:
                candidate["lines"].append(line)
        target = _confirmed(open_, message) if human and message.id is not None else None
        if target is not None and is_confirmation(clean_text(message.text)):
            target["confirmers"][message.sender_id] = message.id
            if len(target["confirmers"]) >= needed:
                open_.remove(target)
                ready.append(target)
        if not human or message.id is None:
            continue
        speakers.add(message.sender_id)
        text = clean_text(message.text)
        to_bot = message.addressed or any(m in batch.bot_ids for m in message.mentions)
        if (
            text
            and not to_bot
            and not is_command(message.text)
            and is_proposal(text)
            and not is_confirmation(text)
        ):
            open_.append(
                {
                    "id": message.id,
                    "proposer": message.sender_id,
                    "ts": ts,
                    "day": message.time.astimezone(zone).date().isoformat(),
                    "lines": [line],
                    "confirmers": {},
                }
            )
            open_ = open_[-OPEN_KEPT:]
    now = batch.now.timestamp()
    open_ = [c for c in open_ if _within(now, c["ts"], window_s)]
    return ready, open_, speakers


def _confirmed(open_: Sequence[dict[str, Any]], message: ChatMessage) -> dict[str, Any] | None:
    """The candidate a confirmation would confirm: the one it replies to, else the newest one
    proposed by someone else; never one its sender proposed or already confirmed."""
    if message.reply_to is not None:
        target = next((c for c in open_ if c["id"] == message.reply_to), None)
    else:
        target = next((c for c in reversed(open_) if c["proposer"] != message.sender_id), None)
    if target is None or target["proposer"] == message.sender_id:
        return None
    if message.sender_id in target["confirmers"]:
        return None
    return target


def learn_group_events(batch: LearnerBatch) -> LearnerResult:
    """Ask the learning model about the batch's confirmed candidates (see the module's docs) and
    store the events whose confirmers are real members of the batch."""
    if not batch.group_id or batch.model is None:
        return LearnerResult()
    window_s = _number(batch, "confirm_window_s", CONFIRM_WINDOW_S)
    needed = _integer(batch, "min_confirmations", MIN_CONFIRMATIONS, minimum=MIN_CONFIRMATIONS)
    offensive = _words(batch, "offensive_words", OFFENSIVE_WORDS)
    ready, open_, speakers = _candidates(batch, window_s, needed)
    state = {"open": open_}
    if not ready:
        return _result(state=state)
    today = batch.now.astimezone(_zone(batch)).date().isoformat()
    payload = {
        "today": today,
        "windows": [{"day": c["day"], "lines": c["lines"][: WINDOW_LINES + 1]} for c in ready],
    }
    task = model_task(
        batch,
        "group_events",
        EventsAnswer,
        SCHEMA,
        payload,
        offline_group_events,
        values={"min_confirmations": needed, "event_chars": EVENT_CHARS},
    )
    answer = batch.model.ask(task)
    if answer is None:
        return _result(state=state, notes=("the answer was invalid: nothing stored",))
    injection = InjectionDetector((batch.persona or default_pack()).persona.name)
    skipped: Counter[str] = Counter()
    items: list[LearnedItem] = []
    for event in answer.events:
        confirmers = list(
            dict.fromkeys(
                uid for uid in event.confirmed_by if uid in speakers and uid not in batch.bot_ids
            )
        )
        if len(confirmers) < needed:
            skipped["unknown_confirmers"] += 1
            continue
        text = " ".join(event.text.split())
        reason = looks_private(text.replace(event.date, ""), offensive, injection)
        if reason:
            skipped[reason] += 1
            continue
        if event.date not in text:
            text = f"{event.date}：{text}"
        source = _source_of(ready, confirmers)
        ids = (
            []
            if source is None
            else [
                source["id"],
                *(source["confirmers"][uid] for uid in confirmers if uid in source["confirmers"]),
            ]
        )
        fields = {"text": text, "date": event.date, "confirmed_by": confirmers}
        items.append(
            _item(
                batch,
                "group_event",
                item_key(event.date, _normalized(text.replace(event.date, ""))),
                fields,
                ids=ids,
            )
        )
    return _result(items, state=state, notes=_skipped(skipped, "events"))


def _normalized(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum()) or text.strip()


def _source_of(
    ready: Sequence[Mapping[str, Any]], confirmers: Sequence[str]
) -> Mapping[str, Any] | None:
    """The candidate most of ``confirmers`` confirmed (the first on a tie)."""
    best, best_n = None, 0
    for candidate in ready:
        n = sum(uid in candidate["confirmers"] for uid in confirmers)
        if n > best_n:
            best, best_n = candidate, n
    return best


LEARNER = Learner(
    name="group_events",
    writes=("group_event",),
    run=learn_group_events,
    min_batch=30,
    interval_s=900.0,
    timeout_s=300.0,
    caps={"group_event": EVENT_CAP},
    uses_model=True,
    description="plans and changes the group confirmed (two members or more), with their date "
    "(learning model)",
)


@hookimpl
def register_learners(register: Callable[[Learner], None]) -> None:
    register(LEARNER)
