"""The ambient excerpt ``【群环境摘录】`` and the injection snapshot
(``docs/design.md#the-message-sequence``).

The excerpt shows the bot what the rest of the group has been saying to it: the group's latest
session turns, the current user's own turns removed (they are in the user's history already), and
turns containing a phrase the group rejected left out. Each rendered line adds a snapshot entry, so
negative feedback on a reply can be traced to the turns that were injected. When the group timeline
is in the system prompt the excerpt is skipped and the snapshot comes from the timeline instead: the
same recent messages are never sent twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptweave.config import AmbientConfig
from promptweave.messages.timeline import GroupTimeline
from promptweave.store.session_rows import SessionTurn
from promptweave.text.persona import PersonaPack
from promptweave.text.rules import IMAGE_MARK
from promptweave.text.sanitize import quote_user_text
from promptweave.turn import ChatMessage

__all__ = [
    "AMBIENT_HEADER",
    "AmbientEntry",
    "AmbientExcerpt",
    "AmbientSelection",
    "render_ambient_excerpt",
    "select_ambient_turns",
    "snapshot_entry",
    "snapshot_from_timeline",
]

AMBIENT_HEADER = "【群环境摘录】"
PREVIEW_CHARS = 120


@attrs.frozen(kw_only=True)
class AmbientEntry:
    """One injected group turn, as the injection snapshot records it.

    :param turn_id: ``ambient:{bot}:{group}:{role}:{user}:{epoch seconds}:{sha256 of the text}``.
    :param text_hash: sha256 (hex) of the raw text.
    :param text_preview: the text as injected, at most 120 characters.
    """

    turn_id: str
    user_id: str
    text_hash: str
    text_preview: str

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "user_id": self.user_id,
            "text_hash": self.text_hash,
            "text_preview": self.text_preview,
        }


@attrs.frozen(kw_only=True)
class AmbientSelection:
    """The turns chosen for the excerpt and what the choice did.

    :param filter_status: ``applied``, ``failed_open`` (the ledger raised; nothing was filtered)
        or ``empty`` (no phrase is blacklisted).
    :param fell_back_to_pair: removing the current user's turns emptied the window, so the
        latest pair was kept (those of its turns the user's history does not already send).
    """

    turns: tuple[SessionTurn, ...]
    removed_own: int = 0
    filtered: int = 0
    fell_back_to_pair: bool = False
    filter_status: str = "empty"
    filter_error: str | None = None


@attrs.frozen(kw_only=True)
class AmbientExcerpt:
    """The rendered excerpt (header included, not yet wrapped as a user message)."""

    text: str
    entries: tuple[AmbientEntry, ...]
    token: str


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _turn_id(bot_id: str, group_id: str, role: str, user_id: str, epoch: int, digest: str) -> str:
    return f"ambient:{bot_id}:{group_id}:{role}:{user_id}:{epoch}:{digest}"


def select_ambient_turns(
    window: Sequence[SessionTurn],
    current_user_id: str,
    blacklisted: Callable[[], Sequence[str]],
    already_sent: Callable[[SessionTurn], bool] | None = None,
) -> AmbientSelection:
    """Choose the excerpt's turns from the group's latest ``window``.

    The current user's turns go; when that leaves nothing, the latest pair stays
    (剔除自己后回退保留最近一对, as the reference bot does), except the turns ``already_sent`` says
    the message sequence carries anyway (the user's own history): nothing is sent twice. Then turns
    containing a blacklisted phrase go; when the ledger cannot be read, nothing is filtered
    (fail-open).
    """
    others = [turn for turn in window if turn.user_id != current_user_id]
    chosen = others
    fell_back = False
    if not others and window:
        chosen = [t for t in window[-2:] if already_sent is None or not already_sent(t)]
        fell_back = bool(chosen)
    try:
        phrases = [phrase for phrase in blacklisted() if phrase]
    except Exception as exc:
        return AmbientSelection(
            turns=tuple(chosen),
            removed_own=len(window) - len(others),
            fell_back_to_pair=fell_back,
            filter_status="failed_open",
            filter_error=f"{type(exc).__name__}: {exc}",
        )
    kept = [turn for turn in chosen if not any(phrase in turn.content for phrase in phrases)]
    return AmbientSelection(
        turns=tuple(kept),
        removed_own=len(window) - len(others),
        filtered=len(chosen) - len(kept),
        fell_back_to_pair=fell_back,
        filter_status="applied" if phrases else "empty",
    )


def render_ambient_excerpt(
    turns: Sequence[SessionTurn],
    *,
    bot_id: str,
    group_id: str,
    persona: PersonaPack,
    config: AmbientConfig,
) -> AmbientExcerpt | None:
    """Render the excerpt: one line per turn under ``【群环境摘录】``, the bot's lines labelled
    with the persona's name and the others with the pack's member label.

    A line is cut at ``line_chars``; when the block reaches ``block_chars`` the line that does not
    fit is cut and rendering stops. Only rendered lines get a snapshot entry.

    :returns: ``None`` when no line was rendered.
    """
    lines = [AMBIENT_HEADER]
    used = len(AMBIENT_HEADER)
    entries: list[AmbientEntry] = []
    for turn in turns:
        raw = turn.display_text().strip()
        label = persona.persona.name if turn.role == "assistant" else persona.labels.excerpt_member
        line = quote_user_text(f"{label}：{raw}", config.line_chars)
        if not raw or not line:
            continue
        room = config.block_chars - used - 1
        if room <= 0:
            break
        shown = line[:room].rstrip()
        text = shown.removeprefix(f"{label}：")
        if not text:
            break
        digest = _sha(raw)
        entries.append(
            AmbientEntry(
                turn_id=_turn_id(
                    bot_id, group_id, turn.role, turn.user_id, int(turn.time.timestamp()), digest
                ),
                user_id=turn.user_id,
                text_hash=digest,
                text_preview=text[:PREVIEW_CHARS],
            )
        )
        lines.append(shown)
        used += len(shown) + 1
        if shown != line:
            break
    if not entries:
        return None
    token = "ambient:" + _sha("\n".join(entry.turn_id for entry in entries))
    return AmbientExcerpt(text="\n".join(lines), entries=tuple(entries), token=token)


def snapshot_entry(
    message: ChatMessage, *, bot_id: str, group_id: str, line_chars: int
) -> AmbientEntry:
    """The snapshot entry of one message the group timeline showed (its id keeps ``ambient:``)."""
    raw = message.text.strip()
    role = "assistant" if message.sender_id == bot_id else "user"
    digest = _sha(raw)
    preview = quote_user_text(raw, line_chars) or (IMAGE_MARK if message.images else "")
    return AmbientEntry(
        turn_id=_turn_id(
            bot_id, group_id, role, message.sender_id, int(message.time.timestamp()), digest
        ),
        user_id=message.sender_id,
        text_hash=digest,
        text_preview=preview[:PREVIEW_CHARS],
    )


def snapshot_from_timeline(
    timeline: GroupTimeline,
    *,
    bot_id: str,
    group_id: str,
    line_chars: int,
    entry: Callable[..., AmbientEntry] = snapshot_entry,
) -> tuple[AmbientEntry, ...]:
    """Snapshot entries for the messages the group timeline showed.

    :param entry: makes one message's entry, with the keyword arguments of
        :func:`snapshot_entry` (a cache passes its own).
    """
    return tuple(
        entry(message, bot_id=bot_id, group_id=group_id, line_chars=line_chars)
        for message in timeline.messages
    )
