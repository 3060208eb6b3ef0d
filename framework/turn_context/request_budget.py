"""The budget of what a turn actually sends (``docs/design.md#character-budget``: the budget covers
the system prompt and the messages, and what is merged into the messages no longer escapes it).

:meth:`promptweave.Promptweave.render` fits the rendered system prompt and the clean messages into
``[budget] chars``. :func:`promptweave.build_turn_context` then sends more than that: the
conversation's active system prompt (reused, so not always the one just rendered), earlier messages
replayed with the sidecars and parts they were sent with, and, on the current user message, the
recalled memory block, the turn sections (with ``turn_sections = "user"``) and the notes.
:func:`fit_turn_budget` measures that, and when it is over the budget trims, in this order, each
step only while the total is still over:

1. the replayed sidecars and parts of earlier messages, oldest first (those messages are sent with
   their clean content);
2. the recalled memory block, cut from its end, then left out;
3. the notes, kept in order while they fit whole; the first that does not is cut, the ones after
   it are left out;
4. earlier messages, oldest first (the render-time rule);
5. the current message's own text, cut as the render-time rule cuts it: to
   ``max(64, budget - system prompt - turn sections)``, keeping its injection line.

The system prompt and the turn sections on the user message are never trimmed, like the system
prompt at render time. Within the budget nothing changes, so the request is byte-identical to an
unbudgeted one; over it, the trims depend only on the sizes, and since the replayed sidecars go
oldest first the messages already sent without theirs stay so while the conversation grows, so the
prefix a provider cached keeps matching up to the first message that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from promptweave.messages.prompt_message import PromptMessage
from promptweave.messages.trimming import (
    MIN_CURRENT_LENGTH,
    Measure,
    cut_current_text,
    cut_to_length,
)
from promptweave.turn_context.sidecar import (
    compose_user_api_content,
    defuse_user_headers,
    sent_text,
    stamp_turn_context,
)

__all__ = ["FittedTurn", "TurnAdditions", "TurnBudgetReport", "fit_turn_budget", "sent_length"]

SECTION_SEPARATOR = "\n\n"


@attrs.frozen(kw_only=True)
class TurnAdditions:
    """What the turn context puts on the current user message, in the sidecar's order.

    :param memory_context: the raw recall of a memory provider.
    :param turn_sections: the texts of the turn sections that ride the message
        (``turn_sections = "user"``); never trimmed.
    :param notes: the turn's notes, in order.
    :param trailing: put them on the message as a trailing text part (``turn_sections =
        "user"``, the cache mode), never as a sidecar: the part is this turn's alone, the
        message's own text stays a block of its own before it, and the next turn sends the
        message without it (``docs/cost.md``, "The layout of a request").
    """

    memory_context: str = ""
    turn_sections: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    trailing: bool = False

    def stamp(self, message: PromptMessage) -> tuple[PromptMessage, str]:
        """``message`` carrying these additions (:func:`promptweave.turn_context.sidecar.stamp_turn_context`,
        or a trailing part when :attr:`trailing`)."""
        plugin_context = SECTION_SEPARATOR.join([*self.turn_sections, *self.notes])
        if not self.trailing:
            return stamp_turn_context(message, self.memory_context, plugin_context)
        injected = compose_user_api_content("", self.memory_context, plugin_context)
        if injected is None:
            return message, "none"
        # The user's lines sit beside the turn's sections in one message here too: sent with
        # their header brackets defused, the clean content kept for the turns after
        # (docs/turn_context.md, "Forged headers").
        content = defuse_user_headers(message.content)
        if content != message.content:
            message = attrs.evolve(message, api_content=content)
        return attrs.evolve(message, parts=(*message.parts, injected.lstrip("\n"))), "part"


@attrs.frozen(kw_only=True)
class TurnBudgetReport:
    """What the budget did to what a turn sends.

    :param budget: the budget; 0 means none.
    :param system: the measured system prompt sent.
    :param before: system prompt plus messages as composed, before trimming.
    :param total: system prompt plus messages as sent.
    :param sidecars_dropped: earlier messages sent with their clean content instead of their
        replayed sidecar or parts.
    :param memory_context: ``none`` (nothing recalled, or no user message to carry it), ``kept``,
        ``cut`` or ``dropped``.
    :param notes_cut: one note was cut.
    :param notes_dropped: the number of notes left out.
    :param dropped: the ``source`` of each earlier message left out, oldest first.
    :param current_cut: the current message's own text was cut.
    """

    budget: int
    system: int
    before: int
    total: int
    sidecars_dropped: int = 0
    memory_context: str = "none"
    notes_cut: bool = False
    notes_dropped: int = 0
    dropped: tuple[str, ...] = ()
    current_cut: bool = False

    @property
    def trimmed(self) -> bool:
        """Whether anything was trimmed."""
        return bool(
            self.sidecars_dropped
            or self.memory_context in ("cut", "dropped")
            or self.notes_cut
            or self.notes_dropped
            or self.dropped
            or self.current_cut
        )

    def trace(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "system": self.system,
            "before": self.before,
            "total": self.total,
            "trimmed": self.trimmed,
            "sidecars_dropped": self.sidecars_dropped,
            "memory_context": self.memory_context,
            "notes_cut": self.notes_cut,
            "notes_dropped": self.notes_dropped,
            "dropped": list(self.dropped),
            "dropped_messages": len(self.dropped),
            "current_cut": self.current_cut,
        }


@attrs.frozen(kw_only=True)
class FittedTurn:
    """The messages a turn sends, within the budget.

    :param messages: the messages, the current one stamped with what was kept of the additions.
    :param current_index: the current user message's index in ``messages``; ``-1`` when none.
    :param additions: what the current message carries (the memory and notes as delivered).
    :param stamp: how they were put on it: ``sidecar``, ``part`` or ``none``.
    :param report: what was trimmed.
    """

    messages: tuple[PromptMessage, ...]
    current_index: int
    additions: TurnAdditions
    stamp: str
    report: TurnBudgetReport


def sent_length(message: PromptMessage, measure: Measure = len) -> int:
    """The measure of what is sent for ``message``: its sidecar when it applies, else its
    content, plus its durable parts."""
    return measure(sent_text(message)) + sum(measure(part) for part in message.parts)


def fit_turn_budget(
    messages: Sequence[PromptMessage],
    current_index: int,
    system_prompt: str,
    additions: TurnAdditions,
    budget: int,
    measure: Measure = len,
    *,
    keep_tail: str = "",
) -> FittedTurn:
    """Stamp the current message with ``additions`` and fit everything sent into ``budget``.

    :param messages: the messages to send; the current one (at ``current_index``) not stamped yet.
    :param current_index: the current user message's index; ``-1`` when the turn has none (the
        additions are then not sent).
    :param system_prompt: the system prompt that will be sent.
    :param budget: ``[budget] chars``; 0 or less trims nothing.
    :param measure: the budget's measure (:meth:`promptweave.plugins.door.Hooks.measure_text`).
    :param keep_tail: the injection line the current message's cut must keep.
    """
    fitter = _Fitter(
        rows=list(messages),
        index=current_index if 0 <= current_index < len(messages) else -1,
        system=measure(system_prompt.strip()),
        additions=additions,
        budget=budget,
        measure=measure,
    )
    before = fitter.total
    if 0 < budget < before:
        fitter.drop_replayed_sidecars()
        fitter.trim_memory_context()
        fitter.trim_notes()
        fitter.drop_oldest_messages()
        fitter.cut_current(keep_tail)
    return fitter.result(before)


@attrs.define
class _Fitter:
    """The trimming state of one turn: the rows, the current message's additions and their
    measures."""

    rows: list[PromptMessage]
    index: int
    system: int
    additions: TurnAdditions
    budget: int
    measure: Measure
    lengths: list[int] = attrs.field(init=False)
    sidecars_dropped: int = 0
    memory_state: str = "none"
    notes_cut: bool = False
    notes_dropped: int = 0
    dropped: list[str] = attrs.field(factory=list)
    current_cut: bool = False

    def __attrs_post_init__(self) -> None:
        if self.index < 0:
            self.additions = TurnAdditions()
        elif self.additions.memory_context.strip():
            self.memory_state = "kept"
        self.lengths = [
            self._current_length(self.additions)
            if position == self.index
            else sent_length(row, self.measure)
            for position, row in enumerate(self.rows)
        ]

    @property
    def total(self) -> int:
        return self.system + sum(self.lengths)

    def _over(self) -> bool:
        return self.total > self.budget

    def _current_length(self, additions: TurnAdditions) -> int:
        """The measure of the current message carrying ``additions``."""
        return sent_length(additions.stamp(self.rows[self.index])[0], self.measure)

    def _room(self) -> int:
        """What the current message may measure with everything else as it is."""
        return self.budget - (self.total - self.lengths[self.index])

    def _set_additions(self, additions: TurnAdditions) -> None:
        self.additions = additions
        self.lengths[self.index] = self._current_length(additions)

    def drop_replayed_sidecars(self) -> None:
        for position, row in enumerate(self.rows):
            if not self._over():
                return
            if position == self.index or (row.api_content is None and not row.parts):
                continue
            self.rows[position] = attrs.evolve(row, api_content=None, parts=())
            self.lengths[position] = sent_length(self.rows[position], self.measure)
            self.sidecars_dropped += 1

    def trim_memory_context(self) -> None:
        if not self._over() or self.memory_state == "none":
            return
        room = self._room()
        recalled = self.additions.memory_context

        def with_memory(text: str) -> int:
            return self._current_length(attrs.evolve(self.additions, memory_context=text))

        kept = cut_to_length(recalled, room, with_memory)
        if not kept.strip():
            kept, self.memory_state = "", "dropped"
        else:
            self.memory_state = "cut"
        self._set_additions(attrs.evolve(self.additions, memory_context=kept))

    def trim_notes(self) -> None:
        if not self._over() or not self.additions.notes:
            return
        room = self._room()
        kept: list[str] = []

        def with_notes(*notes: str) -> int:
            return self._current_length(attrs.evolve(self.additions, notes=(*kept, *notes)))

        for note in self.additions.notes:
            if with_notes(note) <= room:
                kept.append(note)
                continue
            piece = cut_to_length(note, room, with_notes).rstrip()
            if piece:
                kept.append(piece)
                self.notes_cut = True
            break
        self.notes_dropped = len(self.additions.notes) - len(kept)
        self._set_additions(attrs.evolve(self.additions, notes=tuple(kept)))

    def drop_oldest_messages(self) -> None:
        while self._over():
            # The oldest row that is not the current message; without one, keep the last row.
            position = 1 if self.index == 0 else 0
            if position >= len(self.rows) or (self.index < 0 and len(self.rows) == 1):
                return
            self.dropped.append(self.rows.pop(position).source)
            self.lengths.pop(position)
            if position < self.index:
                self.index -= 1

    def cut_current(self, keep_tail: str) -> None:
        if not self._over() or self.index < 0:
            return
        current = self.rows[self.index]
        # What the message carries besides its text (the turn sections, by now) counts like the
        # system prompt: the text gets what the render-time rule gives it.
        carried = self.lengths[self.index] - self.measure(current.content)
        room = max(MIN_CURRENT_LENGTH, self._room() - carried)
        content = cut_current_text(current.content, room, self.measure, keep_tail=keep_tail)
        if content != current.content:
            self.rows[self.index] = attrs.evolve(current, content=content)
            self.lengths[self.index] = self._current_length(self.additions)
            self.current_cut = True

    def result(self, before: int) -> FittedTurn:
        stamp = "none"
        if self.index >= 0:
            self.rows[self.index], stamp = self.additions.stamp(self.rows[self.index])
        report = TurnBudgetReport(
            budget=self.budget,
            system=self.system,
            before=before,
            total=self.total,
            sidecars_dropped=self.sidecars_dropped,
            memory_context=self.memory_state,
            notes_cut=self.notes_cut,
            notes_dropped=self.notes_dropped,
            dropped=tuple(self.dropped),
            current_cut=self.current_cut,
        )
        return FittedTurn(
            messages=tuple(self.rows),
            current_index=self.index,
            additions=self.additions,
            stamp=stamp,
            report=report,
        )
