"""The recorder: incoming messages, delivered replies, and what follows them.

:class:`Recorder` is one of the parts :class:`promptweave.Promptweave` is built from; the runtime's
``record_message``, ``record_bot_reply``, ``note_delivered``… hand their work to it. None of them raises for a failing store: the failure is
logged and the bot goes on (``docs/design.md#degradation``). Their return values are fixed, so each
recording stage logs its duration at debug level on the ``promptweave.stages`` logger instead.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING

import attrs

from promptweave._dates import shifted
from promptweave.config import Config
from promptweave.decision import Decision, DeliveryStyle
from promptweave.delivery.outgoing import ReplyInjection
from promptweave.delivery.store_writes import (
    BackgroundRunner,
    record_bot_reply,
    record_message,
    unusable_ids,
)
from promptweave.plugins.manager import PluginManager
from promptweave.plugins.watchdog import Watchdog
from promptweave.routing.quoting import Delivery, resolve_delivery
from promptweave.store.deliveries import DeliveryState, answered_key, delivered_key
from promptweave.store.sessions import group_scope
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.timing import elapsed_ms, stage_log
from promptweave.turn import ChatMessage, Turn

if TYPE_CHECKING:
    from promptweave.compression.summary import CompressionResult, ModelFor

__all__ = ["Recorder"]

log = logging.getLogger("promptweave")


@attrs.define(kw_only=True)
class Recorder:
    """Records what a bot saw and delivered, and schedules what follows (session compression).

    :param config: the configuration (routing cooldowns, session summaries).
    :param plugins: the plugin manager (``summarize_session``, ``describe_image``).
    :param persona: the persona pack (the bot's self label in the group log).
    :param stores: where everything is recorded.
    :param clock: the time of deliveries reported without one.
    :param background: runs session compression off the caller's path.
    :param watchdog: bounds the plugin calls of session compression (``summarize_session``,
        ``describe_image``).
    """

    config: Config
    plugins: PluginManager
    persona: PersonaPack
    stores: Stores
    clock: Callable[[], dt.datetime]
    background: BackgroundRunner
    watchdog: Watchdog | None = None
    #: ``model_for(learner, bot_id, group_id, now)``: the learning model as session compression's
    #: hooks see it (the runtime sets it when ``[learning.model]`` gives one).
    model_for: ModelFor | None = None
    #: Told of every group message stored (``(bot_id, group_id, time)``, the bot's own included):
    #: the learner stage notes its waiting work there (``docs/learning.md``).
    on_group_message: Callable[[str, str | None, dt.datetime], None] | None = None
    #: Told of every delivered bot message stored with what was injected into its reply
    #: (``(bot_id, group_id, message_id, text, answering, injection, time)``): the learner stage
    #: keeps it for negative feedback.
    on_reply: Callable[..., None] | None = None

    def resolve_delivery(self, turn: Turn, decision: Decision) -> Delivery:
        """How to deliver a decided reply: a QUOTE goes out plain when its target is no longer
        one of the group's candidates (``docs/design.md#quoting``), or when the routing state
        cannot be read."""
        try:
            return resolve_delivery(
                self.stores.routing, bot_id=turn.bot.id, group_id=turn.group_id, decision=decision
            )
        except STORE_ERRORS as exc:
            log.warning("routing state unavailable, delivering plainly: %s", exc)
            return Delivery(style=DeliveryStyle.PLAIN, reason="routing_state_unavailable")

    def note_delivered(
        self, turn: Turn, delivery: Delivery, *, at: dt.datetime | None = None
    ) -> None:
        """Record a delivered reply: it counts as recent bot presence, starts the group's reply
        cooldown (``[routing] reply_cooldown_s``) and, for a quote, the quote cooldown.

        A reply to ``turn.message`` already reported (here or through :meth:`record_bot_reply`
        with ``answering``) is not counted again (:mod:`promptweave.store.deliveries`).
        """
        start = perf_counter()
        quoted = delivery.reply_message_id if delivery.style is DeliveryStyle.QUOTE else None
        at = at or self.clock()
        state = self._record_delivery(
            turn.bot.id, turn.group_id, answering=turn.message, message=None, at=at
        )
        if state is DeliveryState.NEW:
            try:
                self._note_routing_delivery(turn.bot.id, turn.group_id, at, quoted)
            except STORE_ERRORS as exc:
                log.warning("routing state not updated for a delivered reply: %s", exc)
        stage_log.debug(
            "note_delivered: %.3f ms (bot %s, group %s: %s)",
            elapsed_ms(start),
            turn.bot.id,
            turn.group_id,
            state.value,
        )

    def _record_delivery(
        self,
        bot_id: str,
        group_id: str | None,
        *,
        answering: ChatMessage | None,
        message: str | None,
        at: dt.datetime,
    ) -> DeliveryState:
        """Report a delivery to the ledger; a failing ledger counts it as new (logged)."""
        try:
            return self.stores.deliveries.record_delivery(
                bot_id,
                group_scope(group_id),
                answering=answered_key(answering) if answering is not None else None,
                message=message,
                now=at,
            )
        except STORE_ERRORS as exc:
            log.warning("delivery ledger unavailable, counting the delivery as new: %s", exc)
            return DeliveryState.NEW

    def _note_routing_delivery(
        self, bot_id: str, group_id: str | None, at: dt.datetime, quoted_message_id: str | None
    ) -> None:
        if group_id is None:
            return
        state = self.stores.routing
        state.note_bot_reply(bot_id, group_id, at)
        cooldown = self.config.routing.reply_cooldown_s
        if cooldown > 0:
            state.start_cooldown(bot_id, group_id, shifted(at, cooldown))
        if quoted_message_id is not None:
            state.note_quote_delivered(bot_id, group_id, quoted_message_id, at)

    def record_message(self, bot_id: str, group_id: str | None, message: ChatMessage) -> bool:
        """Store an incoming group message (the group timeline reads it), its text cut at
        ``[session] max_content_chars``, and make it one of the group's quote candidates; never
        raises for a failing store. See :func:`promptweave.delivery.store_writes.record_message`.

        A message stored is then observed (``observe_message_recorded``), off the caller's path.
        """
        start = perf_counter()
        stored = record_message(
            self.stores,
            bot_id,
            group_id,
            message,
            max_chars=self.config.session.max_content_chars,
            quote_candidates=self.config.routing.quote_candidates,
        )
        # Every message passes here: the arguments are worked out only when they are logged.
        if stage_log.isEnabledFor(logging.DEBUG):
            stage_log.debug(
                "record_message: %.3f ms (bot %s, group %s: %s)",
                elapsed_ms(start),
                bot_id,
                group_id,
                "stored" if stored else "not stored",
            )
        if stored:
            self.plugins.hooks.observe_message_recorded(bot_id, group_id, message)
            if self.on_group_message is not None and group_id:
                self.on_group_message(bot_id, group_id, message.time)
        return stored

    def record_bot_reply(
        self,
        bot_id: str,
        group_id: str | None,
        text: str,
        *,
        message_id: str | None,
        answering: ChatMessage | None = None,
        quoted: bool = False,
        quote_of: str | None = None,
        time: dt.datetime | None = None,
        session_text: str | None = None,
        usage: Mapping[str, int] | None = None,
        injection: ReplyInjection | None = None,
        answered: ChatMessage | None = None,
    ) -> bool:
        """Store a delivered bot message, note it in the routing state (bot presence, reply and
        quote cooldowns, as :meth:`note_delivered`), then compress the user's session in the
        background if it grew long (``docs/design.md#long-session-compression``). Never raises for a
        failing store.

        One delivered message (same bot and group, same ``message_id``, or without one the same
        text and ``time``) is recorded once: a second call stores and counts nothing, and a call
        answering a message :meth:`note_delivered` already reported stores the reply without
        counting it again (:mod:`promptweave.store.deliveries`).

        :param message_id: the platform's id of the delivered message.
        :param answering: the user message it answers; the pair enters that user's session.
        :param quoted: the reply quoted ``answering``.
        :param quote_of: the id of the message the reply quoted, when it is not ``answering``
            (a QUOTE decision quotes the message the user replied to:
            ``delivery.reply_message_id``).
        :param time: when it was delivered; the clock's time by default.
        :param session_text: what the user's session keeps as the answer when it was delivered
            as several messages (all of them, one a line); ``text`` by default.
        :param usage: the token usage the provider reported for the answer, kept with it in the
            user's session.
        :param injection: what was injected into the reply the message belongs to; given, a
            message stored now is observed (``observe_reply_delivered``), off the caller's path.
        :param answered: the message the reply answers, as its observers are told, for a message
            of the reply after the first (which passes no ``answering``: the pair enters the
            session once); ``answering`` by default.
        :returns: ``True`` when stored (now, or by an earlier call for the same message);
            ``False`` when the store is disabled or failing.
        """
        if unusable_ids(bot_id, group_id, message_id):
            log.warning("not recording a bot reply with a blank group id or an id that is not text")
            return False
        start = perf_counter()
        sent_at = time or self.clock()
        quoted_id = quote_of or (answering.id if quoted and answering is not None else None)
        state = self._record_delivery(
            bot_id,
            group_id,
            answering=answering,
            message=delivered_key(message_id, text, sent_at),
            at=sent_at,
        )
        if state is DeliveryState.REPEATED:
            stored = self.stores.sessions is not None
        else:
            stored = self._store_bot_reply(
                state,
                bot_id,
                group_id,
                text,
                message_id=message_id,
                answering=answering,
                quoted_id=quoted_id,
                sent_at=sent_at,
                session_text=session_text,
                usage=usage,
            )
            if stored and group_id and self.on_group_message is not None:
                self.on_group_message(bot_id, group_id, sent_at)
            if stored and injection is not None:
                self.plugins.hooks.observe_reply_delivered(
                    bot_id, group_id, text, message_id, answering or answered, injection
                )
                if self.on_reply is not None and group_id and message_id:
                    self.on_reply(
                        bot_id,
                        group_id,
                        message_id,
                        text,
                        answering or answered,
                        injection,
                        sent_at,
                    )
        stage_log.debug(
            "record_bot_reply: %.3f ms (bot %s, group %s: %s, %s)",
            elapsed_ms(start),
            bot_id,
            group_id,
            state.value,
            "stored" if stored else "not stored",
        )
        return stored

    def _store_bot_reply(
        self,
        state: DeliveryState,
        bot_id: str,
        group_id: str | None,
        text: str,
        *,
        message_id: str | None,
        answering: ChatMessage | None,
        quoted_id: str | None,
        sent_at: dt.datetime,
        session_text: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> bool:
        """Note a new delivery in the routing state, store the reply, and schedule the
        session's compression."""
        if state is DeliveryState.NEW:
            # The routing state learns of the delivery too: bot presence, reply cooldown, and the
            # quote cooldown, which counts from the quote actually delivered
            # (docs/design.md#quoting).
            try:
                self._note_routing_delivery(bot_id, group_id, sent_at, quoted_id)
            except STORE_ERRORS as exc:
                log.warning("routing state not updated for a delivered reply: %s", exc)
        recorded = record_bot_reply(
            self.stores,
            self.config,
            bot_id,
            group_id,
            text,
            message_id=message_id,
            time=sent_at,
            answering=answering,
            quote_of=quoted_id,
            bot_name=self.persona.labels.self_label,
            session_text=session_text,
            usage=usage,
        )
        if recorded.stored and answering is not None and self.config.session.summary_enabled:
            user_id = answering.sender_id
            self.background.submit(
                ("compress", bot_id, group_id, user_id),
                lambda: self.compress_session(bot_id, group_id, user_id, now=sent_at),
            )
        return recorded.stored

    def compress_session(
        self, bot_id: str, group_id: str | None, user_id: str, *, now: dt.datetime | None = None
    ) -> CompressionResult:
        """Compress one user's session now if it is long enough and the cooldown allows."""
        # Loaded by the first compression, which runs after a delivery, never at start-up
        # (docs/performance.md).
        from promptweave.compression.summary import compress_session

        return compress_session(
            self.stores,
            self.plugins,
            self.config,
            bot_id=bot_id,
            group_id=group_id,
            user_id=user_id,
            now=now or self.clock(),
            watchdog=self.watchdog,
            model_for=self.model_for,
        )
