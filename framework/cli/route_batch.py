"""Route files: many messages decided in one run (``promptweave route``, ``docs/routing.md``).

A route file is JSON Lines. Each line is either a whole turn (the turn-file format, recognised by
its ``message`` key) or a compact message (:class:`CompactCase`); both may carry ``id``,
``expect``, ``state`` and ``seed``. Blank lines and lines starting with ``#`` are skipped. A line
``{"defaults": {"bot": {...}, "group_id": "..."}}`` sets the bot and group of the compact lines
after it that give none; before any, the bot is the one passed to :func:`load_route_file` (the
CLI passes one named after the persona pack's persona).

By default every line is decided on its own: a fresh in-memory routing state prepared from its
``state``, and a random source seeded with its ``seed`` (else the run's seed). With ``stream`` the
lines are one conversation: one state and one random source, in file order.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from promptweave._convert import parse_json, read_text, structure
from promptweave._dates import shifted
from promptweave._fields import Text, finite, has_lone_surrogate
from promptweave.decision import Decision, TurnAction
from promptweave.errors import TurnFileError
from promptweave.items import RelationshipNote, RouteHints
from promptweave.runtime import Promptweave
from promptweave.store.routing_state import REPLY_LOG_MAX, MemoryRoutingState, RoutingState
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.turn import (
    Bot,
    ChatMessage,
    HistoryEntry,
    SpeakTrigger,
    Turn,
    TurnRetrieved,
    speak_trigger,
)

__all__ = [
    "CaseResult",
    "CaseState",
    "CompactCase",
    "ContextMessage",
    "Expectation",
    "RouteCase",
    "RouteDefaults",
    "confusion_table",
    "decide_cases",
    "default_route_bot",
    "load_route_file",
]

#: The time of a compact message that gives none.
BASE_TIME = dt.datetime(2026, 11, 30, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
#: Context messages without ``ago_s`` are this many seconds apart, the last one before the current.
CONTEXT_SPACING_S = 20
#: The bot and group ids of compact lines that give none (no defaults line, no ``bot``).
DEFAULT_BOT_ID = "10001"
DEFAULT_GROUP = "20001"


@attrs.frozen(kw_only=True)
class RouteDefaults:
    """A ``{"defaults": ...}`` line: the bot and group of the compact lines after it."""

    bot: Bot | None = None
    group_id: str | None = None


def sender_id_for(name: str) -> str:
    """A stable account id for a display name, so one name is one member across a file."""
    return str(30000 + zlib.crc32(name.encode("utf-8")) % 60000)


@attrs.frozen(kw_only=True)
class Expectation:
    """The label of a line: the expected action, and optionally reason and delivery style."""

    action: TurnAction
    reason: str | None = None
    delivery_style: str | None = None


_optional_seconds = attrs.validators.optional(finite)


@attrs.frozen(kw_only=True)
class CaseState:
    """Routing state a line starts from (relative to its message's time).

    :param cooldown_s: the group is cooling down for this many more seconds.
    :param silence_s: the group is silenced (after a shut-up) for this many more seconds.
    :param disabled: the bot is switched off in the group.
    :param last_quote_ago_s: a quote was delivered this many seconds ago.
    :param bot_replies: the bot delivered this many replies a moment ago, at most
        :data:`promptweave.store.routing_state.REPLY_LOG_MAX` (the state keeps no more).
    :param last_phrase: the group's last low-engagement phrase.
    """

    cooldown_s: float | None = attrs.field(default=None, validator=_optional_seconds)
    silence_s: float | None = attrs.field(default=None, validator=_optional_seconds)
    disabled: bool = False
    last_quote_ago_s: float | None = attrs.field(default=None, validator=_optional_seconds)
    bot_replies: int = attrs.field(
        default=0, validator=[attrs.validators.ge(0), attrs.validators.le(REPLY_LOG_MAX)]
    )
    last_phrase: str | None = None

    def apply(self, state: RoutingState, bot_id: str, group_id: str, now: dt.datetime) -> None:
        if self.cooldown_s is not None:
            state.start_cooldown(bot_id, group_id, shifted(now, self.cooldown_s))
        if self.silence_s is not None:
            state.start_silence(bot_id, group_id, shifted(now, self.silence_s))
        if self.disabled:
            state.set_disabled(bot_id, group_id, True)
        if self.last_quote_ago_s is not None:
            at = shifted(now, -self.last_quote_ago_s)
            state.note_quote_delivered(bot_id, group_id, "", at)
        for _ in range(self.bot_replies):
            state.note_bot_reply(bot_id, group_id, shifted(now, -10))
        if self.last_phrase is not None:
            state.note_phrase(bot_id, group_id, self.last_phrase)


@attrs.frozen(kw_only=True)
class ContextMessage:
    """An earlier group message of a compact line, oldest first. ``bot`` marks the bot's own."""

    text: Text
    id: str | None = None
    sender: str = ""
    sender_id: str | None = None
    bot: bool = False
    ago_s: float | None = attrs.field(default=None, validator=_optional_seconds)
    reply_to: str | None = None
    images: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class CompactCase:
    """One compact line: the current message and just enough around it."""

    text: Text
    id: str | None = None
    message_id: str | None = None
    sender: str = "群友"
    sender_id: str | None = None
    addressed: bool = False
    trigger: SpeakTrigger | None = attrs.field(default=None, converter=speak_trigger)
    private: bool = False
    reply_to: str | None = None
    images: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    raw: Any = None
    time: dt.datetime | None = None
    context: tuple[ContextMessage, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    quoted_bot_text: str | None = None
    hints: RouteHints = attrs.field(factory=RouteHints)
    affinity: float | None = None
    bot: Bot | None = None
    group_id: str | None = None
    state: CaseState = attrs.field(factory=CaseState)
    seed: int | None = None
    expect: Expectation | None = None

    def to_turn(self, line: int, defaults: RouteDefaults | None = None) -> Turn:
        """The turn of this line; ``defaults`` gives the bot and group it leaves out."""
        defaults = defaults or RouteDefaults()
        now = self.time or BASE_TIME
        bot = self.bot or defaults.bot
        if bot is None:
            raise ValueError("no bot: give 'bot' on the line or in a defaults line")
        recent = []
        for index, earlier in enumerate(self.context):
            ago = earlier.ago_s
            if ago is None:
                ago = CONTEXT_SPACING_S * (len(self.context) - index)
            recent.append(
                ChatMessage(
                    id=earlier.id or f"L{line}c{index + 1}",
                    sender_id=bot.id
                    if earlier.bot
                    else (earlier.sender_id or sender_id_for(earlier.sender or f"#{index}")),
                    sender_name=bot.name if earlier.bot else earlier.sender,
                    text=earlier.text,
                    time=shifted(now, -ago),
                    reply_to=earlier.reply_to,
                    images=earlier.images,
                )
            )
        relationship = None if self.affinity is None else RelationshipNote(affinity=self.affinity)
        return Turn(
            bot=bot,
            group_id=None
            if self.private
            else (self.group_id or defaults.group_id or DEFAULT_GROUP),
            trigger=self.trigger,
            message=ChatMessage(
                id=self.message_id or f"L{line}",
                sender_id=self.sender_id or sender_id_for(self.sender),
                sender_name=self.sender,
                text=self.text,
                time=now,
                raw=self.raw,
                addressed=self.addressed,
                reply_to=self.reply_to,
                images=self.images,
                mentions=self.mentions,
            ),
            recent_messages=tuple(recent),
            history=self.history,
            retrieved=TurnRetrieved(relationship=relationship),
            quoted_bot_text=self.quoted_bot_text,
            route_hints=self.hints,
        )


@attrs.frozen(kw_only=True)
class RouteCase:
    """One line of a route file, ready to decide."""

    line: int
    id: str
    turn: Turn
    state: CaseState
    seed: int | None
    expect: Expectation | None


_EXTRAS = ("id", "expect", "state", "seed")


def _label(label: str, where: str) -> str:
    # The label is printed and written as JSON, which cannot encode a lone surrogate.
    if has_lone_surrogate(label):
        raise TurnFileError(
            where, [f"id {label!r} holds a lone surrogate, which is not text @ $.id"]
        )
    return label


def _parse_line(data: dict[str, Any], line: int, source: str, defaults: RouteDefaults) -> RouteCase:
    where = f"{source}:{line}"
    if "message" in data:
        extras = {key: data.pop(key) for key in _EXTRAS if key in data}
        turn = structure(data, Turn, where, TurnFileError)
        state = structure(extras.get("state", {}), CaseState, where, TurnFileError)
        expect = (
            structure(extras["expect"], Expectation, where, TurnFileError)
            if "expect" in extras
            else None
        )
        seed = extras.get("seed")
        if seed is not None and not isinstance(seed, int):
            raise TurnFileError(where, ["seed must be an integer @ $.seed"])
        label = str(extras.get("id") or turn.message.id or f"line {line}")
        return RouteCase(
            line=line, id=_label(label, where), turn=turn, state=state, seed=seed, expect=expect
        )
    case = structure(data, CompactCase, where, TurnFileError)
    try:
        turn = case.to_turn(line, defaults)
    except (ValueError, OverflowError) as exc:
        # Times without an offset, or offsets that leave the calendar.
        raise TurnFileError(where, [f"invalid value ({exc})"]) from exc
    return RouteCase(
        line=line,
        id=_label(case.id or f"line {line}", where),
        turn=turn,
        state=case.state,
        seed=case.seed,
        expect=case.expect,
    )


def default_route_bot(persona: PersonaPack) -> Bot:
    """The bot of compact lines that name none: id :data:`DEFAULT_BOT_ID`, named after the pack's
    persona, answering to the pack's generic aliases."""
    name = persona.persona.name
    aliases = tuple(alias for alias in persona.identity.generic_aliases if alias != name)
    return Bot(id=DEFAULT_BOT_ID, name=name, aliases=aliases)


def load_route_file(path: Path, *, bot: Bot | None = None) -> list[RouteCase]:
    """Read a route file; a bad line raises :class:`promptweave.errors.TurnFileError` naming the
    file, the line and the key path.

    :param bot: the bot of compact lines that name none, until a defaults line says otherwise;
        without it such a line is an error.
    """
    # Only "\n" ends a line: str.splitlines() would also split on U+2028 inside a string.
    lines = read_text(path, TurnFileError).split("\n")
    cases = []
    defaults = RouteDefaults(bot=bot)
    for number, text in enumerate(lines, 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise TurnFileError(f"{path}:{number}", [f"invalid JSON: {exc.msg}"]) from exc
        except ValueError as exc:
            raise TurnFileError(f"{path}:{number}", [f"invalid JSON: {exc}"]) from exc
        if not isinstance(data, dict):
            raise TurnFileError(f"{path}:{number}", ["each line must be a JSON object"])
        if "defaults" in data:
            if len(data) > 1:
                extra = ", ".join(sorted(key for key in data if key != "defaults"))
                raise TurnFileError(
                    f"{path}:{number}", [f"a defaults line holds nothing else (found {extra})"]
                )
            given = structure(
                data["defaults"], RouteDefaults, f"{path}:{number}", TurnFileError, "$.defaults"
            )
            defaults = RouteDefaults(
                bot=given.bot or defaults.bot, group_id=given.group_id or defaults.group_id
            )
            continue
        cases.append(_parse_line(data, number, str(path), defaults))
    return cases


@attrs.frozen(kw_only=True)
class CaseResult:
    """A decided line and whether it matched its label (``None`` without a label)."""

    case: RouteCase
    decision: Decision

    @property
    def matched(self) -> bool | None:
        expect = self.case.expect
        if expect is None:
            return None
        decision = self.decision
        return (
            decision.action is expect.action
            and expect.reason in (None, decision.reason)
            and expect.delivery_style in (None, decision.delivery_style.value)
        )

    def to_json(self) -> dict[str, Any]:
        expect = self.case.expect
        return {
            "id": self.case.id,
            "line": self.case.line,
            "decision": self.decision.trace(),
            "low_engagement_phrase": self.decision.low_engagement_phrase,
            "necessity": None if self.decision.necessity is None else self.decision.necessity.score,
            "expected": None
            if expect is None
            else {k: v for k, v in attrs.asdict(expect).items() if v is not None},
            "matched": self.matched,
        }


def decide_cases(
    runtime: Promptweave, cases: Sequence[RouteCase], *, seed: int = 0, stream: bool = False
) -> list[CaseResult]:
    """Decide every case with ``runtime``'s rules and pools.

    :param seed: the random seed of a line without its own (and of the whole stream).
    :param stream: decide the lines as one conversation, sharing state and random source.
    """
    shared = attrs.evolve(
        runtime, stores=Stores(routing=MemoryRoutingState()), rng=random.Random(seed)
    )
    results = []
    for case in cases:
        if stream:
            current = shared
        else:
            case_seed = seed if case.seed is None else case.seed
            current = attrs.evolve(
                runtime,
                stores=Stores(routing=MemoryRoutingState()),
                rng=random.Random(case_seed),
            )
        turn = case.turn
        if turn.group_id is not None:
            case.state.apply(current.stores.routing, turn.bot.id, turn.group_id, turn.message.time)
        results.append(CaseResult(case=case, decision=current.decide(turn)))
    return results


def confusion_table(results: Sequence[CaseResult]) -> str:
    """Expected action (rows) against decided action (columns), then every mismatch."""
    labelled = [r for r in results if r.case.expect is not None]
    actions = [action.value for action in TurnAction]
    counts = Counter(
        (r.case.expect.action.value, r.decision.action.value)
        for r in labelled
        if r.case.expect is not None
    )
    width = max(len(a) for a in actions) + 2
    lines = ["expected \\ decided".ljust(width + 10) + "".join(a.rjust(width) for a in actions)]
    for expected in actions:
        row = "".join(str(counts[(expected, decided)]).rjust(width) for decided in actions)
        lines.append(expected.ljust(width + 10) + row)
    matched = sum(1 for r in labelled if r.matched)
    lines.append(f"{matched}/{len(labelled)} labels matched (action, reason, delivery style)")
    for result in labelled:
        if not result.matched and result.case.expect is not None:
            expect = result.case.expect
            lines.append(
                f"  line {result.case.line} {result.case.id}: expected "
                f"{expect.action.value}/{expect.reason or '*'}, decided "
                f"{result.decision.action.value}/{result.decision.reason}"
            )
    return "\n".join(lines)
