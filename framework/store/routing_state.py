"""Per-group routing state: cooldowns, silences, kept messages, quote candidates, phrases.

The routing flow (``docs/design.md``: gates, the cooldown stash, quoting, the low-engagement exit)
keeps small pieces of state per group, behind a store interface so several bot processes can share
them. Every key is scoped by bot and group. What a list keeps is decided by the functions of this
module (:func:`kept_messages_after`, :func:`candidates_after`), which every backend calls.
:class:`MemoryRoutingState` keeps the state in this process;
:class:`promptweave.store.routing_state_sqlite.SQLiteRoutingState` in the shared SQLite file, and
``promptweave.contrib.redis_store.RedisRoutingState`` in Redis.
"""

from __future__ import annotations

import abc
import datetime as dt
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from promptweave.items import RhythmProfile
from promptweave.turn import ChatMessage

__all__ = [
    "CANDIDATE_TEXT_CHARS",
    "REPLY_LOG_MAX",
    "GroupMute",
    "GroupSnapshot",
    "GroupSwitch",
    "MemoryRoutingState",
    "QuoteCandidate",
    "RoutingState",
    "candidates_after",
    "kept_messages_after",
    "newest",
]

T = TypeVar("T")

#: Candidate texts are cut to this length (they are only shown in traces).
CANDIDATE_TEXT_CHARS = 160
#: How many delivered bot replies per group a store keeps for the recent-reply count.
REPLY_LOG_MAX = 64


def _candidate_text(value: object) -> str:
    return str(value)[:CANDIDATE_TEXT_CHARS]


@attrs.frozen(kw_only=True)
class QuoteCandidate:
    """A recent group message the bot may quote (``docs/design.md``, quoting).

    :param message_id: the platform's message id.
    :param sender_id: who sent it.
    :param text: its text, cut to :data:`CANDIDATE_TEXT_CHARS`.
    :param time: when it was sent.
    :param is_current: it is the message being routed.
    """

    message_id: str
    sender_id: str
    text: str = attrs.field(converter=_candidate_text)
    time: dt.datetime
    is_current: bool = False

    @classmethod
    def of(cls, message: ChatMessage) -> QuoteCandidate | None:
        """The candidate for ``message``; ``None`` when it has no id or no text."""
        if not message.id or not message.text.strip():
            return None
        return cls(
            message_id=message.id,
            sender_id=message.sender_id,
            text=message.text.strip(),
            time=message.time,
        )


@attrs.frozen(kw_only=True)
class GroupSwitch:
    """The bot switched on or off in a group at run time, from chat or the ``promptweave groups``
    command (``docs/groups.md``). It outlives restarts and wins over the configuration until it
    is reset.

    :param enabled: on (``True``) or off.
    :param by: who switched it, as the switch's author wrote it (``chat:30001``, ``cli``).
    :param at: when.
    """

    enabled: bool
    by: str = ""
    at: dt.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """The switch as a store keeps it."""
        return {
            "enabled": self.enabled,
            "by": self.by,
            "at": None if self.at is None else self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupSwitch:
        """The switch :meth:`to_json` gave."""
        at = data.get("at")
        return cls(
            enabled=bool(data["enabled"]),
            by=str(data.get("by") or ""),
            at=None if at is None else dt.datetime.fromisoformat(str(at)),
        )


@attrs.frozen(kw_only=True)
class GroupMute:
    """Why a group may not get a reply right now.

    :param disabled: the bot is switched off in this group (its ``switch`` is off).
    :param cooldown_until: replies wait until then; messages are kept meanwhile.
    :param silence_until: a shut-up request silenced the bot until then.
    :param switch: the run-time switch, when one is set (``None``: the configuration decides).
    """

    disabled: bool = False
    cooldown_until: dt.datetime | None = None
    silence_until: dt.datetime | None = None
    switch: GroupSwitch | None = None


@attrs.frozen(kw_only=True)
class GroupSnapshot:
    """One group's small routing values, read at once (:meth:`RoutingState.snapshot`).

    :param mute: the disabled flag, cooldown and silence.
    :param last_quote_at: when a quote was last delivered.
    :param last_phrase: the last low-engagement phrase.
    :param rhythm: the reply rhythm, when known.
    :param replies_since: the ``since`` the reply count was taken from; ``None`` when not counted.
    :param bot_replies: the bot's replies delivered since ``replies_since``.
    """

    mute: GroupMute = GroupMute()
    last_quote_at: dt.datetime | None = None
    last_phrase: str | None = None
    rhythm: RhythmProfile | None = None
    replies_since: dt.datetime | None = None
    bot_replies: int = 0


# -- the rules every backend applies ----------------------------------------------------------


def newest(items: Sequence[T], limit: int) -> list[T]:
    """The last ``limit`` of ``items`` (none when ``limit`` is 0 or less): how every per-group list
    of the routing state is trimmed."""
    return list(items[max(0, len(items) - limit) :]) if limit > 0 else []


def kept_messages_after(
    kept: Sequence[ChatMessage], message: ChatMessage, limit: int
) -> list[ChatMessage]:
    """The messages a group keeps after :meth:`RoutingState.keep_message`, oldest first:
    ``message`` is added unless one with its id is kept already, then the newest ``limit`` stay."""
    if message.id is not None and any(known.id == message.id for known in kept):
        return newest(kept, limit)
    return newest([*kept, message], limit)


def candidates_after(
    kept: Sequence[QuoteCandidate], candidates: Sequence[QuoteCandidate], limit: int
) -> list[QuoteCandidate]:
    """The quote candidates a group keeps after :meth:`RoutingState.record_candidates`, oldest
    first.

    A candidate whose message is kept already, or older than the newest one kept, is not added:
    feeding the same recent messages turn after turn never brings back one that slid out. None is
    kept as the current message (``is_current`` is for the turn that found it); the newest
    ``limit`` stay.
    """
    merged = list(kept)
    known = {candidate.message_id for candidate in merged}
    for candidate in candidates:
        if candidate.message_id in known or (merged and candidate.time < merged[-1].time):
            continue
        merged.append(
            attrs.evolve(candidate, is_current=False) if candidate.is_current else candidate
        )
        known.add(candidate.message_id)
    return newest(merged, limit)


class RoutingState(abc.ABC):
    """The routing state of one deployment, keyed by bot and group.

    Times are aware datetimes. Implementations must be safe to share between threads.
    """

    # -- one read of a group ---------------------------------------------------------------

    def snapshot(
        self, bot_id: str, group_id: str, *, replies_since: dt.datetime | None = None
    ) -> GroupSnapshot:
        """The group's mute, last quote, last phrase and rhythm, and with ``replies_since`` the
        count of the bot's replies since then, as one read.

        The router reads a group through this once per route (``docs/routing.md``). This
        default asks the single-value methods; a backend that can fetch them in one query or
        round trip overrides it.
        """
        return GroupSnapshot(
            mute=self.mute(bot_id, group_id),
            last_quote_at=self.last_quote_at(bot_id, group_id),
            last_phrase=self.last_phrase(bot_id, group_id),
            rhythm=self.rhythm(bot_id, group_id),
            replies_since=replies_since,
            bot_replies=0
            if replies_since is None
            else self.bot_replies_since(bot_id, group_id, replies_since),
        )

    # -- cooldown, disabled, silence -------------------------------------------------------

    @abc.abstractmethod
    def mute(self, bot_id: str, group_id: str) -> GroupMute:
        """The group's run-time switch, cooldown and silence."""

    @abc.abstractmethod
    def set_switch(self, bot_id: str, group_id: str, switch: GroupSwitch | None) -> None:
        """Switch the bot on or off in a group at run time; ``None`` leaves it to the
        configuration again (``docs/groups.md``)."""

    @abc.abstractmethod
    def switches(self, bot_id: str | None = None) -> tuple[tuple[str, str, GroupSwitch], ...]:
        """Every group with a run-time switch set, as ``(bot_id, group_id, switch)``, sorted (of
        ``bot_id`` only, when given)."""

    def set_disabled(self, bot_id: str, group_id: str, disabled: bool) -> None:
        """Switch the bot off (or back on) in a group: :meth:`set_switch` without an author."""
        self.set_switch(bot_id, group_id, GroupSwitch(enabled=not disabled))

    @abc.abstractmethod
    def start_cooldown(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        """Hold replies in a group until ``until``; messages are kept meanwhile."""

    @abc.abstractmethod
    def start_silence(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        """Silence the bot in a group until ``until`` (a shut-up request)."""

    # -- messages kept during a cooldown ---------------------------------------------------

    @abc.abstractmethod
    def keep_message(self, bot_id: str, group_id: str, message: ChatMessage, limit: int) -> None:
        """Keep a message for the next trigger; beyond ``limit`` the oldest goes."""

    @abc.abstractmethod
    def take_kept_messages(self, bot_id: str, group_id: str) -> tuple[ChatMessage, ...]:
        """Return the kept messages, oldest first, and forget them."""

    # -- quote candidates and the quote throttle -------------------------------------------

    @abc.abstractmethod
    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...] | None:
        """Add candidates not yet known, oldest first; only the newest ``limit`` are kept.

        A candidate older than the newest one kept is ignored, so feeding the same recent
        messages turn after turn never brings back a candidate that already slid out.

        :returns: the group's candidates after the change, oldest first, as :meth:`candidates`
            would read them, when the backend has them at hand (it saves the router a read);
            ``None`` otherwise.
        """

    @abc.abstractmethod
    def candidates(self, bot_id: str, group_id: str) -> tuple[QuoteCandidate, ...]:
        """The group's candidates, oldest first."""

    @abc.abstractmethod
    def last_quote_at(self, bot_id: str, group_id: str) -> dt.datetime | None:
        """When a quote was last delivered in the group."""

    @abc.abstractmethod
    def note_quote_delivered(
        self, bot_id: str, group_id: str, message_id: str, at: dt.datetime
    ) -> None:
        """Record a delivered quote; the quote cooldown counts from ``at``."""

    # -- low-engagement phrases, bot replies, rhythm ---------------------------------------

    @abc.abstractmethod
    def last_phrase(self, bot_id: str, group_id: str) -> str | None:
        """The group's last low-engagement phrase."""

    @abc.abstractmethod
    def note_phrase(self, bot_id: str, group_id: str, phrase: str) -> None:
        """Remember the group's last low-engagement phrase (never repeated right away)."""

    @abc.abstractmethod
    def note_bot_reply(self, bot_id: str, group_id: str, at: dt.datetime) -> None:
        """Record that the bot replied in the group at ``at``."""

    @abc.abstractmethod
    def bot_replies_since(self, bot_id: str, group_id: str, since: dt.datetime) -> int:
        """How many replies the bot delivered in the group since ``since``."""

    @abc.abstractmethod
    def rhythm(self, bot_id: str, group_id: str) -> RhythmProfile | None:
        """The group's reply rhythm, when known."""

    @abc.abstractmethod
    def set_rhythm(self, bot_id: str, group_id: str, profile: RhythmProfile) -> None:
        """Store the group's reply rhythm (from a profiling job)."""


@attrs.define
class _GroupState:
    switch: GroupSwitch | None = None
    cooldown_until: dt.datetime | None = None
    silence_until: dt.datetime | None = None
    kept: list[ChatMessage] = attrs.field(factory=list)
    candidates: list[QuoteCandidate] = attrs.field(factory=list)
    last_quote_at: dt.datetime | None = None
    last_phrase: str | None = None
    replies: deque[dt.datetime] = attrs.field(factory=lambda: deque(maxlen=REPLY_LOG_MAX))
    rhythm: RhythmProfile | None = None


@attrs.define
class MemoryRoutingState(RoutingState):
    """Routing state in this process (tests, single-process bots); thread-safe."""

    _groups: dict[tuple[str, str], _GroupState] = attrs.field(factory=dict, init=False)
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False, repr=False)

    def _group(self, bot_id: str, group_id: str) -> _GroupState:
        key = (bot_id, group_id)
        group = self._groups.get(key)
        if group is None:  # not setdefault: that builds a state on every call
            group = self._groups[key] = _GroupState()
        return group

    def snapshot(
        self, bot_id: str, group_id: str, *, replies_since: dt.datetime | None = None
    ) -> GroupSnapshot:
        with self._lock:
            group = self._group(bot_id, group_id)
            return GroupSnapshot(
                mute=self._mute(group),
                last_quote_at=group.last_quote_at,
                last_phrase=group.last_phrase,
                rhythm=group.rhythm,
                replies_since=replies_since,
                bot_replies=0
                if replies_since is None
                else sum(1 for at in group.replies if at >= replies_since),
            )

    @staticmethod
    def _mute(group: _GroupState) -> GroupMute:
        return GroupMute(
            disabled=group.switch is not None and not group.switch.enabled,
            cooldown_until=group.cooldown_until,
            silence_until=group.silence_until,
            switch=group.switch,
        )

    def mute(self, bot_id: str, group_id: str) -> GroupMute:
        with self._lock:
            return self._mute(self._group(bot_id, group_id))

    def set_switch(self, bot_id: str, group_id: str, switch: GroupSwitch | None) -> None:
        with self._lock:
            self._group(bot_id, group_id).switch = switch

    def switches(self, bot_id: str | None = None) -> tuple[tuple[str, str, GroupSwitch], ...]:
        with self._lock:
            return tuple(
                (bot, group, state.switch)
                for (bot, group), state in sorted(self._groups.items())
                if state.switch is not None and bot_id in (None, bot)
            )

    def start_cooldown(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        with self._lock:
            self._group(bot_id, group_id).cooldown_until = until

    def start_silence(self, bot_id: str, group_id: str, until: dt.datetime) -> None:
        with self._lock:
            self._group(bot_id, group_id).silence_until = until

    def keep_message(self, bot_id: str, group_id: str, message: ChatMessage, limit: int) -> None:
        with self._lock:
            group = self._group(bot_id, group_id)
            group.kept = kept_messages_after(group.kept, message, limit)

    def take_kept_messages(self, bot_id: str, group_id: str) -> tuple[ChatMessage, ...]:
        with self._lock:
            group = self._group(bot_id, group_id)
            taken, group.kept = tuple(group.kept), []
            return taken

    def record_candidates(
        self, bot_id: str, group_id: str, candidates: Sequence[QuoteCandidate], limit: int
    ) -> tuple[QuoteCandidate, ...]:
        with self._lock:
            group = self._group(bot_id, group_id)
            group.candidates = candidates_after(group.candidates, candidates, limit)
            return tuple(group.candidates)

    def candidates(self, bot_id: str, group_id: str) -> tuple[QuoteCandidate, ...]:
        with self._lock:
            return tuple(self._group(bot_id, group_id).candidates)

    def last_quote_at(self, bot_id: str, group_id: str) -> dt.datetime | None:
        with self._lock:
            return self._group(bot_id, group_id).last_quote_at

    def note_quote_delivered(
        self, bot_id: str, group_id: str, message_id: str, at: dt.datetime
    ) -> None:
        with self._lock:
            self._group(bot_id, group_id).last_quote_at = at

    def last_phrase(self, bot_id: str, group_id: str) -> str | None:
        with self._lock:
            return self._group(bot_id, group_id).last_phrase

    def note_phrase(self, bot_id: str, group_id: str, phrase: str) -> None:
        with self._lock:
            self._group(bot_id, group_id).last_phrase = phrase

    def note_bot_reply(self, bot_id: str, group_id: str, at: dt.datetime) -> None:
        with self._lock:
            self._group(bot_id, group_id).replies.append(at)

    def bot_replies_since(self, bot_id: str, group_id: str, since: dt.datetime) -> int:
        with self._lock:
            return sum(1 for at in self._group(bot_id, group_id).replies if at >= since)

    def rhythm(self, bot_id: str, group_id: str) -> RhythmProfile | None:
        with self._lock:
            return self._group(bot_id, group_id).rhythm

    def set_rhythm(self, bot_id: str, group_id: str, profile: RhythmProfile) -> None:
        with self._lock:
            self._group(bot_id, group_id).rhythm = profile
