"""Per-conversation state of the turn-context layer: queued notes, the active system prompt, and
what was sent (``docs/turn_context.md``).

Each piece is an interface with an in-memory implementation. A session store can implement
:class:`SystemPromptStore` and :class:`TurnTranscript` on its own tables and be handed to
:class:`ConversationState`; callers never see the difference
(``docs/design.md#where-promptweave-differs-from-the-reference``: no conversational state in module
globals).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Protocol, runtime_checkable
from urllib.parse import quote, unquote

import attrs

from promptweave.messages.prompt_message import PromptMessage
from promptweave.turn import Turn

__all__ = [
    "PRIVATE_KEY_PART",
    "ActiveSystemPrompt",
    "ConversationState",
    "InMemorySystemPromptStore",
    "InMemoryTurnTranscript",
    "NoteQueue",
    "SentMessage",
    "SystemPromptStore",
    "TurnTranscript",
    "conversation_key",
    "message_fingerprint",
    "prompt_cache_key",
    "split_conversation_key",
]

log = logging.getLogger("promptweave")

#: Notes waiting for one conversation; a producer that never gets a turn cannot grow it forever.
MAX_QUEUED_NOTES = 32
#: Conversations remembered by the in-memory stores (least recently used are forgotten).
MAX_CONVERSATIONS = 4096
#: Sent versions kept per conversation by the in-memory transcript.
MAX_SENT_PER_CONVERSATION = 256


#: The group part of a private chat's conversation key: no encoded group id can be it, since
#: ``@`` is always encoded.
PRIVATE_KEY_PART = "@private"


def conversation_key(turn: Turn) -> str:
    """The key of the conversation a turn belongs to: ``bot:group:speaker``.

    Each id is percent-encoded (``urllib.parse.quote(id, safe="")``), so a ``:`` inside an id
    cannot move the boundaries (bot ``1`` in group ``2:3`` is not bot ``1:2`` in group ``3``),
    and a private chat's group is :data:`PRIVATE_KEY_PART`, which no group id encodes to (a
    group named ``private`` is ``private``). Ids of letters, digits and ``_.-~`` read as they
    are: ``10001:20001:30017``, ``10001:@private:30017``.
    """
    group = PRIVATE_KEY_PART if turn.group_id is None else quote(turn.group_id, safe="")
    return ":".join((quote(turn.bot.id, safe=""), group, quote(turn.message.sender_id, safe="")))


def split_conversation_key(key: str) -> tuple[str, str | None, str]:
    """The ``(bot id, group id or None, speaker id)`` of a :func:`conversation_key`.

    :raises ValueError: ``key`` is not a conversation key.
    """
    parts = key.split(":")
    if len(parts) != 3:
        raise ValueError(f"not a conversation key: {key!r}")
    bot, group, speaker = parts
    return unquote(bot), None if group == PRIVATE_KEY_PART else unquote(group), unquote(speaker)


def prompt_cache_key(turn: Turn, *, per_speaker: bool = False) -> str:
    """The key OpenAI's prompt cache groups a turn's requests by: ``pw-`` and 16 hex digits.

    A group chat's key depends on the bot and the group only, so every member's turns share one
    cache (they share the system prompt and the timeline); a private chat's on the bot and the
    user. The ids are hashed, so the key carries no account number to the provider.

    :param per_speaker: one key per speaker in a group too (``turn_sections = "user"``): there
        the long cached prefix is the speaker's own history, behind a system prompt every
        group shares, so each speaker's requests are routed together
        (``docs/cost.md``, "The layout of a request").
    """
    if turn.group_id and per_speaker:
        scope: tuple[str, ...] = (turn.bot.id, turn.group_id, turn.message.sender_id)
    elif turn.group_id:
        scope = (turn.bot.id, turn.group_id)
    else:
        scope = (turn.bot.id, "private", turn.message.sender_id)
    digest = hashlib.sha256("\0".join(scope).encode("utf-8", "surrogatepass")).hexdigest()
    return f"pw-{digest[:16]}"


def message_fingerprint(message: PromptMessage) -> str:
    """Identify a message by its role and clean content, never by its sidecar or parts.

    Images are left out: a history builder may show an earlier message's images as ``[图片]``
    placeholders without their URLs, and the message must still be found.
    """
    return _fingerprint(message.role, message.content)


@functools.lru_cache(maxsize=512)
def _fingerprint(role: str, content: str) -> str:
    # Remembered: a conversation's messages are fingerprinted on every turn they stay in its
    # window, three times a turn (the transcript's replay, the request, its new bytes). 512
    # texts hold the windows of a few dozen conversations, and a few megabytes at the most.
    digest = hashlib.sha256()
    for piece in (role, content):
        digest.update(piece.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


@attrs.define
class NoteQueue:
    """Notes queued for the next turn of a conversation, delivered once.

    A producer (the bot's gateway, a plugin reacting to an event) calls :meth:`push`; the next
    :func:`promptweave.turn_context.context.build_turn_context` of that conversation pops them all. Popping
    clears the queue, so a cached runtime can never replay a stale note on a later turn.
    """

    _pending: dict[str, deque[str]] = attrs.field(factory=dict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def push(self, key: str, note: str) -> None:
        """Queue ``note`` for the next turn of conversation ``key`` (blank notes are ignored)."""
        if not note.strip():
            return
        with self._lock:
            queue = self._pending.setdefault(key, deque())
            if len(queue) >= MAX_QUEUED_NOTES:
                log.warning("note queue of %s is full; the oldest note was dropped", key)
                queue.popleft()
            queue.append(note)

    def pending(self, key: str) -> tuple[str, ...]:
        """The queued notes of ``key``, without consuming them."""
        with self._lock:
            return tuple(self._pending.get(key, ()))

    def pop(self, key: str) -> tuple[str, ...]:
        """Take every queued note of ``key``, oldest first; the queue is empty afterwards."""
        with self._lock:
            return tuple(self._pending.pop(key, ()))


@attrs.frozen(kw_only=True)
class ActiveSystemPrompt:
    """The system prompt a conversation reuses byte for byte.

    :param text: the stable prefix: the leading static and profile sections, joined.
    :param sections: ``(section_id, text)`` of each section in ``text``, in order.
    :param static_fingerprint: hash of the static sections; a change (a persona edit, an override)
        rebuilds the prompt.
    :param profile_fingerprint: hash of the profile sections (recalled per message); a change
        rebuilds the prompt too.
    """

    text: str
    sections: tuple[tuple[str, str], ...]
    static_fingerprint: str
    profile_fingerprint: str = ""


@runtime_checkable
class SystemPromptStore(Protocol):
    """Where each conversation's active system prompt lives."""

    def get(self, key: str) -> ActiveSystemPrompt | None:
        """The active prompt of ``key``, or ``None`` when none was built yet."""

    def put(self, key: str, prompt: ActiveSystemPrompt) -> None:
        """Make ``prompt`` the active prompt of ``key``."""

    def invalidate(self, key: str) -> None:
        """Forget the active prompt of ``key`` (after a compression)."""


@attrs.define
class InMemorySystemPromptStore:
    """:class:`SystemPromptStore` in process memory, bounded by least recent use."""

    max_conversations: int = MAX_CONVERSATIONS
    _prompts: OrderedDict[str, ActiveSystemPrompt] = attrs.field(factory=OrderedDict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def get(self, key: str) -> ActiveSystemPrompt | None:
        with self._lock:
            prompt = self._prompts.get(key)
            if prompt is not None:
                self._prompts.move_to_end(key)
            return prompt

    def put(self, key: str, prompt: ActiveSystemPrompt) -> None:
        with self._lock:
            self._prompts[key] = prompt
            self._prompts.move_to_end(key)
            while len(self._prompts) > self.max_conversations:
                self._prompts.popitem(last=False)

    def invalidate(self, key: str) -> None:
        with self._lock:
            self._prompts.pop(key, None)


@attrs.frozen(kw_only=True)
class SentMessage:
    """What was sent for one message beyond its clean form: its sidecar and durable parts."""

    fingerprint: str
    api_content: str | None
    parts: tuple[str, ...] = ()


@runtime_checkable
class TurnTranscript(Protocol):
    """What was sent, persisted with each message so later turns replay it byte for byte."""

    def record(self, key: str, message: PromptMessage) -> None:
        """Persist what is sent for ``message`` (its sidecar and parts) in conversation ``key``."""

    def replay(self, key: str, messages: Sequence[PromptMessage]) -> list[PromptMessage]:
        """Return ``messages`` with each one's recorded sidecar and parts restored."""

    def forget(self, key: str) -> None:
        """Erase everything recorded for conversation ``key``."""


@attrs.define
class InMemoryTurnTranscript:
    """:class:`TurnTranscript` in process memory.

    Messages are matched by :func:`message_fingerprint`. When the same clean message occurs several
    times, occurrences are matched from the newest: the last occurrence in the history gets the
    last recorded version, so a sliding history window keeps matching.
    """

    max_conversations: int = MAX_CONVERSATIONS
    max_per_conversation: int = MAX_SENT_PER_CONVERSATION
    _sent: OrderedDict[str, deque[SentMessage]] = attrs.field(factory=OrderedDict, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def record(self, key: str, message: PromptMessage) -> None:
        # Recorded even without a sidecar, so repeated clean messages stay matched in order.
        entry = SentMessage(
            fingerprint=message_fingerprint(message),
            api_content=message.api_content,
            parts=message.parts,
        )
        with self._lock:
            sent = self._sent.setdefault(key, deque(maxlen=self.max_per_conversation))
            self._sent.move_to_end(key)
            sent.append(entry)
            while len(self._sent) > self.max_conversations:
                self._sent.popitem(last=False)

    def replay(self, key: str, messages: Sequence[PromptMessage]) -> list[PromptMessage]:
        with self._lock:
            recorded = list(self._sent.get(key, ()))
        if not recorded:
            return list(messages)
        versions: dict[str, list[SentMessage]] = {}
        for entry in recorded:
            versions.setdefault(entry.fingerprint, []).append(entry)
        replayed = list(messages)
        for index in range(len(replayed) - 1, -1, -1):
            message = replayed[index]
            found = versions.get(message_fingerprint(message))
            if not found:
                continue
            entry = found.pop()
            if (message.api_content, message.parts) != (entry.api_content, entry.parts):
                replayed[index] = attrs.evolve(
                    message, api_content=entry.api_content, parts=entry.parts
                )
        return replayed

    def forget(self, key: str) -> None:
        with self._lock:
            self._sent.pop(key, None)


@attrs.define
class ConversationState:
    """The per-conversation state a runtime owns for the turn-context layer.

    :param notes: notes queued for the next turn of each conversation.
    :param system_prompts: each conversation's active system prompt.
    :param transcript: what was sent, replayed on later turns.
    :param last_requests: the latest request body of each conversation and API, for the prefix
        report (bounded like the in-memory stores): the body built last, replaced by the body
        actually submitted (with its tools, or a tool round) when it is sent.
    :param last_messages: the message fingerprints of each conversation's latest request.
    """

    notes: NoteQueue = attrs.field(factory=NoteQueue)
    system_prompts: SystemPromptStore = attrs.field(factory=InMemorySystemPromptStore)
    transcript: TurnTranscript = attrs.field(factory=InMemoryTurnTranscript)
    last_requests: OrderedDict[tuple[str, str], bytes] = attrs.field(factory=OrderedDict)
    last_messages: OrderedDict[tuple[str, str], tuple[str, ...]] = attrs.field(factory=OrderedDict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    def remember_request(
        self, key: str, api: str, body: bytes, messages: Sequence[str] | None = None
    ) -> bytes | None:
        """Store ``body`` as the latest request of ``key`` for ``api``; return the one before.

        :param messages: the :func:`message_fingerprint` of each message the request carries, so
            the next request can tell which of its messages are new; ``None`` keeps those of the
            previous call (a body sent with tools, or a tool round, carries the same messages).
        """
        with self._lock:
            previous = self.last_requests.pop((key, api), None)
            self.last_requests[(key, api)] = body
            if messages is not None:
                self.last_messages.pop((key, api), None)
                self.last_messages[(key, api)] = tuple(messages)
            while len(self.last_requests) > MAX_CONVERSATIONS:
                self.last_requests.popitem(last=False)
            while len(self.last_messages) > MAX_CONVERSATIONS:
                self.last_messages.popitem(last=False)
        return previous

    def previous_messages(self, key: str, api: str) -> tuple[str, ...] | None:
        """The message fingerprints of the latest request of ``key`` for ``api``, if any."""
        with self._lock:
            return self.last_messages.get((key, api))
