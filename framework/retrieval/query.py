"""The retriever contract: what ``Retriever.retrieve(query)`` receives and may return.

A retriever receives one frozen :class:`RetrievalQuery` and returns either an iterable of items
for the section it feeds, or a :class:`RetrievalResult` (items plus the hits and details to show
in the trace, or a reason to skip). Sync retrievers run in a worker thread, async ones on the
event loop; both within their timeout (``docs/retrieval.md``).
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from promptweave.config import RetrievalConfig
from promptweave.decision import Decision, allows_persistent_memory
from promptweave.text.scoring import normalize_query, query_terms
from promptweave.turn import Turn

if TYPE_CHECKING:
    from promptweave.store.stores import Stores

__all__ = ["RetrievalHit", "RetrievalQuery", "RetrievalResult", "SkipReason"]


class SkipReason(enum.StrEnum):
    """Why a retriever contributed nothing without having searched (or without finishing)."""

    SHORT_SOCIAL_TURN = "skipped_short_social_turn"
    NOT_A_KNOWLEDGE_QUESTION = "not_a_knowledge_question"
    PRIVATE_CHAT = "private_chat"
    TIMEOUT = "timeout"
    ERROR = "error"
    #: a sync retriever's call of an earlier turn is still running past its timeout
    HUNG = "hung"


@attrs.frozen(kw_only=True)
class RetrievalQuery:
    """What every retriever of a turn receives.

    :param bot_id: the bot answering.
    :param group_id: the group; ``None`` in a private chat.
    :param user_id: the current speaker.
    :param text: the search text: the current message with mentions removed.
    :param turn: the whole turn (recent group lines, history, …).
    :param decision: the routing decision of the turn.
    :param allow_persistent_memory: ``False`` on a short social turn; retrievers registered with
        ``persistent=True`` are not even called then.
    :param limits: the ``[retrieval]`` settings (limits and minimum scores).
    :param stores: the runtime's stores; the built-in retrievers read ``stores.retrieval``.
    :param now: the turn's time.
    """

    bot_id: str
    group_id: str | None
    user_id: str
    text: str
    turn: Turn
    decision: Decision
    allow_persistent_memory: bool
    limits: RetrievalConfig
    stores: Stores
    now: dt.datetime

    @classmethod
    def for_turn(
        cls,
        turn: Turn,
        *,
        decision: Decision,
        limits: RetrievalConfig,
        stores: Stores,
        now: dt.datetime | None = None,
        allow_persistent_memory: bool | None = None,
    ) -> RetrievalQuery:
        """The query of ``turn``; ``allow_persistent_memory`` defaults to the decision's memory
        policy (:func:`promptweave.decision.allows_persistent_memory`)."""
        if allow_persistent_memory is None:
            allow_persistent_memory = allows_persistent_memory(decision)
        return cls(
            bot_id=turn.bot.id,
            group_id=turn.group_id,
            user_id=turn.message.sender_id,
            text=normalize_query(turn.message.text, (turn.bot.name, *turn.bot.aliases)),
            turn=turn,
            decision=decision,
            allow_persistent_memory=allow_persistent_memory,
            limits=limits,
            stores=stores,
            now=now or turn.message.time,
        )

    @functools.cached_property
    def terms(self) -> tuple[str, ...]:
        """The search terms of ``text`` (:func:`promptweave.text.scoring.query_terms`), computed once per turn
        however many retrievers ask."""
        return query_terms(self.text)

    @property
    def is_private(self) -> bool:
        return self.group_id is None

    @property
    def scope_group(self) -> str:
        """The group scope of stored data: the group id, ``""`` for a private chat."""
        return self.group_id or ""


@attrs.frozen(kw_only=True)
class RetrievalHit:
    """One hit as the trace shows it.

    :param text: the hit's text (the trace shortens it).
    :param score: its score; built-in scores are in [0, 1].
    :param id: a stable id of the hit, when it has one.
    :param source: where it came from (a memory source, a document).
    :param details: anything else worth showing (``bm25``, ``matched`` terms, …).
    """

    text: str
    score: float = 0.0
    id: str = ""
    source: str = ""
    details: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"text": self.text, "score": self.score}
        if self.id:
            data["id"] = self.id
        if self.source:
            data["source"] = self.source
        data.update(self.details)
        return data


def _items(value: Iterable[Any]) -> tuple[Any, ...]:
    return value if type(value) is tuple else tuple(value)


def _hits(value: Iterable[RetrievalHit]) -> tuple[RetrievalHit, ...]:
    return value if type(value) is tuple else tuple(value)


def _skip_reason(value: SkipReason | str | None) -> SkipReason | None:
    # Most results skip nothing; calling the enum costs more than the rest of the record.
    return value if value is None or type(value) is SkipReason else SkipReason(value)


@attrs.frozen(kw_only=True)
class RetrievalResult:
    """What a retriever may return instead of a bare iterable of items.

    :param items: the items for the section the retriever feeds.
    :param hits: the hits to trace; when empty, the runtime derives them from the items' ``text``
        and ``score`` attributes.
    :param skipped: the reason the retriever chose not to search; its items are ignored.
    :param details: free-form trace details (for example the terms searched).
    """

    items: tuple[Any, ...] = attrs.field(default=(), converter=_items)
    hits: tuple[RetrievalHit, ...] = attrs.field(default=(), converter=_hits)
    skipped: SkipReason | None = attrs.field(default=None, converter=_skip_reason)
    details: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def skip(cls, reason: SkipReason | str, **details: Any) -> RetrievalResult:
        """A result saying the retriever did not search, and why."""
        return cls(skipped=reason, details=details)
