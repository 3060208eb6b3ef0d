"""The delivery ledger: which delivered bot messages the runtime has already recorded.

A bot may report one delivery through :meth:`framework.Promptweave.note_delivered`, through
:meth:`framework.Promptweave.record_bot_reply`, or both, and may report it twice (a retry, an echo).
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
from typing import Protocol, runtime_checkable

import attrs

from framework.turn import ChatMessage

__all__ = [
    "DELIVERY_LEDGER_MAX",
    "DeliveryLedger",
    "DeliveryState",
    "MemoryDeliveryLedger",
    "answered_key",
    "delivered_key",
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


@attrs.define
class _Delivery:
    answering: str | None
    message: str | None


@attrs.define
class MemoryDeliveryLedger:
    """:class:`DeliveryLedger` in this process; the newest :data:`DELIVERY_LEDGER_MAX` deliveries
    per (bot, group)."""

    _deliveries: dict[tuple[str, str], deque[_Delivery]] = attrs.field(factory=dict, init=False)
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
        if answering is None and message is None:
            raise ValueError("a delivery needs the answered or the delivered message")
        with self._lock:
            known = self._deliveries.setdefault(
                (bot_id, group_id), deque(maxlen=DELIVERY_LEDGER_MAX)
            )
            if message is not None and any(entry.message == message for entry in known):
                return DeliveryState.REPEATED
            if answering is not None:
                same = [entry for entry in known if entry.answering == answering]
                if message is None and same:
                    return DeliveryState.REPEATED
                noted = next((entry for entry in same if entry.message is None), None)
                if noted is not None:
                    noted.message = message
                    return DeliveryState.COMPLETED
            known.append(_Delivery(answering=answering, message=message))
        return DeliveryState.NEW
