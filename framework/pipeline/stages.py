"""One turn through every stage, carried by one object (``docs/architecture.md``, "One turn,
through the code").

:class:`TurnPipeline` is built by :meth:`promptweave.Promptweave.pipeline` for one turn, from the
parts the runtime holds (:class:`TurnParts`). Its stages run in order, each once, and each keeps
what it made for the stages after it::

    read_session ─► route ─► retrieve ─► assemble (sections, messages) ─► RenderedTurn
                 ─► turn_context ─► request ─► submit ─► read_answer ─► plan_delivery

The session is read once: the route and the assembly see the same reader. ``Promptweave.render``
and ``arender`` run the stages up to the rendered turn; ``Promptweave.decide`` the first two; the
live loop (and the replay, which drives it) all of them, routing first and the rest only for a
turn that speaks. Each stage receives the parts it uses, never the runtime.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from promptweave.config import Config
from promptweave.decision import Decision, DeliveryStyle, allows_persistent_memory
from promptweave.delivery.outgoing import (
    DeliveryPlan,
    InjectedSource,
    ModelAnswer,
    ReplyInjection,
    text_hash,
)
from promptweave.delivery.recorder import Recorder
from promptweave.items import ReplyShape, TurnPolicy
from promptweave.messages.builder import TurnMessages, build_turn_messages, carried_by_history
from promptweave.messages.message_cache import MessageCache
from promptweave.messages.sequence import HistoryRow
from promptweave.messages.timeline import build_group_timeline
from promptweave.plugins.door import Hooks
from promptweave.plugins.registry import Registries
from promptweave.plugins.watchdog import Deadline, PluginFault, Watchdog, cut
from promptweave.prompt.assembly import SectionAssembler
from promptweave.prompt.render_context import RenderContext
from promptweave.prompt.rendered import RenderedSection, RenderedTurn, TurnTrace
from promptweave.providers.exchange import ProviderRequest, ProviderSpec, SubmitResult
from promptweave.providers.request import asubmit_request, build_provider_request
from promptweave.retrieval.query import RetrievalQuery
from promptweave.retrieval.runner import RetrievalOutcome, RetrievalRunner
from promptweave.routing.memory_policy import PERSISTENT_MEMORY_SECTIONS
from promptweave.routing.router import DEFAULT_DECISION, Router
from promptweave.session.reader import SessionReader, read_session
from promptweave.store.routing_state import MemoryRoutingState
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.turn import ChatMessage, HistoryEntry, Turn
from promptweave.turn_context.context import TurnContext, build_turn_context
from promptweave.turn_context.conversation_state import ConversationState

if TYPE_CHECKING:
    import asyncio

__all__ = ["TurnParts", "TurnPipeline", "render_context_for"]

log = logging.getLogger("promptweave")

#: The longest preview of an injected item kept for negative feedback.
INJECTED_PREVIEW_CHARS = 120


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


@attrs.frozen(kw_only=True)
class TurnParts:
    """The parts a turn's stages use, as the runtime holds them when the turn starts.

    :param event_loop: this thread's event loop for retrievers that wait under ``render`` (the
        runtime keeps one per thread).
    """

    config: Config
    persona: PersonaPack
    registries: Registries
    stores: Stores
    router: Router
    retrieval_runner: RetrievalRunner
    assembler: SectionAssembler
    recorder: Recorder
    watchdog: Watchdog
    hooks: Hooks
    conversations: ConversationState
    message_cache: MessageCache
    clock: Callable[[], dt.datetime]
    event_loop: Callable[[], asyncio.AbstractEventLoop]
    #: The live loop's stages (``route``, ``render``, ``read``) in which a plugin not shipped
    #: with promptweave takes part: those run off the event loop's thread.
    off_loop: frozenset[str] = frozenset()

    def context_for(
        self,
        turn: Turn,
        *,
        now: dt.datetime | None = None,
        decision: Decision | None = None,
        retrieved: Mapping[str, tuple[Any, ...]] | None = None,
        hidden_in_timeline: Callable[[ChatMessage], bool] | None = None,
        allow_persistent_memory: bool | None = None,
    ) -> RenderContext:
        """:func:`render_context_for` with these parts."""
        return render_context_for(
            turn,
            persona=self.persona,
            config=self.config,
            message_cache=self.message_cache,
            now=now,
            decision=decision,
            retrieved=retrieved,
            hidden_in_timeline=hidden_in_timeline,
            allow_persistent_memory=allow_persistent_memory,
        )


def render_context_for(
    turn: Turn,
    *,
    persona: PersonaPack,
    config: Config,
    message_cache: MessageCache | None,
    now: dt.datetime | None = None,
    decision: Decision | None = None,
    retrieved: Mapping[str, tuple[Any, ...]] | None = None,
    hidden_in_timeline: Callable[[ChatMessage], bool] | None = None,
    allow_persistent_memory: bool | None = None,
) -> RenderContext:
    """The render context of ``turn``; ``now`` defaults to the message's time, and
    ``allow_persistent_memory`` to the decision's memory policy.

    The reply shape and turn policy are the turn's own when it gives them, else the decision's.
    Messages kept during a cooldown join the timeline, so they are not lost; messages for which
    ``hidden_in_timeline`` is true are left out of it (the message sequence carries them).
    """
    decision = decision or DEFAULT_DECISION
    if allow_persistent_memory is None:
        allow_persistent_memory = allows_persistent_memory(decision)
    timeline_messages = _with_kept(turn, decision)
    return RenderContext(
        turn=turn,
        persona=persona,
        config=config,
        now=now or turn.message.time,
        decision=decision,
        allow_persistent_memory=allow_persistent_memory,
        reply_shape=turn.reply_shape or decision.reply_shape or ReplyShape(),
        turn_policy=turn.turn_policy or decision.turn_policy or TurnPolicy(),
        timeline=build_group_timeline(
            turn,
            persona,
            config.timeline,
            timeline_messages,
            hidden_in_timeline,
            memo=message_cache,
        ),
        retrieved=dict(turn.retrieved_items()) if retrieved is None else retrieved,
    )


@attrs.define(eq=False)
class TurnPipeline:
    """One turn on its way through the stages, and what each stage made.

    :param parts: what the stages use.
    :param turn: the turn as the bot gave it; :attr:`completed` is the turn once the session
        filled in what it left out.
    :param now: the turn's time (the message's by default).
    """

    parts: TurnParts
    turn: Turn
    now: dt.datetime | None = None
    #: Milliseconds of each stage run so far: the rendered turn's ``stage_durations_ms``.
    durations: dict[str, float] = attrs.field(factory=dict)
    reader: SessionReader | None = None
    completed: Turn | None = None
    decision: Decision | None = None
    retrieval: RetrievalOutcome | None = None
    rendered: RenderedTurn | None = None
    #: The rendered turn's messages, with what they carried (the injection reads it).
    built: TurnMessages | None = None
    #: The render context the turn context was built from.
    render_context: RenderContext | None = None
    turn_context: TurnContext | None = None

    # -- read the session, route -------------------------------------------------------------

    def read_session(self) -> tuple[SessionReader, Turn]:
        """Complete the turn from the stores, once: the route and the assembly read the same
        session. Stage ``session``."""
        if self.reader is None or self.completed is None:
            parts = self.parts
            start = time.perf_counter()
            # The stored group log and bot replies fill the turn first, so routing, retrieval
            # and the timeline all see the same recent group messages.
            self.reader, self.completed = read_session(
                parts.stores,
                parts.config,
                parts.persona,
                self.turn,
                self.now or self.turn.message.time,
                parts.message_cache,
            )
            self.durations["session"] = _ms(start)
        return self.reader, self.completed

    def decide(self, deadline: Deadline | None = None) -> Decision:
        """Read the session and route the turn (:meth:`promptweave.Promptweave.decide`): the
        route's reads see the store as of one moment (one read transaction in SQLite), unless
        the route may wait for a model's answer: no read is held open that long.

        :param deadline: the turn's deadline for its plugins (a fresh one by default).
        """
        stores = self.parts.stores
        deadline = deadline or self.parts.watchdog.deadline()
        with stores.reading():
            self.read_session()
            if not self.parts.config.routing.model_decision:
                return self.route(deadline)
        return self.route(deadline)

    def route(self, deadline: Deadline, decision: Decision | None = None) -> Decision:
        """Route the turn within ``deadline`` unless ``decision`` is given (or it was routed
        already), with a note for each plugin that hung meanwhile. Stage ``route``."""
        start = time.perf_counter()
        if decision is None:
            decision = self.decision
        if decision is None:
            reader, completed = self.read_session()
            decision = self._route(_with_stored_history(completed, reader), deadline)
            decision = _with_fault_notes(decision, deadline.faults)
        self.decision = decision
        self.durations.setdefault("route", _ms(start))
        return decision

    def _route(self, turn: Turn, deadline: Deadline) -> Decision:
        router, watchdog = self.parts.router, self.parts.watchdog
        at = self.now or turn.message.time
        try:
            return watchdog.run(lambda: router.route(turn, at), deadline)
        except STORE_ERRORS as exc:
            # A failing routing store must not cost the bot its turn: route on a scratch state
            # (no cooldowns or quote history known) and say so in the trace.
            log.warning("routing state unavailable, routing without it: %s", exc)
            scratch = attrs.evolve(router, state=MemoryRoutingState())
            decision = watchdog.run(lambda: scratch.route(turn, at), deadline)
            note = f"routing_state_unavailable: {exc}"
            return attrs.evolve(decision, notes=(*decision.notes, note))

    def quoted_pending(self) -> str | None:
        """The id of the message the turn replies to when neither the event nor the store had
        it: the message to ask the platform for, before the turn is rendered."""
        reader, _completed = self.read_session()
        return reader.quoted_pending

    def quoted_fetched(self, step: dict[str, Any], images: tuple[str, ...]) -> None:
        """What the platform said of the quoted message (``step``, traced in ``quoted_lookup``)
        and the images it gave: the completed turn's ``quoted_message_images`` from now on."""
        reader, completed = self.read_session()
        reader.quoted_fetched(step)
        if images:
            self.completed = attrs.evolve(completed, quoted_message_images=images)

    # -- retrieve --------------------------------------------------------------------------

    def retrieval_query(
        self,
        turn: Turn,
        decision: Decision,
        allow_persistent_memory: bool | None,
        deadline: Deadline | None,
    ) -> tuple[RetrievalQuery, float | None]:
        """The query of the turn's retrievers, and what is left of its deadline for them."""
        parts = self.parts
        query = RetrievalQuery.for_turn(
            turn,
            decision=decision,
            limits=parts.config.retrieval,
            stores=parts.stores,
            now=self.now,
            allow_persistent_memory=allow_persistent_memory,
        )
        budget = None
        if deadline is not None and deadline.seconds > 0:
            budget = max(deadline.remaining(), parts.watchdog.grace_s)
        return query, budget

    async def retrieve(
        self,
        turn: Turn,
        decision: Decision,
        allow_persistent_memory: bool | None,
        deadline: Deadline | None,
    ) -> RetrievalOutcome:
        """Every registered retriever for ``turn``, concurrently (``docs/retrieval.md``)."""
        parts = self.parts
        query, budget = self.retrieval_query(turn, decision, allow_persistent_memory, deadline)
        return await parts.retrieval_runner.run(
            tuple(parts.registries.retrievers.values()),
            query,
            parts.config.retrieval.timeouts,
            budget_s=budget,
        )

    def retrieve_here(
        self,
        turn: Turn,
        decision: Decision,
        allow_persistent_memory: bool | None,
        deadline: Deadline,
    ) -> RetrievalOutcome:
        """:meth:`retrieve` on a thread with no running event loop: the retrievers run right
        here when none of them waits (``docs/retrieval.md#one-turn``), else on this thread's
        event loop."""
        parts = self.parts
        query, budget = self.retrieval_query(turn, decision, allow_persistent_memory, deadline)
        retrievers = tuple(parts.registries.retrievers.values())
        timeouts = parts.config.retrieval.timeouts
        runner = parts.retrieval_runner
        found = runner.run_inline(retrievers, query, timeouts, budget_s=budget)
        if found is not None:
            return found
        return parts.event_loop().run_until_complete(
            runner.run(retrievers, query, timeouts, budget_s=budget)
        )

    # -- render: session, route, retrieve, assemble ------------------------------------------

    def render(
        self,
        *,
        decision: Decision | None = None,
        retrieve: bool = True,
        allow_persistent_memory: bool | None = None,
    ) -> RenderedTurn:
        """The stages up to the rendered turn, on this thread (:meth:`promptweave.Promptweave.render`)."""
        deadline, completed, decision = self._routed(decision)
        if retrieve:
            self.retrieval = self.retrieve_here(
                completed, decision, allow_persistent_memory, deadline
            )
            self.durations.update(self.retrieval.durations())
        return self.assemble(deadline, allow_persistent_memory)

    async def arender(
        self,
        *,
        decision: Decision | None = None,
        retrieve: bool = True,
        allow_persistent_memory: bool | None = None,
    ) -> RenderedTurn:
        """Like :meth:`render`, the retrievers on the caller's event loop."""
        deadline, completed, decision = self._routed(decision)
        if retrieve:
            self.retrieval = await self.retrieve(
                completed, decision, allow_persistent_memory, deadline
            )
            self.durations.update(self.retrieval.durations())
        return self.assemble(deadline, allow_persistent_memory)

    async def aretrieve(self, deadline: Deadline) -> None:
        """The retrievers of the routed turn on the caller's event loop, as :meth:`arender` runs
        them (the live loop assembles the turn off the loop's thread afterwards)."""
        _reader, completed = self.read_session()
        assert self.decision is not None
        self.retrieval = await self.retrieve(completed, self.decision, None, deadline)
        self.durations.update(self.retrieval.durations())

    def _routed(self, decision: Decision | None) -> tuple[Deadline, Turn, Decision]:
        """The turn's deadline, the turn the session completed, and its decision: what
        :meth:`render` and :meth:`arender` start from."""
        deadline = self.parts.watchdog.deadline()
        _reader, completed = self.read_session()
        return deadline, completed, self.route(deadline, decision)

    def assemble(self, deadline: Deadline, allow_persistent_memory: bool | None) -> RenderedTurn:
        """The sections and the message sequence within the turn's deadline, and the trace.
        Stages ``sections`` and ``messages``."""
        self.rendered = self.parts.watchdog.run(
            lambda: self._assemble(deadline, allow_persistent_memory), deadline
        )
        return self.rendered

    def _assemble(self, deadline: Deadline, allow_persistent_memory: bool | None) -> RenderedTurn:
        parts = self.parts
        reader, turn, decision = self.reader, self.completed, self.decision
        assert reader is not None and turn is not None and decision is not None
        retrieval, durations = self.retrieval, self.durations
        start = time.perf_counter()
        if retrieval is not None:
            allow_persistent_memory = retrieval.query.allow_persistent_memory
        elif allow_persistent_memory is None:
            allow_persistent_memory = allows_persistent_memory(decision)
        given = dict(turn.retrieved_items())
        withheld: list[str] = []
        if not allow_persistent_memory:
            # A short social turn shows no persistent memory, relationship, person facts or old
            # topics (docs/design.md#short-social-turns), not even items the turn brought along.
            persistent = _persistent_sections(parts.registries)
            withheld = [
                section for section, items in given.items() if section in persistent and items
            ]
            given = {
                section: items for section, items in given.items() if section not in persistent
            }
        history = reader.history()
        cache = parts.message_cache
        context = parts.context_for(
            turn,
            now=self.now,
            decision=decision,
            retrieved=given if retrieval is None else _merge(given, retrieval.items),
            hidden_in_timeline=carried_by_history(history, turn, cache.history_texts(history)),
            allow_persistent_memory=allow_persistent_memory,
        )
        sections, system_prompt = parts.assembler.assemble(parts.registries.sections, context)
        durations["sections"] = _ms(start)

        start = time.perf_counter()
        hooks = parts.hooks
        # The hint history is built only for a plugin that reads it (the hints may be disabled).
        hints, hint_failures = (
            hooks.collect_wording_hints(context, _hint_history(history))
            if hooks.implementations("collect_wording_hints")
            else ([], [])
        )
        built = build_turn_messages(
            reader,
            turn,
            context.timeline,
            system_prompt,
            # Plain len when no plugin measures text: then the budget can stop building
            # messages at the first that does not fit.
            hooks.measure_text if hooks.implemented("measure_text") else len,
            include_ambient_excerpt=decision.memory_policy.include_ambient_excerpt,
            cache=cache,
            hints=hints,
            hint_failures=hint_failures,
        )
        durations["messages"] = _ms(start)
        self.built = built
        # The faults are those of this turn so far: read now, not when the trace is first read.
        faults = deadline.trace()
        warnings = parts.registries.section_warnings
        return RenderedTurn(
            sections=sections,
            system_prompt=system_prompt,
            messages=built.messages,
            decision=decision,
            trace=TurnTrace(
                lambda: _trace(
                    decision, sections, retrieval, withheld, context, built, faults, warnings
                )
            ),
            stage_durations_ms=durations,
            vision_images=built.vision_images,
            context=context,
        )

    def injection(self) -> ReplyInjection:
        """What went into the rendered turn, for the observers of its delivered reply: each
        section of the system prompt with the hash of its text, and what each retriever found
        (as its trace reports it), with the item's id where it has one. Nothing for a turn
        that was not rendered (a low-engagement phrase)."""
        rendered = self.rendered
        if rendered is None:
            return ReplyInjection()
        retrieval = self.retrieval
        # The group turns the messages carried, without building the rest of the trace.
        ambient = self.built.ambient_snapshot() if self.built is not None else ()
        bot = self.turn.bot
        return ReplyInjection(
            sections=tuple(
                InjectedSource(section=section.id, text_hash=text_hash(section.text))
                for section in rendered.sections
                if section.status == "rendered"
            ),
            retrieved=()
            if retrieval is None
            else tuple(
                InjectedSource(
                    section=trace.section,
                    retriever=trace.retriever,
                    id=hit.id,
                    text_hash=text_hash(hit.text),
                    preview=hit.text[:INJECTED_PREVIEW_CHARS],
                )
                for trace in retrieval.traces
                if trace.status == "hit"
                for hit in trace.hits
            ),
            ambient=tuple(
                InjectedSource(
                    section="ambient",
                    id=entry.turn_id,
                    text_hash=entry.text_hash,
                    preview=entry.text_preview[:INJECTED_PREVIEW_CHARS],
                )
                for entry in ambient
            ),
            self_aliases=tuple(dict.fromkeys(a for a in (bot.name, *bot.aliases) if a)),
        )

    # -- turn context, request, submit ---------------------------------------------------------

    def build_turn_context(self) -> TurnContext:
        """The turn context of the rendered turn (``docs/turn_context.md``)."""
        rendered = self.rendered
        assert rendered is not None
        render_context = rendered.context or self.parts.context_for(
            self.turn, decision=self.decision
        )
        self.render_context = render_context
        self.turn_context = build_turn_context(
            self.parts, self.turn, rendered, context=render_context
        )
        return self.turn_context

    def build_request(self, spec: ProviderSpec) -> ProviderRequest:
        """The provider request of the turn context."""
        assert self.turn_context is not None
        return build_provider_request(self.parts, self.turn_context, spec)

    async def submit(self, request: ProviderRequest) -> SubmitResult:
        """``request`` through the ``submit_request_async`` hook (``submit_request`` as the
        fallback)."""
        return await asubmit_request(self.parts, request)

    # -- the model's answer, the delivery plan ---------------------------------------------------

    def read_answer(self, text: str, trace: dict[str, Any]) -> ModelAnswer:
        """The model's answer read by the reply contract (``read_model_answer``); a failing or
        wrong reader gives a silent answer, and ``trace["read"]`` says what was read."""
        parts, render_context, context = self.parts, self.render_context, self.turn_context
        assert render_context is not None and context is not None
        shape, system_prompt = render_context.reply_shape, context.system_prompt
        try:
            answer = parts.hooks.read_model_answer(text, shape, system_prompt, parts.config)
        except Exception as exc:  # the door records a plugin's faults; this is the core's own
            log.warning("read_model_answer failed: %s", exc)
            trace["read"] = {"error": cut(f"{type(exc).__name__}: {exc}")}
            return ModelAnswer(bubbles=(), silent=True, reason="read_error")
        if answer is None:
            trace["read"] = {
                "error": "no read_model_answer implementation gave a ModelAnswer "
                "(see plugin_faults)"
            }
            return ModelAnswer(bubbles=(), silent=True, reason="read_error")
        trace["read"] = {
            "bubbles": len(answer.bubbles),
            "silent": answer.silent,
            "reason": answer.reason,
            "removed": list(answer.removed),
            "sticker": answer.sticker,
        }
        return answer

    def plan_delivery(
        self, answer: ModelAnswer, *, mention_allowed: bool, trace: dict[str, Any]
    ) -> DeliveryPlan:
        """The bubbles of ``answer`` by the decision's delivery style: a quote only while its
        target is still a candidate, the sticker the ``choose_sticker`` hook picks."""
        # Imported here: a render (``promptweave render``) never plans a delivery, and its start-up
        # loads no delivery module (docs/performance.md).
        from promptweave.delivery.plan import PauseConfig, plan_delivery

        parts, turn, decision = self.parts, self.turn, self.decision
        assert decision is not None
        message = turn.message
        delivery = parts.recorder.resolve_delivery(turn, decision)
        plan = plan_delivery(
            answer,
            bot_id=turn.bot.id,
            group_id=turn.group_id,
            user_id=message.sender_id,
            decision=attrs.evolve(
                decision,
                delivery_style=delivery.style,
                reply_message_id=delivery.reply_message_id,
            ),
            quote_candidate_ids=(
                {delivery.reply_message_id}
                if delivery.style is DeliveryStyle.QUOTE and delivery.reply_message_id
                else set()
            ),
            sticker_segment=self._sticker(answer),
            pause=PauseConfig.from_config(parts.config.delivery),
            mention_allowed=mention_allowed,
        )
        trace["delivery"] = {"style": delivery.style.value, "reason": delivery.reason}
        return plan

    def _sticker(self, answer: ModelAnswer) -> Any:
        if not answer.sticker:
            return None
        parts, turn = self.parts, self.turn
        try:
            return parts.hooks.choose_sticker(
                answer.sticker, turn.bot.id, turn.group_id, parts.config
            )
        except Exception as exc:  # the door records a plugin's faults; this is the core's own
            log.warning("choose_sticker failed, the sticker is dropped: %s", cut(str(exc)))
            return None


def _trace(
    decision: Decision,
    sections: Sequence[RenderedSection],
    retrieval: RetrievalOutcome | None,
    withheld: list[str],
    context: RenderContext,
    built: TurnMessages,
    faults: Any,
    section_warnings: Sequence[str],
) -> dict[str, Any]:
    """The trace of one turn (``docs/cli.md``), built when it is first read."""
    return {
        "decision": decision.trace(),
        "route": decision.details(),
        "sections": [
            {
                "id": s.id,
                "plugin": s.plugin,
                "status": s.status,
                "chars": s.chars,
                **({"override": s.override} if s.override else {}),
                **({"error": cut(s.error)} if s.error else {}),
            }
            for s in sections
        ],
        "section_warnings": list(section_warnings),
        "retrieval": {
            # retrieve=False: the sections got the turn's own items only
            **(
                {
                    "skipped": True,
                    "query": None,
                    "allow_persistent_memory": None,
                    "sections": {},
                }
                if retrieval is None
                else retrieval.trace()
            ),
            "turn_items_withheld": withheld,
        },
        "timeline": {
            "lines": len(context.timeline.messages),
            "hidden_in_history": context.timeline.hidden,
        },
        **built.trace(),
        "plugin_faults": faults,
    }


def _persistent_sections(registries: Registries) -> frozenset[str]:
    """The sections of persistent memory: the built-in four and whatever a persistent retriever
    feeds."""
    retrievers = registries.retrievers.values()
    return PERSISTENT_MEMORY_SECTIONS | {e.item.feeds for e in retrievers if e.item.persistent}


def _merge(
    given: Mapping[str, tuple[Any, ...]], found: Mapping[str, tuple[Any, ...]]
) -> dict[str, tuple[Any, ...]]:
    """The turn's own items first, then the retrievers' (an item given twice is kept once).

    Linear in the items: equal items are found by hash (items are frozen records); only an item
    that cannot be hashed is compared with the other unhashable ones.
    """
    merged = dict(given)
    for section_id, items in found.items():
        kept: list[Any] = []
        seen: set[Any] = set()
        unhashable: list[Any] = []
        for item in (*merged.get(section_id, ()), *items):
            try:
                if item in seen:
                    continue
                seen.add(item)
            except TypeError:
                if item in unhashable:
                    continue
                unhashable.append(item)
            kept.append(item)
        merged[section_id] = tuple(kept)
    return merged


def _with_fault_notes(decision: Decision, faults: list[PluginFault]) -> Decision:
    """The decision with a note for each plugin that hung while it was routed."""
    if not faults:
        return decision
    return attrs.evolve(decision, notes=(*decision.notes, *(f.describe() for f in faults)))


def _with_stored_history(turn: Turn, reader: SessionReader) -> Turn:
    """The turn with the user's stored history when it carries none, for routing: whether the
    bot just answered this user, and its recent replies, read the history
    (``docs/design.md#reply-necessity``)."""
    if turn.history:
        return turn
    rows = reader.history()
    if not rows:
        return turn
    return attrs.evolve(
        turn, history=tuple(HistoryEntry(role=row.role, content=row.content) for row in rows)
    )


def _hint_history(rows: Sequence[HistoryRow]) -> tuple[HistoryEntry, ...]:
    """The history the wording hints read: the user's rows as the messages carry them, the
    summary rows left out."""
    return tuple(
        HistoryEntry(role=row.role, content=row.content) for row in rows if not row.summary
    )


def _with_kept(turn: Turn, decision: Decision) -> list[ChatMessage] | None:
    """The turn's recent messages plus those kept during a cooldown, in time order."""
    if not decision.kept_messages:
        return None
    known = {m.id for m in turn.recent_messages if m.id is not None}
    extra = [m for m in decision.kept_messages if m.id is None or m.id not in known]
    return sorted([*turn.recent_messages, *extra], key=lambda m: m.time)
