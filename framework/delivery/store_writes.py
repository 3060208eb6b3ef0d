"""Recording what happened in a chat, and the background work that follows delivery.

:func:`record_message` stores an incoming message in the group log (the timeline reads it);
:func:`record_bot_reply` stores a delivered bot message: in the group log, in the bot-reply context
(so a reply to it can show what the bot said), and, with the message it answered, as a turn pair of
that user's session, and says how many rows were new. Store failures are logged and reported
(``False``, ``stored=False``): recording never raises into the bot (``docs/design.md#degradation``,
运行态不可用时的退化).
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping

import attrs

from promptweave._fields import has_lone_surrogate
from promptweave.config import Config
from promptweave.messages.images import IMAGE_WITHOUT_URL
from promptweave.messages.sequence import USER_MESSAGE_MAX_CHARS
from promptweave.plugins.workers import DaemonExecutor
from promptweave.store.routing_state import QuoteCandidate
from promptweave.store.session_rows import SessionTurn
from promptweave.store.sessions import group_scope
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.sanitize import strip_lone_surrogates
from promptweave.turn import ChatMessage

__all__ = [
    "BackgroundRunner",
    "RecordedReply",
    "record_bot_reply",
    "record_message",
    "unusable_ids",
]

log = logging.getLogger("promptweave.store")

#: ``until`` for reading a session's newest summary whatever its time.
_END_OF_TIME = dt.datetime.max.replace(tzinfo=dt.UTC)


def unusable_ids(bot_id: str, group_id: str | None, message_id: str | None = None) -> bool:
    """Whether ids handed to a recording call cannot be stored: a blank group id (stores would
    file it under the private-chat scope) or an id holding a lone surrogate (not text)."""
    if group_id is not None and not group_id.strip():
        return True
    return any(
        value is not None and has_lone_surrogate(value) for value in (bot_id, group_id, message_id)
    )


def record_message(
    stores: Stores,
    bot_id: str,
    group_id: str | None,
    message: ChatMessage,
    *,
    max_chars: int = USER_MESSAGE_MAX_CHARS,
    quote_candidates: int = 0,
) -> bool:
    """Store an incoming group message in the group log, its text cut at ``max_chars`` (the
    recorder passes ``[session] max_content_chars``, the cap of a session row), and with
    ``quote_candidates`` (``[routing] quote_candidates``) make it one of the group's quote
    candidates, the newest ``quote_candidates`` kept (``docs/routing.md``, quoting).

    Both writes are committed together (:meth:`Stores.transaction`); a routing state that fails
    is logged and leaves the message stored. A private message is not logged (private chats have
    no timeline); it enters the session when the bot answers it.

    :returns: ``True`` when stored; ``False`` for a private chat, a duplicate id, or a store that
        is disabled or failing (logged).
    """
    if group_id is None or stores.group_log is None:
        return False
    if unusable_ids(bot_id, group_id):
        log.warning("not recording a message with a blank group id or an id that is not text")
        return False
    # Made from the message as the router makes it, before the cut below.
    candidate = (
        QuoteCandidate.of(message) if quote_candidates > 0 and message.sender_id != bot_id else None
    )
    if len(message.text) > max_chars:
        message = attrs.evolve(message, text=message.text[:max_chars])
    # One commit for both, without savepoints (two statements less each): a failing candidate
    # write fails the whole, and the message alone is then recorded again.
    step = "message"
    try:
        with stores.transaction(savepoints=False):
            stored = stores.group_log.append_group_message(bot_id, group_id, message)
            if stored and candidate is not None:
                step = "candidate"
                stores.routing.record_candidates(bot_id, group_id, (candidate,), quote_candidates)
                step = "commit"
    except Exception as exc:
        if step != "candidate":
            if not isinstance(exc, STORE_ERRORS):
                raise
            log.warning("recording a message of group %s failed: %s", group_id, exc)
            return False
        # Whatever a routing state raises, the message must not be lost with its candidate.
        log.warning(
            "recording a quote candidate of group %s failed: %s",
            group_id,
            exc,
            exc_info=not isinstance(exc, STORE_ERRORS),
        )
        if not stores.commits_together:
            return True  # the message was committed on its own
        try:
            return stores.group_log.append_group_message(bot_id, group_id, message)
        except STORE_ERRORS as again:
            log.warning("recording a message of group %s failed: %s", group_id, again)
            return False
    return stored


def _user_turn(
    bot_id: str,
    group_id: str | None,
    message: ChatMessage,
    *,
    keep_image_urls: bool,
    max_chars: int,
) -> SessionTurn:
    """The session row of a user message, its text cut at ``max_chars`` like the bot's. Its
    images keep their URLs for compression to describe them later; without ``keep_image_urls``
    each is a plain ``[图片]`` mark and no URL is stored (``docs/design.md#images``: the switch
    off degrades to the bare placeholder)."""
    images = message.images if keep_image_urls else (IMAGE_WITHOUT_URL,) * len(message.images)
    return SessionTurn(
        bot_id=bot_id,
        group_id=group_scope(group_id),
        user_id=message.sender_id,
        role="user",
        content=message.text[:max_chars],
        message_id=message.id,
        reply_to=message.reply_to,
        images=images,
        time=message.time,
    )


@attrs.frozen(kw_only=True)
class RecordedReply:
    """What recording one delivered bot message did.

    :param stored: every write succeeded; ``False`` when a store is disabled or failing.
    :param added: rows that were new: the bot's message in the group log and the session turns.
        0 when everything was stored already (the same ids recorded before).
    """

    stored: bool
    added: int = 0


def record_bot_reply(
    stores: Stores,
    config: Config,
    bot_id: str,
    group_id: str | None,
    text: str,
    *,
    message_id: str | None,
    time: dt.datetime,
    answering: ChatMessage | None = None,
    quote_of: str | None = None,
    bot_name: str = "",
    session_text: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> RecordedReply:
    """Store a delivered bot message.

    :param message_id: the platform's id of the delivered message.
    :param answering: the user message it answers; with it, the pair enters that user's session
        (its images as URLs, or as plain ``[图片]`` marks when ``[session] describe_images`` is
        off).
    :param quote_of: the id of the message the reply was delivered quoting (the timeline then
        shows it).
    :param session_text: what the user's session keeps as the bot's answer, when it is more than
        this one message (an answer delivered as several bubbles, one a line).
    :param usage: the token usage the provider reported for the answer, kept on its session row.
    :returns: whether everything was stored, and how many rows were new.
    """
    text = strip_lone_surrogates(text)[: config.session.max_content_chars]
    session_text = None if session_text is None else strip_lone_surrogates(session_text)
    if stores.sessions is None:
        return RecordedReply(stored=False)
    if unusable_ids(bot_id, group_id, message_id):
        log.warning("not recording a bot reply with a blank group id or an id that is not text")
        return RecordedReply(stored=False)
    session = config.session
    sent = ChatMessage(
        id=message_id,
        sender_id=bot_id,
        sender_name=bot_name,
        text=text,
        time=time,
        reply_to=quote_of,
    )
    added = 0
    try:
        if group_id is not None and stores.group_log is not None:
            added += stores.group_log.append_group_message(bot_id, group_id, sent)
        if group_id is not None and message_id and stores.bot_replies is not None:
            stores.bot_replies.remember(bot_id, group_id, message_id, text, now=time)
        if answering is not None:
            reply = SessionTurn(
                bot_id=bot_id,
                group_id=group_scope(group_id),
                user_id=answering.sender_id,
                role="assistant",
                content=(session_text or text)[: session.max_content_chars],
                usage=usage,
                message_id=message_id,
                reply_to=answering.id,
                time=time,
            )
            user = _user_turn(
                bot_id,
                group_id,
                answering,
                keep_image_urls=session.describe_images,
                max_chars=session.max_content_chars,
            )
            pair = [user, reply]
            # Turns older than the session's newest summary were compressed into it: recording
            # them again (a log imported twice) must not bring them back.
            summary = stores.sessions.latest_summary(
                bot_id, reply.group_id, reply.user_id, until=_END_OF_TIME
            )
            if summary is not None:
                pair = [row for row in pair if row.time > summary.time]
            if pair:
                added += stores.sessions.append_turns(pair, storage_window=session.storage_window)
    except STORE_ERRORS as exc:
        log.warning("recording a reply of bot %s failed: %s", bot_id, exc)
        return RecordedReply(stored=False, added=added)
    return RecordedReply(stored=True, added=added)


@attrs.define
class BackgroundRunner:
    """Runs work after delivery on one worker thread, one job per key at a time.

    A job submitted while another with the same key is queued or running is not lost: the newest
    such job runs once the current one is done. Failures are logged and counted, never raised into
    the caller.
    """

    _executor: DaemonExecutor | None = attrs.field(default=None, init=False)
    _pending: set[concurrent.futures.Future[object]] = attrs.field(factory=set, init=False)
    _in_flight: set[Hashable] = attrs.field(factory=set, init=False)
    _follow_up: dict[Hashable, Callable[[], object]] = attrs.field(factory=dict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    failures: int = attrs.field(default=0, init=False)

    def submit(self, key: Hashable, job: Callable[[], object]) -> bool:
        """Queue ``job``; if a job with the same ``key`` is queued or running, run ``job`` after it
        instead (replacing any job already waiting for that key).

        :returns: ``True`` when queued now, ``False`` when deferred.
        """
        with self._lock:
            if key in self._in_flight:
                self._follow_up[key] = job
                return False
            self._in_flight.add(key)
            self._start(key, job)
        return True

    def _start(self, key: Hashable, job: Callable[[], object]) -> None:
        """Hand ``job`` to the worker; the caller holds the lock."""
        if self._executor is None:
            # A daemon thread: a job stuck in a plugin cannot keep the process from exiting.
            self._executor = DaemonExecutor(max_workers=1, name="promptweave-background")
        future = self._executor.submit(self._run, key, job)
        self._pending.add(future)
        future.add_done_callback(self._forget)

    def _run(self, key: Hashable, job: Callable[[], object]) -> object:
        try:
            return job()
        except Exception:
            log.exception("background job %r failed", key)
            with self._lock:
                self.failures += 1
            return None
        finally:
            with self._lock:
                follow_up = self._follow_up.pop(key, None)
                if follow_up is None:
                    self._in_flight.discard(key)
                else:
                    self._start(key, follow_up)

    def _forget(self, future: concurrent.futures.Future[object]) -> None:
        with self._lock:
            self._pending.discard(future)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every queued job. :returns: ``True`` when all finished within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                pending = [future for future in self._pending if not future.done()]
            if not pending:
                return True
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            _done, not_done = concurrent.futures.wait(pending, timeout=remaining)
            if not_done:
                return False

    def shutdown(self) -> None:
        """Finish the queued jobs and stop the worker thread."""
        self.wait()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
