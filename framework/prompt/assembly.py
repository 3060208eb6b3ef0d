"""Section assembly: render, override, sanitize, skip empty and duplicate blocks, join.

``docs/design.md#assembly`` and ``docs/sections.md``: sections render in their effective order; an
override (per bot and group, never in a private chat) may replace, extend or disable one; each block
is sanitized and capped; empty blocks and exact duplicates of an earlier one are skipped; the rest
are joined with a blank line. A section whose ``render`` raises, returns something other than text, or
hangs past the turn's deadline is left out and traced, unless the assembler is strict; so is an
override that raises, returns something other than a :class:`promptweave.SectionOverride`, or hangs.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import attrs

from promptweave.errors import SectionRenderError
from promptweave.plugins.contributions import (
    READS_CONTEXT,
    OverrideMode,
    Section,
    SectionOverride,
    Volatility,
)
from promptweave.plugins.door import Hooks, log_failure
from promptweave.plugins.registry import Registered
from promptweave.plugins.watchdog import (
    PluginFault,
    PluginHungError,
    _StageRun,
    call_in,
    current_stage,
    raised_fault,
    record_fault,
    type_name,
)
from promptweave.prompt.overrides import MAX_OVERRIDE_CONTENT_CHARS
from promptweave.prompt.render_context import RenderContext
from promptweave.prompt.rendered import RenderedSection
from promptweave.text.sanitize import BLOCK_MAX_CHARS, sanitize_block
from promptweave.turn import Bot

__all__ = ["FINISHED_CACHE_ENTRIES", "STATIC_CACHE_ENTRIES", "SectionAssembler"]

log = logging.getLogger("promptweave")

#: Rendered static sections kept per runtime; bounded so many groups cannot grow it forever.
STATIC_CACHE_ENTRIES = 4096
#: Finished section records kept per runtime, by the text their section rendered.
FINISHED_CACHE_ENTRIES = 4096
#: A section text longer than this is cleaned afresh on every turn instead of being kept.
FINISHED_TEXT_CHARS = 16384

#: A section that reads names (``Section.reads`` a tuple) and rendered this many turns in a row
#: without finding a record kept for what it read (new every turn, as what is retrieved for each
#: message is) renders for the next ``UNREAD_RENDERS`` turns as a section without ``reads``:
#: nothing read, compared, hashed or kept. Then it reads again, and keeps reading while it finds
#: kept records. Likewise a section without ``reads`` whose text was new this many turns in a row
#: (the group timeline) has its records neither looked up nor kept by text for as many turns. The
#: same text comes out either way (``docs/performance.md``).
NEW_READS_IN_A_ROW = 8
UNREAD_RENDERS = 64

_Scope = tuple[str, Bot, str | None]
# Stands for a value of ``Section.reads`` that cannot be kept (it raised, or is unhashable).
_UNHASHABLE: Any = object()
#: A section's raw text is cut here before it is cleaned (then capped at ``BLOCK_MAX_CHARS``):
#: cleaning a plugin's ten megabytes would cost the turn for nothing.
RAW_SECTION_MAX_CHARS = 4 * BLOCK_MAX_CHARS


class _Read:
    """What a section read, as a key of its kept records, hashed once: a value new to the
    section is looked up and then stored, and hashing a tuple of items twice would cost the
    turn a second walk over them (``docs/performance.md``)."""

    __slots__ = ("hash", "value")

    def __init__(self, value: Hashable) -> None:
        self.value = value
        self.hash = hash(value)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Read) and bool(self.value == other.value)


@attrs.define(eq=False)
class _ReadsSlot:
    """What is kept of one registered section that declares what it reads."""

    entry: Registered[Section]
    where: str = attrs.field(init=False)
    # Finished records by what the section read.
    kept: dict[_Read, RenderedSection] = attrs.field(factory=dict, init=False)
    # What it read last and its record, replaced whole so that threads sharing the runtime
    # never see one turn's value beside another's record.
    last: tuple[Hashable, RenderedSection] | None = attrs.field(default=None, init=False)

    # Renders in a row that found nothing kept (what the section read was new each time), and
    # the renders left in which it reads nothing (``NEW_READS_IN_A_ROW``).
    misses: int = attrs.field(default=0, init=False)
    unread: int = attrs.field(default=0, init=False)

    # For names (``Section.reads`` a tuple): the section ids whose items are read, and a getter
    # of the context paths (``None`` when none is named).
    ids: tuple[str, ...] = attrs.field(default=(), init=False)
    paths: Callable[[RenderContext], Any] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.where = f"section {self.entry.item.id!r} reads"
        reads = self.entry.item.reads
        if type(reads) is tuple:
            self.ids = tuple(name for name in reads if not name.startswith(READS_CONTEXT))
            paths = [name[len(READS_CONTEXT) :] for name in reads if name.startswith(READS_CONTEXT)]
            if paths:
                self.paths = operator.attrgetter(*paths)


# How :meth:`SectionAssembler._records` takes a section.
_STATIC, _READS, _TURN = 0, 1, 2


@attrs.define(eq=False)
class _Plan:
    """One registered section as the assembler takes it on every turn, worked out once for the
    registered sections and the stage's trust in their plugins.

    :param trusted: the stage calls the section's plugin right here (it ships with promptweave):
        called through :meth:`promptweave.plugins.watchdog._StageRun.call_trusted`, which asks
        nothing more unless some plugin is hung or quarantined.
    """

    entry: Registered[Section]
    kind: int
    where: str
    trusted: bool
    slot: _ReadsSlot | None = None
    # The section's render, and the fields every record of it shares (``_plain_record``).
    render: Callable[[RenderContext], object] = attrs.field(init=False)
    id: str = attrs.field(init=False)
    title: str = attrs.field(init=False)
    plugin: str = attrs.field(init=False)
    volatility: str = attrs.field(init=False)
    # A turn section: renders in a row whose text was new, and the renders left whose records
    # are not kept by text (``NEW_READS_IN_A_ROW``).
    misses: int = 0
    unkept: int = 0

    def __attrs_post_init__(self) -> None:
        section = self.entry.item
        self.render = section.render
        self.id, self.title, self.plugin = section.id, section.title, self.entry.plugin
        self.volatility = str(section.volatility)


@attrs.define
class SectionAssembler:
    """Assembles the system prompt of a turn from the registered sections.

    :param hooks: the door to the hooks, for ``override_section``.
    :param strict: raise :class:`promptweave.errors.SectionRenderError` when a section's ``render``
        raises (and let an ``override_section`` error propagate), instead of tracing it.
    """

    hooks: Hooks
    strict: bool = False
    _static_renders: dict[_Scope, str] = attrs.field(factory=dict, init=False, repr=False)
    _static_records: dict[tuple[Bot, str | None], dict[str, RenderedSection]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _finished: dict[tuple[str, str, str], RenderedSection] = attrs.field(
        factory=dict, init=False, repr=False
    )
    # Per section that declares what it reads (``Section.reads``): its finished records by what it
    # read. Keyed by the registered entry's id and holding the entry, so a section replaced or
    # recollected starts afresh and the id cannot be reused while the slot exists.
    _by_reads: dict[int, _ReadsSlot] = attrs.field(factory=dict, init=False, repr=False)
    _made_with: tuple[object, object] | None = attrs.field(default=None, init=False, repr=False)
    # The plans of the sections last assembled: the sections (a registries' tuple, never
    # changed), the trust they were made with, and a plan per section.
    _plans: tuple[Sequence[Registered[Section]], object, list[_Plan]] | None = attrs.field(
        default=None, init=False, repr=False
    )

    def forget_static(self) -> None:
        """Drop every kept section: the rendered static sections and the finished records (the
        plugins, the persona pack or the settings changed)."""
        self._static_renders.clear()
        self._static_records.clear()
        self._finished.clear()
        self._by_reads.clear()
        self._plans = None

    def _check_inputs(self, context: RenderContext) -> None:
        """Forget what was kept when the persona pack or the settings object changed since."""
        made_with = self._made_with
        if (
            made_with is None
            or made_with[0] is not context.persona
            or made_with[1] is not (context.config)
        ):
            self.forget_static()
            self._made_with = (context.persona, context.config)

    def override(
        self, section_id: str, text: str, context: RenderContext
    ) -> tuple[SectionOverride | None, str | None]:
        """The override in force for one section, and the error that kept one from applying."""
        group_id = context.turn.group_id
        if group_id is None:
            return None, None  # private chats never get overrides
        return self.hooks.override_section(
            section_id, text, context.turn.bot.id, group_id, context, strict=self.strict
        )

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
        return self.hooks.override_section_possible(context)

    def render_one(
        self, entry: Registered[Section], context: RenderContext
    ) -> tuple[str, str | None]:
        """A section's raw text, and the error when its ``render`` raised."""
        return self._render(entry, context, current_stage(), False, f"section {entry.item.id!r}")

    def _render(
        self,
        entry: Registered[Section],
        context: RenderContext,
        run: _StageRun | None,
        trusted: bool,
        where: str,
    ) -> tuple[str, str | None]:
        """:meth:`render_one` in the stage ``run`` (``None``: outside any), which ``trusted``
        says calls the section's plugin right here; ``where`` places a fault of it."""
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
            found = call_in(run, trusted, entry.plugin, where, entry.item.render, context)
        except Exception as exc:
            return self._failed(entry, exc)
        text, problem = self._text_of(entry, found, where)
        if problem is not None:
            return text, problem
        if static_key is not None:
            if len(self._static_renders) >= STATIC_CACHE_ENTRIES:
                self._static_renders.clear()
            self._static_renders[static_key] = text
        return text, None

    def _failed(self, entry: Registered[Section], exc: Exception) -> tuple[str, str]:
        """What a section's render that raised ``exc`` leaves (raised when strict)."""
        if self.strict:
            raise SectionRenderError(
                f"section {entry.item.id!r} of plugin {entry.plugin!r} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        log_failure(log, exc, "section %r of plugin %r raised", entry.item.id, entry.plugin)
        return "", f"{type(exc).__name__}: {exc}"

    def _text_of(
        self, entry: Registered[Section], found: object, where: str
    ) -> tuple[str, str | None]:
        """The raw text of what a section's render returned (cut at ``RAW_SECTION_MAX_CHARS``),
        and the problem when it is neither text nor ``None`` (raised when strict)."""
        if found is not None and not isinstance(found, str):
            problem = f"render returned {type_name(found)}, expected str or None"
            if self.strict:
                raise SectionRenderError(
                    f"section {entry.item.id!r} of plugin {entry.plugin!r}: {problem}"
                )
            log.error("section %r of plugin %r: %s", entry.item.id, entry.plugin, problem)
            record_fault(
                PluginFault(
                    plugin=entry.plugin,
                    where=where,
                    kind="wrong_type",
                    detail=problem,
                )
            )
            return "", problem
        return (found or "")[:RAW_SECTION_MAX_CHARS], None

    def assemble(
        self, sections: Sequence[Registered[Section]], context: RenderContext
    ) -> tuple[tuple[RenderedSection, ...], str]:
        """Render ``sections`` in order and join what is left into the system prompt.

        A static section is rendered once per bot and group, and a section whose text is the same
        as on an earlier turn reuses its finished record (``docs/performance.md``); with an
        override in force a section is always finished afresh.
        """
        self._check_inputs(context)
        if not self.overrides_possible(context):
            return self._records(sections, context)
        records = [self._with_override(entry, context) for entry in sections]
        emitted: list[str] = []
        seen: set[str] = set()
        for index, record in enumerate(records):
            if record.status == "rendered":
                if record.text in seen:
                    records[index] = _duplicate(record)
                else:
                    emitted.append(record.text)
                    seen.add(record.text)
        return tuple(records), "\n\n".join(emitted)

    def _plans_for(
        self, sections: Sequence[Registered[Section]], run: _StageRun | None
    ) -> list[_Plan]:
        """The plan of every section, made again when the sections or the stage's trust in
        their plugins changed."""
        trusted = None if run is None or run.bound_all else run.watchdog.trusted
        plans = self._plans
        if plans is not None and plans[0] is sections and plans[1] is trusted:
            return plans[2]
        made = []
        for entry in sections:
            section = entry.item
            plan = _Plan(
                entry=entry,
                kind=_STATIC
                if section.volatility is Volatility.STATIC
                else _TURN
                if section.reads is None
                else _READS,
                where=f"section {section.id!r}",
                trusted=trusted is not None and bool(trusted(entry.plugin)),
            )
            if plan.kind == _READS:
                plan.slot = self._slot(entry)
            made.append(plan)
        self._plans = (sections, trusted, made)
        return made

    def _slot(self, entry: Registered[Section]) -> _ReadsSlot:
        """What is kept of a section that declares what it reads."""
        slot = self._by_reads.get(id(entry))
        if slot is None or slot.entry is not entry:
            if len(self._by_reads) >= STATIC_CACHE_ENTRIES:
                self._by_reads.clear()
            slot = self._by_reads[id(entry)] = _ReadsSlot(entry)
        return slot

    def _records(
        self, sections: Sequence[Registered[Section]], context: RenderContext
    ) -> tuple[tuple[RenderedSection, ...], str]:
        """The finished record of every section, none with an override in force (static sections
        from those kept for the bot and group, the others from those kept by text), a text that
        duplicates an earlier section's marked ``duplicate``; and the system prompt."""
        scope = (context.turn.bot, context.turn.group_id)
        kept_static = self._static_records.get(scope)
        if kept_static is None:
            if len(self._static_records) >= STATIC_CACHE_ENTRIES:
                self._static_records.clear()
            kept_static = self._static_records[scope] = {}
        run = current_stage()
        records = []
        emitted: list[str] = []
        for plan in self._plans_for(sections, run):
            record: RenderedSection | None
            kind = plan.kind
            if kind == _READS:
                slot = plan.slot
                assert slot is not None
                if slot.unread:
                    # What it read was new on every turn of late: rendered as it comes (see
                    # ``NEW_READS_IN_A_ROW``).
                    slot.unread -= 1
                    record = _plan_record(plan, *self._render_plan(plan, context, run))
                else:
                    record = self._read_record(plan, slot, context, run)
            elif kind == _STATIC:
                entry = plan.entry
                record = kept_static.get(entry.item.id)
                if record is None:
                    text, error = self._render(entry, context, run, plan.trusted, plan.where)
                    record = self._finish(entry, text, error)
                    if error is None:
                        kept_static[entry.item.id] = record
            else:
                text, error = self._render_plan(plan, context, run)
                if plan.unkept:
                    # Its text was new on every turn of late (a timeline): finished as it
                    # comes, neither looked up nor kept.
                    plan.unkept -= 1
                    record = _plan_record(plan, text, error)
                else:
                    size = len(self._finished)
                    record = self._finish(plan.entry, text, error)
                    if len(self._finished) == size:
                        plan.misses = 0  # found (or not keepable)
                    else:
                        plan.misses += 1
                        if plan.misses >= NEW_READS_IN_A_ROW:
                            plan.misses = 0
                            plan.unkept = UNREAD_RENDERS
            # Without an override, a record has text exactly when it is ``rendered``.
            text = record.text
            if text:
                if text in emitted:
                    record = _duplicate(record)
                else:
                    emitted.append(text)
            records.append(record)
        return tuple(records), "\n\n".join(emitted)

    def _render_plan(
        self, plan: _Plan, context: RenderContext, run: _StageRun | None
    ) -> tuple[str, str | None]:
        """:meth:`_render` of a section that is not static, as its plan takes it."""
        if plan.trusted and run is not None:
            watchdog = run.watchdog
            if not (watchdog._hung or watchdog._quarantined):
                # ``_StageRun.call_trusted``, made here: the section's render is one of the
                # fifteen plugin calls of every turn.
                try:
                    found = plan.render(context)
                except Exception as exc:
                    if not isinstance(exc, PluginHungError):
                        run.deadline.add(raised_fault(plan.plugin, plan.where, exc))
                    return self._failed(plan.entry, exc)
                if type(found) is str:
                    return found[:RAW_SECTION_MAX_CHARS], None
                return self._text_of(plan.entry, found, plan.where)
        return self._render(plan.entry, context, run, plan.trusted, plan.where)

    def _read_record(
        self, plan: _Plan, slot: _ReadsSlot, context: RenderContext, run: _StageRun | None
    ) -> RenderedSection:
        """The finished record of a section that declares what it reads: the one of an earlier
        turn that read an equal value, else rendered and kept under what it read."""
        entry = plan.entry
        reads = entry.item.reads
        value: Any
        try:
            if type(reads) is tuple:
                # Names: read here, without calling the plugin.
                retrieved, ids, paths = context.retrieved, slot.ids, slot.paths
                if paths is None and len(ids) == 1:
                    value = retrieved.get(ids[0], ())
                else:
                    found = [retrieved.get(section_id, ()) for section_id in ids]
                    if paths is not None:
                        found.append(paths(context))
                    value = tuple(found)
            else:
                read = cast("Callable[[RenderContext], Hashable]", reads)
                value = call_in(run, plan.trusted, entry.plugin, slot.where, read, context)
        except Exception as exc:
            if self.strict:
                raise SectionRenderError(
                    f"reads of section {entry.item.id!r} of plugin {entry.plugin!r} raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            log_failure(
                log, exc, "reads of section %r of plugin %r raised", entry.item.id, entry.plugin
            )
            value = _UNHASHABLE
        last = slot.last
        if last is not None and value is not _UNHASHABLE:
            # Most turns read what the turn before read, often the very same objects: compared
            # first, element by element (identical elements cost nothing), before any hashing.
            try:
                if value is last[0] or value == last[0]:
                    slot.misses = 0
                    return last[1]
            except Exception:
                value = _UNHASHABLE
        kept = slot.kept
        key: _Read | None = None
        try:
            key = _Read(value)
            record = kept.get(key)
        except Exception:
            # What it read cannot be a key (a list, say, or a value that cannot be compared): the
            # section renders as it would without.
            value, record = _UNHASHABLE, None
        if record is not None:
            slot.last = (value, record)
            slot.misses = 0
            return record
        if value is not _UNHASHABLE:
            slot.misses += 1
            if slot.misses >= NEW_READS_IN_A_ROW and type(reads) is tuple:
                # A function's reads are the plugin's own: called every turn, so that its faults
                # are traced on every turn (and names that fail to read are logged every turn).
                slot.misses = 0
                slot.unread = UNREAD_RENDERS
        text, error = self._render_plan(plan, context, run)
        record = self._finish(entry, text, error)
        if error is None and value is not _UNHASHABLE and key is not None:
            if len(kept) >= FINISHED_CACHE_ENTRIES:
                kept.clear()
            kept[key] = record
            slot.last = (value, record)
        return record

    def _finish(self, entry: Registered[Section], text: str, error: str | None) -> RenderedSection:
        """The record of a section's text without an override: cleaned and capped, ``rendered``
        or ``empty`` (``error`` when its render raised); kept by text for the turns after."""
        if error is not None or len(text) > FINISHED_TEXT_CHARS:
            return _plain_record(entry, text, error)
        key = (entry.item.id, entry.plugin, text)
        record = self._finished.get(key)
        if record is None:
            record = _plain_record(entry, text, None)
            if len(self._finished) >= FINISHED_CACHE_ENTRIES:
                self._finished.clear()
            self._finished[key] = record
        return record

    def _with_override(self, entry: Registered[Section], context: RenderContext) -> RenderedSection:
        """A section finished afresh with the override in force, if any."""
        text, error = self.render_one(entry, context)
        override, override_error = self.override(entry.item.id, text, context)
        return _record(entry, text, error, override, override_error)


def _record(
    entry: Registered[Section],
    text: str,
    error: str | None,
    override: SectionOverride | None,
    override_error: str | None,
) -> RenderedSection:
    """Apply the override, clean and cap the text, and say what became of the section (a text
    that duplicates an earlier section's is marked by the caller, which knows the others)."""
    section = entry.item
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
    else:
        status = "rendered"
    return RenderedSection(
        id=section.id,
        title=section.title,
        plugin=entry.plugin,
        volatility=section.volatility.value,
        text=text if status == "rendered" else "",
        status=status,
        override=override.mode.value if override else None,
        error=error or override_error,
    )


def _duplicate(record: RenderedSection) -> RenderedSection:
    """``record`` as a section whose text an earlier section already gave."""
    return attrs.evolve(record, text="", status="duplicate")


def _cleaned(text: str, error: str | None) -> tuple[str, str]:
    """A render's text, cleaned and capped, and its status: ``rendered``, ``empty`` or
    ``error`` (whose text is dropped)."""
    if error is not None:
        return "", "error"
    text = sanitize_block(text, BLOCK_MAX_CHARS)
    return text, "rendered" if text else "empty"


def _plan_record(plan: _Plan, text: str, error: str | None) -> RenderedSection:
    """:func:`_plain_record` with the fields its plan keeps."""
    text, status = _cleaned(text, error)
    return RenderedSection(
        id=plan.id,
        title=plan.title,
        plugin=plan.plugin,
        volatility=plan.volatility,
        text=text,
        status=status,
        error=error or None,
    )


def _plain_record(entry: Registered[Section], text: str, error: str | None) -> RenderedSection:
    """:func:`_record` without an override: cleaned and capped, ``rendered``, ``empty`` or
    ``error``."""
    section = entry.item
    text, status = _cleaned(text, error)
    return RenderedSection(
        id=section.id,
        title=section.title,
        plugin=entry.plugin,
        volatility=str(section.volatility),
        text=text,
        status=status,
        error=error or None,
    )
