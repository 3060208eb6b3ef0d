"""A section that declares what it reads (``Section.reads``) renders again only when that changes,
and what was kept from it is dropped when anything else it is made from changes: the persona pack,
the overrides file (``tests/prompt/test_assembly_reuse.py``, for a static section and one that declares
what it reads), the plugins, the settings (``docs/sections.md#what-a-section-reads``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Hashable

import attrs
import pytest

from promptweave import (
    Config,
    MemoryItem,
    Promptweave,
    RenderContext,
    Section,
    Turn,
    hookimpl,
)
from promptweave.config import BudgetConfig, StoreConfig
from promptweave.errors import SectionRenderError
from promptweave.testing import TEST_ENVIRON

MEMORY = StoreConfig(backend="memory")


def _runtime(config: Config | None = None, *, strict: bool | None = None) -> Promptweave:
    return Promptweave.from_config(
        config or Config(store=MEMORY), environ=TEST_ENVIRON, strict=strict
    )


def _sections(runtime: Promptweave, turn: Turn) -> dict[str, str]:
    result = runtime.render(turn, retrieve=False)
    return {s.id: s.text for s in result.sections if s.status == "rendered"}


def _with_memory(turn: Turn, *texts: str) -> Turn:
    memory = tuple(MemoryItem(kind="teaching", text=text) for text in texts)
    return attrs.evolve(turn, retrieved=attrs.evolve(turn.retrieved, memory=memory))


@attrs.define(eq=False)
class Counted:
    """A section showing the memory items and the budget, which counts its renders; ``reads``
    is what it declares it reads."""

    reads: Callable[[RenderContext], Hashable] | tuple[str, ...] | None
    renders: list[str] = attrs.field(factory=list)
    section_id: str = "counted"

    def render(self, context: RenderContext) -> str:
        texts = [item.text for item in context.items("memory", MemoryItem)]
        text = f"【计数】{context.config.budget.chars}\n" + "\n".join(texts)
        self.renders.append(text)
        return text

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        register(
            Section(
                id=self.section_id,
                title="【计数】",
                render=self.render,
                volatility="retrieval",
                reads=self.reads,
            )
        )


def _memory_items(context: RenderContext) -> Hashable:
    return context.retrieved.get("memory", ())


@pytest.mark.parametrize("reads", [_memory_items, ("memory",)], ids=["function", "section ids"])
def test_a_section_renders_again_only_when_what_it_reads_changes(
    rich_turn: Turn, reads: Callable[[RenderContext], Hashable] | tuple[str, ...]
) -> None:
    runtime = _runtime()
    counted = Counted(reads)
    runtime.add_plugin(counted, name="counted")
    first, second = _with_memory(rich_turn, "甲"), _with_memory(rich_turn, "乙")
    assert _sections(runtime, first)["counted"] == "【计数】12000\n甲"
    assert _sections(runtime, first)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 1
    assert _sections(runtime, second)["counted"] == "【计数】12000\n乙"
    assert len(counted.renders) == 2
    # Equal items made anew are what it read before: the block of that turn comes back.
    assert _sections(runtime, _with_memory(rich_turn, "甲"))["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 2


def test_a_section_without_reads_renders_on_every_turn(rich_turn: Turn) -> None:
    runtime = _runtime()
    counted = Counted(None)
    runtime.add_plugin(counted, name="counted")
    for _ in range(3):
        assert _sections(runtime, rich_turn)["counted"].startswith("【计数】")
    assert len(counted.renders) == 3


def test_an_unhashable_value_renders_the_section_as_usual(rich_turn: Turn) -> None:
    runtime = _runtime()
    counted = Counted(lambda context: [item.text for item in context.items("memory")])
    runtime.add_plugin(counted, name="counted")
    turn = _with_memory(rich_turn, "甲")
    for _ in range(2):
        assert _sections(runtime, turn)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 2


def _raising(context: RenderContext) -> Hashable:
    raise RuntimeError("reads broke")


def test_reads_that_raise_render_the_section_unless_strict(rich_turn: Turn) -> None:
    runtime = _runtime(strict=False)
    counted = Counted(_raising)
    runtime.add_plugin(counted, name="counted")
    turn = _with_memory(rich_turn, "甲")
    for _ in range(2):
        assert _sections(runtime, turn)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 2

    strict = _runtime(strict=True)
    strict.add_plugin(Counted(_raising), name="counted")
    with pytest.raises(SectionRenderError, match="reads of section 'counted'"):
        strict.render(turn, retrieve=False)


def test_a_built_in_section_follows_its_items(rich_turn: Turn) -> None:
    runtime = _runtime()
    assert "甲乙丙" not in _sections(runtime, rich_turn)["memory"]
    changed = _sections(runtime, _with_memory(rich_turn, "甲乙丙"))
    assert "甲乙丙" in changed["memory"]
    assert _sections(runtime, rich_turn) == _sections(_runtime(), rich_turn)


def test_a_new_settings_object_renders_the_section_again(rich_turn: Turn) -> None:
    runtime = _runtime()
    counted = Counted(_memory_items)
    runtime.add_plugin(counted, name="counted")
    turn = _with_memory(rich_turn, "甲")
    assert _sections(runtime, turn)["counted"] == "【计数】12000\n甲"
    runtime.config = attrs.evolve(runtime.config, budget=BudgetConfig(chars=9000))
    assert _sections(runtime, turn)["counted"] == "【计数】9000\n甲"


def test_a_new_persona_pack_renders_the_built_in_sections_again(rich_turn: Turn) -> None:
    runtime = _runtime()
    # Without notes, the relationship section shows the pack's fallback line.
    turn = attrs.evolve(rich_turn, retrieved=attrs.evolve(rich_turn.retrieved, relationship=None))
    before = _sections(runtime, turn)["relationship"]
    pack = runtime.persona
    runtime.persona = attrs.evolve(
        pack, relationship=attrs.evolve(pack.relationship, fallback="换了的备注")
    )
    after = _sections(runtime, turn)["relationship"]
    assert "换了的备注" in after and "换了的备注" not in before


def test_the_relationship_fallback_follows_the_memory_policy(rich_turn: Turn) -> None:
    runtime = _runtime()
    turn = attrs.evolve(rich_turn, retrieved=attrs.evolve(rich_turn.retrieved, relationship=None))
    decision = runtime.decide(turn)
    shown = runtime.render(turn, decision=decision, retrieve=False, allow_persistent_memory=True)
    hidden = runtime.render(turn, decision=decision, retrieve=False, allow_persistent_memory=False)
    assert [s.status for s in shown.sections if s.id == "relationship"] == ["rendered"]
    assert [s.status for s in hidden.sections if s.id == "relationship"] == ["empty"]


class ReplaceMemory:
    """Replaces the built-in section ``memory``, reading the same items."""

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        register(
            Section(
                id="memory",
                title="替换的记忆",
                render=lambda context: "【替换的记忆】",
                volatility="retrieval",
                reads=_memory_items,
                replace=True,
            )
        )


def test_a_plugin_added_and_removed_replaces_the_kept_section(rich_turn: Turn) -> None:
    runtime = _runtime()
    original = _sections(runtime, rich_turn)["memory"]
    name = runtime.add_plugin(ReplaceMemory(), name="replace_memory")
    assert _sections(runtime, rich_turn)["memory"] == "【替换的记忆】"
    runtime.remove_plugin(name)
    assert _sections(runtime, rich_turn)["memory"] == original


@attrs.frozen(eq=False)
class Incomparable:
    """Hashable, but comparing it raises (an array, say)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("cannot compare")

    def __hash__(self) -> int:
        return 1


def test_a_value_that_cannot_be_compared_renders_the_section(rich_turn: Turn) -> None:
    runtime = _runtime()
    counted = Counted(lambda context: Incomparable())
    runtime.add_plugin(counted, name="counted")
    turn = _with_memory(rich_turn, "甲")
    for _ in range(3):
        assert _sections(runtime, turn)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 3


def test_section_ids_read_from_several_sections(rich_turn: Turn) -> None:
    runtime = _runtime()
    counted = Counted(("knowledge", "memory"))
    runtime.add_plugin(counted, name="counted")
    turn = _with_memory(rich_turn, "甲")
    for _ in range(2):
        assert _sections(runtime, turn)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 1
    assert _sections(runtime, _with_memory(rich_turn, "乙"))["counted"] == "【计数】12000\n乙"
    knowledge = attrs.evolve(turn, retrieved=attrs.evolve(turn.retrieved, knowledge=()))
    assert _sections(runtime, knowledge)["counted"] == "【计数】12000\n甲"
    assert len(counted.renders) == 3


@pytest.mark.parametrize(
    "reads", ["memory", ("Memory",), (1,), ("context._private",), ("context.turn..bot",)]
)
def test_reads_must_be_section_ids_or_a_function(reads: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        Section(id="bad", title="坏", render=lambda context: "", reads=reads)  # type: ignore[arg-type]


@pytest.mark.parametrize("year", [1, 999, 1000, 2026, 9999])
def test_the_current_time_reads_as_strftime_writes_it(rich_turn: Turn, year: int) -> None:
    # The bot's zone is UTC, so the time is shown as given, whatever the year.
    bot = attrs.evolve(rich_turn.bot, timezone="UTC")
    at = dt.datetime(year, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    turn = attrs.evolve(rich_turn, bot=bot, message=attrs.evolve(rich_turn.message, time=at))
    shown = _sections(_runtime(), turn)["current_time"]
    assert f"- 本轮时间：{at:%Y-%m-%d %H:%M}（" in shown


@attrs.define(eq=False)
class Echo:
    """A section showing the message's text and the memory items, declared by name."""

    renders: list[str] = attrs.field(factory=list)

    def render(self, context: RenderContext) -> str:
        memory = [item.text for item in context.items("memory", MemoryItem)]
        text = f"【回声】{context.turn.message.text}|{'、'.join(memory)}"
        self.renders.append(text)
        return text

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        register(
            Section(
                id="echo",
                title="【回声】",
                render=self.render,
                reads=("memory", "context.turn.message.text"),
            )
        )


def test_context_paths_are_read_by_the_runtime(rich_turn: Turn) -> None:
    runtime = _runtime()
    echo = Echo()
    runtime.add_plugin(echo, name="echo")

    def shown(turn: Turn) -> str:
        result = runtime.render(turn, retrieve=False, allow_persistent_memory=True)
        return next(s.text for s in result.sections if s.id == "echo")

    turn = _with_memory(rich_turn, "甲")
    asked = attrs.evolve(turn, message=attrs.evolve(turn.message, text="另一句"))
    assert shown(turn) == f"【回声】{turn.message.text}|甲"
    assert shown(turn) == f"【回声】{turn.message.text}|甲"
    assert len(echo.renders) == 1
    assert shown(asked) == "【回声】另一句|甲"
    assert shown(_with_memory(asked, "乙")) == "【回声】另一句|乙"
    assert len(echo.renders) == 3


def test_a_context_path_that_does_not_resolve_is_traced(rich_turn: Turn) -> None:
    class Missing(Echo):
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            register(
                Section(id="echo", title="【回声】", render=self.render, reads=("context.no_such",))
            )

    runtime = _runtime(strict=False)
    missing = Missing()
    runtime.add_plugin(missing, name="echo")
    for _ in range(2):
        assert _sections(runtime, rich_turn)["echo"].startswith("【回声】")
    assert len(missing.renders) == 2
    strict = _runtime(strict=True)
    strict.add_plugin(Missing(), name="echo")
    with pytest.raises(SectionRenderError, match="reads of section 'echo'"):
        strict.render(rich_turn, retrieve=False)


@attrs.frozen(eq=False)
class _HashCounted:
    """A read value that counts how often it is hashed; equal to another of the same label."""

    label: str
    hashes: list[str]

    def __hash__(self) -> int:
        self.hashes.append(self.label)
        return hash(self.label)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _HashCounted) and other.label == self.label


def test_a_new_value_is_hashed_once_and_an_earlier_one_found_again(rich_turn: Turn) -> None:
    hashes: list[str] = []
    labels = iter(["a", "b", "a"])
    runtime = _runtime()
    counted = Counted(lambda context: _HashCounted(next(labels), hashes))
    runtime.add_plugin(counted, name="counted")
    for _ in range(3):
        assert _sections(runtime, rich_turn)["counted"].startswith("【计数】")
    # "a" and "b" each hashed once when new (looked up, then kept); "a" once more, found again.
    assert hashes == ["a", "b", "a"]
    assert len(counted.renders) == 2


def test_a_section_whose_reads_are_new_every_turn_stops_reading_for_a_while(
    rich_turn: Turn,
) -> None:
    from promptweave.prompt.assembly import NEW_READS_IN_A_ROW, UNREAD_RENDERS

    runtime = _runtime()
    counted = Counted(("memory",))
    runtime.add_plugin(counted, name="counted")
    # New items on every turn: after NEW_READS_IN_A_ROW of them it renders without reading.
    for number in range(NEW_READS_IN_A_ROW):
        _sections(runtime, _with_memory(rich_turn, f"新{number}"))
    assert len(counted.renders) == NEW_READS_IN_A_ROW
    repeated = _with_memory(rich_turn, "新0")
    for number in range(UNREAD_RENDERS):
        # The same text as when it read, rendered again (what it read is not compared).
        assert _sections(runtime, repeated)["counted"] == "【计数】12000\n新0"
        assert len(counted.renders) == NEW_READS_IN_A_ROW + number + 1
    # Then it reads again: an earlier value is found again, the last one kept.
    rendered = len(counted.renders)
    assert _sections(runtime, repeated)["counted"] == "【计数】12000\n新0"
    assert _sections(runtime, repeated)["counted"] == "【计数】12000\n新0"
    assert _sections(runtime, _with_memory(rich_turn, "新1"))["counted"] == "【计数】12000\n新1"
    assert len(counted.renders) == rendered


def test_reads_of_a_function_are_called_every_turn_however_new_their_values(
    rich_turn: Turn,
) -> None:
    from promptweave.prompt.assembly import NEW_READS_IN_A_ROW

    values = iter(range(10 * NEW_READS_IN_A_ROW))
    calls: list[int] = []

    def reads(context: RenderContext) -> Hashable:
        calls.append(1)
        return next(values)

    runtime = _runtime()
    counted = Counted(reads)
    runtime.add_plugin(counted, name="counted")
    for _ in range(3 * NEW_READS_IN_A_ROW):
        _sections(runtime, rich_turn)
    assert len(calls) == len(counted.renders) == 3 * NEW_READS_IN_A_ROW


def test_names_that_fail_to_read_are_logged_on_every_turn(
    rich_turn: Turn, caplog: pytest.LogCaptureFixture
) -> None:
    from promptweave.prompt.assembly import NEW_READS_IN_A_ROW

    class Missing(Echo):
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            register(
                Section(id="echo", title="【回声】", render=self.render, reads=("context.no_such",))
            )

    runtime = _runtime(strict=False)
    runtime.add_plugin(Missing(), name="echo")
    turns = 2 * NEW_READS_IN_A_ROW
    with caplog.at_level("ERROR", logger="promptweave"):
        for _ in range(turns):
            _sections(runtime, rich_turn)
    failed = [r for r in caplog.records if "reads of section 'echo'" in r.getMessage()]
    assert len(failed) == turns


def test_a_section_whose_text_is_new_every_turn_is_not_kept_by_text_for_a_while(
    rich_turn: Turn,
) -> None:
    from promptweave.prompt.assembly import NEW_READS_IN_A_ROW, UNREAD_RENDERS

    class Turned:
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            register(Section(id="turned", title="【轮】", render=self.render))

        def render(self, context: RenderContext) -> str:
            return f"【轮】{context.turn.message.text}"

    runtime = _runtime()
    runtime.add_plugin(Turned(), name="turned")

    def kept() -> int:
        return sum(1 for key in runtime.assembler._finished if key[0] == "turned")

    def turn(text: str) -> Turn:
        return attrs.evolve(rich_turn, message=attrs.evolve(rich_turn.message, text=text))

    for number in range(NEW_READS_IN_A_ROW):
        assert _sections(runtime, turn(f"第{number}句"))["turned"] == f"【轮】第{number}句"
    assert kept() == NEW_READS_IN_A_ROW
    for number in range(UNREAD_RENDERS):
        assert _sections(runtime, turn(f"又{number}句"))["turned"] == f"【轮】又{number}句"
    assert kept() == NEW_READS_IN_A_ROW
    # Then kept again: a text that comes back is found, and the count starts over.
    first = runtime.render(turn("第0句"), retrieve=False)
    again = runtime.render(turn("第0句"), retrieve=False)
    [found] = [s for s in first.sections if s.id == "turned"]
    [found_again] = [s for s in again.sections if s.id == "turned"]
    assert found is found_again
    _sections(runtime, turn("新的一句"))
    assert kept() == NEW_READS_IN_A_ROW + 1
