"""The rows of a user's session with the bot: records the stores keep and the plugin contract
passes (``summarize_session`` receives :class:`SessionTurn` rows).

The stores that keep them are in :mod:`promptweave.store.sessions`.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping

import attrs

from promptweave.text.rules import IMAGE_MARK

__all__ = ["SUMMARY_MARK", "SessionSummary", "SessionTurn", "TurnKind"]

#: The first line of a summary row (``docs/design.md``, long-session compression).
SUMMARY_MARK = "【此前对话摘要】"


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
        needs them, or :data:`promptweave.IMAGE_WITHOUT_URL` marks (``[session] describe_images``
        off, or an image that came without a URL). Either way the turn reads ``[图片]``.
    :param usage: on a bot's answer, the token usage the provider reported for it
        (``prompt_tokens``, ``output_tokens``, ``cached_tokens``, ``cache_creation_tokens``; a
        count the provider did not report is left out); ``None`` when unknown.
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
    usage: Mapping[str, int] | None = None
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
