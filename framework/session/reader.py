"""What a turn reads from the conversational stores, and the degradation when it cannot.

A turn may carry its recent group messages, history, quoted bot text and quoted message images
itself (a turn file does); whatever it leaves out is read from the stores. When the stores are
disabled or a read fails, the reader records why and the message sequence falls back to the current
message alone (``docs/design.md#degradation``). No store error ever leaves this module.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptweave._dates import shifted
from promptweave.config import Config
from promptweave.messages.ambient import (
    AmbientExcerpt,
    render_ambient_excerpt,
    select_ambient_turns,
)
from promptweave.messages.message_cache import MessageCache, turn_rows
from promptweave.messages.sequence import HistoryRow, stepped_window
from promptweave.messages.timeline import timeline_limit
from promptweave.routing.signals import raw_reply_id
from promptweave.store.session_rows import SessionTurn
from promptweave.store.sessions import group_scope
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.turn import ChatMessage, Turn

__all__ = ["SessionReader", "read_session"]

log = logging.getLogger("promptweave.store")


def _same_message(message: ChatMessage, current: ChatMessage) -> bool:
    if message.id is not None and current.id is not None:
        return message.id == current.id
    return (message.sender_id, message.text, message.time) == (
        current.sender_id,
        current.text,
        current.time,
    )


#: Per session store class: whether its ``user_turns`` takes ``usage``.
_TAKES_USAGE: dict[type, bool] = {}


def _takes_usage(sessions: object) -> bool:
    """Whether ``sessions.user_turns`` takes ``usage`` (the built-in session stores do; a
    backend written before the parameter came need not), asked once per class."""
    kind: Any = type(sessions)
    known = _TAKES_USAGE.get(kind)
    if known is None:
        try:
            signature = inspect.signature(kind.user_turns)
        except (AttributeError, TypeError, ValueError):
            known = False
        else:
            known = any(
                p.name == "usage" or p.kind is inspect.Parameter.VAR_KEYWORD
                for p in signature.parameters.values()
            )
        _TAKES_USAGE[kind] = known
    return known


@attrs.define
class SessionReader:
    """Reads one turn's session inputs from ``stores``; any store failure sets ``degraded``.

    :param now: the turn's time: nothing newer than it is read, so a stored log can be replayed.
    :param cache: where the rows of a turn's own history are kept between turns.
    """

    stores: Stores
    config: Config
    persona: PersonaPack
    turn: Turn
    now: dt.datetime
    cache: MessageCache | None = None
    degraded: str | None = attrs.field(init=False, default=None)
    sources: dict[str, str] = attrs.field(init=False, factory=dict)
    #: Each source asked for the quoted message, in order, and what it gave
    #: (``{"source": "group_log", "result": "missing"}``): the trace's ``quoted_lookup``.
    quoted_lookup: list[dict[str, Any]] = attrs.field(init=False, factory=list)
    _history: tuple[HistoryRow, ...] | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if self.stores.sessions is None:
            self.degraded = self.stores.unavailable or "store_disabled"

    @property
    def _scope(self) -> str:
        return group_scope(self.turn.group_id)

    def _failed(self, what: str, exc: BaseException) -> None:
        log.warning("reading %s from the store failed, degrading: %s", what, exc)
        self.degraded = f"store_unavailable: {exc}"

    def _since(self) -> dt.datetime | None:
        session = self.config.session
        ttl = session.private_ttl_s if self.turn.is_private else session.group_ttl_s
        if ttl <= 0:
            return None
        return shifted(self.now, -ttl)

    def recent_messages(self) -> tuple[ChatMessage, ...]:
        """The group's latest messages for the timeline: the turn's own, else the group log's."""
        if self.turn.recent_messages:
            self.sources["timeline"] = "turn"
            return self.turn.recent_messages
        limit = timeline_limit(self.turn, self.config.timeline)
        log_store = self.stores.group_log
        if limit == 0 or log_store is None or self.turn.group_id is None:
            return ()
        try:
            found = log_store.recent_group_messages(
                self.turn.bot.id, self._scope, until=self.now, limit=limit + 1
            )
        except STORE_ERRORS as exc:
            self._failed("the group log", exc)
            return ()
        self.sources["timeline"] = "store"
        return tuple(m for m in found if not _same_message(m, self.turn.message))

    def quoted_bot_text(self) -> str | None:
        """The turn's quoted bot text, else the bot-reply context's entry for ``reply_to``."""
        if self.turn.quoted_bot_text is not None:
            return self.turn.quoted_bot_text
        reply_to = self.turn.message.reply_to
        context = self.stores.bot_replies
        if reply_to is None or context is None or self.turn.group_id is None:
            return None
        try:
            found = context.lookup(self.turn.bot.id, self.turn.group_id, reply_to, now=self.now)
        except STORE_ERRORS as exc:
            log.warning("bot-reply context lookup failed: %s", exc)
            return None
        if found is not None:
            self.sources["quoted_bot_text"] = "bot_reply_context"
        return found

    def quoted_message_images(self, recent: Sequence[ChatMessage]) -> tuple[str, ...]:
        """The images of the message the current one replies to (``docs/design.md#images``),
        from the first source that has the message, in this order: the turn's own
        ``quoted_message_images`` (source ``turn``); the quoted message the platform delivered
        with the event (``turn.quoted_message``, source ``event``); the ``reply_to`` message
        among ``recent`` (the turn's recent messages, source ``recent_messages``), else in the
        group log (source ``group_log``). The source names where the message was found, also
        when it has no image. When none has it, the source is ``none`` and the live
        loop may still ask the platform (``get_msg``: :meth:`quoted_fetched`). A message newer
        than the turn is not read, so a stored log can be replayed. Each source asked is in
        :attr:`quoted_lookup`."""
        if self.turn.quoted_message_images:
            self.sources["quoted_message_images"] = "turn"
            return self.turn.quoted_message_images
        reply_to = self.turn.message.reply_to
        if reply_to is None:
            return ()
        self.sources["quoted_message_images"] = "none"
        given = self.turn.quoted_message
        if given is not None:
            if given.id is not None and given.id != reply_to:
                self._tried("event", "other_message")
            else:
                return given.images if self._quoted_in("event", given) else ()
        quoted = next((m for m in reversed(recent) if m.id == reply_to), None)
        if quoted is not None:
            return quoted.images if self._quoted_in("recent_messages", quoted) else ()
        self._tried("recent_messages", "missing")
        log_store = self.stores.group_log
        if log_store is None or self.turn.group_id is None:
            return ()
        try:
            quoted = log_store.find_group_message(self.turn.bot.id, self._scope, reply_to)
        except STORE_ERRORS as exc:
            log.warning("looking up the quoted message failed: %s", exc)
            self._tried("group_log", f"error: {exc}")
            return ()
        if quoted is None:
            self._tried("group_log", "missing")
            return ()
        return quoted.images if self._quoted_in("group_log", quoted) else ()

    def _tried(self, source: str, result: str) -> None:
        self.quoted_lookup.append({"source": source, "result": result})

    def _quoted_in(self, source: str, quoted: ChatMessage) -> bool:
        """Whether ``source``'s copy of the quoted message gives images (noted either way). A
        message newer than the turn is not read; one without images is still the quoted message
        found (the source names it), and no later source is asked."""
        if quoted.time > self.now:
            self._tried(source, "newer_than_turn")
            return False
        self.sources["quoted_message_images"] = source
        self._tried(source, "found" if quoted.images else "no_images")
        return bool(quoted.images)

    @property
    def quoted_pending(self) -> str | None:
        """The id of the quoted message when no source had it (source ``none``): the message
        the live loop asks the platform for (``get_msg``)."""
        if self.sources.get("quoted_message_images") != "none":
            return None
        return self.turn.message.reply_to

    def quoted_fetched(self, step: dict[str, Any]) -> None:
        """Note what the platform said of the quoted message when asked (``step``: its
        ``source``, such as ``get_msg``, and ``result``): ``found`` or ``no_images`` when it gave
        the message (the source then names it), else why not (``timeout``, ``error: …``,
        ``missing``)."""
        self.quoted_lookup.append(dict(step))
        if step["result"] in ("found", "no_images"):
            self.sources["quoted_message_images"] = step["source"]

    def history(self) -> tuple[HistoryRow, ...]:
        """The user's history: the turn's own, else the store's newest rows with the summary kept
        at the front; nothing once degraded. Read once per turn."""
        if self._history is None:
            self._history = self._read_history()
        return self._history

    def _read_history(self) -> tuple[HistoryRow, ...]:
        window = self.config.history.user_window
        # The cache mode's window moves in steps (docs/cost.md); system mode's by one row.
        step = (
            self.config.history.window_step
            if self.config.turn_context.turn_sections == "user"
            else 1
        )
        if self.degraded is not None:
            return ()
        if self.turn.history:
            self.sources["history"] = "turn"
            if self.cache is None or step > 1:
                return turn_rows(self.turn.history, window, HistoryRow.from_entry, step)
            conversation = (self.turn.bot.id, self._scope, self.turn.message.sender_id)
            return self.cache.window_rows(conversation, self.turn.history, window)
        try:
            turns = self._window_turns(window, step)
        except STORE_ERRORS as exc:
            self._failed("the session history", exc)
            return ()
        self.sources["history"] = "store"
        return tuple(
            HistoryRow(
                role=t.role, content=t.display_text(), summary=t.is_summary, message_id=t.message_id
            )
            for t in turns
        )

    def _window_turns(self, window: int, step: int) -> list[SessionTurn]:
        """The session rows of the history window: the newest ``window`` (``step`` 1), or the
        rows :func:`promptweave.messages.sequence.stepped_window` keeps of the session."""
        sessions = self.stores.sessions
        assert sessions is not None  # not degraded
        bot_id, user_id = self.turn.bot.id, self.turn.message.sender_id

        # The rows become HistoryRows, which keep nothing of a row's usage: a store that can
        # leave it out is asked to (a store written before the parameter is read as before).
        without_usage = {"usage": False} if _takes_usage(sessions) else {}

        def read(limit: int) -> list[SessionTurn]:
            found = sessions.user_turns(
                bot_id,
                self._scope,
                user_id,
                until=self.now,
                limit=limit + 1,
                since=self._since(),
                **without_usage,
            )
            return [t for t in found if not self._is_current(t)][-limit:]

        if step <= 1:
            turns = read(window)
        else:
            # Enough rows to find the anchor (the newest summary) in a session compressed as
            # usual; the whole kept session when it is not among them.
            limit = window + 3 * step
            turns = read(limit)
            if len(turns) >= limit and not any(t.is_summary for t in turns):
                turns = read(self.config.session.storage_window)
            summary_at, start = stepped_window([t.is_summary for t in turns], window, step)
            if summary_at is not None:
                return [turns[summary_at], *turns[start:]]
            turns = turns[start:]
            window = len(turns) + 1
        summary = None
        if turns and not any(t.is_summary for t in turns):
            summary = sessions.latest_summary(bot_id, self._scope, user_id, until=turns[0].time)
        if summary is not None and window > 1:
            turns = [summary, *turns[-(window - 1) :]]
        return turns

    def _is_current(self, turn: SessionTurn) -> bool:
        current = self.turn.message
        return turn.role == "user" and turn.message_id is not None and turn.message_id == current.id

    def ambient(self) -> tuple[AmbientExcerpt | None, dict[str, Any]]:
        """The ambient excerpt from the group's latest session turns, with its trace notes."""
        sessions = self.stores.sessions
        if sessions is None or self.degraded is not None or self.turn.group_id is None:
            return None, {}
        settings = self.config.ambient
        try:
            window = sessions.group_turns(
                self.turn.bot.id,
                self._scope,
                until=self.now,
                limit=settings.window + 1,
                since=self._since(),
            )
        except STORE_ERRORS as exc:
            log.warning("reading the ambient excerpt failed: %s", exc)
            return None, {"ambient_error": str(exc)}
        window = [t for t in window if not self._is_current(t)][-settings.window :]
        selection = select_ambient_turns(
            window, self.turn.message.sender_id, self._blacklist, self._in_history()
        )
        if selection.filter_error is not None:
            log.warning("negative-feedback filter failed open: %s", selection.filter_error)
        excerpt = render_ambient_excerpt(
            selection.turns,
            bot_id=self.turn.bot.id,
            group_id=self._scope,
            persona=self.persona,
            config=settings,
        )
        notes: dict[str, Any] = {
            "ambient_window": len(window),
            "ambient_removed_own": selection.removed_own,
            "ambient_fell_back_to_pair": selection.fell_back_to_pair,
            "feedback_filter": selection.filter_status,
            "feedback_filtered": selection.filtered,
        }
        if selection.filter_error is not None:
            notes["feedback_filter_error"] = selection.filter_error
        return excerpt, notes

    def _in_history(self) -> Callable[[SessionTurn], bool]:
        """Whether a session turn is one of the history rows this turn sends: by message id
        when both have one, else by role and text."""
        rows = [row for row in self.history() if not row.summary]
        ids = {(row.role, row.message_id) for row in rows if row.message_id is not None}
        texts = {(row.role, row.content.strip()) for row in rows}

        def sent(turn: SessionTurn) -> bool:
            if turn.message_id is not None and (turn.role, turn.message_id) in ids:
                return True
            return (turn.role, turn.display_text().strip()) in texts

        return sent

    def _blacklist(self) -> tuple[str, ...]:
        ledger = self.stores.feedback
        if ledger is None:
            return ()
        return ledger.blacklisted_phrases(self.turn.bot.id, self._scope)


def read_session(
    stores: Stores,
    config: Config,
    persona: PersonaPack,
    turn: Turn,
    now: dt.datetime,
    cache: MessageCache | None = None,
) -> tuple[SessionReader, Turn]:
    """Read what the turn leaves out from the stores; return the reader and the completed turn
    (its ``recent_messages``, ``quoted_bot_text`` and ``quoted_message_images`` filled in, and
    the message's ``reply_to`` read from its raw form when only that names it).

    :param cache: where the rows of a turn's own history are kept between turns.
    """
    if turn.message.reply_to is None:
        reply_to = raw_reply_id(turn.message.raw)
        if reply_to is not None:
            turn = attrs.evolve(turn, message=attrs.evolve(turn.message, reply_to=reply_to))
    reader = SessionReader(
        stores=stores, config=config, persona=persona, turn=turn, now=now, cache=cache
    )
    recent = reader.recent_messages()
    quoted = reader.quoted_bot_text()
    images = reader.quoted_message_images(recent)
    if (
        recent is turn.recent_messages
        and quoted == turn.quoted_bot_text
        and images == turn.quoted_message_images
    ):
        return reader, turn  # the turn carried all of it: nothing to complete
    return reader, attrs.evolve(
        turn, recent_messages=recent, quoted_bot_text=quoted, quoted_message_images=images
    )
