"""The runtime: where the parts of a turn are built and held.

:class:`Promptweave` is built once (``Promptweave.from_config``) and then used for every turn; it
holds no conversational state. A turn runs through a :class:`promptweave.pipeline.stages.TurnPipeline`
built from the runtime's parts (:meth:`Promptweave.pipeline`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import random
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from promptweave.config import Config
from promptweave.decision import Decision
from promptweave.delivery.recorder import Recorder
from promptweave.delivery.store_writes import BackgroundRunner
from promptweave.errors import ConfigError
from promptweave.learning.budget import LearningBudget
from promptweave.learning.model import LearningModel, RunModel
from promptweave.learning.stage import LearningStage
from promptweave.messages.message_cache import MessageCache
from promptweave.pipeline.stages import TurnParts, TurnPipeline
from promptweave.plugins.door import Hooks
from promptweave.plugins.manager import PluginInfo, PluginManager, build_plugin_manager
from promptweave.plugins.registry import Registries, collect_registries
from promptweave.plugins.watchdog import Deadline, Watchdog
from promptweave.prompt.assembly import SectionAssembler
from promptweave.prompt.render_context import RenderContext
from promptweave.prompt.rendered import RenderedSection, RenderedTurn, SectionListing
from promptweave.retrieval.runner import RetrievalOutcome, RetrievalRunner
from promptweave.routing.router import Router
from promptweave.store.learned_retrieval import LearnedRetrievalStore
from promptweave.store.sqlite import STORE_ERRORS
from promptweave.store.stores import Stores
from promptweave.text.persona import PersonaPack
from promptweave.turn import Bot, ChatMessage, Turn
from promptweave.turn_context.conversation_state import ConversationState

if TYPE_CHECKING:
    import asyncio

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


#: The attributes a turn's parts are made of: replacing one (a plugin added, the settings or the
#: persona pack swapped) makes :meth:`Promptweave.parts` build them anew.
_PART_ATTRIBUTES = frozenset(
    {
        "config",
        "persona",
        "registries",
        "stores",
        "router",
        "retrieval_runner",
        "assembler",
        "recorder",
        "watchdog",
        "hooks",
        "conversations",
        "clock",
    }
)


def _forget_parts(instance: Promptweave, attribute: attrs.Attribute[Any], value: Any) -> Any:
    # The live loop asks for the parts on every message; they are built again only after one of
    # them was replaced, so that check costs nothing per message.
    if attribute.name in _PART_ATTRIBUTES:
        instance._parts = None
    return value


@attrs.define(
    on_setattr=attrs.setters.pipe(attrs.setters.convert, attrs.setters.validate, _forget_parts)
)
class Promptweave:
    """Routes and assembles turns with the loaded plugins.

    It is built from parts, each usable and testable alone: the :attr:`stores`, the
    :attr:`router` (gates, reply necessity, decide rules), the :attr:`retrieval_runner`, the
    :attr:`assembler` (sections, overrides, sanitising), the :attr:`recorder` (what the bot saw
    and delivered: ``runtime.recorder.record_message(...)``), the :attr:`background` work
    (``runtime.background.wait()``) and :attr:`hooks`, the door to the hooks. Each turn runs
    through a :meth:`pipeline` built from them.

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
            lambda self: RetrievalRunner(
                threads=self.config.retrieval.threads, trusted=self._ships_with_promptweave
            ),
            takes_self=True,
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
                deadline_s=self.config.plugins.turn_deadline_s,
                trusted=self._ships_with_promptweave,
                quarantine_s=self.config.plugins.quarantine_s,
            ),
            takes_self=True,
        )
    )
    router: Router = attrs.field(init=False)
    recorder: Recorder = attrs.field(init=False)
    #: The learner stage (``docs/learning.md``): what the bot learns of its groups.
    learning: LearningStage = attrs.field(init=False)
    #: The learning model (``[learning.model]``, ``docs/learning.md``), ``None`` when there is none
    #: (:attr:`learning_model_unavailable` says why).
    learning_model: LearningModel | None = attrs.field(default=None, init=False)
    learning_model_unavailable: str | None = attrs.field(default=None, init=False)
    #: The door to the hooks (the plugin manager's :attr:`PluginManager.hooks`).
    hooks: Hooks = attrs.field(init=False)
    _message_cache: MessageCache | None = attrs.field(default=None, init=False, repr=False)
    #: The parts of :meth:`parts`, kept until one of them is replaced (:func:`_forget_parts`).
    _parts: TurnParts | None = attrs.field(default=None, init=False, repr=False)
    _bots: dict[tuple[str, tuple[str, ...]], tuple[Config, PersonaPack, Bot]] = attrs.field(
        factory=dict, init=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        self.hooks = self.plugins.hooks
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
        self._build_learning_model()
        self._build_learning()

    def _build_learning_model(self) -> None:
        """The learning model and its budget; the recorder hands it to session compression."""
        budget = LearningBudget(limits=self.config.learning.budget, store=self.stores.learned)
        self.learning_model, self.learning_model_unavailable = LearningModel.from_config(
            self.config, budget, enabled_plugins=tuple(self.plugins.infos), clock=self.clock
        )
        self.recorder.model_for = None if self.learning_model is None else self._model_for

    def _model_for(
        self, learner: str, bot_id: str, group_id: str | None, now: dt.datetime
    ) -> RunModel | None:
        """The learning model as one session-compression hook call sees it; none for a group
        that opted out of learning (its sessions are summarized without a model)."""
        model = self.learning_model
        if model is None or (group_id and self.config.learning.opted_out(bot_id, group_id)):
            return None
        return RunModel(
            model=model,
            learner=learner,
            bot_id=bot_id,
            group_id=group_id or "",
            now=now,
            persona=self.persona,
        )

    def _build_learning(self) -> None:
        """The learner stage over the registered learners; the recorder tells it of every group
        message stored and every reply delivered."""
        if isinstance(self.stores.retrieval, LearnedRetrievalStore):
            self.stores.retrieval.clock = self.clock  # feedback decays on the runtime's clock
        self.learning = LearningStage(
            learners=[entry.item for entry in self.registries.learners.values()],
            stores=self.stores,
            config=self.config,
            bot_names=self._bot_names,
            model=self.learning_model,
            model_unavailable=self.learning_model_unavailable,
            persona=self.persona,
        )
        self.recorder.on_group_message = self.learning.note if self.learning.enabled else None
        self.recorder.on_reply = self.learning.note_reply if self.learning.enabled else None

    def _bot_names(self, bot_id: str) -> tuple[str, ...]:
        bot = self.bot_for(bot_id)
        return (bot.name, *bot.aliases)

    def _ships_with_promptweave(self, plugin: str) -> bool:
        """A built-in or ``contrib`` plugin: the watchdog calls it without handing it to a
        worker thread (``docs/plugin_hooks.md``, "When a plugin misbehaves")."""
        return _shipped(self.plugins, plugin)

    def _off_loop_stages(self) -> frozenset[str]:
        """The stages of the live loop's turn in which a plugin not shipped with promptweave
        takes part: those run off the event loop's thread (``docs/plugin_hooks.md``)."""
        trusted = self._ships_with_promptweave
        registries, hooks = self.registries, self.hooks

        def untrusted(items: Iterable[Any], hook_names: Iterable[str]) -> bool:
            return any(not trusted(entry.plugin) for entry in items) or any(
                not trusted(implementation.plugin)
                for name in hook_names
                for implementation in hooks.implementations(name)
            )

        stages = {
            "route": untrusted(
                (*registries.decision_rules.values(), *registries.pools.values()),
                ("decide_with_model",),
            ),
            "render": untrusted(registries.sections, _RENDER_HOOKS),
            "read": untrusted((), ("read_model_answer", "choose_sticker")),
        }
        return frozenset(stage for stage, off in stages.items() if off)

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
        registries = collect_registries(
            plugins.pm,
            deadline_s=config.plugins.register_deadline_s,
            trusted=functools.partial(_shipped, plugins),
        )
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

    # -- one turn ----------------------------------------------------------------------------

    def parts(self) -> TurnParts:
        """The parts a turn's stages use, as this runtime holds them now."""
        kept = self._parts
        if kept is not None:
            return kept
        parts = TurnParts(
            config=self.config,
            persona=self.persona,
            registries=self.registries,
            stores=self.stores,
            router=self.router,
            retrieval_runner=self.retrieval_runner,
            assembler=self.assembler,
            recorder=self.recorder,
            watchdog=self.watchdog,
            hooks=self.hooks,
            conversations=self.conversations,
            message_cache=self.message_cache,
            clock=self.clock,
            off_loop=self._off_loop_stages(),
            # Through a weak reference: the kept parts must not keep the runtime alive, whose
            # collection closes its event loops.
            event_loop=functools.partial(_thread_event_loop, weakref.ref(self)),
        )
        self._parts = parts
        return parts

    def pipeline(self, turn: Turn, now: dt.datetime | None = None) -> TurnPipeline:
        """The pipeline that carries ``turn`` through the stages (``docs/architecture.md``);
        ``now`` defaults to the message's time."""
        return TurnPipeline(parts=self.parts(), turn=turn, now=now)

    def decide(self, turn: Turn, now: dt.datetime | None = None) -> Decision:
        """Route the turn: gates, reply necessity, then the decide rules (``docs/routing.md``).

        ``now`` defaults to the message's time. What the turn leaves out (recent group messages,
        the quoted bot text) is read from the store first, exactly as :meth:`render` does, so a
        decision made here is the one ``render(turn, decision=...)`` would make. Routing updates
        the routing state (quote candidates, kept messages, silences, the last canned phrase), so
        replaying the same events with the same seeded ``rng`` gives the same decisions. A bot
        that goes on to render the turn keeps its :meth:`pipeline` instead, which reads the
        session once for both.
        """
        return self.pipeline(turn, now).decide()

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
        """The render context of ``turn``:
        :func:`promptweave.pipeline.stages.render_context_for` with this runtime's persona pack,
        settings and message cache."""
        return self.parts().context_for(
            turn,
            now=now,
            decision=decision,
            retrieved=retrieved,
            hidden_in_timeline=hidden_in_timeline,
            allow_persistent_memory=allow_persistent_memory,
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
            :func:`promptweave.decision.allows_persistent_memory` of the decision.
        :param deadline: the turn's deadline: no retriever waits past it (past it, each gets
            :data:`promptweave.plugins.watchdog.RERUN_GRACE_S`).
        """
        return await self.pipeline(turn, now).retrieve(
            turn, decision, allow_persistent_memory, deadline
        )

    # -- render ------------------------------------------------------------------------------

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
        if retrieve and _loop_running():
            raise RuntimeError(
                "Promptweave.render() cannot run inside a running event loop; "
                "use 'await Promptweave.arender(turn)' instead"
            )
        return self.pipeline(turn, now).render(
            decision=decision, retrieve=retrieve, allow_persistent_memory=allow_persistent_memory
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
            :func:`promptweave.decision.allows_persistent_memory` of the decision.
        :param retrieve: ``False`` runs no retriever: the sections get only the items the turn
            carries (``Turn.retrieved``), for a caller that retrieved them itself or a replay.
        """
        return await self.pipeline(turn, now).arender(
            decision=decision, retrieve=retrieve, allow_persistent_memory=allow_persistent_memory
        )

    @property
    def message_cache(self) -> MessageCache:
        """The finished messages kept between turns (``docs/performance.md``), for the persona
        pack in force: a new pack starts a new cache."""
        cache = self._message_cache
        if cache is None or cache.persona is not self.persona:
            cache = self._message_cache = MessageCache(persona=self.persona)
        return cache

    def close(self) -> None:
        """Finish the background work and the observations queued (each within its bound),
        release the retrieval and stage worker threads and close this thread's store
        connection."""
        self.background.shutdown()
        self.plugins.hooks.observations.close()
        self.retrieval_runner.close()
        self.watchdog.close()
        self.learning.close()
        if self.learning_model is not None:
            self.learning_model.close()
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
            self.registries = self._collect_registries()
            self.router = self._build_router()
            self.assembler.forget_static()
            self._rebuild_learning()
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
        self.registries = self._collect_registries()
        self.router = self._build_router()
        self.assembler.forget_static()
        self._rebuild_learning()

    def _collect_registries(self) -> Registries:
        return collect_registries(
            self.plugins.pm,
            deadline_s=self.config.plugins.register_deadline_s,
            trusted=self._ships_with_promptweave,
        )

    def _rebuild_learning(self) -> None:
        self.learning.close()
        self._build_learning()


#: The hooks of a turn's assembly stage (sections, messages, turn context, request), besides the
#: sections' own renders.
_RENDER_HOOKS = (
    "override_section",
    "measure_text",
    "collect_wording_hints",
    "collect_turn_notes",
    "compress_turn_messages",
    "fetch_image",
)


def _shipped(plugins: PluginManager, plugin: str) -> bool:
    info = plugins.infos.get(plugin)
    return info is not None and info.kind in _SHIPPED_KINDS


def _loop_running() -> bool:
    """Whether this thread runs an event loop; without asyncio loaded none can run, and asyncio
    is not loaded to find out (``docs/performance.md#start-up``)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _thread_event_loop(owner: weakref.ref[Promptweave]) -> asyncio.AbstractEventLoop:
    """The runtime's event loop of this thread, for retrievers that wait under
    :meth:`Promptweave.render`: one per thread, reused turn after turn (a new loop per turn would
    cost more than assembling the turn)."""
    runtime = owner()
    if runtime is None:
        raise RuntimeError("the runtime of this turn is gone")
    loops = runtime._loops
    loop: asyncio.AbstractEventLoop | None = getattr(loops, "loop", None)
    if loop is None or loop.is_closed():
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        loop = loops.loop = asyncio.new_event_loop()
        # A runtime dropped without close() closes its loops when it is collected, not the
        # garbage collector in whatever order it frees the loop's sockets.
        weakref.finalize(runtime, loop.close)
    return loop


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
