"""One turn's message side: the sequence, the budget and the injection snapshot.

:class:`promptweave.Promptweave` calls :func:`promptweave.session.reader.read_session` before the
sections render (the timeline and the quoted bot text come from the store) and
:func:`build_turn_messages` after (the budget needs the finished system prompt).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from promptweave.messages.ambient import AmbientEntry, snapshot_from_timeline
from promptweave.messages.images import vision_image_urls
from promptweave.messages.message_cache import NOT_BUILT, HistoryTexts, MessageCache
from promptweave.messages.prompt_message import PromptMessage
from promptweave.messages.sequence import (
    AmbientPart,
    HistoryRow,
    ambient_part,
    current_text,
)
from promptweave.messages.timeline import GroupTimeline
from promptweave.messages.trimming import (
    MIN_CURRENT_LENGTH,
    BudgetReport,
    Measure,
    apply_budget,
    cut_current_text,
)
from promptweave.messages.wording import (
    WORDING_HINT_SOURCE,
    WordingHint,
    clean_hints,
    hint_messages,
)
from promptweave.store.sessions import group_scope
from promptweave.turn import ChatMessage, Turn

if TYPE_CHECKING:
    from promptweave.config import Config
    from promptweave.messages.ambient import AmbientExcerpt
    from promptweave.text.persona import PersonaPack

__all__ = [
    "SessionInputs",
    "TurnMessages",
    "build_turn_messages",
    "carried_by_history",
]


class SessionInputs(Protocol):
    """What the messages are built from, as the session read left it
    (:class:`promptweave.session.reader.SessionReader`). The messages sit below the session read in
    the layers (``docs/architecture.md``, "Layers"), so they name what they use rather than the
    reader.
    """

    @property
    def config(self) -> Config: ...

    @property
    def persona(self) -> PersonaPack: ...

    @property
    def degraded(self) -> str | None: ...

    @property
    def sources(self) -> dict[str, str]: ...

    @property
    def quoted_lookup(self) -> list[dict[str, Any]]: ...

    def history(self) -> tuple[HistoryRow, ...]: ...

    def ambient(self) -> tuple[AmbientExcerpt | None, dict[str, Any]]: ...


@attrs.frozen(kw_only=True)
class TurnMessages:
    """The messages of a turn after the budget, and how to explain them.

    :param trace: builds the trace entries (``degraded``, ``messages``, ``budget``,
        ``injection_snapshot``, ``vision``) when called; nothing of it is built before.
    :param ambient_snapshot: the group turns the messages carry (the trace's injection
        snapshot), worked out once when first called, without the rest of the trace: what a
        delivered reply's injection records.
    :param wording_hints: the wording hints the messages carry, in order.
    :param wording_hints_trimmed: the wording hints the budget trimmed.
    """

    messages: tuple[PromptMessage, ...]
    vision_images: tuple[str, ...]
    trace: Callable[[], dict[str, Any]] = attrs.field(eq=False, repr=False)
    ambient_snapshot: Callable[[], tuple[AmbientEntry, ...]] = attrs.field(
        default=tuple, eq=False, repr=False
    )
    wording_hints: tuple[WordingHint, ...] = ()
    wording_hints_trimmed: tuple[WordingHint, ...] = ()


@attrs.frozen(kw_only=True)
class _Fitted:
    """What the budget kept, and what the trace needs to tell the rest."""

    kept: list[PromptMessage]
    report: Callable[[], BudgetReport]


def build_turn_messages(
    reader: SessionInputs,
    turn: Turn,
    timeline: GroupTimeline,
    system_prompt: str,
    measure: Measure,
    *,
    include_ambient_excerpt: bool = True,
    cache: MessageCache | None = None,
    hints: Sequence[WordingHint] = (),
    hint_failures: Sequence[dict[str, str]] = (),
) -> TurnMessages:
    """Build the sequence, apply the budget, and derive the injection snapshot from what
    survived: the ambient excerpt's entries only when its message is still there (found by its
    ``source_token``), else the timeline's entries when the timeline is in the system prompt.

    The wording hints ride user messages of their own between the history and the current
    message (:func:`promptweave.messages.wording.hint_messages`), in the budget like the rest:
    oldest first, so they go after all history and before the current message is cut.

    :param measure: the length of a text for the budget; with the built-in :func:`len` the budget
        is filled from the newest message back, and the messages it drops are never built (the
        trace builds them when it is read).
    :param cache: the finished messages kept from earlier turns; a fresh one by default.
    :param hints: the turn's wording hints (the ``collect_wording_hints`` hook); sanitized here.
    :param hint_failures: the hook's failed implementations, for the trace.
    """
    config = reader.config
    persona = reader.persona
    if cache is None:
        cache = MessageCache(persona=persona)
    history = reader.history()
    max_len = config.session.max_content_chars
    current = _current_message(turn, cache, max_len)
    # Most turns carry no hints and looked up no quoted message: nothing is made for them.
    given_hints = clean_hints(hints) if hints else ()
    hinted = hint_messages(given_hints) if given_hints else []
    sources = dict(reader.sources)
    quoted_lookup = [dict(step) for step in reader.quoted_lookup] if reader.quoted_lookup else []
    if reader.degraded is not None:
        rows: Sequence[HistoryRow] = ()
        part = AmbientPart()
        notes: dict[str, Any] = {"degraded": reader.degraded}
    else:
        rows = history
        part = ambient_part(
            persona,
            config,
            turn,
            timeline_present=bool(timeline.text),
            ambient=reader.ambient,
            include_ambient_excerpt=include_ambient_excerpt,
            # The excerpt carries its own 【群环境摘录】 mark: only the prefix line is defused in it.
            wrap=cache.ambient_turn,
        )
        notes = {"history_turns": len(history), **part.notes}
    keep_tail = cache.injection_suffix
    # In the cache mode the excerpt is the turn's own: it goes after the history, which then
    # stays the previous request's prefix (docs/cost.md, "The layout of a request").
    ambient_last = config.turn_context.turn_sections == "user"
    if measure is len and config.budget.chars > 0:
        fitted = _fit_newest_first(
            system_prompt,
            config.budget.chars,
            rows,
            part.message,
            current,
            cache,
            max_len,
            keep_tail,
            hinted,
            ambient_last=ambient_last,
        )
    else:
        ambient = [part.message] if part.message is not None else []
        sequence = [
            *([] if ambient_last else ambient),
            *(m for row in rows if (m := cache.history_message(row, max_len)) is not None),
            *(ambient if ambient_last else []),
            *hinted,
            *([current] if current is not None else []),
        ]
        kept, report = apply_budget(
            sequence, system_prompt, config.budget.chars, measure, keep_tail=keep_tail
        )
        fitted = _Fitted(kept=kept, report=lambda: report)
    kept_messages = tuple(fitted.kept)
    # Hints are kept as a run just before the current message: the ones the budget dropped are
    # the oldest, so the last ``n`` given hints are those still in the messages.
    hints_kept = (
        sum(1 for m in kept_messages if m.source.startswith(WORDING_HINT_SOURCE + ":"))
        if given_hints
        else 0
    )
    hints_sent = given_hints[len(given_hints) - hints_kept :]
    hints_trimmed = given_hints[: len(given_hints) - hints_kept]

    # Worked out once, when first asked (a cell rather than ``functools.cache``, whose wrapper
    # costs a turn that never asks more than the snapshot itself).
    made: list[tuple[str, tuple[AmbientEntry, ...]]] = []

    def snapshot() -> tuple[str, tuple[AmbientEntry, ...]]:
        if not made:
            made.append(_snapshot())
        return made[0]

    def _snapshot() -> tuple[str, tuple[AmbientEntry, ...]]:
        tokens = {message.source_token for message in kept_messages if message.source_token}
        if part.token is not None and part.token in tokens:
            return "ambient_excerpt", tuple(part.entries)
        if timeline.text and turn.group_id is not None:
            return "timeline", tuple(
                snapshot_from_timeline(
                    timeline,
                    bot_id=turn.bot.id,
                    group_id=group_scope(turn.group_id),
                    line_chars=config.timeline.line_chars,
                    entry=cache.snapshot,
                )
            )
        return "none", ()

    def trace() -> dict[str, Any]:
        snapshot_source, entries = snapshot()
        return {
            "degraded": reader.degraded,
            "messages": {
                **notes,
                "sources": sources,
                **({"quoted_lookup": quoted_lookup} if quoted_lookup else {}),
                "sent": [
                    {"role": m.role, "source": m.source, "chars": len(m.content)}
                    for m in kept_messages
                ],
            },
            "budget": fitted.report().trace(),
            "wording_hints": {
                "sent": [{**h.to_json(), "chars": len(h.text)} for h in hints_sent],
                "trimmed": [{**h.to_json(), "chars": len(h.text)} for h in hints_trimmed],
                "failures": [dict(failure) for failure in hint_failures],
            },
            "injection_snapshot": {
                "source": snapshot_source,
                "ambient_turns": [entry.to_json() for entry in entries],
            },
            "vision": {
                "current": list(vision_image_urls(turn.message.images, turn.quoted_message_images)),
                "images": list(timeline.images),
                "withheld": timeline.images_withheld,
            },
        }

    return TurnMessages(
        messages=kept_messages,
        vision_images=timeline.images,
        trace=trace,
        ambient_snapshot=lambda: snapshot()[1],
        wording_hints=hints_sent,
        wording_hints_trimmed=hints_trimmed,
    )


def _current_message(turn: Turn, cache: MessageCache, max_len: int) -> PromptMessage | None:
    content = cache.user_turn(current_text(turn), max_len)
    if not content:
        return None
    # Any image shows [图片] in the text; only valid URLs are sent (docs/design.md#images).
    images = vision_image_urls(turn.message.images) if turn.message.images else ()
    return PromptMessage(role="user", content=content, source="current", images=images)


def _fit_newest_first(
    system_prompt: str,
    budget: int,
    rows: Sequence[HistoryRow],
    ambient: PromptMessage | None,
    current: PromptMessage | None,
    cache: MessageCache,
    max_len: int,
    keep_tail: str,
    hinted: Sequence[PromptMessage] = (),
    *,
    ambient_last: bool = False,
) -> _Fitted:
    """:func:`promptweave.messages.trimming.apply_budget` in characters, taking messages from the newest back.

    :param ambient_last: the ambient excerpt goes after the history, just before the hints (the
        cache mode), and is taken before the history.

    The oldest messages go first, so what the budget keeps is the longest run of newest messages
    that fits (at least the newest one): reading back from the current message and stopping at
    the first that does not fit keeps exactly that run, and leaves the older messages unbuilt.
    """
    system = len(system_prompt.strip())
    total = system
    kept: list[PromptMessage] = []
    if current is not None:
        kept.append(current)
        total += len(current.content)
    boundary = len(rows)  # rows[boundary:] are kept, or clean to no message at all
    full = False
    hints_from = len(hinted)  # hinted[hints_from:] are kept
    for hint in reversed(hinted):
        size = len(hint.content)
        if kept and total + size > budget:
            full = True
            break
        kept.append(hint)
        total += size
        hints_from -= 1
    ambient_kept = False
    if ambient_last and not full and ambient is not None:
        size = len(ambient.content)
        if not kept or total + size <= budget:
            kept.append(ambient)
            total += size
            ambient_kept = True
        else:
            full = True
    if not full:
        history_message = cache.history_message
        messages = cache.row_messages(rows, max_len)
        for index in range(len(rows) - 1, -1, -1):
            message = messages[index]
            if message is NOT_BUILT:
                message = messages[index] = history_message(rows[index], max_len)
            if message is not None:
                size = len(message.content)
                if kept and total + size > budget:
                    full = True
                    break
                kept.append(message)
                total += size
            boundary = index
    if not ambient_last and not full and ambient is not None:
        size = len(ambient.content)
        if not kept or total + size <= budget:
            kept.append(ambient)
            total += size
            ambient_kept = True
    kept.reverse()
    uncut = total
    cut = False
    if kept and total > budget:
        last = kept[-1]
        room = max(MIN_CURRENT_LENGTH, budget - system)
        shortened = cut_current_text(last.content, room, len, keep_tail=keep_tail)
        if shortened != last.content:
            kept[-1] = attrs.evolve(last, content=shortened)
            total = system + len(shortened)
            cut = True
    # What the budget dropped is told (and its messages built) only when the trace is read.
    dropped_ambient = ambient if ambient is not None and not ambient_kept else None
    report = functools.partial(
        _dropped_report,
        cache,
        max_len,
        rows[:boundary],
        dropped_ambient,
        hinted[:hints_from],
        budget,
        system,
        uncut,
        total,
        cut,
    )
    return _Fitted(kept=kept, report=report)


def _dropped_report(
    cache: MessageCache,
    max_len: int,
    rows: Sequence[HistoryRow],
    ambient: PromptMessage | None,
    hinted: Sequence[PromptMessage],
    budget: int,
    system: int,
    kept_size: int,
    total: int,
    cut: bool,
) -> BudgetReport:
    """The budget's report of :func:`_fit_newest_first`, with the messages it dropped: the
    ambient excerpt, the older ``rows`` and the older hints given (``kept_size``: what was kept
    before the current message was cut)."""
    history_message = cache.history_message
    dropped = [
        *([ambient] if ambient is not None else []),
        *(m for row in rows if (m := history_message(row, max_len)) is not None),
        *hinted,
    ]
    return BudgetReport(
        budget=budget,
        system=system,
        before=kept_size + sum(len(message.content) for message in dropped),
        total=total,
        dropped=tuple(message.source for message in dropped),
        current_cut=cut,
    )


def carried_by_history(
    history: Sequence[HistoryRow], turn: Turn, kept: HistoryTexts | None = None
) -> Callable[[ChatMessage], bool]:
    """Whether a group message is already in the user's history rows, so the timeline need not
    show it again (the message sequence never repeats what the system prompt carries). Matched by
    message id when the row has one, else by speaker and text: the user's own lines and the bot's.

    :param kept: the texts of ``history`` when its window was kept between turns
        (:meth:`promptweave.messages.message_cache.MessageCache.history_texts`): its rows carry
        no message ids, and the texts need not be gathered again.
    """
    ids: set[str] = set()
    texts: Container[tuple[str, str]]
    if kept is not None:
        texts = kept
    else:
        gathered: set[tuple[str, str]] = set()
        for row in history:
            if row.summary:
                continue
            if row.message_id is not None:
                ids.add(row.message_id)
            else:
                gathered.add((row.role, row.content.strip()))
        texts = gathered

    bot_id, user_id = turn.bot.id, turn.message.sender_id

    def carried(message: ChatMessage) -> bool:
        if ids and message.id is not None and message.id in ids:
            return True
        sender_id = message.sender_id
        if sender_id == bot_id:
            role = "assistant"
        elif sender_id == user_id:
            role = "user"
        else:
            return False
        return (role, message.text.strip()) in texts

    return carried
