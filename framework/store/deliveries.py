"""The delivery ledger: which delivered bot messages the runtime has already recorded.

A bot may report one delivery through :meth:`promptweave.delivery.recorder.Recorder.note_delivered`, through
:meth:`promptweave.delivery.recorder.Recorder.record_bot_reply`, or both, and may report it twice (a retry, an echo).
The ledger makes every report after the first a no-op, so the routing state counts the delivery
once (recent bot replies, the engagement roll) and the stores hold it once.

Identity (``docs/store.md``):

- a delivered message is known by its platform id, or without one by its text and time
  (:func:`delivered_key`); ``record_bot_reply`` knows it, ``note_delivered`` does not;
- the message a reply answered is known by its id, or without one by its sender and time
  (:func:`answered_key`); ``note_delivered`` knows it (the turn's message), ``record_bot_reply``
  does with ``answering``.

``note_delivered`` records "a reply to this message went out"; the first ``record_bot_reply``
answering that message completes that delivery instead of adding one. A second bubble answering
the same message is another delivered message, and counts.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import threading
from collections import deque
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from promptweave.turn import ChatMessage

__all__ = [
    "DELIVERY_LEDGER_MAX",
    "DeliveryLedger",
    "DeliveryState",
    "MemoryDeliveryLedger",
    "answered_key",
    "delivered_key",
    "settle_delivery",
]

#: Deliveries remembered per (bot, group); a report of an older one counts again. Far more than a
#: bot delivers between the two reports of one message.
DELIVERY_LEDGER_MAX = 256


class DeliveryState(enum.StrEnum):
    """What a report of a delivery was."""

    #: The first report: note it in the routing state (and store it, from ``record_bot_reply``).
    NEW = "new"
    #: ``record_bot_reply`` of a delivery ``note_delivered`` reported: store it, count nothing.
    COMPLETED = "completed"
    #: Reported before: nothing to do.
    REPEATED = "repeated"


def answered_key(message: ChatMessage) -> str:
    """The identity of the message a reply answered: its id, or its sender and time."""
    if message.id:
        return f"id:{message.id}"
    return f"at:{message.sender_id}:{message.time.timestamp()!r}"


def delivered_key(message_id: str | None, text: str, time: dt.datetime) -> str:
    """The identity of a delivered message: its id, or its text and time."""
    if message_id:
        return f"id:{message_id}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"text:{time.timestamp()!r}:{digest}"


@runtime_checkable
class DeliveryLedger(Protocol):
    """The deliveries of each (bot, group) already reported; a private chat is group ``""``."""

    def record_delivery(
        self,
        bot_id: str,
        group_id: str,
        *,
        answering: str | None,
        message: str | None,
        now: dt.datetime,
    ) -> DeliveryState:
        """Record one report of a delivery, atomically.

        :param answering: :func:`answered_key` of the message the reply answered, if known.
        :param message: :func:`delivered_key` of the delivered message; ``None`` from
            ``note_delivered``, which does not know it. At least one of the two is given.
        :returns: :attr:`DeliveryState.REPEATED` when ``message`` was recorded before, or when
            ``message`` is ``None`` and a delivery answering ``answering`` was;
            :attr:`DeliveryState.COMPLETED` when ``message`` completes a delivery recorded with
            the same ``answering`` and no ``message``; :attr:`DeliveryState.NEW` otherwise.
        """


def settle_delivery(
    known: Sequence[tuple[str | None, str | None]],
    *,
    answering: str | None,
    message: str | None,
) -> tuple[DeliveryState, int | None]:
    """What one report of a delivery is, given the deliveries recorded before it: the rule of
    :meth:`DeliveryLedger.record_delivery`, which every backend applies through this function.

    :param known: the ``(answering, message)`` pairs of the bot and group's recorded deliveries,
        oldest first (``None`` for an unknown side).
    :returns: the state, and with :attr:`DeliveryState.COMPLETED` the position in ``known`` of the
        delivery whose message becomes ``message``. The caller appends ``(answering, message)``
        on :attr:`DeliveryState.NEW` and changes nothing on :attr:`DeliveryState.REPEATED`.
    :raises ValueError: neither side of the delivery is given.
    """
    if answering is None and message is None:
        raise ValueError("a delivery needs the answered or the delivered message")
    if message is not None and any(delivered == message for _, delivered in known):
        return DeliveryState.REPEATED, None
    if answering is not None:
        same = [index for index, (answered, _) in enumerate(known) if answered == answering]
        if message is None and same:
            return DeliveryState.REPEATED, None
        noted = next((index for index in same if known[index][1] is None), None)
        if noted is not None:
            return DeliveryState.COMPLETED, noted
    return DeliveryState.NEW, None


@attrs.define
class MemoryDeliveryLedger:
    """:class:`DeliveryLedger` in this process; the newest :data:`DELIVERY_LEDGER_MAX` deliveries
    per (bot, group)."""

    _deliveries: dict[tuple[str, str], deque[tuple[str | None, str | None]]] = attrs.field(
        factory=dict, init=False
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def record_delivery(
        self,
        bot_id: str,
        group_id: str,
        *,
        answering: str | None,
        message: str | None,
        now: dt.datetime,
    ) -> DeliveryState:
        with self._lock:
            known = self._deliveries.setdefault(
                (bot_id, group_id), deque(maxlen=DELIVERY_LEDGER_MAX)
            )
            state, noted = settle_delivery(known, answering=answering, message=message)
            if noted is not None:
                known[noted] = (answering, message)
            elif state is DeliveryState.NEW:
                known.append((answering, message))
        return state
