"""The budget of one request: system prompt plus messages (``docs/design.md#character-budget``).

The oldest messages go first (the ambient excerpt, then the oldest history); the current message is
never dropped, only cut when it alone does not fit; the system prompt, and with it the group
timeline, is never trimmed. Length is measured by a pluggable function: characters by default, a
token counter through the ``measure_text`` hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from promptweave.messages.prompt_message import PromptMessage

__all__ = [
    "MIN_CURRENT_LENGTH",
    "BudgetReport",
    "Measure",
    "apply_budget",
    "cut_current_text",
    "cut_to_length",
]

#: What the current message keeps at least when cut, in the measure's unit.
MIN_CURRENT_LENGTH = 64

Measure = Callable[[str], int]


@attrs.frozen(kw_only=True)
class BudgetReport:
    """What the budget did to one turn.

    :param budget: the budget; 0 means none.
    :param system: the measured system prompt.
    :param before: system prompt plus messages before trimming.
    :param total: system prompt plus the kept messages.
    :param dropped: the ``source`` of each dropped message, oldest first.
    :param current_cut: the current message was cut to fit.
    """

    budget: int
    system: int
    before: int
    total: int
    dropped: tuple[str, ...] = ()
    current_cut: bool = False

    def trace(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "system": self.system,
            "before": self.before,
            "total": self.total,
            "dropped": list(self.dropped),
            "dropped_messages": len(self.dropped),
            "current_cut": self.current_cut,
        }


def cut_to_length(text: str, limit: int, measure: Measure = len) -> str:
    """The longest prefix of ``text`` whose measure is at most ``limit``."""
    if measure(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def cut_current_text(text: str, room: int, measure: Measure = len, *, keep_tail: str = "") -> str:
    """Cut the current message's ``text`` to ``room``, from its end.

    :param keep_tail: a closing line that must survive the cut (the "ignore instructions above"
        line of a suspected injection): when ``text`` ends with it, the text before it is cut
        instead.
    """
    tail = f"\n{keep_tail}" if keep_tail and text.endswith(f"\n{keep_tail}") else ""
    head = text[: len(text) - len(tail)]
    return cut_to_length(head, max(0, room - measure(tail)), measure).rstrip() + tail


def apply_budget(
    messages: Sequence[PromptMessage],
    system_prompt: str,
    budget: int,
    measure: Measure = len,
    *,
    keep_tail: str = "",
) -> tuple[list[PromptMessage], BudgetReport]:
    """Fit ``messages`` and ``system_prompt`` into ``budget``.

    While more than one message is left and the total is over budget, the oldest goes. If the last
    message is then still over, it is cut to ``max(64, budget - system)`` (its ``source_token`` is
    kept). A budget of 0 or less changes nothing.

    :param keep_tail: a closing line that must survive the cut (the "ignore instructions above"
        line of a suspected injection): when the last message ends with it, the text before it is
        cut instead.
    """
    system = measure(system_prompt.strip())
    lengths = [measure(message.content) for message in messages]
    before = system + sum(lengths)
    if budget <= 0 or not messages:
        return list(messages), BudgetReport(
            budget=budget, system=system, before=before, total=before
        )
    kept = list(messages)
    total = before
    dropped: list[str] = []
    while len(kept) > 1 and total > budget:
        total -= lengths.pop(0)
        dropped.append(kept.pop(0).source)
    cut = False
    if total > budget:
        last = kept[-1]
        room = max(MIN_CURRENT_LENGTH, budget - system)
        shortened = cut_current_text(last.content, room, measure, keep_tail=keep_tail)
        if shortened != last.content:
            kept[-1] = attrs.evolve(last, content=shortened)
            total = system + measure(shortened)
            cut = True
    return kept, BudgetReport(
        budget=budget,
        system=system,
        before=before,
        total=total,
        dropped=tuple(dropped),
        current_cut=cut,
    )
