"""Section assembly: render, override, sanitize, skip empty and duplicate blocks, join.

DESIGN.md §3: sections render in their effective order; an override (per bot and group, never in
a private chat) may replace, extend or disable one; each block is sanitized and capped; empty
blocks and exact duplicates of an earlier one are skipped; the rest are joined with a blank line.
A section whose ``render`` raises, returns something other than text, or hangs past the turn's
deadline is left out and traced, unless the assembler is strict; so is an override that raises,
returns something other than a :class:`framework.SectionOverride`, or hangs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs
import pluggy

from framework.errors import ConfigError, SectionRenderError
from framework.plugins.hook_calls import implementations, log_failure
from framework.plugins.records import OverrideMode, Section, SectionOverride, Volatility
from framework.plugins.registry import Registered
from framework.plugins.watchdog import call_plugin, type_name
from framework.prompt.overrides import MAX_OVERRIDE_CONTENT_CHARS
from framework.prompt.render_context import RenderContext
from framework.prompt.rendered import RenderedSection
from framework.prompt.sanitize import BLOCK_MAX_CHARS, sanitize_block
from framework.turn import Bot

__all__ = ["STATIC_CACHE_ENTRIES", "SectionAssembler"]

log = logging.getLogger("promptweave")

#: Rendered static sections kept per runtime; bounded so many groups cannot grow it forever.
STATIC_CACHE_ENTRIES = 4096
#: A section's raw text is cut here before it is cleaned (then capped at ``BLOCK_MAX_CHARS``):
#: cleaning a plugin's ten megabytes would cost the turn for nothing.
RAW_SECTION_MAX_CHARS = 4 * BLOCK_MAX_CHARS


@attrs.define
class SectionAssembler:
    """Assembles the system prompt of a turn from the registered sections.

    :param pm: the plugin manager, for the ``override_section`` hook.
    :param strict: raise :class:`framework.errors.SectionRenderError` when a section's ``render``
        raises (and let an ``override_section`` error propagate), instead of tracing it.
    """

    pm: pluggy.PluginManager
    strict: bool = False
    _static_renders: dict[tuple[str, Bot, str | None], str] = attrs.field(
        factory=dict, init=False, repr=False
    )

    def forget_static(self) -> None:
        """Drop the rendered static sections (the plugins changed)."""
        self._static_renders.clear()

    def override(
        self, section_id: str, text: str, context: RenderContext
    ) -> tuple[SectionOverride | None, str | None]:
        """The override in force for one section, and the error that kept one from applying."""
        group_id = context.turn.group_id
        if group_id is None:
            return None, None  # private chats never get overrides
        arguments = {
            "section_id": section_id,
            "text": text,
            "bot_id": context.turn.bot.id,
            "group_id": group_id,
            "context": context,
        }
        # Each implementation on its own, so that a fault names its plugin; the first answer wins.
        for implementation in implementations(self.pm.hook.override_section):
            try:
                found = call_plugin(
                    implementation.plugin, "hook override_section", implementation, **arguments
                )
            except ConfigError as exc:
                return None, str(exc)
            except Exception as exc:
                if self.strict:
                    raise
                return None, (
                    f"override_section raised {type(exc).__name__}: {exc} "
                    f"(plugin {implementation.plugin!r})"
                )
            if found is None:
                continue
            if not isinstance(found, SectionOverride):
                problem = (
                    f"override_section returned {type_name(found)}, expected SectionOverride "
                    f"or None (plugin {implementation.plugin!r})"
                )
                if self.strict:
                    raise TypeError(problem)
                return None, problem
            return found, None
        return None, None

    def overrides_possible(self, context: RenderContext) -> bool:
        """Whether any ``override_section`` implementation may answer for this turn.

        ``False`` in a private chat, when no plugin implements the hook, or when every
        implementing plugin defines ``has_overrides(context)`` and it returns ``False`` (the
        built-in file plugin does when the file has no entry for the bot and group): then the
        hook is not called for each section. A ``has_overrides`` that raises counts as ``True``,
        so the hook itself reports the problem.
        """
        if context.turn.group_id is None:
            return False
        for impl in self.pm.hook.override_section.get_hookimpls():
            probe = getattr(impl.plugin, "has_overrides", None)
            if not callable(probe):
                return True
            try:
                if call_plugin(impl.plugin_name, "has_overrides", probe, context):
                    return True
            except Exception:
                return True
        return False

    def render_one(
        self, entry: Registered[Section], context: RenderContext
    ) -> tuple[str, str | None]:
        """A section's raw text, and the error when its ``render`` raised."""
        static_key = None
        if entry.item.volatility is Volatility.STATIC:
            # Static sections depend only on the persona pack, the config and the scope, so
            # they are rendered once per (bot, group) and reused: the cacheable prefix stays
            # byte-identical and costs nothing per turn.
            static_key = (entry.item.id, context.turn.bot, context.turn.group_id)
            cached = self._static_renders.get(static_key)
            if cached is not None:
                return cached, None
        try:
            found = call_plugin(
                entry.plugin, f"section {entry.item.id!r}", entry.item.render, context
            )
        except Exception as exc:
            if self.strict:
                raise SectionRenderError(
                    f"section {entry.item.id!r} of plugin {entry.plugin!r} raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            log_failure(log, exc, "section %r of plugin %r raised", entry.item.id, entry.plugin)
            return "", f"{type(exc).__name__}: {exc}"
        if found is not None and not isinstance(found, str):
            problem = f"render returned {type_name(found)}, expected str or None"
            if self.strict:
                raise SectionRenderError(
                    f"section {entry.item.id!r} of plugin {entry.plugin!r}: {problem}"
                )
            log.error("section %r of plugin %r: %s", entry.item.id, entry.plugin, problem)
            return "", problem
        text = (found or "")[:RAW_SECTION_MAX_CHARS]
        if static_key is not None:
            if len(self._static_renders) >= STATIC_CACHE_ENTRIES:
                self._static_renders.clear()
            self._static_renders[static_key] = text
        return text, None

    def assemble(
        self, sections: Sequence[Registered[Section]], context: RenderContext
    ) -> tuple[tuple[RenderedSection, ...], str]:
        """Render ``sections`` in order and join what is left into the system prompt."""
        rendered: list[RenderedSection] = []
        emitted: list[str] = []
        seen: set[str] = set()
        consult_overrides = self.overrides_possible(context)
        override: SectionOverride | None = None
        override_error: str | None = None
        for entry in sections:
            section = entry.item
            text, error = self.render_one(entry, context)
            if consult_overrides:
                override, override_error = self.override(section.id, text, context)
            if override is not None:
                # Whoever supplied it, override content is sanitized and capped like a section.
                content = sanitize_block(
                    override.content[:RAW_SECTION_MAX_CHARS], MAX_OVERRIDE_CONTENT_CHARS
                )
                text = attrs.evolve(override, content=content).apply(text)
            text = sanitize_block(text, BLOCK_MAX_CHARS)
            if error is not None:
                status = "error"
            elif override is not None and override.mode is OverrideMode.DISABLE:
                status = "disabled"
            elif not text:
                status = "empty"
            elif text in seen:
                status = "duplicate"
            else:
                status = "rendered"
                emitted.append(text)
                seen.add(text)
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
