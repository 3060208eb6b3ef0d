"""Replaying a recorded chat through the live loop (``promptweave replay``, ``docs/replay.md``).

A replay reads a chat log, carries every message through :class:`promptweave.BotLoop` in order with
the log's timestamps as the clock, and gives one record per incoming message and a summary. With
the same log, configuration and seed it repeats exactly.

Two log formats are read, one per file:

- raw OneBot v11 events, one JSON event a line, as NapCat and go-cqhttp write them (``message``
  and ``message_sent`` events; meta events, notices and requests are skipped and counted);
- the store's event log (``{"event": "message", ...}`` / ``{"event": "bot_reply", ...}``,
  ``docs/store.md``).

The bot's own messages in the log (``message_sent``, ``bot_reply``) are recorded as delivered, not
answered, so a later message replying to one of them is a reply to the bot.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs

from promptweave._convert import parse_json, read_text
from promptweave.config import ModelPrice
from promptweave.errors import TurnFileError
from promptweave.loop.events import IncomingEvent, OutcomeStatus, TurnOutcome
from promptweave.loop.live import BotLoop
from promptweave.providers.cost import spend_totals
from promptweave.replay.chat_log import LoggedReply, MessageEvent, read_events
from promptweave.replay.learning import InjectionWatch, learned_hits, learning_summary, run_record
from promptweave.runtime import Promptweave
from promptweave.text.rules import IMAGE_MARK
from promptweave.text.sanitize import shorten_error
from promptweave.text.tokens import REPORTED, weakest_basis
from promptweave.turn import ChatMessage

__all__ = [
    "RejectedLine",
    "ReplayClock",
    "ReplayLog",
    "ReplayTransport",
    "read_chat_log",
    "replay_events",
    "summarize",
]

logger = logging.getLogger("promptweave.replay")

#: OneBot v11 post types that carry no chat message.
SKIPPED_POST_TYPES = ("meta_event", "notice", "request")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@attrs.define(eq=False)
class ReplayClock:
    """The runtime's clock during a replay: the time of the event being replayed."""

    now: dt.datetime = _EPOCH

    def __call__(self) -> dt.datetime:
        return self.now


@attrs.define(eq=False)
class ReplayTransport:
    """A OneBot v11 transport that sends nowhere: it keeps the calls and answers with fresh
    message ids, as a platform would. It knows no message but the log's: ``get_msg`` (a quoted
    message the log does not hold) finds none."""

    platform: str = "onebot.v11"
    next_id: int = 8_000_000_001
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    async def call_api(self, api: str, **params: Any) -> dict[str, Any] | None:
        self.calls.append((api, params))
        if api == "get_msg":
            return None
        message_id, self.next_id = self.next_id, self.next_id + 1
        return {"message_id": message_id}


@attrs.frozen(kw_only=True)
class ReplayLog:
    """The events of a chat log, in order.

    :param skipped: lines that carry no chat message (OneBot meta events, notices, requests).
    :param rejected: the events the live loop would reject (a group message that names no
        group, a guild message, a malformed OneBot event): each line and why, in order. They are
        not replayed; the summary counts them (``docs/replay.md``).
    """

    source: str
    events: tuple[IncomingEvent, ...]
    skipped: int = 0
    rejected: tuple[RejectedLine, ...] = ()


@attrs.frozen(kw_only=True)
class RejectedLine:
    """An event of the log the live loop would reject: where it is and why."""

    line: str
    reason: str


def read_chat_log(path: Path, runtime: Promptweave, *, bot_id: str | None = None) -> ReplayLog:
    """Read a chat log in either format; OneBot lines are parsed by the ``parse_event`` hook.

    An event the parser refuses is what the live loop would reject: it is kept in
    :attr:`ReplayLog.rejected`, not replayed (and never taken as a private chat).

    :param bot_id: the bot OneBot events are addressed to; the event's ``self_id`` by default.
    :raises TurnFileError: a line is not JSON or not an object, an event of the store's log is
        not valid, or a OneBot message event has a blank ``self_id`` and no ``bot_id`` is given;
        the error names the file and line.
    """
    source = str(path)
    # Unreadable or not UTF-8: one line naming where (``not UTF-8 at line N column C``).
    lines = read_text(path, TurnFileError).splitlines()
    if _is_event_log(lines):
        converted, refused = _store_events(lines, source)
        return ReplayLog(source=source, events=tuple(converted), rejected=tuple(refused))
    events: list[IncomingEvent] = []
    rejected: list[RejectedLine] = []
    skipped = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            data = parse_json(line)
        except json.JSONDecodeError as exc:
            raise TurnFileError(where, [f"not JSON: {exc}"]) from None
        except ValueError as exc:  # nested too deep
            raise TurnFileError(where, [f"invalid JSON: {exc}"]) from None
        if not isinstance(data, dict):
            raise TurnFileError(where, ["an event must be a JSON object"])
        if data.get("post_type") in SKIPPED_POST_TYPES:
            skipped += 1
            continue
        receiver = bot_id or _self_id(data.get("self_id"))
        if not receiver.strip():
            raise TurnFileError(
                where,
                [
                    f"self_id {data.get('self_id')!r} names no bot: the bot the event is "
                    "addressed to is unknown (give --bot ID)"
                ],
            )
        try:
            parsed = runtime.plugins.hooks.parse_event("onebot", data, receiver)
        except (ValueError, TypeError) as exc:
            rejected.append(RejectedLine(line=where, reason=shorten_error(str(exc))))
            logger.warning(
                "replay: %s rejected, as the live loop would: %s", where, shorten_error(str(exc))
            )
            continue
        if parsed is None:
            raise TurnFileError(where, ["no plugin parses OneBot events (enable contrib 'onebot')"])
        events.append(parsed)
    return ReplayLog(source=source, events=tuple(events), skipped=skipped, rejected=tuple(rejected))


def _self_id(value: object) -> str:
    return "" if value is None or isinstance(value, bool) else str(value)


def _is_event_log(lines: Sequence[str]) -> bool:
    """The file is the store's event log: its first event has an ``event`` key."""
    first = next((line for line in lines if line.strip()), "")
    try:
        data = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "event" in data


def _store_events(
    lines: Sequence[str], source: str
) -> tuple[list[IncomingEvent], list[RejectedLine]]:
    """The store's event log as loop events (a ``bot_reply`` is the bot's own message), and the
    events the live loop would reject (a blank ``group_id`` is no group, nor a private chat:
    that is ``null``)."""
    log = read_events(lines, source=source)
    numbers = [number for number, line in enumerate(lines, 1) if line.strip()]
    converted = []
    rejected = []
    for number, event in zip(numbers, log.events, strict=True):
        try:
            converted.append(_store_event(event))
        except ValueError as exc:
            where = f"{source}:{number}"
            rejected.append(RejectedLine(line=where, reason=shorten_error(str(exc))))
            logger.warning(
                "replay: %s rejected, as the live loop would: %s", where, shorten_error(str(exc))
            )
    return converted, rejected


def _store_event(event: MessageEvent | LoggedReply) -> IncomingEvent:
    if isinstance(event, MessageEvent):
        return IncomingEvent(
            platform="log", bot_id=event.bot_id, group_id=event.group_id, message=event.message
        )
    reply = event.event
    return IncomingEvent(
        platform="log",
        bot_id=reply.bot_id,
        group_id=reply.group_id,
        message=ChatMessage(
            id=reply.message_id, sender_id=reply.bot_id, text=reply.text, time=reply.time
        ),
        self_sent=True,
    )


async def replay_events(
    loop: BotLoop,
    clock: ReplayClock,
    events: Iterable[IncomingEvent],
    *,
    transport: ReplayTransport | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    watch: InjectionWatch | None = None,
) -> list[dict[str, Any]]:
    """Carry ``events`` through ``loop`` one after another, the clock at each event's time.

    After each event, once its background work is done, the learners due at its time run one
    after another on this thread (``runtime.learning.run_due(now, threads=False)``): a replay
    learns what a live bot would have learned by then, and repeats exactly. Nothing is caught up
    at the end.

    :param on_record: called with each message record as soon as it is made (progress, streaming
        output).
    :param watch: the observer registered with the runtime that keeps what each delivered reply's
        prompt carried; without it a record's ``learned_in_prompt`` is empty.
    :returns: the message records (``docs/replay.md`` gives their fields).
    """
    transport = transport or ReplayTransport()
    # The replay runs the learners itself, after each event, on the log's clock; the loop's own
    # background learning would run them at the wall clock's pace instead.
    loop.learn = False
    records = []
    zones: dict[str, dt.tzinfo] = {}
    for index, event in enumerate(events):
        clock.now = event.message.time
        if event.bot_id not in zones:
            zones[event.bot_id] = ZoneInfo(loop.runtime.bot_for(event.bot_id).timezone)
        outcome = await loop.handle(event, transport)
        # Session compression runs in the background; a replay waits for it after each turn,
        # so the next turn reads the same history every time the log is replayed.
        loop.runtime.background.wait()
        runs = loop.runtime.learning.run_due(clock.now, threads=False)
        record = message_record(index, event, outcome, zones[event.bot_id])
        record["learned"] = [run_record(run) for run in runs]
        if watch is not None:
            loop.runtime.plugins.hooks.observations.wait()
        record["learned_in_prompt"] = learned_hits(watch.drain()) if watch is not None else []
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def message_record(
    index: int, event: IncomingEvent, outcome: TurnOutcome, zone: dt.tzinfo = dt.UTC
) -> dict[str, Any]:
    """One message's record: what came in, what was decided, what was sent, what it cost; its
    time in ``zone`` (the bot's time zone in a replay)."""
    decision = outcome.decision
    request = outcome.request
    prefix = getattr(request, "prefix", None)
    necessity = decision.necessity if decision is not None else None
    quoted = next(
        (
            send["quoted"]
            for send in outcome.trace.get("sends", ())
            if send.get("ok") and send.get("quoted")
        ),
        None,
    )
    return {
        "type": "message",
        "index": index,
        "time": event.message.time.astimezone(zone).isoformat(),
        "message_id": event.message.id,
        "group_id": event.group_id,
        "sender_id": event.message.sender_id,
        "sender_name": event.message.sender_name,
        # What the bot saw: one [图片] mark per image before the text, as docs/replay.md says.
        "text": f"{IMAGE_MARK * len(event.message.images)} {event.message.text}".strip()
        if event.message.images
        else event.message.text,
        "images": len(event.message.images),
        "model_failure": outcome.trace.get("model_failure"),
        "status": outcome.status,
        "action": decision.action.value if decision is not None else None,
        "reason": outcome.reason,
        "source": decision.source if decision is not None else None,
        "delivery_style": decision.delivery_style.value if decision is not None else None,
        "necessity": None
        if necessity is None
        else {
            "score": necessity.score,
            "threshold": necessity.threshold,
            "bypassed": necessity.bypassed,
            "terms": [{"name": term.name, "points": term.points} for term in necessity.terms],
        },
        "bubbles": list(outcome.bubbles),
        "message_ids": list(outcome.message_ids),
        "quoted_message_id": quoted,
        "prefix_reuse": None if prefix is None else round(prefix.ratio, 4),
        "prefix_break": None if prefix is None else prefix.first_difference,
        "uncached_bytes": None if prefix is None else prefix.uncached_bytes,
        "new_bytes": None if prefix is None else prefix.new_bytes,
        "request_bytes": None if request is None else len(request.body_bytes()),
        "chars": outcome.trace.get("chars"),
        "wording_hints": outcome.trace.get("wording_hints"),
        "usage": None if outcome.usage is None else attrs.asdict(outcome.usage),
        "tokens": outcome.trace.get("tokens"),
        "durations_ms": dict(outcome.stage_durations_ms),
        # Only where a plugin misbehaved, so a clean replay's records stay as they were.
        **(
            {"plugin_faults": list(outcome.trace["plugin_faults"])}
            if outcome.trace.get("plugin_faults")
            else {}
        ),
    }


def _faults_by_plugin(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many turns each ``plugin: where kind`` fault was met in."""
    counted = Counter(
        f"{fault['plugin']}: {fault['where']} {fault['kind']}"
        for record in records
        for fault in {
            (f["plugin"], f["where"], f["kind"]): f for f in record.get("plugin_faults", ())
        }.values()
    )
    return dict(counted.most_common())


def _percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 1), "p95": round(p95, 1)}


def _sent_chars(record: Mapping[str, Any]) -> int:
    chars = record["chars"]
    kinds = ("ambient", "summary", "history", "wording_hints", "current", "sidecar")
    return int(sum(chars["system"].values()) + sum(chars.get(kind, 0) for kind in kinds))


def summarize(
    records: Sequence[Mapping[str, Any]],
    *,
    model: str,
    model_label: str,
    learned: Mapping[str, Any] | None = None,
    rejected: Sequence[RejectedLine] = (),
    prices: Mapping[str, ModelPrice] | None = None,
) -> dict[str, Any]:
    """The summary of a replay (the last JSON line of ``--format jsonl``).

    :param learned: what the learned store holds at the end
        (:func:`promptweave.replay.learning.learning_state`).
    :param rejected: the log's events the live loop would reject (:attr:`ReplayLog.rejected`):
        counted in ``rejected``, each line and why in ``rejected_lines``.
    :param prices: the price table (``[prices]``): the requests' model's row prices the
        ``spend`` figures.
    """
    statuses = Counter(record["status"] for record in records)
    answered = [r for r in records if r["status"] == OutcomeStatus.REPLIED]
    requested = [r for r in records if r["chars"] is not None]
    spent = [r["tokens"] for r in requested if r.get("tokens")]
    tokens = [float(t["prompt_tokens"]) for t in spent]
    cached = [r["usage"]["cached_tokens"] for r in requested if r["usage"]]
    reuse = [r["prefix_reuse"] for r in records if r["prefix_reuse"] is not None]
    uncached = [r for r in records if r.get("uncached_bytes") is not None and r.get("new_bytes")]
    stages: dict[str, list[float]] = {}
    for record in records:
        for stage, ms in record["durations_ms"].items():
            stages.setdefault(stage, []).append(ms)
    return {
        "type": "summary",
        "model": model,
        "model_label": model_label,
        "messages": len(records),
        "replies": len(answered),
        "follow_ups": sum(1 for r in answered if r["action"] == "follow_up"),
        "quotes": sum(1 for r in answered if r["quoted_message_id"] is not None),
        "tools": sum(1 for r in answered if r["action"] == "tool"),
        "phrases": statuses[OutcomeStatus.PHRASE],
        "silences": dict(Counter(r["reason"] for r in records if r["status"] == "silent")),
        "failed": dict(Counter(r["reason"] for r in records if r["status"] == "failed")),
        "model_failures": _model_failures(records),
        "recorded": statuses[OutcomeStatus.RECORDED],
        "rejected": len(rejected),
        "rejected_lines": [{"line": r.line, "reason": r.reason} for r in rejected],
        "chars_per_reply": _percentiles([float(_sent_chars(r)) for r in requested]),
        "tokens_per_reply": _percentiles(tokens),
        "tokens_basis": weakest_basis(t["basis"]["prompt"] for t in spent),
        "spend": _spend(records, answered, prices or {}),
        "cached_tokens": sum(c for c in cached if c is not None)
        if any(c is not None for c in cached)
        else None,
        "prefix_reuse": None
        if not reuse
        else {
            "median": round(statistics.median(reuse), 4),
            "min": round(min(reuse), 4),
            "requests": len(reuse),
        },
        "uncached_per_new_byte": _uncached_per_new(uncached),
        "stage_ms": {stage: _percentiles(values) for stage, values in sorted(stages.items())},
        **({"plugin_faults": faults} if (faults := _faults_by_plugin(records)) else {}),
        "learning": learning_summary(records, learned, turns=_turns_by_group(requested)),
    }


def _uncached_per_new(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The bytes of each request that are not a prefix of its conversation's previous request,
    per byte of what is new in it (``docs/replay.md``, "Prefix reuse"): the median over the
    requests and the sum over the replay."""
    if not records:
        return None
    uncached = sum(r["uncached_bytes"] for r in records)
    new = sum(r["new_bytes"] for r in records)
    return {
        "median": round(
            statistics.median(r["uncached_bytes"] / r["new_bytes"] for r in records), 3
        ),
        "summed": round(uncached / new, 3),
        "uncached_bytes": uncached,
        "new_bytes": new,
        "requests": len(records),
    }


def _model_failures(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cause, the turns the model left unanswered, with the first one's reason and the fix
    (``docs/bot.md``, "When the bot does not answer")."""
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        failure = record.get("model_failure")
        if not isinstance(failure, Mapping):
            continue
        seen = found.setdefault(
            str(failure.get("cause")),
            {"count": 0, "reason": failure.get("reason"), "fix": failure.get("fix"), "first": None},
        )
        seen["count"] += 1
        if seen["first"] is None:
            seen["first"] = record["index"]
    return found


def _spend(
    records: Sequence[Mapping[str, Any]],
    answered: Sequence[Mapping[str, Any]],
    prices: Mapping[str, ModelPrice],
) -> dict[str, Any]:
    """What the replay's requests spent (:func:`promptweave.providers.cost.spend_totals`): in
    all, per reply delivered and per 1,000 messages, and the same per group; priced at the
    requests' model's row of ``prices``."""
    spent = [r["tokens"] for r in records if r.get("tokens")]
    model = spent[0]["model"] if spent else None
    price = None if model is None else prices.get(model)
    totals = spend_totals(spent, price=price, messages=len(records), answered=len(answered))
    groups: dict[str, dict[str, Any]] = {}
    for group_id in sorted({r["group_id"] for r in records if r["group_id"] is not None}):
        mine = [r for r in records if r["group_id"] == group_id]
        groups[group_id] = spend_totals(
            [r["tokens"] for r in mine if r.get("tokens")],
            price=price,
            messages=len(mine),
            answered=sum(1 for r in answered if r["group_id"] == group_id),
        )
    faults = Counter(fault for spend in spent for fault in spend.get("count_faults", ()))
    return {"model": model, **totals, "groups": groups, "count_faults": dict(faults)}


def _turns_by_group(requested: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the turns spent per group (the requests that reached the provider, their prompt,
    output and cached tokens: reported, else counted or estimated, ``docs/cost.md``), beside what
    learning spent."""
    groups: dict[str, dict[str, Any]] = {}
    for record in requested:
        group_id = record.get("group_id")
        spent = record.get("tokens")
        if group_id is None or not spent:
            continue
        group = groups.setdefault(
            group_id,
            {
                "requests": 0,
                "prompt_tokens": 0,
                "output_tokens": 0,
                "cached_tokens": 0,
                "estimated": False,
            },
        )
        group["requests"] += 1
        group["prompt_tokens"] += spent["prompt_tokens"]
        group["output_tokens"] += spent["output_tokens"]
        group["cached_tokens"] += spent["cached_tokens"]
        if spent["basis"]["prompt"] != REPORTED:
            group["estimated"] = True
    return dict(sorted(groups.items()))
