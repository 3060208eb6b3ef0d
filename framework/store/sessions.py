"""The conversational stores: group log, sessions, summaries, bot-reply context, feedback ledger.

The rows they keep (:class:`~promptweave.store.session_rows.SessionTurn`, …) are records of their
own module, :mod:`promptweave.store.session_rows`, which the plugin contract imports.

Each store is a :class:`typing.Protocol`; SQLite (:mod:`promptweave.store.sessions_sqlite`),
in-memory (:mod:`promptweave.store.sessions_memory`) and Redis (``promptweave.contrib.redis_store``)
implementations exist, and another engine can be added without touching the callers (``Writing a
store backend`` in ``docs/store.md``). What a store keeps, when an entry expires and what a row
becomes is decided by the functions of this module, which every backend calls. Every method takes
the time it acts at (``now``) from the caller, so expiry and cooldowns follow the runtime's
injectable clock.

Scopes are strings: a private chat is stored under the group id ``""`` (see :func:`group_scope`).
Every method may raise :class:`promptweave.StoreUnavailableError`; the runtime turns that into
a degraded turn (``docs/design.md``, degradation) and never lets it reach the bot.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from promptweave.store.session_rows import SessionSummary, SessionTurn, TurnKind
from promptweave.turn import ChatMessage

__all__ = [
    "BOT_REPLY_MAX_ENTRIES",
    "BOT_REPLY_TEXT_CHARS",
    "BOT_REPLY_TTL_S",
    "FEEDBACK_MAX_PHRASES",
    "GROUP_LOG_MAX_PER_GROUP",
    "TRIM_BATCH",
    "BotReplyContext",
    "FeedbackLedger",
    "GroupLog",
    "SessionStore",
    "SummaryStore",
    "bot_reply_entry",
    "compaction_due",
    "feedback_phrases",
    "group_scope",
    "newest_phrases",
    "summary_row",
]

#: Messages a group log keeps per (bot, group) on every backend; the oldest go first. The
#: timeline and the bot-presence count read far fewer, and a long-running bot stays bounded.
GROUP_LOG_MAX_PER_GROUP = 1000
#: Rows beyond a window (the group log's, a session's storage window) deleted per write at most:
#: a group that holds a million rows (a log kept before the window, a window made smaller) is
#: trimmed a batch per write, never in one long call that holds the store.
TRIM_BATCH = 64

#: Seconds a delivered bot message can be looked up after it was written (``[session]
#: bot_reply_ttl_s`` sets the runtime's).
BOT_REPLY_TTL_S = 600.0
#: Delivered bot messages a bot-reply context keeps (``[session] bot_reply_max_entries``).
BOT_REPLY_MAX_ENTRIES = 512
#: The longest text a bot-reply context keeps of one message; the quote block needs no more.
BOT_REPLY_TEXT_CHARS = 500

#: The most phrases the feedback ledger applies per (bot, group), newest first.
FEEDBACK_MAX_PHRASES = 32


def group_scope(group_id: str | None) -> str:
    """The stored form of a group id: ``""`` for a private chat."""
    return group_id or ""


# -- the rules every backend applies ----------------------------------------------------------
# A backend stores and finds; what to keep, when something expires and what a row becomes are
# decided here, once, so that no two engines can drift apart.


def summary_row(bot_id: str, group_id: str, user_id: str, summary: SessionTurn) -> SessionTurn:
    """The row :meth:`SessionStore.replace_with_summary` stores for ``summary``.

    It belongs to the session it replaces rows of, is a ``user`` row of kind ``summary``, and has
    no message id, reply or images of its own: it stands for many turns, none of which it is.
    """
    return attrs.evolve(
        summary,
        bot_id=bot_id,
        group_id=group_id,
        user_id=user_id,
        role="user",
        kind=TurnKind.SUMMARY,
        message_id=None,
        reply_to=None,
        images=(),
        key=None,
    )


def compaction_due(started: float | None, now: dt.datetime, cooldown_s: float) -> bool:
    """Whether :meth:`SessionStore.claim_compaction` may start a compaction at ``now``.

    :param started: when the last one of the session started (epoch seconds), if ever.
    """
    return started is None or now.timestamp() - started >= cooldown_s


def bot_reply_entry(
    message_id: str, text: str, *, now: dt.datetime, ttl_s: float, text_chars: int
) -> tuple[str, float] | None:
    """What a :class:`BotReplyContext` keeps of one delivered message.

    :returns: the text, stripped and cut to ``text_chars``, and when the entry expires (epoch
        seconds, ``ttl_s`` after ``now``: a lookup at or after it finds nothing); ``None`` when
        the id or the text is blank, which is not kept.
    """
    kept = text.strip()[:text_chars]
    if not message_id or not kept:
        return None
    return kept, now.timestamp() + ttl_s


def feedback_phrases(phrases: Iterable[str]) -> list[str]:
    """The phrases of one outcome as :meth:`FeedbackLedger.record_outcome` records them:
    stripped, blank ones dropped, each once, in the order given."""
    return list(dict.fromkeys(phrase.strip() for phrase in phrases if phrase.strip()))


def newest_phrases(newest_first: Iterable[str]) -> tuple[str, ...]:
    """What :meth:`FeedbackLedger.blacklisted_phrases` returns of the recorded phrases (newest
    first, repeats included): each phrase once, at most :data:`FEEDBACK_MAX_PHRASES`."""
    return tuple(dict.fromkeys(newest_first))[:FEEDBACK_MAX_PHRASES]


@runtime_checkable
class GroupLog(Protocol):
    """The messages the bot saw in a group, its own included; the group timeline reads it.

    An implementation keeps the newest :data:`GROUP_LOG_MAX_PER_GROUP` messages (by time) per bot
    and group, so a long-running bot stays bounded; rows beyond that are deleted at most
    :data:`TRIM_BATCH` per append.
    """

    def append_group_message(self, bot_id: str, group_id: str, message: ChatMessage) -> bool:
        """Store ``message``; one already stored with the same id is ignored.

        :returns: ``True`` when a row was added: not for a duplicate id, nor for a message older
            than the kept window (dropped at once).
        """

    def recent_group_messages(
        self, bot_id: str, group_id: str, *, until: dt.datetime, limit: int
    ) -> list[ChatMessage]:
        """The newest ``limit`` messages at or before ``until``, oldest first."""

    def find_group_message(self, bot_id: str, group_id: str, message_id: str) -> ChatMessage | None:
        """The kept message with id ``message_id``, or ``None``: what a reply quotes, where its
        images come from when the platform does not send them (``docs/design.md``, images)."""


@runtime_checkable
class SessionStore(Protocol):
    """Per (bot, group, user) conversation turns, and their compression into a summary row."""

    def append_turns(self, turns: Sequence[SessionTurn], *, storage_window: int) -> int:
        """Store turns; one with the same (scope, role, message id) as a stored one is ignored.

        Afterwards each touched session keeps only its newest ``storage_window`` rows.

        :returns: how many rows were added: a row older than the kept window is deleted at once
            and not counted.
        """

    def user_turns(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
        usage: bool = True,
    ) -> list[SessionTurn]:
        """The newest ``limit`` rows of one session in ``[since, until]``, oldest first.

        :param usage: ``False`` for a read that uses nothing of the rows' ``usage`` (the session
            reader's history, read for every message routed): a store may then give the rows
            without it (``None``), sparing the building of it.
        """

    def latest_summary(
        self, bot_id: str, group_id: str, user_id: str, *, until: dt.datetime
    ) -> SessionTurn | None:
        """The newest summary row of one session at or before ``until``."""

    def group_turns(
        self,
        bot_id: str,
        group_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
    ) -> list[SessionTurn]:
        """The newest ``limit`` conversation rows (no summaries) of all sessions of a group."""

    def claim_compaction(
        self, bot_id: str, group_id: str, user_id: str, *, now: dt.datetime, cooldown_s: float
    ) -> bool:
        """Atomically start a compaction unless one started less than ``cooldown_s`` ago.

        :returns: ``True`` when the caller may compact now (and the cooldown restarts).
        """

    def replace_with_summary(
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        remove: Sequence[int],
        summary: SessionTurn,
    ) -> bool:
        """Delete the rows with keys ``remove`` and insert ``summary`` in one step.

        :returns: ``False`` when none of the rows existed any more (nothing changed).
        """


@runtime_checkable
class SummaryStore(Protocol):
    """The archive of every summary written, for recalling older topics (section ``mid_term``)."""

    def add_summary(self, summary: SessionSummary) -> None:
        """Archive one summary."""

    def list_summaries(
        self, bot_id: str, group_id: str | None, user_id: str | None, limit: int
    ) -> list[SessionSummary]:
        """The newest ``limit`` summaries of a bot in a group (``None``: private chats), newest
        first; ``user_id=None`` lists those of every user of the group."""


@runtime_checkable
class BotReplyContext(Protocol):
    """What the bot said in each delivered message, so a reply to it can show the quoted text.

    Keyed by (group, bot, message id); entries expire after a TTL, and beyond a maximum count the
    least recently used (written, or found by :meth:`lookup`) are evicted (``docs/design.md``,
    bot-reply context).
    """

    def remember(
        self, bot_id: str, group_id: str, message_id: str, text: str, *, now: dt.datetime
    ) -> None:
        """Record the text of a delivered message (blank text or id is ignored)."""

    def lookup(
        self, bot_id: str, group_id: str, message_id: str, *, now: dt.datetime
    ) -> str | None:
        """The text of a delivered message, or ``None`` when unknown or expired."""


@runtime_checkable
class FeedbackLedger(Protocol):
    """Phrases group members rejected, per (bot, group); ambient turns containing one are not
    injected again (negative feedback, ``docs/messages.md``)."""

    def record_outcome(
        self,
        bot_id: str,
        group_id: str,
        outcome_id: str,
        phrases: Sequence[str],
        *,
        now: dt.datetime,
    ) -> int:
        """Blacklist ``phrases`` because of one negative outcome; idempotent per outcome id.

        :returns: how many phrases were newly recorded.
        """

    def undo_outcome(self, bot_id: str, group_id: str, outcome_id: str) -> int:
        """Remove the phrases of one outcome. :returns: how many were removed."""

    def blacklisted_phrases(self, bot_id: str, group_id: str) -> tuple[str, ...]:
        """The blacklisted phrases of a bot in a group, newest first."""
