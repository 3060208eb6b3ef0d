"""What one turn is made of: the bot, the current message, the group around it, and its inputs.

These records are what a bot hands to :meth:`promptweave.Promptweave.render`, and what a turn file
(``docs/turn_file.md``) describes in JSON.
"""

from __future__ import annotations

import datetime as dt
import enum
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import attrs

from promptweave._convert import load_json, structure
from promptweave._fields import Text, one_of, platform_id, str_tuple
from promptweave.errors import TurnFileError
from promptweave.items import (
    BehaviorStrategy,
    ExpressionPair,
    KnowledgeItem,
    MemoryItem,
    PersonFact,
    RelationshipNote,
    ReplyShape,
    RhythmBaseline,
    RouteHints,
    ToolContext,
    TopicSummary,
    TurnPolicy,
)
from promptweave.text.sanitize import strip_lone_surrogates

__all__ = [
    "Bot",
    "ChatMessage",
    "GroupExpression",
    "History",
    "HistoryEntry",
    "SpeakTrigger",
    "Turn",
    "TurnRetrieved",
    "load_turn_file",
    "speak_trigger",
]


def _group_id(_instance: Any, _attribute: Any, value: str | None) -> None:
    # "" must not pass for a group: stores file it under the private-chat scope.
    if value is not None and not value.strip():
        raise ValueError("group_id must be a group's id, or null for a private chat")


def _account_id(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    # A blank id would file the bot's state under no account at all.
    if not value.strip():
        raise ValueError(f"{attribute.name} must be the bot's account id, not blank")


def _image_entries(values: Any) -> tuple[str, ...]:
    # An image entry with a lone surrogate is no URL; it still stands for an image ([图片]).
    return tuple(strip_lone_surrogates(value) for value in str_tuple(values))


def _aware(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError(f"time {value.isoformat()} has no UTC offset")
    return value


class SpeakTrigger(enum.StrEnum):
    """Why the bot is looking at this message (``docs/design.md#group-timeline``)."""

    MENTION = "mention"
    ALIAS = "alias"
    FOLLOWUP = "followup"
    AMBIENT = "ambient"


def speak_trigger(value: SpeakTrigger | str | None) -> SpeakTrigger | None:
    """``"followup"`` as :attr:`SpeakTrigger.FOLLOWUP`: a plain string works wherever a trigger
    does, and compares by identity like the member it names.

    :raises ValueError: the string names no trigger.
    """
    if value is None or isinstance(value, SpeakTrigger):
        return value
    try:
        return SpeakTrigger(value)
    except ValueError:
        choices = ", ".join(member.value for member in SpeakTrigger)
        raise ValueError(f"trigger must be one of {choices} or None, not {value!r}") from None


@attrs.frozen(kw_only=True)
class Bot:
    """The bot account answering in this turn.

    :param id: the bot's account id on the platform.
    :param name: its nickname (how the group sees it).
    :param aliases: other names group members use to address it.
    :param timezone: IANA time zone of section ``current_time``.
    :param peer_bot_ids: accounts of other bots of the same deployment.
    """

    id: str = attrs.field(validator=[_account_id, platform_id])
    name: str
    aliases: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    timezone: str = "Asia/Shanghai"
    peer_bot_ids: tuple[str, ...] = attrs.field(
        default=(), converter=str_tuple, validator=platform_id
    )


@attrs.frozen(kw_only=True)
class ChatMessage:
    """One group or private chat message.

    :param id: the platform's message id; ``None`` when unknown.
    :param raw: the platform's raw form (a OneBot CQ-code string or segment list), kept verbatim.
    :param addressed: ``True`` when the message is addressed to the bot (@, alias, reply to it).
    :param reply_to: the id of the message this one replies to.
    :param images: the images the message carries, one entry each: their URLs. Every entry shows
        as ``[图片]``; only valid HTTP(S) URLs (:func:`promptweave.messages.images.is_vision_url`) are ever sent to a
        provider, so an image whose URL is unknown is :data:`promptweave.IMAGE_WITHOUT_URL`.
    :param mentions: account ids the message @-mentions (``"all"`` for @全体成员); routing also
        reads ``[CQ:at,qq=…]`` codes and ``at`` segments from ``raw``.
    """

    sender_id: str = attrs.field(validator=platform_id)
    # Lone surrogates are dropped from text on arrival: no store, hash or provider accepts them.
    # Ids holding one are refused (platform_id).
    text: Text = attrs.field(converter=strip_lone_surrogates)
    time: dt.datetime = attrs.field(validator=lambda _i, _a, v: _aware(v))
    id: str | None = attrs.field(default=None, validator=platform_id)
    sender_name: str = attrs.field(default="", converter=strip_lone_surrogates)
    raw: Any = None
    addressed: bool = False
    reply_to: str | None = attrs.field(default=None, validator=platform_id)
    images: tuple[str, ...] = attrs.field(default=(), converter=_image_entries)
    mentions: tuple[str, ...] = attrs.field(default=(), converter=str_tuple, validator=platform_id)


@attrs.frozen(kw_only=True)
class HistoryEntry:
    """One turn of the current user's conversation with the bot."""

    role: str = attrs.field(validator=one_of("user", "assistant"))
    content: Text = attrs.field(converter=strip_lone_surrogates)


# Taken while a history appends, so two histories appended to the same one at once cannot both
# extend its line of appends.
_APPENDS = threading.Lock()


class _Line:
    """One line of appends: the entries every :class:`History` on it holds are a slice of one
    sequence that only grows at the end, ``end`` entries long so far (the entries themselves are
    not kept here, only how many there are)."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


class History(tuple[HistoryEntry, ...]):
    """A user's conversation with the bot, oldest first, grown only through :meth:`appended`:
    a tuple (everything that reads :attr:`Turn.history` reads it as one) that also knows where it
    stands in the line of appends it came from, so assembly can tell, without comparing their
    entries, that a turn's history is the last turn's with entries added at the end and some
    dropped from the front (``docs/performance.md#what-is-kept-between-turns``).

    ``History(entries)`` starts a new line; ``history.appended(*entries, keep=n)`` continues it.
    Appending to a history that is no longer the newest of its line (it was appended to already)
    starts a new line too, so two histories on one line never disagree about an entry. Slicing a
    history, or adding a tuple to it, gives a plain tuple.

    :param entries: the entries, oldest first.
    """

    _line: _Line
    _start: int

    def __new__(cls, entries: Iterable[HistoryEntry] = ()) -> History:
        history = super().__new__(cls, entries)
        object.__setattr__(history, "_line", _Line(len(history)))
        object.__setattr__(history, "_start", 0)
        return history

    def appended(self, *entries: HistoryEntry, keep: int | None = None) -> History:
        """This history with ``entries`` added at the end, and, with ``keep``, only the newest
        ``keep`` entries of the result kept (the oldest dropped from the front). Like any new
        tuple, the result holds its own copy of the references it keeps: ``keep`` bounds that.

        :raises ValueError: ``keep`` is negative.
        """
        if keep is not None and keep < 0:
            raise ValueError(f"keep must be at least 0, not {keep}")
        total = len(self) + len(entries)
        drop = 0 if keep is None else max(0, total - keep)
        if drop <= len(self):
            kept = self[drop:] + entries if drop else tuple.__add__(self, entries)
        else:
            kept = entries[drop - len(self) :]
        history = tuple.__new__(type(self), kept)
        line, start = self._line, self._start + drop
        with _APPENDS:
            if entries:
                if line.end == self._start + len(self):
                    line.end += len(entries)
                else:
                    line, start = _Line(len(history)), 0
        object.__setattr__(history, "_line", line)
        object.__setattr__(history, "_start", start)
        return history

    def offset_from(self, other: History) -> int | None:
        """How many entries after the start of ``other`` this history starts, when both come
        from one line of appends (``self[i] is other[i + offset]`` wherever both have the
        index); ``None`` when they do not, and only comparing their entries can tell."""
        if self._line is not other._line:
            return None
        return self._start - other._start

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"a History cannot be changed (tried to set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"a History cannot be changed (tried to delete {name!r})")

    def __reduce__(self) -> tuple[type[History], tuple[tuple[HistoryEntry, ...]]]:
        # A copy or an unpickled history starts a line of its own.
        return type(self), (tuple(self),)


@attrs.frozen(kw_only=True)
class GroupExpression:
    """Learned direct pairs and the rhythm baseline of the group (section ``group_expression``)."""

    pairs: tuple[ExpressionPair, ...] = ()
    baseline: RhythmBaseline | None = None


@attrs.frozen(kw_only=True)
class TurnRetrieved:
    """Items given with the turn for the retrieval-fed sections, keyed like the sections."""

    group_expression: GroupExpression | None = None
    behavior_reference: tuple[BehaviorStrategy, ...] = ()
    memory: tuple[MemoryItem, ...] = ()
    knowledge: tuple[KnowledgeItem, ...] = ()
    relationship: RelationshipNote | None = None
    person_facts: tuple[PersonFact, ...] = ()
    mid_term: tuple[TopicSummary, ...] = ()

    def as_items(self) -> dict[str, tuple[Any, ...]]:
        """The items per section id, in the shape retrievers contribute them."""
        items: dict[str, tuple[Any, ...]] = {}
        if self.group_expression is not None:
            expression: tuple[Any, ...] = self.group_expression.pairs
            if self.group_expression.baseline is not None:
                expression += (self.group_expression.baseline,)
            items["group_expression"] = expression
        items["behavior_reference"] = self.behavior_reference
        items["memory"] = self.memory
        items["knowledge"] = self.knowledge
        items["relationship"] = () if self.relationship is None else (self.relationship,)
        items["person_facts"] = self.person_facts
        items["mid_term"] = self.mid_term
        return {section_id: found for section_id, found in items.items() if found}


@attrs.frozen(kw_only=True)
class Turn:
    """Everything promptweave needs to decide and assemble one turn.

    :param group_id: ``None`` for a private chat.
    :param trigger: why the bot looks at the message; ``None`` when it was not triggered at all.
    :param recent_messages: the group's latest messages, oldest first, the current one excluded.
    :param history: the current user's conversation with the bot, oldest first; a
        :class:`History` grown from the last turn's with :meth:`History.appended` is kept as it is,
        and lets assembly carry the last turn's window without comparing the older entries.
    :param retrieved: items given with the turn; retrievers add to them.
    :param reply_shape: this turn's reply shape, when already resolved.
    :param turn_policy: this turn's policy, when already resolved.
    :param tool_context: tool results and tool rules.
    :param quoted_bot_text: when the message replies to one of the bot's messages, that message's
        text (from the bot-reply context), shown as "what the bot just said".
    :param quoted_message_images: image URLs of the message this one replies to; they are sent
        with the current message, as images the user is asking about (``docs/design.md#images``).
        Left empty, they are those of ``quoted_message``, else of the ``message.reply_to``
        message found among the recent messages or in the group log (``docs/messages.md``).
    :param quoted_message: the message this one replies to, as the platform delivered it with
        the event (the OneBot v11 adapter's ``event.reply``); its images are the quoted images
        when the turn gives none of its own.
    :param route_hints: tool intent, scene and rhythm known to the bot, for routing.
    """

    bot: Bot
    message: ChatMessage
    group_id: str | None = attrs.field(default=None, validator=[_group_id, platform_id])
    trigger: SpeakTrigger | None = attrs.field(default=None, converter=speak_trigger)
    recent_messages: tuple[ChatMessage, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    retrieved: TurnRetrieved = TurnRetrieved()
    reply_shape: ReplyShape | None = None
    turn_policy: TurnPolicy | None = None
    tool_context: ToolContext | None = None
    quoted_bot_text: str | None = None
    quoted_message_images: tuple[str, ...] = attrs.field(default=(), converter=_image_entries)
    quoted_message: ChatMessage | None = None
    route_hints: RouteHints = attrs.field(factory=RouteHints)

    @property
    def is_private(self) -> bool:
        return self.group_id is None

    def retrieved_items(self) -> Mapping[str, tuple[Any, ...]]:
        return self.retrieved.as_items()


def load_turn_file(path: Path | str) -> Turn:
    """Read a turn file (``docs/turn_file.md``); a malformed one raises
    :class:`promptweave.errors.TurnFileError` with one line per problem, naming the file and the key
    path."""
    path = Path(path)
    data = load_json(path, TurnFileError)
    if not isinstance(data, dict):
        raise TurnFileError(str(path), ["the top level must be a JSON object"])
    return structure(data, Turn, str(path), TurnFileError)
