"""The turn pipeline: one object per turn, built from the parts the runtime holds."""

from __future__ import annotations

import attrs
from base_support import EXAMPLES

from promptweave import Config, Promptweave, Section, hookimpl, load_turn_file
from promptweave.config import StoreConfig
from promptweave.pipeline import stages

MEMORY = Config(store=StoreConfig(backend="memory"))


def _runtime() -> Promptweave:
    return Promptweave.from_config(MEMORY)


def test_the_parts_are_kept_while_no_part_is_replaced() -> None:
    runtime = _runtime()
    assert runtime.parts() is runtime.parts()
    assert runtime.pipeline(load_turn_file(EXAMPLES / "at_question.json")).parts is runtime.parts()


def test_replacing_a_part_builds_the_parts_anew() -> None:
    runtime = _runtime()
    before = runtime.parts()
    runtime.config = attrs.evolve(runtime.config)
    after = runtime.parts()
    assert after is not before and after.config is runtime.config
    runtime.persona = attrs.evolve(runtime.persona)
    assert runtime.parts().persona is runtime.persona
    assert runtime.parts().message_cache.persona is runtime.persona


def test_a_plugin_added_reaches_the_next_turns_parts() -> None:
    runtime = _runtime()
    before = runtime.parts()

    class Notice:
        @hookimpl
        def register_sections(self, register):
            register(
                Section(id="notice", title="群公告", render=lambda context: "【群公告】周五停电")
            )

    runtime.add_plugin(Notice(), name="notice")
    parts = runtime.parts()
    assert parts is not before and parts.registries is runtime.registries
    rendered = runtime.render(load_turn_file(EXAMPLES / "at_question.json"))
    assert "【群公告】周五停电" in rendered.system_prompt


def test_the_stages_run_one_by_one_give_what_render_gives() -> None:
    turn = load_turn_file(EXAMPLES / "at_question.json")
    whole = _runtime().render(turn)
    pipeline = _runtime().pipeline(turn)
    decision = pipeline.decide()
    staged = pipeline.render(decision=decision)
    assert staged.system_prompt == whole.system_prompt
    assert staged.messages == whole.messages
    assert staged.decision == whole.decision
    assert {"session", "route", "sections", "messages"} <= set(staged.stage_durations_ms)


def test_a_pipeline_reads_the_session_once_for_route_and_assembly(monkeypatch) -> None:
    reads = []
    original = stages.read_session

    def counted(*args, **kwargs):
        reads.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(stages, "read_session", counted)
    pipeline = _runtime().pipeline(load_turn_file(EXAMPLES / "at_question.json"))
    pipeline.render(decision=pipeline.decide())
    assert len(reads) == 1


def test_the_injection_carries_the_ambient_turns_the_trace_shows() -> None:
    turn = load_turn_file(EXAMPLES / "at_question.json")
    pipeline = _runtime().pipeline(turn)
    rendered = pipeline.render(decision=pipeline.decide())
    injection = pipeline.injection()
    shown = rendered.trace["injection_snapshot"]["ambient_turns"]
    assert shown  # the example's group messages stand in for the ambient excerpt
    assert [(s.id, s.text_hash, s.preview) for s in injection.ambient] == [
        (entry["turn_id"], entry["text_hash"], entry["text_preview"]) for entry in shown
    ]
