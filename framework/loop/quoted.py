"""The last source of a quoted message's images: the platform, asked by the message's id
(OneBot v11 ``get_msg``), bounded by a timeout, its answers cached per message id
(``docs/messages.md``, the quoted images).

The event and the message store come first (:class:`promptweave.session.reader.SessionReader`);
the live loop asks the platform only for a turn that speaks and whose quoted message neither had.
A failure is an answer too: it is traced, and the turn goes on without the images.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

import attrs

from promptweave.delivery.outgoing import Transport
from promptweave.plugins.door import Hooks
from promptweave.plugins.watchdog import Deadline, PluginHungError, Watchdog, cut
from promptweave.turn import ChatMessage

__all__ = ["QUOTED_CACHE_ENTRIES", "QuotedFetch", "QuotedFetches"]

log = logging.getLogger("promptweave.loop")

#: How many messages' answers are kept (the least recently asked for go first).
QUOTED_CACHE_ENTRIES = 1024


@attrs.frozen(kw_only=True)
class QuotedFetch:
    """What the platform said of one quoted message.

    :param result: ``found`` (it has images), ``no_images``, ``missing`` (the platform has no
        such message), ``timeout``, ``unsupported`` (no plugin fetches from the transport's
        platform), or ``error: …``.
    :param images: the message's images (``found`` only).
    :param cached: the answer came from the cache, not from the platform.
    """

    result: str
    images: tuple[str, ...] = ()
    cached: bool = False

    def trace(self) -> dict[str, Any]:
        """The entry of the turn's ``quoted_lookup``."""
        return {
            "source": "get_msg",
            "result": self.result,
            **({"cached": True} if self.cached else {}),
        }


@attrs.define(eq=False)
class QuotedFetches:
    """Asks the platform for quoted messages through the ``fetch_message`` hook, and keeps its
    answers per (platform, bot, message id): ``found``, ``no_images`` and ``missing``, the
    newest ``entries`` of them. A timeout or an error is not kept, so a later turn asks again.

    :param entries: how many answers are kept.
    """

    entries: int = QUOTED_CACHE_ENTRIES
    _answers: OrderedDict[tuple[str, str, str], QuotedFetch] = attrs.field(
        factory=OrderedDict, init=False
    )

    def __len__(self) -> int:
        return len(self._answers)

    async def fetch(
        self,
        hooks: Hooks,
        message_id: str,
        *,
        bot_id: str,
        group_id: str | None,
        transport: Transport,
        timeout_s: float,
        watchdog: Watchdog | None = None,
        deadline: Deadline | None = None,
    ) -> QuotedFetch:
        """The images of message ``message_id``: the cached answer, else the platform's within
        ``timeout_s``. Never raises for the platform's or a plugin's failure.

        :param watchdog: given (with the turn's ``deadline``), the hook's synchronous part
            never holds the event loop and its faults are noted in ``deadline``
            (``docs/plugin_hooks.md``).
        """
        key = (transport.platform, bot_id, message_id)
        known = self._answers.get(key)
        if known is not None:
            self._answers.move_to_end(key)
            return attrs.evolve(known, cached=True)
        if watchdog is not None and deadline is not None:
            answer = await self._ask_bounded(
                hooks, message_id, bot_id, group_id, transport, timeout_s, watchdog, deadline
            )
        else:
            answer = await self._ask(hooks, message_id, bot_id, group_id, transport, timeout_s)
        if answer.result in ("found", "no_images", "missing"):
            self._answers[key] = answer
            while len(self._answers) > self.entries:
                self._answers.popitem(last=False)
        return answer

    async def _ask_bounded(
        self,
        hooks: Hooks,
        message_id: str,
        bot_id: str,
        group_id: str | None,
        transport: Transport,
        timeout_s: float,
        watchdog: Watchdog,
        deadline: Deadline,
    ) -> QuotedFetch:
        try:
            taken = await hooks.afetch_message(
                message_id, bot_id, group_id, transport, watchdog=watchdog, deadline=deadline
            )
            if taken is None:
                return QuotedFetch(result="unsupported")
            plugin, pending = taken
            message = await watchdog.awaited(
                plugin, "hook fetch_message", pending, seconds=timeout_s, deadline=deadline
            )
        except PluginHungError:
            log.warning("fetching quoted message %s timed out after %g s", message_id, timeout_s)
            return QuotedFetch(result="timeout")
        except Exception as exc:
            log.warning("fetching quoted message %s failed: %s", message_id, cut(str(exc)))
            return QuotedFetch(result=cut(f"error: {type(exc).__name__}: {exc}"))
        return _found(message)

    async def _ask(
        self,
        hooks: Hooks,
        message_id: str,
        bot_id: str,
        group_id: str | None,
        transport: Transport,
        timeout_s: float,
    ) -> QuotedFetch:
        try:
            pending = hooks.fetch_message(message_id, bot_id, group_id, transport)
            if pending is None:
                return QuotedFetch(result="unsupported")
            async with asyncio.timeout(timeout_s):
                message = await pending
        except TimeoutError:
            log.warning("fetching quoted message %s timed out after %g s", message_id, timeout_s)
            return QuotedFetch(result="timeout")
        except Exception as exc:
            log.warning("fetching quoted message %s failed: %s", message_id, exc)
            return QuotedFetch(result=f"error: {type(exc).__name__}: {exc}")
        return _found(message)


def _found(message: object) -> QuotedFetch:
    """What the platform's answer for a quoted message gives the turn."""
    if message is None:
        return QuotedFetch(result="missing")
    if not isinstance(message, ChatMessage):
        return QuotedFetch(result=f"error: fetch_message gave {type(message).__name__}")
    if not message.images:
        return QuotedFetch(result="no_images")
    return QuotedFetch(result="found", images=message.images)
