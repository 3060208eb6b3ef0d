"""The per-turn snapshot between an assembled turn and a provider request
(``docs/design.md#turn-context``).

:func:`build_turn_context` runs once per turn, after :meth:`promptweave.Promptweave.render`. It
decides which system prompt is active for the conversation (built once and reused byte for byte,
rebuilt only after a compression or when a static section changed), takes the turn's notes, runs
the preflight compression, and stamps the per-turn context on the current user message: as its
sidecar, or as a trailing text part when the message carries images or in the cache mode
(``turn_sections = "user"``, ``docs/cost.md``), where the history is sent as it was said. What is then sent is fitted
into ``[budget] chars`` (:mod:`promptweave.turn_context.request_budget`). The result,
:class:`TurnContext`, is what the provider request builders read. See ``docs/turn_context.md``.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from promptweave.messages.images import vision_image_urls
from promptweave.messages.prompt_message import PromptMessage
from promptweave.messages.sequence import format_user_turn
from promptweave.plugins.contributions import Volatility
from promptweave.plugins.watchdog import Deadline
from promptweave.prompt.render_context import RenderContext
from promptweave.text.rules import IMAGE_MARK
from promptweave.text.sanitize import sanitize_block, strip_lone_surrogates
from promptweave.timing import elapsed_ms
from promptweave.turn_context.conversation_state import (
    ActiveSystemPrompt,
    conversation_key,
    prompt_cache_key,
)
from promptweave.turn_context.preflight import (
    PreflightResult,
    default_compress_messages,
    reanchor_current_turn_user_idx,
    run_preflight,
)
from promptweave.turn_context.request_budget import TurnAdditions, TurnBudgetReport, fit_turn_budget

if TYPE_CHECKING:
    import datetime as dt

    from promptweave.config import Config
    from promptweave.decision import Decision
    from promptweave.plugins.door import Hooks
    from promptweave.plugins.watchdog import Watchdog
    from promptweave.prompt.rendered import RenderedSection, RenderedTurn
    from promptweave.text.persona import PersonaPack
    from promptweave.turn import Turn
    from promptweave.turn_context.conversation_state import ConversationState

__all__ = [
    "STABLE_VOLATILITIES",
    "TurnContext",
    "TurnContextParts",
    "build_turn_context",
    "collect_turn_notes",
]


class TurnContextParts(Protocol):
    """The parts the turn-context stage uses; a :class:`promptweave.Promptweave` and a turn's
    :class:`promptweave.pipeline.stages.TurnParts` both have them."""

    @property
    def config(self) -> Config: ...
    @property
    def persona(self) -> PersonaPack: ...
    @property
    def conversations(self) -> ConversationState: ...
    @property
    def watchdog(self) -> Watchdog: ...
    @property
    def hooks(self) -> Hooks: ...

    def context_for(
        self, turn: Turn, *, now: dt.datetime | None = ..., decision: Decision | None = ...
    ) -> RenderContext: ...


log = logging.getLogger("promptweave")

#: Sections of these volatilities, at the front of the prompt, form the cached stable prefix.
STABLE_VOLATILITIES = frozenset({Volatility.STATIC.value, Volatility.PROFILE.value})
STATIC_ONLY = frozenset({Volatility.STATIC.value})
SECTION_SEPARATOR = "\n\n"


@attrs.frozen(kw_only=True)
class TurnContext:
    """Everything one turn sends, fixed before the first request.

    :param conversation_key: bot, group and speaker (:func:`promptweave.turn_context.conversation_state.conversation_key`).
    :param prompt_cache_key: the key the OpenAI formats send so that one group's turns share a
        prompt cache (:func:`promptweave.turn_context.conversation_state.prompt_cache_key`); ``""`` sends none.
        With ``turn_sections = "user"`` it is one key per speaker.
    :param turn_part: how the current message carries the turn's own context: ``sidecar`` (its
        text sent in place of the content), ``part`` (a trailing text part, the last of the
        message: always in the cache mode, and for a message with images) or ``none``.
    :param turn_id: ``<conversation key>:<task id>:<8 hex>``, unique per turn.
    :param task_id: the caller's task id, or a fresh one.
    :param user_message: the current user message's content, lone surrogates removed.
    :param original_user_message: the clean text the user wrote, for memory and log queries; no
        injected text ever lands in it.
    :param messages: a copy of the history (with what was sent replayed, in ``system`` mode) and
        the current message carrying its sidecar or parts.
    :param conversation_history: the history as given; ``None`` after a compression rewrote it.
    :param active_system_prompt: the conversation's cached stable prefix.
    :param turn_sections: ``(section_id, text)`` of the per-turn sections that follow it in the
        system prompt (empty with ``turn_sections = "user"``: they ride the sidecar instead).
    :param current_turn_user_idx: index of the current user message in ``messages``; ``-1`` when
        the turn has none.
    :param notes: the notes delivered this turn, in order.
    :param memory_context: the recall delivered in the sidecar this turn (cut or emptied when the
        budget required it).
    :param timeline_images: the timeline's image URLs, for providers with image support.
    :param system_prompt_status: ``built``, ``reused``, ``rebuilt_static_changed``,
        ``rebuilt_profile_changed`` or
        ``rebuilt_after_compression``.
    :param preflight: what the preflight compression did.
    :param budget: what the budget trimmed from what is sent.
    :param trace: notes failures, the sidecar decision and the above, for the turn's trace.
    :param stage_durations_ms: milliseconds spent in ``turn_context`` (the whole build), and within
        it ``turn_context.notes`` (the queued notes and the ``collect_turn_notes`` hook),
        ``turn_context.preflight`` (the size gate, the estimate and any compression passes) and
        ``turn_context.budget`` (measuring and trimming what is sent).
        Timing is not part of the value: two contexts that differ only here are equal.
    """

    conversation_key: str
    turn_id: str
    task_id: str
    user_message: str
    original_user_message: str
    messages: tuple[PromptMessage, ...]
    conversation_history: tuple[PromptMessage, ...] | None
    active_system_prompt: ActiveSystemPrompt
    turn_sections: tuple[tuple[str, str], ...]
    current_turn_user_idx: int
    notes: tuple[str, ...] = ()
    memory_context: str = ""
    timeline_images: tuple[str, ...] = ()
    system_prompt_status: str = "built"
    preflight: PreflightResult = attrs.field(factory=PreflightResult)
    budget: TurnBudgetReport = attrs.field(
        factory=lambda: TurnBudgetReport(budget=0, system=0, before=0, total=0)
    )
    trace: Mapping[str, Any] = attrs.field(factory=dict)
    stage_durations_ms: Mapping[str, float] = attrs.field(factory=dict, eq=False)
    prompt_cache_key: str = ""
    turn_part: str = "none"

    @property
    def system_prompt(self) -> str:
        """The full system prompt sent: the stable prefix, then the per-turn sections."""
        return _system_text(self.active_system_prompt, self.turn_sections)

    @property
    def current_message(self) -> PromptMessage | None:
        """The current user message, or ``None`` when the turn has none."""
        if 0 <= self.current_turn_user_idx < len(self.messages):
            return self.messages[self.current_turn_user_idx]
        return None


def _split_sections(
    sections: Sequence[RenderedSection], stable_volatilities: frozenset[str]
) -> tuple[list[RenderedSection], list[RenderedSection]]:
    """The leading run of sections of ``stable_volatilities``, and everything after the first
    other one."""
    shown = [s for s in sections if s.status == "rendered"]
    cut = next((i for i, s in enumerate(shown) if s.volatility not in stable_volatilities), None)
    cut = len(shown) if cut is None else cut
    return shown[:cut], shown[cut:]


def _fingerprint(sections: Sequence[RenderedSection], volatility: Volatility) -> str:
    digest = hashlib.sha256()
    for section in sections:
        if section.volatility == volatility.value:
            digest.update(f"{section.id}\0{section.text}\0".encode())
    return digest.hexdigest()


def _active_prompt(stable: Sequence[RenderedSection]) -> ActiveSystemPrompt:
    pieces = tuple((s.id, s.text) for s in stable)
    return ActiveSystemPrompt(
        text=SECTION_SEPARATOR.join(text for _, text in pieces),
        sections=pieces,
        static_fingerprint=_fingerprint(stable, Volatility.STATIC),
        profile_fingerprint=_fingerprint(stable, Volatility.PROFILE),
    )


def _system_text(active: ActiveSystemPrompt, turn_pieces: Sequence[tuple[str, str]]) -> str:
    """The system prompt sent: the stable prefix, then the turn sections that stay in it."""
    return SECTION_SEPARATOR.join(t for t in (active.text, *(text for _, text in turn_pieces)) if t)


def collect_turn_notes(
    parts: TurnContextParts, context: RenderContext, key: str, deadline: Deadline | None = None
) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    """Take this turn's notes: those queued for the conversation, then the hook's, once.

    Each note is sanitized like a section block, cut at ``turn_context.note_max_chars``; blank
    notes and exact repeats are dropped. A hook implementation that raises, hangs past the
    turn's deadline or returns something other than a string or strings is left out; at most
    :data:`promptweave.plugins.door.NOTES_PER_PLUGIN_MAX` notes of one implementation are read.

    :param deadline: the turn's deadline (a fresh one of the watchdog by default).
    :returns: the notes, and one ``{"plugin", "error"}`` entry per failed implementation.
    """
    raw: list[str] = list(parts.conversations.notes.pop(key))
    found, failures = parts.watchdog.run(
        lambda: parts.hooks.collect_turn_notes(context),
        deadline or parts.watchdog.deadline(),
    )
    raw.extend(found)
    limit = parts.config.turn_context.note_max_chars
    notes: list[str] = []
    for note in raw:
        # Cut before cleaning, so a note of ten megabytes costs nothing.
        cleaned = sanitize_block(note[: 4 * limit], limit)
        if cleaned and cleaned not in notes:
            notes.append(cleaned)
    return tuple(notes), failures


def _current_message(
    parts: TurnContextParts, turn: Turn, rendered: RenderedTurn
) -> tuple[list[PromptMessage], PromptMessage | None]:
    messages = list(rendered.messages)
    index = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].source == "current"), None
    )
    # The turn as rendered: quoted images the store supplied are current images too.
    completed = rendered.context.turn if rendered.context is not None else turn
    images = vision_image_urls(completed.message.images, completed.quoted_message_images)
    if index is not None:
        current = messages.pop(index)
    elif images:
        # An image-only message renders no text; it is still the turn's user message.
        current = PromptMessage(
            role="user",
            content=format_user_turn(parts.persona, IMAGE_MARK),
            source="current",
        )
    else:
        return messages, None
    current = attrs.evolve(
        current,
        content=strip_lone_surrogates(current.content),
        images=vision_image_urls(current.images, images),
        api_content=None,
        parts=(),
    )
    return messages, current


def _plugin_compression(
    parts: TurnContextParts, rows: Sequence[PromptMessage], pass_number: int
) -> Sequence[PromptMessage] | None:
    """The first ``compress_turn_messages`` answer: ``None`` when no plugin answers, or when
    one raises, hangs or answers anything but a list of messages (then the built-in pass runs,
    and the fault is in the trace)."""
    settings = parts.config.turn_context
    return parts.hooks.compress_turn_messages(
        tuple(rows), pass_number, settings.protect_first, settings.protect_last
    )


def build_turn_context(
    parts: TurnContextParts,
    turn: Turn,
    rendered: RenderedTurn,
    *,
    memory_context: str = "",
    task_id: str | None = None,
    persist_user_message: str | None = None,
    context: RenderContext | None = None,
) -> TurnContext:
    """Build the turn's context from its assembled result. Call once per turn.

    :param parts: what the stage uses (a :class:`promptweave.Promptweave` has them all); its
        ``conversations`` hold the state.
    :param turn: the turn.
    :param rendered: ``runtime.render(turn)``.
    :param memory_context: recall of an external memory provider, delivered in the sidecar (and
        trimmed first when what is sent is over the budget, after replayed sidecars).
    :param task_id: the caller's task id; a fresh one by default.
    :param persist_user_message: the clean text to keep for memory and logs, when the message
        text was already decorated (defaults to the message text).
    :param context: the render context, to spare rebuilding it for the notes hook.
    """
    start = time.perf_counter()
    deadline = parts.watchdog.deadline()
    settings = parts.config.turn_context
    state = parts.conversations
    key = conversation_key(turn)
    cache_mode = settings.turn_sections == "user"
    history, current = _current_message(parts, turn, rendered)
    if not cache_mode:
        # In the cache mode the history carries only what was said: a turn's context was that
        # turn's alone, and resending it inside old messages would cost its bytes on every
        # later turn (docs/cost.md, "The layout of a request").
        history = state.transcript.replay(key, history)
    task = task_id or uuid.uuid4().hex
    turn_id = f"{key}:{task}:{uuid.uuid4().hex[:8]}"
    original = strip_lone_surrogates(
        turn.message.text if persist_user_message is None else persist_user_message
    )

    # With the turn part on the user message, the system prompt keeps the static sections alone:
    # profile sections are recalled for each message, and would change it turn after turn.
    stable, tail = _split_sections(
        rendered.sections,
        STATIC_ONLY if cache_mode else STABLE_VOLATILITIES,
    )
    fresh = _active_prompt(stable)
    active = state.system_prompts.get(key)
    if active is None:
        active, status = fresh, "built"
    elif active.static_fingerprint != fresh.static_fingerprint:
        active, status = fresh, "rebuilt_static_changed"
    elif active.profile_fingerprint != fresh.profile_fingerprint:
        # Expression pairs and strategies are recalled for each message: reusing the first
        # turn's would show the model examples for a message it is not answering. The static
        # sections in front stay byte-identical, so a prefix cache still covers them.
        active, status = fresh, "rebuilt_profile_changed"
    else:
        status = "reused"
    state.system_prompts.put(key, active)
    turn_pieces = tuple((s.id, s.text) for s in tail)

    render_context = (
        context or rendered.context or parts.context_for(turn, decision=rendered.decision)
    )
    notes_start = time.perf_counter()
    notes, note_failures = collect_turn_notes(parts, render_context, key, deadline)
    notes_ms = elapsed_ms(notes_start)

    messages = [*history, *([current] if current is not None else [])]
    index = len(messages) - 1 if current is not None else -1
    system_for_estimate = _system_text(active, turn_pieces)

    def compress(rows: Sequence[PromptMessage], pass_number: int) -> Sequence[PromptMessage]:
        found = _plugin_compression(parts, rows, pass_number)
        if found is None:
            return default_compress_messages(
                rows,
                pass_number,
                protect_first=settings.protect_first,
                protect_last=settings.protect_last,
            )
        return found

    preflight_start = time.perf_counter()
    tally = parts.hooks.token_counter(parts.config)
    messages, preflight = parts.watchdog.run(
        lambda: run_preflight(
            messages,
            system_for_estimate,
            compress,
            protect_first=settings.protect_first,
            protect_last=settings.protect_last,
            threshold_tokens=settings.threshold_tokens,
            max_passes=settings.max_passes,
            image_token_cost=settings.image_token_cost,
            # The group timeline's images ride in a message of their own, added to the request.
            extra_images=len(rendered.vision_images),
            count=tally,
            basis=lambda: tally.basis,
        ),
        deadline,
    )
    preflight_ms = elapsed_ms(preflight_start)
    conversation_history: tuple[PromptMessage, ...] | None = tuple(history)
    if preflight.compressed:
        # Compression is the one sanctioned cache break: the prompt is rebuilt, the history
        # given no longer describes the messages, and the current message has moved.
        state.system_prompts.invalidate(key)
        active, status = fresh, "rebuilt_after_compression"
        state.system_prompts.put(key, active)
        conversation_history = None
        index = reanchor_current_turn_user_idx(messages, current.content if current else "")

    sidecar_blocks = tuple(text for _, text in turn_pieces)
    if cache_mode:
        turn_pieces = ()
    else:
        sidecar_blocks = ()
    budget_start = time.perf_counter()
    additions = TurnAdditions(
        memory_context=memory_context,
        turn_sections=sidecar_blocks,
        notes=notes,
        trailing=cache_mode,
    )
    fitted = parts.watchdog.run(
        lambda: fit_turn_budget(
            messages,
            index,
            _system_text(active, turn_pieces),
            additions,
            parts.config.budget.chars,
            # Characters, as measure_text gives them with no plugin, without a hook check a text.
            parts.hooks.measure_text if parts.hooks.implemented("measure_text") else len,
            keep_tail=parts.persona.format(parts.persona.user_turn.injection_suffix),
        ),
        deadline,
    )
    budget_ms = elapsed_ms(budget_start)
    messages, index, stamp = list(fitted.messages), fitted.current_index, fitted.stamp
    user_message = current.content if current is not None else ""
    if index >= 0:
        # What is recorded is what is sent, so a later turn replays these very bytes.
        state.transcript.record(key, messages[index])
        memory_context, notes = fitted.additions.memory_context, fitted.additions.notes
        if fitted.report.current_cut:
            user_message = messages[index].content
    elif notes:
        for note in notes:  # no user message to carry them: keep them for the next turn
            state.notes.push(key, note)
        notes = ()

    trace = {
        "conversation_key": key,
        "turn_id": turn_id,
        "system_prompt": {
            "status": status,
            "stable_sections": [section_id for section_id, _ in active.sections],
            "stable_chars": len(active.text),
        },
        "turn_sections": settings.turn_sections,
        "notes": list(notes),
        "note_failures": note_failures,
        "stamp": stamp,
        "current_turn_user_idx": index,
        "preflight": preflight.to_json(),
        "budget": fitted.report.trace(),
        "plugin_faults": deadline.trace(),
    }
    return TurnContext(
        conversation_key=key,
        prompt_cache_key=prompt_cache_key(turn, per_speaker=cache_mode),
        turn_part=stamp if index >= 0 else "none",
        turn_id=turn_id,
        task_id=task,
        user_message=user_message,
        original_user_message=original,
        messages=tuple(messages),
        conversation_history=conversation_history,
        active_system_prompt=active,
        turn_sections=turn_pieces,
        current_turn_user_idx=index,
        notes=notes,
        memory_context=memory_context,
        timeline_images=rendered.vision_images,
        system_prompt_status=status,
        preflight=preflight,
        budget=fitted.report,
        trace=trace,
        stage_durations_ms={
            "turn_context": elapsed_ms(start),
            "turn_context.notes": notes_ms,
            "turn_context.preflight": preflight_ms,
            "turn_context.budget": budget_ms,
        },
    )
