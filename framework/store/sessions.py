"""The conversational stores: group log, sessions, summaries, bot-reply context, feedback ledger.

Each store is a :class:`typing.Protocol`; SQLite (:mod:`framework.store.sessions_sqlite`) and
in-memory (:mod:`framework.store.sessions_memory`) implementations exist, and another engine can be
added without touching the callers. Every method takes the time it acts at (``now``) from the
caller, so expiry and cooldowns follow the runtime's injectable clock (DESIGN.md §6).

Scopes are strings: a private chat is stored under the group id ``""`` (see :func:`group_scope`).
Every method may raise :class:`framework.store.StoreUnavailableError`; the runtime turns that into
the degradation of seed 004 (运行态不可用时的退化) and never lets it reach the bot.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from framework.prompt.text_rules import IMAGE_MARK
from framework.turn import ChatMessage

__all__ = [
    "GROUP_LOG_MAX_PER_GROUP",
    "SUMMARY_MARK",
    "TRIM_BATCH",
    "BotReplyContext",
    "FeedbackLedger",
    "GroupLog",
    "SessionStore",
    "SessionSummary",
    "SessionTurn",
    "SummaryStore",
    "TurnKind",
    "group_scope",
]

#: The first line of a summary row (seed 004, 长会话压缩).
SUMMARY_MARK = "【此前对话摘要】"

#: Messages a group log keeps per (bot, group) on every backend; the oldest go first. The
#: timeline and the bot-presence count read far fewer, and a long-running bot stays bounded.
GROUP_LOG_MAX_PER_GROUP = 1000
#: Rows beyond a window (the group log's, a session's storage window) deleted per write at most:
#: a group that holds a million rows (a log kept before the window, a window made smaller) is
#: trimmed a batch per write, never in one long call that holds the store.
TRIM_BATCH = 64


def group_scope(group_id: str | None) -> str:
    """The stored form of a group id: ``""`` for a private chat."""
    return group_id or ""


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _aware(_instance: object, _attribute: object, value: dt.datetime) -> None:
    if value.tzinfo is None:
        raise ValueError(f"time {value.isoformat()} has no UTC offset")


class TurnKind(enum.StrEnum):
    """A session row is a conversation turn or the summary of older turns."""

    TURN = "turn"
    SUMMARY = "summary"


@attrs.frozen(kw_only=True)
class SessionTurn:
    """One row of a user's session with the bot.

    :param user_id: the user whose session this is (also on the bot's replies to that user).
    :param role: ``user`` or ``assistant``; a summary row is a ``user`` row.
    :param content: the text; images are not in it but in ``images``.
    :param kind: ``turn`` or ``summary``.
    :param message_id: the platform's message id, if known.
    :param reply_to: the id of the message this one replied to.
    :param images: the turn's images, one entry each: their URLs, described only when a summary
        needs them, or :data:`framework.IMAGE_WITHOUT_URL` marks (``[session] describe_images``
        off, or an image that came without a URL). Either way the turn reads ``[图片]``.
    :param key: the store's own row key; ``None`` before the row is stored.
    """

    bot_id: str
    group_id: str
    user_id: str
    role: str = attrs.field(validator=attrs.validators.in_(("user", "assistant")))
    content: str
    time: dt.datetime = attrs.field(validator=_aware)
    kind: TurnKind = attrs.field(default=TurnKind.TURN, converter=TurnKind)
    message_id: str | None = None
    reply_to: str | None = None
    images: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    key: int | None = None

    @property
    def is_summary(self) -> bool:
        return self.kind is TurnKind.SUMMARY

    def display_text(self, image_text: str = IMAGE_MARK) -> str:
        """The content with one image mark in front when the turn carried images."""
        if not self.images:
            return self.content
        return f"{image_text} {self.content}".strip()


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One archived summary, as :meth:`SummaryStore.list_summaries` returns it.

    :param turns_covered: how many session rows the summary replaced.
    """

    bot_id: str
    group_id: str
    user_id: str
    text: str
    created: dt.datetime = attrs.field(validator=_aware)
    turns_covered: int = 0


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
        """The kept message with id ``message_id``, or ``None``: what a reply quotes (seed 004,
        当前/被引用的图片, the message store as the fallback)."""


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
    ) -> list[SessionTurn]:
        """The newest ``limit`` rows of one session in ``[since, until]``, oldest first."""

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
    least recently used (written, or found by :meth:`lookup`) are evicted (seed 004, 引用兜底).
    """

    def remember(
        self, group_id: str, bot_id: str, message_id: str, text: str, *, now: dt.datetime
    ) -> None:
        """Record the text of a delivered message (blank text or id is ignored)."""

    def lookup(
        self, group_id: str, bot_id: str, message_id: str, *, now: dt.datetime
    ) -> str | None:
        """The text of a delivered message, or ``None`` when unknown or expired."""


@runtime_checkable
class FeedbackLedger(Protocol):
    """Phrases group members rejected, per (bot, group); ambient turns containing one are not
    injected again (negative feedback, seed 004 messages 序列)."""

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
