"""The group timeline: the latest group messages as a continuous, speaker-labelled dialogue.

``docs/design.md#group-timeline``. The section ``group_timeline`` renders it into the system prompt;
its images become vision inputs of the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from promptweave.config import TimelineConfig
from promptweave.messages.images import is_vision_url, vision_image_urls
from promptweave.text.persona import PersonaPack
from promptweave.text.rules import IMAGE_MARK, is_recognition_question
from promptweave.text.sanitize import quote_user_text
from promptweave.turn import Bot, ChatMessage, SpeakTrigger, Turn

__all__ = [
    "TIMELINE_HEADER",
    "GroupTimeline",
    "TimelineMemo",
    "build_group_timeline",
    "speaker_label",
    "timeline_limit",
    "timeline_line",
    "timeline_text",
]

TIMELINE_HEADER = "【刚才的群聊】"
SPEAKER_NAME_CHARS = 40


@attrs.frozen(kw_only=True)
class GroupTimeline:
    """The rendered timeline and what it showed.

    :param text: the block, header included; ``""`` when there is nothing to show.
    :param messages: the messages shown, oldest first.
    :param images: valid image URLs of the shown messages (at most the configured number, the most
        recent ones, in timeline order), the current image (the message's own and the quoted
        message's) left out.
    :param hidden: how many messages of the window were left out because the message sequence
        already carries them (the current user's own exchange with the bot).
    :param images_withheld: why the shown messages' images are not handed on, if they are not.
    """

    text: str = ""
    messages: tuple[ChatMessage, ...] = ()
    images: tuple[str, ...] = ()
    images_withheld: str | None = None
    hidden: int = 0


def speaker_label(sender_id: str, sender_name: str, bot: Bot, persona: PersonaPack) -> str:
    """The label of a speaker: the bot, a peer bot, the display name, else ``群友#`` + 4 digits."""
    if sender_id == bot.id:
        return persona.labels.self_label
    if sender_id in bot.peer_bot_ids:
        return persona.labels.peer_bot
    name = quote_user_text(
        sender_name or persona.display_names.get(sender_id, ""), SPEAKER_NAME_CHARS
    )
    if name:
        return name
    digits = "".join(ch for ch in sender_id if ch.isdigit())
    return persona.labels.member_fallback.replace("{tail}", digits[-4:].rjust(4, "0"))


def timeline_limit(turn: Turn, config: TimelineConfig) -> int:
    """How many messages the timeline shows: more when the bot is addressed, none untriggered."""
    if turn.is_private:
        return 0
    if turn.message.addressed or turn.trigger in (
        SpeakTrigger.MENTION,
        SpeakTrigger.ALIAS,
        SpeakTrigger.FOLLOWUP,
    ):
        return config.addressed_limit
    if turn.trigger is SpeakTrigger.AMBIENT:
        return config.ambient_limit
    return 0


def timeline_text(message: ChatMessage, line_chars: int) -> str:
    """What a timeline line shows of a message: its text on one line, cut at ``line_chars``, unable
    to open a section header, with ``[图片]`` in front when it carries images."""
    text = quote_user_text(message.text, line_chars)
    if message.images:
        text = f"{IMAGE_MARK} {text}".strip()
    return text


def timeline_line(message: ChatMessage, speaker: str, tail: str, line_chars: int) -> str:
    """One line of the timeline: ``- speaker（回X的话）：text``; ``""`` when the text is empty."""
    text = timeline_text(message, line_chars)
    return f"- {speaker}{tail}：{text}" if text else ""


class TimelineMemo(Protocol):
    """Where the timeline finds what it shows of a message when that is kept between turns
    (:class:`promptweave.messages.message_cache.MessageCache`)."""

    def shown(
        self, message: ChatMessage, bot: Bot, persona: PersonaPack, line_chars: int
    ) -> tuple[str, str]:
        """:func:`speaker_label` of the message's sender and :func:`timeline_text` of the
        message."""


def _window(source: Sequence[ChatMessage], current_id: str | None, limit: int) -> list[ChatMessage]:
    """The newest ``limit`` messages of ``source`` other than the current one, oldest first; read
    from the end, so a turn that carries a long backlog costs no more than one that does not."""
    # Most often the current message is among the newest ``limit + 1``, or not there at all.
    tail = source[-(limit + 1) :]
    window = [m for m in tail if m.id is None or m.id != current_id]
    if len(window) >= limit or len(tail) == len(source):
        return window[-limit:]
    window = []
    for message in reversed(source):
        if message.id is None or message.id != current_id:
            window.append(message)
            if len(window) == limit:
                break
    window.reverse()
    return window


def build_group_timeline(
    turn: Turn,
    persona: PersonaPack,
    config: TimelineConfig,
    messages: Sequence[ChatMessage] | None = None,
    hidden: Callable[[ChatMessage], bool] | None = None,
    memo: TimelineMemo | None = None,
) -> GroupTimeline:
    """Render the timeline of ``turn`` from ``messages`` (default: ``turn.recent_messages``).

    The current message is excluded; a reply to a message inside the window reads ``（回X的话）``;
    lines are cut at ``line_chars`` and, when the block exceeds ``block_chars``, the oldest lines go
    first so the newest context survives. Messages for which ``hidden`` is true are not shown
    (the message sequence carries them); a reply to one still reads ``（回X的话）`` and its images
    still count. ``memo`` supplies the speaker labels and lines kept from earlier turns.
    """
    limit = timeline_limit(turn, config)
    if limit == 0:
        return GroupTimeline()
    source = turn.recent_messages if messages is None else messages
    window = _window(source, turn.message.id, limit)
    line_chars = config.line_chars
    bot = turn.bot
    # What each message shows (its speaker label, and its text when the memo keeps it), and the
    # labels by message id for the replies: one pass over the window.
    parts: list[tuple[str, str | None]] = []
    labels: dict[str, str] = {}
    memo_shown = None if memo is None else memo.shown
    for message in window:
        if memo_shown is None:
            part: tuple[str, str | None] = (
                speaker_label(message.sender_id, message.sender_name, bot, persona),
                None,
            )
        else:
            part = memo_shown(message, bot, persona, line_chars)
        parts.append(part)
        if message.id is not None:
            labels[message.id] = part[0]
    rendered: list[tuple[ChatMessage, str]] = []
    left_out = 0
    for message, (label, kept_text) in zip(window, parts, strict=True):
        if hidden is not None and hidden(message):
            left_out += 1
            continue
        text = timeline_text(message, line_chars) if kept_text is None else kept_text
        if text:
            reply_to = message.reply_to
            replied = labels.get(reply_to) if reply_to is not None else None
            if replied:
                rendered.append((message, f"- {label}（回{replied}的话）：{text}"))
            else:
                rendered.append((message, f"- {label}：{text}"))
    budget = config.block_chars - len(TIMELINE_HEADER) - 1
    size = sum(len(line) + 1 for _, line in rendered)
    while rendered and size > budget:
        size -= len(rendered.pop(0)[1]) + 1
    if not rendered:
        return GroupTimeline(hidden=left_out)
    shown = tuple(message for message, _ in rendered)
    oldest_shown = window.index(shown[0])
    # docs/design.md#images: only valid HTTP(S) images count towards the limit; any other entry
    # keeps its line's [图片] mark. The current image (the message's own, the quoted message's) goes
    # with the current message, so it takes no history slot.
    images: list[str] = []
    with_images = [m for m in window[oldest_shown:] if m.images]
    seen = (
        {url.lower() for url in vision_image_urls(turn.message.images, turn.quoted_message_images)}
        if with_images
        else set()
    )
    for message in reversed(with_images):
        for url in reversed(message.images):
            url = url.strip()
            if is_vision_url(url) and url.lower() not in seen:
                seen.add(url.lower())
                images.append(url)
    kept = images[: config.max_images][::-1]
    text = "\n".join([TIMELINE_HEADER, *(line for _, line in rendered)])
    # The current image is the message's own or the one of the message it quotes
    # (docs/design.md#images); asking what it is must not pull history images in.
    current_image = bool(turn.message.images or turn.quoted_message_images)
    if kept and current_image and is_recognition_question(turn.message.text):
        # docs/design.md#images, 识别问句聚焦当前图: history images would pull the answer away from
        # the image the user is asking about.
        return GroupTimeline(
            text=text,
            messages=shown,
            images=(),
            images_withheld="recognition_question",
            hidden=left_out,
        )
    return GroupTimeline(text=text, messages=shown, images=tuple(kept), hidden=left_out)
