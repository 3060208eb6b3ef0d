"""The runtime: route a turn, render its sections, apply overrides, assemble the request.

:class:`Promptweave` is built once (``Promptweave.from_config``) and then used for every turn; it
holds no conversational state.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from promptweave.config import Config
from promptweave.conversation.message_cache import MessageCache
from promptweave.conversation.pipeline import TurnMessages, build_turn_messages, carried_by_history
from promptweave.conversation.session import SessionReader, read_session
from promptweave.conversation.state import ConversationState
from promptweave.conversation.timeline import build_group_timeline
from promptweave.decision import Decision
from promptweave.delivery.recorder import Recorder
from promptweave.delivery.writes import BackgroundRunner
from promptweave.errors import ConfigError
from promptweave.items import ReplyShape, TurnPolicy
from promptweave.plugins.manager import PluginInfo, PluginManager, build_plugin_manager
from promptweave.plugins.registry import Registries, collect_registries
from promptweave.plugins.watchdog import (
    Deadline,
    PluginFault,
    Watchdog,
)
from promptweave.prompt.assembly import SectionAssembler
from promptweave.prompt.persona import PersonaPack
from promptweave.prompt.render_context import RenderContext
from promptweave.prompt.rendered import RenderedSection, RenderedTurn, SectionListing, TurnTrace
from promptweave.retrieval.query import RetrievalQuery
from promptweave.retrieval.runner import RetrievalOutcome, RetrievalRunner
from promptweave.routing.memory import PERSISTENT_MEMORY_SECTIONS, allows_persistent_memory
from promptweave.routing.quoting import Delivery
from promptweave.routing.router import DEFAULT_DECISION, Router
from promptweave.store.routing_state import MemoryRoutingState
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.turn import Bot, ChatMessage, HistoryEntry, Turn

if TYPE_CHECKING:
    from promptweave.conversation.summary import CompressionResult

__all__ = ["Promptweave"]

log = logging.getLogger("promptweave")

#: The kinds of plugin (``PluginInfo.kind``) that ship with promptweave.
_SHIPPED_KINDS = frozenset({"builtin", "contrib"})


#: How many of a group's stored expression pairs the low-engagement exit reads for its phrases.
LEARNED_REPLIES_READ = 64
#: Bot records :meth:`Promptweave.bot_for` keeps (by bot id and fallback names) before starting
#: over: a process serves a handful of bot accounts.
BOTS_KEPT = 64


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


@attrs.define
class Promptweave:
    """Routes and assembles turns with the loaded plugins.

    It is built from parts, each usable and testable alone: the :attr:`stores`, the
    :attr:`router` (gates, reply necessity, decide rules), the :attr:`retrieval_runner`, the
    :attr:`assembler` (sections, overrides, sanitising) and the :attr:`recorder` (what the bot
    saw and delivered).

    :param strict: raise :class:`promptweave.errors.SectionRenderError` when a section's ``render``
        raises, instead of leaving the section out and tracing the error.
    :param conversations: per-conversation state of the turn-context layer: queued notes, active
        system prompts, what was sent (``docs/turn_context.md``).
    :param rng: the only source of randomness (quoting, the low-engagement exit, reply shapes);
        seed it to replay a conversation exactly.
    :param clock: the current time, for deliveries noted without a time.
    :param watchdog: runs each turn's plugin work within ``[plugins] turn_deadline_s`` and
        remembers the plugins that hung (``docs/plugin_hooks.md``).
    """

    config: Config
    plugins: PluginManager
    registries: Registries
    persona: PersonaPack
    stores: Stores = attrs.field(factory=Stores)
    strict: bool = False
    conversations: ConversationState = attrs.field(factory=ConversationState)
    retrieval_runner: RetrievalRunner = attrs.field(
        default=attrs.Factory(
            lambda self: RetrievalRunner(threads=self.config.retrieval.threads), takes_self=True
        )
    )
    assembler: SectionAssembler = attrs.field(
        default=attrs.Factory(
            lambda self: SectionAssembler(hooks=self.plugins.hooks, strict=self.strict),
            takes_self=True,
        )
    )
    _loops: threading.local = attrs.field(factory=threading.local, init=False, repr=False)
    rng: random.Random = attrs.field(factory=random.Random)
    clock: Callable[[], dt.datetime] = _utc_now
    background: BackgroundRunner = attrs.field(factory=BackgroundRunner)
    watchdog: Watchdog = attrs.field(
        default=attrs.Factory(
            lambda self: Watchdog(
                deadline_s=self.config.plugins.turn_deadline_s, trusted=self._ships_with_promptweave
            ),
            takes_self=True,
        )
    )
    router: Router = attrs.field(init=False)
    recorder: Recorder = attrs.field(init=False)
    _message_cache: MessageCache | None = attrs.field(default=None, init=False, repr=False)
    _bots: dict[tuple[str, tuple[str, ...]], tuple[Config, PersonaPack, Bot]] = attrs.field(
        factory=dict, init=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        self.router = self._build_router()
        self.recorder = Recorder(
            config=self.config,
            plugins=self.plugins,
            persona=self.persona,
            stores=self.stores,
            clock=self.clock,
            background=self.background,
            watchdog=self.watchdog,
        )

    def _ships_with_promptweave(self, plugin: str) -> bool:
        """A built-in or ``contrib`` plugin: the watchdog calls it without handing it to a
        worker thread (``docs/plugin_hooks.md``, "When a plugin misbehaves")."""
        info = self.plugins.infos.get(plugin)
        return info is not None and info.kind in _SHIPPED_KINDS

    def _build_router(self) -> Router:
        return Router(
            registries=self.registries,
            config=self.config,
            state=self.stores.routing,
            rng=self.rng,
            model_hook=self.plugins.hooks.decide_with_model,
            learned_replies=self._learned_replies,
            rhythm_share=self._rhythm_share,
            trusted=self._ships_with_promptweave,
        )

    @classmethod
    def from_config(
        cls,
        config: Config | None = None,
        *,
        contrib: Iterable[str] = (),
        extra_plugins: Iterable[object] = (),
        environ: Mapping[str, str] | None = None,
        strict: bool | None = None,
        rng: random.Random | None = None,
        stores: Stores | None = None,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> Promptweave:
        """Load the plugins and the persona pack; fail early on any configuration problem.

        :param stores: the stores to use instead of those of ``[store]``.
        :param clock: the clock to use instead of the system's UTC time.
        """
        config = config or Config()
        plugins = build_plugin_manager(
            contrib=[*config.plugins.contrib, *contrib],
            extra_plugins=extra_plugins,
            environ=environ,
        )
        registries = collect_registries(plugins.pm)
        for warning in registries.section_warnings:
            log.warning(warning)
        persona = PersonaPack.from_file(_pack_path(config, registries))
        return cls(
            config=config,
            plugins=plugins,
            registries=registries,
            persona=persona,
            stores=Stores.from_config(config) if stores is None else stores,
            strict=config.plugins.strict if strict is None else strict,
            rng=rng or random.Random(),
            clock=clock or _utc_now,
        )

    # -- routing ---------------------------------------------------------------------------

    def decide(self, turn: Turn, now: dt.datetime | None = None) -> Decision:
        """Route the turn: gates, reply necessity, then the decide rules (``docs/routing.md``).

        ``now`` defaults to the message's time. What the turn leaves out (recent group messages,
        the quoted bot text) is read from the store first, exactly as :meth:`render` does, so a
        decision made here is the one ``render(turn, decision=...)`` would make. Routing updates
        the routing state (quote candidates, kept messages, silences, the last canned phrase), so
        replaying the same events with the same seeded ``rng`` gives the same decisions.
        """
        # The route's reads see the store as of one moment (one read transaction in SQLite),
        # unless the route may wait for a model's answer: no read is held open that long.
        with self.stores.reading():
            reader, completed = self._read_session(turn, now)
            if not self.config.routing.model_decision:
                return self._routed(_with_stored_history(completed, reader), now)
        return self._routed(_with_stored_history(completed, reader), now)

    def _routed(self, turn: Turn, now: dt.datetime | None) -> Decision:
        deadline = self.watchdog.deadline()
        decision = self._route(turn, now, deadline)
        return _with_fault_notes(decision, deadline.faults)

    def _read_session(self, turn: Turn, now: dt.datetime | None) -> tuple[SessionReader, Turn]:
        return read_session(
            self.stores,
            self.config,
            self.persona,
            turn,
            now or turn.message.time,
            self.message_cache,
        )

    def _route(self, turn: Turn, now: dt.datetime | None, deadline: Deadline) -> Decision:
        router = self.router
        at = now or turn.message.time
        try:
            return self.watchdog.run(lambda: router.route(turn, at), deadline)
        except STORE_ERRORS as exc:
            # A failing routing store must not cost the bot its turn: route on a scratch state
            # (no cooldowns or quote history known) and say so in the trace.
            log.warning("routing state unavailable, routing without it: %s", exc)
            scratch = attrs.evolve(router, state=MemoryRoutingState())
            decision = self.watchdog.run(lambda: scratch.route(turn, at), deadline)
            note = f"routing_state_unavailable: {exc}"
            return attrs.evolve(decision, notes=(*decision.notes, note))

    def _rhythm_share(self, bot_id: str, group_id: str) -> float | None:
        try:
            baseline = self.stores.retrieval.rhythm_baseline(bot_id, group_id)
        except STORE_ERRORS as exc:
            log.warning("rhythm baseline unavailable for the reply shape: %s", exc)
            return None
        return None if baseline is None else baseline.single_bubble_share

    def _learned_replies(self, bot_id: str, group_id: str) -> list[str]:
        pairs = self.stores.retrieval.expression_pairs(bot_id, group_id, limit=LEARNED_REPLIES_READ)
        return [pair.reply for pair in pairs]

    def bot_for(self, bot_id: str, fallback_names: Sequence[str] = ()) -> Bot:
        """The bot account ``bot_id`` as the turn sees it: its ``[bots."ID"]`` table; where that
        leaves the name empty, ``fallback_names`` (a bot framework's own nicknames: the first is
        the name, the rest aliases), else the persona pack's name and aliases
        (``docs/configuration.md``)."""
        # The live loop asks on every message: the same record while config and persona stay.
        key = (bot_id, tuple(fallback_names))
        known = self._bots.get(key)
        if known is not None and known[0] is self.config and known[1] is self.persona:
            return known[2]
        bot = self._bot_for(bot_id, key[1])
        if len(self._bots) >= BOTS_KEPT:
            self._bots.clear()
        self._bots[key] = (self.config, self.persona, bot)
        return bot

    def _bot_for(self, bot_id: str, fallback_names: tuple[str, ...]) -> Bot:
        identity = self.config.bots.get(bot_id)
        name = identity.name if identity else ""
        aliases: Sequence[str] = identity.aliases if identity else ()
        if not name and fallback_names:
            name, aliases = fallback_names[0], (*aliases, *fallback_names[1:])
        name = name or self.persona.persona.name
        aliases = tuple(aliases) or self.persona.identity.generic_aliases
        if identity is None:
            return Bot(id=bot_id, name=name, aliases=aliases)
        return Bot(
            id=bot_id,
            name=name,
            aliases=aliases,
            timezone=identity.timezone,
            peer_bot_ids=identity.peer_bot_ids,
        )

    # -- assembly --------------------------------------------------------------------------

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
        """The render context of ``turn``; ``now`` defaults to the message's time, and
        ``allow_persistent_memory`` to the decision's memory policy.

        The reply shape and turn policy are the turn's own when it gives them, else the decision's.
        Messages kept during a cooldown join the timeline, so they are not lost; messages for
        which ``hidden_in_timeline`` is true are left out of it (the message sequence carries
        them).
        """
        decision = decision or DEFAULT_DECISION
        if allow_persistent_memory is None:
            allow_persistent_memory = allows_persistent_memory(decision)
        timeline_messages = _with_kept(turn, decision)
        return RenderContext(
            turn=turn,
            persona=self.persona,
            config=self.config,
            now=now or turn.message.time,
            decision=decision,
            allow_persistent_memory=allow_persistent_memory,
            reply_shape=turn.reply_shape or decision.reply_shape or ReplyShape(),
            turn_policy=turn.turn_policy or decision.turn_policy or TurnPolicy(),
            timeline=build_group_timeline(
                turn,
                self.persona,
                self.config.timeline,
                timeline_messages,
                hidden_in_timeline,
                memo=self.message_cache,
            ),
            retrieved=dict(turn.retrieved_items()) if retrieved is None else retrieved,
        )

    def assemble(self, context: RenderContext) -> tuple[tuple[RenderedSection, ...], str]:
        """Render every section in order, apply overrides, sanitize, skip empty and duplicates,
        and join with a blank line (``docs/sections.md``)."""
        return self.assembler.assemble(self.registries.sections, context)

    # -- retrieval -------------------------------------------------------------------------

    async def retrieve(
        self,
        turn: Turn,
        *,
        decision: Decision,
        now: dt.datetime | None = None,
        allow_persistent_memory: bool | None = None,
        deadline: Deadline | None = None,
    ) -> RetrievalOutcome:
        """Run every registered retriever for ``turn`` concurrently (``docs/retrieval.md``).

        :param allow_persistent_memory: ``None`` decides with
            :func:`promptweave.allows_persistent_memory` of the decision.
        :param deadline: the turn's deadline: no retriever waits past it (past it, each gets
            :data:`promptweave.plugins.watchdog.RERUN_GRACE_S`).
        """
        query, budget = self._retrieval_query(
            turn, decision, now, allow_persistent_memory, deadline
        )
        return await self.retrieval_runner.run(
            tuple(self.registries.retrievers.values()),
            query,
            self.config.retrieval.timeouts,
            budget_s=budget,
        )

    def _retrieval_query(
        self,
        turn: Turn,
        decision: Decision,
        now: dt.datetime | None,
        allow_persistent_memory: bool | None,
        deadline: Deadline | None,
    ) -> tuple[RetrievalQuery, float | None]:
        """The query of the turn's retrievers, and what is left of its deadline for them."""
        query = RetrievalQuery.for_turn(
            turn,
            decision=decision,
            limits=self.config.retrieval,
            stores=self.stores,
            now=now,
            allow_persistent_memory=allow_persistent_memory,
        )
        budget = None
        if deadline is not None and deadline.seconds > 0:
            budget = max(deadline.remaining(), self.watchdog.grace_s)
        return query, budget

    def _retrieve_here(
        self,
        turn: Turn,
        decision: Decision,
        now: dt.datetime | None,
        allow_persistent_memory: bool | None,
        deadline: Deadline,
    ) -> RetrievalOutcome:
        """:meth:`retrieve` for :meth:`render`, on a thread with no running event loop: the
        retrievers run right here when none of them waits (``docs/retrieval.md#one-turn``),
        else on this thread's event loop."""
        query, budget = self._retrieval_query(
            turn, decision, now, allow_persistent_memory, deadline
        )
        retrievers = tuple(self.registries.retrievers.values())
        timeouts = self.config.retrieval.timeouts
        runner = self.retrieval_runner
        found = runner.run_inline(retrievers, query, timeouts, budget_s=budget)
        if found is not None:
            return found
        # One event loop per thread, reused turn after turn: a new loop per turn would cost
        # more than assembling the turn.
        loop: asyncio.AbstractEventLoop | None = getattr(self._loops, "loop", None)
        if loop is None or loop.is_closed():
            loop = self._loops.loop = asyncio.new_event_loop()
            # A runtime dropped without close() closes its loops when it is collected, not
            # the garbage collector in whatever order it frees the loop's sockets.
            weakref.finalize(self, loop.close)
        return loop.run_until_complete(runner.run(retrievers, query, timeouts, budget_s=budget))

    # -- one turn ----------------------------------------------------------------------------

    def render(
        self,
        turn: Turn,
        *,
        now: dt.datetime | None = None,
        decision: Decision | None = None,
        retrieve: bool = True,
        allow_persistent_memory: bool | None = None,
    ) -> RenderedTurn:
        """Route, retrieve and assemble one turn: the system prompt, the messages, the decision,
        the trace. The parameters are those of :meth:`arender`.

        This is the synchronous entry point. It cannot be called from inside a running event
        loop (async code awaits :meth:`arender`), except without retrieval
        (``retrieve=False``): then nothing is awaited. When every retriever runs inline (the
        built-in ones over the built-in stores do), the turn needs no event loop and no thread;
        a retriever that waits runs on an event loop of this thread's own.
        """
        if retrieve:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                raise RuntimeError(
                    "Promptweave.render() cannot run inside a running event loop; "
                    "use 'await Promptweave.arender(turn)' instead"
                )
        deadline = self.watchdog.deadline()
        reader, turn, decision, durations = self._begin(turn, now, decision, deadline)
        retrieval = None
        if retrieve:
            retrieval = self._retrieve_here(turn, decision, now, allow_persistent_memory, deadline)
            durations.update(retrieval.durations())
        return self._finish(
            reader, turn, decision, retrieval, now, durations, deadline, allow_persistent_memory
        )

    async def arender(
        self,
        turn: Turn,
        *,
        now: dt.datetime | None = None,
        allow_persistent_memory: bool | None = None,
        decision: Decision | None = None,
        retrieve: bool = True,
    ) -> RenderedTurn:
        """Like :meth:`render`, for async callers: the retrievers run concurrently on the
        caller's event loop, then the sections are assembled.

        :param decision: the turn's decision when the bot already routed it with :meth:`decide`
            (routing updates the routing state, so a turn must be routed once); ``None`` routes
            it here.
        :param allow_persistent_memory: ``None`` decides with
            :func:`promptweave.allows_persistent_memory` of the decision.
        :param retrieve: ``False`` runs no retriever: the sections get only the items the turn
            carries (``Turn.retrieved``), for a caller that retrieved them itself or a replay.
        """
        deadline = self.watchdog.deadline()
        reader, turn, decision, durations = self._begin(turn, now, decision, deadline)
        retrieval = None
        if retrieve:
            retrieval = await self.retrieve(
                turn,
                decision=decision,
                now=now,
                allow_persistent_memory=allow_persistent_memory,
                deadline=deadline,
            )
            durations.update(retrieval.durations())
        return self._finish(
            reader, turn, decision, retrieval, now, durations, deadline, allow_persistent_memory
        )

    def _begin(
        self, turn: Turn, now: dt.datetime | None, decision: Decision | None, deadline: Deadline
    ) -> tuple[SessionReader, Turn, Decision, dict[str, float]]:
        """Read the session, then route the turn unless it comes with its decision."""
        durations: dict[str, float] = {}
        start = time.perf_counter()
        # The stored group log and bot replies fill the turn first, so routing, retrieval and
        # the timeline all see the same recent group messages.
        reader, turn = self._read_session(turn, now)
        durations["session"] = _ms(start)

        start = time.perf_counter()
        if decision is None:
            decision = self._route(_with_stored_history(turn, reader), now, deadline)
            decision = _with_fault_notes(decision, deadline.faults)
        durations["route"] = _ms(start)
        return reader, turn, decision, durations

    def _finish(
        self,
        reader: SessionReader,
        turn: Turn,
        decision: Decision,
        retrieval: RetrievalOutcome | None,
        now: dt.datetime | None,
        durations: dict[str, float],
        deadline: Deadline,
        allow_persistent_memory: bool | None = None,
    ) -> RenderedTurn:
        """Assemble the sections and the message sequence within the turn's deadline, and write
        the trace."""
        return self.watchdog.run(
            lambda: self._assemble_turn(
                reader, turn, decision, retrieval, now, durations, deadline, allow_persistent_memory
            ),
            deadline,
        )

    def _assemble_turn(
        self,
        reader: SessionReader,
        turn: Turn,
        decision: Decision,
        retrieval: RetrievalOutcome | None,
        now: dt.datetime | None,
        durations: dict[str, float],
        deadline: Deadline,
        allow_persistent_memory: bool | None,
    ) -> RenderedTurn:
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
            persistent = self._persistent_sections()
            withheld = [
                section for section, items in given.items() if section in persistent and items
            ]
            given = {
                section: items for section, items in given.items() if section not in persistent
            }
        history = reader.history()
        context = self.context_for(
            turn,
            now=now,
            decision=decision,
            retrieved=given if retrieval is None else _merge(given, retrieval.items),
            hidden_in_timeline=carried_by_history(
                history, turn, self.message_cache.history_texts(history)
            ),
            allow_persistent_memory=allow_persistent_memory,
        )
        sections, system_prompt = self.assemble(context)
        durations["sections"] = _ms(start)

        start = time.perf_counter()
        built = build_turn_messages(
            reader,
            turn,
            context.timeline,
            system_prompt,
            self._budget_measure(),
            include_ambient_excerpt=decision.memory_policy.include_ambient_excerpt,
            cache=self.message_cache,
        )
        durations["messages"] = _ms(start)
        # The faults are those of this turn so far: read now, not when the trace is first read.
        faults = deadline.trace()
        return RenderedTurn(
            sections=sections,
            system_prompt=system_prompt,
            messages=built.messages,
            decision=decision,
            trace=TurnTrace(
                lambda: self._trace(decision, sections, retrieval, withheld, context, built, faults)
            ),
            stage_durations_ms=durations,
            vision_images=built.vision_images,
            context=context,
        )

    def _trace(
        self,
        decision: Decision,
        sections: Sequence[RenderedSection],
        retrieval: RetrievalOutcome | None,
        withheld: list[str],
        context: RenderContext,
        built: TurnMessages,
        faults: Any,
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
                    **({"error": s.error} if s.error else {}),
                }
                for s in sections
            ],
            "section_warnings": list(self.registries.section_warnings),
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

    @property
    def message_cache(self) -> MessageCache:
        """The finished messages kept between turns (``docs/performance.md``), for the persona
        pack in force: a new pack starts a new cache."""
        cache = self._message_cache
        if cache is None or cache.persona is not self.persona:
            cache = self._message_cache = MessageCache(persona=self.persona)
        return cache

    def _budget_measure(self) -> Callable[[str], int]:
        """The ``measure_text`` hook, or :func:`len` itself when no plugin measures text (then the budget
        can stop building messages at the first that does not fit)."""
        if not self.plugins.hooks.implemented("measure_text"):
            return len
        return self.plugins.hooks.measure_text

    def _persistent_sections(self) -> frozenset[str]:
        """The sections of persistent memory: the built-in four and whatever a persistent
        retriever feeds."""
        retrievers = self.registries.retrievers.values()
        return PERSISTENT_MEMORY_SECTIONS | {e.item.feeds for e in retrievers if e.item.persistent}

    def close(self) -> None:
        """Finish the background work, release the retrieval and stage worker threads and close
        this thread's store connection."""
        self.background.shutdown()
        self.retrieval_runner.close()
        self.watchdog.close()
        self.stores.close()
        loop: asyncio.AbstractEventLoop | None = getattr(self._loops, "loop", None)
        if loop is not None:
            loop.close()
            self._loops.loop = None

    # -- inspection ------------------------------------------------------------------------

    def list_sections(self, bot_id: str, group_id: str | None) -> list[SectionListing]:
        """The effective ordered sections for one bot and group, with the override in force."""
        preview = Turn(
            bot=Bot(id=bot_id, name=self.persona.labels.self_label),
            group_id=group_id,
            message=ChatMessage(sender_id="", text="", time=dt.datetime.now(dt.UTC)),
        )
        context = self.context_for(preview)
        rows = []
        for entry in self.registries.sections:
            override, error = self.assembler.override(entry.item.id, "", context)
            rows.append(
                SectionListing(
                    id=entry.item.id,
                    title=entry.item.title,
                    plugin=entry.plugin,
                    volatility=entry.item.volatility.value,
                    override=override.mode.value if override else None,
                    error=error,
                )
            )
        return rows

    # -- plugins at run time -----------------------------------------------------------------

    def add_plugin(self, plugin: object, name: str | None = None) -> str:
        """Register one more plugin and recollect the registries (tests, notebooks).

        :returns: the name the plugin was registered under.
        :raises DuplicateRegistrationError: it contributes an id another plugin already has.
        """
        registered = self.plugins.pm.register(plugin, name=name)
        if registered is None:
            raise ValueError(f"plugin {name or plugin!r} is blocked")
        try:
            self.plugins.pm.check_pending()
            self.registries = collect_registries(self.plugins.pm)
            self.router = self._build_router()
            self.assembler.forget_static()
        except Exception:
            self.plugins.pm.unregister(name=registered)
            raise
        self.plugins.infos[registered] = PluginInfo(
            name=registered, kind="extra", distribution=None, version=None
        )
        return registered

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin by name and recollect the registries."""
        self.plugins.pm.unregister(name=name)
        self.plugins.infos.pop(name, None)
        self.registries = collect_registries(self.plugins.pm)
        self.router = self._build_router()
        self.assembler.forget_static()

    # -- recording and delivery (the recorder's work) ------------------------------------------

    def resolve_delivery(self, turn: Turn, decision: Decision) -> Delivery:
        """How to deliver a decided reply: :meth:`promptweave.delivery.recorder.Recorder.resolve_delivery`."""
        return self.recorder.resolve_delivery(turn, decision)

    def note_delivered(
        self, turn: Turn, delivery: Delivery, *, at: dt.datetime | None = None
    ) -> None:
        """Record a delivered reply in the routing state:
        :meth:`promptweave.delivery.recorder.Recorder.note_delivered`."""
        self.recorder.note_delivered(turn, delivery, at=at)

    def record_message(self, bot_id: str, group_id: str | None, message: ChatMessage) -> bool:
        """Store an incoming message; never raises for a failing store:
        :meth:`promptweave.delivery.recorder.Recorder.record_message`."""
        return self.recorder.record_message(bot_id, group_id, message)

    def record_bot_reply(
        self,
        bot_id: str,
        group_id: str | None,
        text: str,
        *,
        message_id: str | None,
        answering: ChatMessage | None = None,
        quoted: bool = False,
        quote_of: str | None = None,
        time: dt.datetime | None = None,
        session_text: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> bool:
        """Store a delivered bot message once, note it in the routing state and compress the
        session in the background: :meth:`promptweave.delivery.recorder.Recorder.record_bot_reply`."""
        return self.recorder.record_bot_reply(
            bot_id,
            group_id,
            text,
            message_id=message_id,
            answering=answering,
            quoted=quoted,
            quote_of=quote_of,
            time=time,
            session_text=session_text,
            usage=usage,
        )

    def compress_session(
        self, bot_id: str, group_id: str | None, user_id: str, *, now: dt.datetime | None = None
    ) -> CompressionResult:
        """Compress one user's session now if it is long enough and the cooldown allows."""
        return self.recorder.compress_session(bot_id, group_id, user_id, now=now)

    def wait_for_background(self, timeout: float | None = None) -> bool:
        """Wait until the background work (session compression) is done.

        :returns: ``True`` when everything finished within ``timeout`` seconds.
        """
        return self.background.wait(timeout)


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


def _with_kept(turn: Turn, decision: Decision) -> list[ChatMessage] | None:
    """The turn's recent messages plus those kept during a cooldown, in time order."""
    if not decision.kept_messages:
        return None
    known = {m.id for m in turn.recent_messages if m.id is not None}
    extra = [m for m in decision.kept_messages if m.id is None or m.id not in known]
    return sorted([*turn.recent_messages, *extra], key=lambda m: m.time)


def _pack_path(config: Config, registries: Registries) -> Path:
    name = config.persona_pack
    if name in registries.persona_packs:
        return registries.persona_packs[name].item
    if name.endswith(".toml") or "/" in name:
        return config.resolve_path(name)
    known = ", ".join(sorted(registries.persona_packs)) or "none"
    raise ConfigError(
        config.source,
        [f"unknown persona pack {name!r} @ $.persona_pack (registered packs: {known})"],
    )
