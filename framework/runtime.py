"""The runtime: route a turn, render its sections, apply overrides, assemble the request.

:class:`Promptweave` is built once (``Promptweave.from_config``) and then used for every turn; it
holds no conversational state.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from framework.config import Config
from framework.context import RenderContext
from framework.decision import Decision, RouteContext, SocialAction, TurnAction
from framework.errors import ConfigError, SectionRenderError
from framework.items import ReplyShape, TurnPolicy
from framework.messages import PromptMessage
from framework.persona import PersonaPack
from framework.plugins import PluginManager, build_plugin_manager
from framework.recording import BackgroundRunner, record_bot_reply, record_message
from framework.records import RuleStage, Section, SectionOverride
from framework.registry import Registered, Registries, collect_registries
from framework.sanitize import BLOCK_MAX_CHARS, sanitize_block
from framework.store.stores import Stores
from framework.summary import CompressionResult, compress_session
from framework.timeline import build_group_timeline
from framework.turn import Bot, ChatMessage, Turn
from framework.turn_messages import build_turn_messages, read_session

__all__ = ["Promptweave", "RenderedSection", "RenderedTurn", "SectionListing"]

log = logging.getLogger("promptweave")

DEFAULT_DECISION = Decision(
    action=TurnAction.REPLY,
    social_action=SocialAction.ANSWER,
    source="default",
    reason="no_rule_matched",
)


@attrs.frozen(kw_only=True)
class RenderedSection:
    """One section as it went into the system prompt.

    :param status: ``rendered``, ``empty``, ``duplicate``, ``disabled`` or ``error``.
    :param override: the override mode in force, if any.
    """

    id: str
    title: str
    plugin: str
    volatility: str
    text: str
    status: str
    override: str | None = None
    error: str | None = None

    @property
    def chars(self) -> int:
        return len(self.text)


@attrs.frozen(kw_only=True)
class RenderedTurn:
    """The result of one turn: what the LLM receives, the decision, and why."""

    sections: tuple[RenderedSection, ...]
    system_prompt: str
    messages: tuple[PromptMessage, ...]
    decision: Decision
    trace: Mapping[str, Any]
    stage_durations_ms: Mapping[str, float]
    vision_images: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "sections": [
                {
                    "id": s.id,
                    "plugin": s.plugin,
                    "title": s.title,
                    "volatility": s.volatility,
                    "text": s.text,
                    "chars": s.chars,
                    "status": s.status,
                    "override": s.override,
                }
                for s in self.sections
                if s.status == "rendered"
            ],
            "system_prompt": self.system_prompt,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "decision": self.decision.trace(),
            "trace": dict(self.trace),
            "stage_durations_ms": dict(self.stage_durations_ms),
        }


@attrs.frozen(kw_only=True)
class SectionListing:
    """One row of ``promptweave sections``."""

    id: str
    title: str
    plugin: str
    volatility: str
    override: str | None
    error: str | None = None


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


@attrs.define
class Promptweave:
    """Routes and assembles turns with the loaded plugins.

    :param strict: raise :class:`framework.errors.SectionRenderError` when a section's ``render``
        raises, instead of leaving the section out and tracing the error.
    :param clock: the current time (aware) for recording and compression; injectable so a
        conversation can be replayed exactly (DESIGN.md §6).
    """

    config: Config
    plugins: PluginManager
    registries: Registries
    persona: PersonaPack
    stores: Stores = attrs.field(factory=Stores)
    strict: bool = False
    clock: Callable[[], dt.datetime] = _utc_now
    background: BackgroundRunner = attrs.field(factory=BackgroundRunner)

    @classmethod
    def from_config(
        cls,
        config: Config | None = None,
        *,
        contrib: Iterable[str] = (),
        extra_plugins: Iterable[object] = (),
        environ: Mapping[str, str] | None = None,
        strict: bool | None = None,
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
            clock=clock or _utc_now,
        )

    # -- routing ---------------------------------------------------------------------------

    def decide(self, turn: Turn, now: dt.datetime | None = None) -> Decision:
        """Run the ``decide`` rules in order; the first that returns a decision wins."""
        route = RouteContext(turn=turn, now=now or turn.message.time, config=self.config)
        for entry in self.registries.rules_for(RuleStage.DECIDE):
            decision = entry.item.evaluate(route)
            if decision is not None:
                return decision  # type: ignore[no-any-return]
        return DEFAULT_DECISION

    # -- assembly --------------------------------------------------------------------------

    def context_for(
        self,
        turn: Turn,
        *,
        now: dt.datetime | None = None,
        decision: Decision | None = None,
        retrieved: Mapping[str, tuple[Any, ...]] | None = None,
    ) -> RenderContext:
        """The render context of ``turn``; ``now`` defaults to the message's time."""
        return RenderContext(
            turn=turn,
            persona=self.persona,
            config=self.config,
            now=now or turn.message.time,
            decision=decision or DEFAULT_DECISION,
            reply_shape=turn.reply_shape or ReplyShape(),
            turn_policy=turn.turn_policy or TurnPolicy(),
            timeline=build_group_timeline(turn, self.persona, self.config.timeline),
            retrieved=dict(turn.retrieved_items()) if retrieved is None else retrieved,
        )

    def _override(
        self, section_id: str, text: str, context: RenderContext
    ) -> tuple[SectionOverride | None, str | None]:
        group_id = context.turn.group_id
        if group_id is None:
            return None, None  # private chats never get overrides
        try:
            found = self.plugins.pm.hook.override_section(
                section_id=section_id,
                text=text,
                bot_id=context.turn.bot.id,
                group_id=group_id,
                context=context,
            )
        except ConfigError as exc:
            return None, str(exc)
        except Exception as exc:
            if self.strict:
                raise
            return None, f"override_section raised {type(exc).__name__}: {exc}"
        return found, None

    def _render_one(
        self, entry: Registered[Section], context: RenderContext
    ) -> tuple[str, str | None]:
        try:
            return entry.item.render(context) or "", None
        except Exception as exc:
            if self.strict:
                raise SectionRenderError(
                    f"section {entry.item.id!r} of plugin {entry.plugin!r} raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            log.exception("section %r of plugin %r raised", entry.item.id, entry.plugin)
            return "", f"{type(exc).__name__}: {exc}"

    def assemble(self, context: RenderContext) -> tuple[tuple[RenderedSection, ...], str]:
        """Render every section in order, apply overrides, sanitize, skip empty and duplicates,
        and join with a blank line."""
        rendered: list[RenderedSection] = []
        emitted: list[str] = []
        for entry in self.registries.sections:
            section = entry.item
            text, error = self._render_one(entry, context)
            override, override_error = self._override(section.id, text, context)
            if override is not None:
                text = override.apply(text)
            text = sanitize_block(text, BLOCK_MAX_CHARS)
            if error is not None:
                status = "error"
            elif override is not None and override.mode.value == "disable":
                status = "disabled"
            elif not text:
                status = "empty"
            elif text in emitted:
                status = "duplicate"
            else:
                status = "rendered"
                emitted.append(text)
            rendered.append(
                RenderedSection(
                    id=section.id,
                    title=section.title,
                    plugin=entry.plugin,
                    volatility=section.volatility.value,
                    text=text if status == "rendered" else "",
                    status=status,
                    override=override.mode.value if override else None,
                    error=error or override_error,
                )
            )
        return tuple(rendered), "\n\n".join(emitted)

    def render(self, turn: Turn, *, now: dt.datetime | None = None) -> RenderedTurn:
        """Route and assemble one turn: the system prompt, the messages, the decision, the trace."""
        durations: dict[str, float] = {}
        start = time.perf_counter()
        decision = self.decide(turn, now)
        durations["route"] = _ms(start)

        start = time.perf_counter()
        reader, turn = read_session(
            self.stores, self.config, self.persona, turn, now or turn.message.time
        )
        durations["session"] = _ms(start)

        start = time.perf_counter()
        context = self.context_for(turn, now=now, decision=decision)
        sections, system_prompt = self.assemble(context)
        durations["sections"] = _ms(start)

        start = time.perf_counter()
        built = build_turn_messages(reader, turn, context.timeline, system_prompt, self.measure)
        durations["messages"] = _ms(start)

        trace = {
            "decision": decision.trace(),
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
            **built.trace,
        }
        return RenderedTurn(
            sections=sections,
            system_prompt=system_prompt,
            messages=built.messages,
            decision=decision,
            trace=trace,
            stage_durations_ms=durations,
            vision_images=built.vision_images,
        )

    def measure(self, text: str) -> int:
        """The length of ``text`` for the budget: the ``measure_text`` hook, else characters."""
        measured = self.plugins.pm.hook.measure_text(text=text)
        return len(text) if measured is None else int(measured)

    # -- recording -------------------------------------------------------------------------

    def record_message(self, bot_id: str, group_id: str | None, message: ChatMessage) -> bool:
        """Store an incoming group message (the group timeline reads it); never raises for a
        failing store. See :func:`framework.recording.record_message`."""
        return record_message(self.stores, bot_id, group_id, message)

    def record_bot_reply(
        self,
        bot_id: str,
        group_id: str | None,
        text: str,
        *,
        message_id: str | None,
        answering: ChatMessage | None = None,
        quoted: bool = False,
        time: dt.datetime | None = None,
    ) -> bool:
        """Store a delivered bot message, then compress the user's session in the background
        if it grew long (seed 004, 长会话压缩). Never raises for a failing store.

        :param message_id: the platform's id of the delivered message.
        :param answering: the user message it answers; the pair enters that user's session.
        :param quoted: the reply quoted ``answering``.
        :param time: when it was delivered; the clock's time by default.
        """
        sent_at = time or self.clock()
        stored = record_bot_reply(
            self.stores,
            self.config,
            bot_id,
            group_id,
            text,
            message_id=message_id,
            time=sent_at,
            answering=answering,
            quoted=quoted,
            bot_name=self.persona.labels.self_label,
        )
        if stored and answering is not None and self.config.session.summary_enabled:
            user_id = answering.sender_id
            self.background.submit(
                ("compress", bot_id, group_id, user_id),
                lambda: self.compress_session(bot_id, group_id, user_id, now=sent_at),
            )
        return stored

    def compress_session(
        self, bot_id: str, group_id: str | None, user_id: str, *, now: dt.datetime | None = None
    ) -> CompressionResult:
        """Compress one user's session now if it is long enough and the cooldown allows."""
        return compress_session(
            self.stores,
            self.plugins,
            self.config,
            bot_id=bot_id,
            group_id=group_id,
            user_id=user_id,
            now=now or self.clock(),
        )

    def wait_for_background(self, timeout: float | None = None) -> bool:
        """Wait until the background work (session compression) is done.

        :returns: ``True`` when everything finished within ``timeout`` seconds.
        """
        return self.background.wait(timeout)

    def close(self) -> None:
        """Finish the background work and close this thread's store connection."""
        self.background.shutdown()
        self.stores.close()

    def parse_incoming(self, platform: str, payload: Any, bot_id: str) -> ChatMessage:
        """Turn a platform's incoming message into a :class:`ChatMessage` through the
        ``parse_incoming`` hook (enable the ``contrib`` plugin ``onebot`` for OneBot v11).

        :raises ValueError: no loaded plugin handles ``platform``.
        """
        message = self.plugins.pm.hook.parse_incoming(
            platform=platform, payload=payload, bot_id=bot_id
        )
        if message is None:
            raise ValueError(
                f"no plugin parses messages of platform {platform!r}; "
                "enable one (contrib plugin 'onebot' handles 'onebot')"
            )
        return message  # type: ignore[no-any-return]

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
            override, error = self._override(entry.item.id, "", context)
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


def _pack_path(config: Config, registries: Registries) -> Path:
    name = config.persona_pack
    if name in registries.persona_packs:
        return registries.persona_packs[name].item
    if name.endswith(".toml") or "/" in name:
        return config.resolve_path(name)
    known = ", ".join(sorted(registries.persona_packs)) or "none"
    raise ConfigError(
        "promptweave.toml",
        [f"unknown persona pack {name!r} @ $.persona_pack (registered packs: {known})"],
    )
