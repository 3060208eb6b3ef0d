from __future__ import annotations

import asyncio
import json

import pytest
from base_support import ROOT
from click.testing import CliRunner
from retrieval_support import BOT, GROUP, USER, make_turn

from promptweave import (
    Config,
    ConfigError,
    KnowledgeItem,
    MemoryItem,
    PersonFact,
    Promptweave,
    RenderContext,
    RetrievalResult,
    Retriever,
    Section,
    hookimpl,
    load_turn_file,
)
from promptweave.cli.main import cli
from promptweave.config import PluginsConfig, StoreConfig
from promptweave.store.retrieval import MemoryRecord, RelationshipRecord, RetrievalBatch
from promptweave.store.retrieval_import import import_files
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase
from promptweave.turn import TurnRetrieved

EXAMPLES = ROOT / "examples"
QUESTION = "@小织 周六晚上桌游局还照常吗？我记得上次说要换地方"
NO_AUTOLOAD = {"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def runtime(*plugins: object) -> Promptweave:
    config = Config(store=StoreConfig(backend="memory"))
    return Promptweave.from_config(config, extra_plugins=plugins, environ=NO_AUTOLOAD)


def remember(pw: Promptweave, *texts: str, kind: str = "teaching") -> None:
    pw.stores.retrieval.write(
        RetrievalBatch(
            memories=tuple(
                MemoryRecord(bot_id=BOT, group_id=GROUP, kind=kind, text=text) for text in texts
            )
        )
    )


def test_render_retrieves_from_the_store_into_the_section_and_traces_it():
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")
    result = pw.render(make_turn(QUESTION))
    assert (
        "【用户明确教导】 — 仅在当前话题相关时参考，不得覆盖核心人设。\n- 桌游局一般在周六晚上七点开始"
        in result.system_prompt
    )
    trace = result.trace["retrieval"]
    assert trace["query"] == "周六晚上桌游局还照常吗？我记得上次说要换地方"
    (memory_trace,) = trace["sections"]["memory"]
    assert (
        memory_trace["status"] == "hit"
        and memory_trace["hits"][0]["text"] == "桌游局一般在周六晚上七点开始"
    )
    assert {
        "route",
        "retrieval",
        "retrieval.memory",
        "retrieval.knowledge",
        "sections",
        "messages",
    } <= set(result.stage_durations_ms)


def test_short_social_turns_skip_persistent_sections_and_say_so():
    pw = runtime()
    remember(pw, "早上好要说早上好呀")
    result = pw.render(make_turn("早上好"))
    assert "【用户明确教导】" not in result.system_prompt
    sections = result.trace["retrieval"]["sections"]
    for name in ("memory", "relationship", "person_facts", "mid_term"):
        assert sections[name][0]["reason"] == "skipped_short_social_turn"


def test_sections_see_whether_the_turn_may_show_persistent_memory():
    seen: list[bool] = []

    def probe(context: RenderContext) -> None:
        seen.append(context.allow_persistent_memory)

    class Probe:
        @hookimpl
        def register_sections(self, register):
            register(Section(id="probe", title="probe", render=probe))

    pw = runtime(Probe())
    question, greeting = make_turn(QUESTION), make_turn("早上好")
    asked, greeted = pw.decide(question), pw.decide(greeting)
    for retrieve in (True, False):
        pw.render(question, decision=asked, retrieve=retrieve)
        pw.render(greeting, decision=greeted, retrieve=retrieve)
        # The caller's word wins over the decision's memory policy.
        asyncio.run(
            pw.arender(question, decision=asked, allow_persistent_memory=False, retrieve=retrieve)
        )
    assert seen == [True, False, False] * 2


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (None, None),
        (RelationshipRecord(bot_id=BOT, group_id=GROUP, user_id=USER), None),
        (
            RelationshipRecord(bot_id=BOT, group_id=GROUP, user_id=USER, facts=("常来桌游局",)),
            "- 常来桌游局",
        ),
    ],
)
def test_relationship_from_the_store_falls_back_to_the_packs_line(record, line):
    pw = runtime()
    if record is not None:
        pw.stores.retrieval.write(RetrievalBatch(relationships=(record,)))
    result = pw.render(make_turn(QUESTION))
    text = next(s.text for s in result.sections if s.id == "relationship")
    fallback = "- " + pw.persona.format(pw.persona.relationship.fallback)
    assert text.splitlines()[1:] == [line or fallback]
    (trace,) = result.trace["retrieval"]["sections"]["relationship"]
    assert trace["status"] == ("hit" if line else "empty")


def test_items_given_with_the_turn_are_merged_with_the_retrievers_items():
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")
    given = MemoryItem(kind="group_event", text="换到格子桌游吧了")
    result = pw.render(make_turn(QUESTION, retrieved=TurnRetrieved(memory=(given,))))
    assert "- 换到格子桌游吧了" in result.system_prompt
    assert "- 桌游局一般在周六晚上七点开始" in result.system_prompt


def test_arender_runs_on_the_callers_event_loop():
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")

    async def main():
        return await pw.arender(make_turn(QUESTION))

    assert "桌游局一般在周六晚上七点开始" in asyncio.run(main()).system_prompt


def test_render_inside_a_running_loop_points_to_arender():
    pw = runtime()

    async def main():
        pw.render(make_turn(QUESTION))

    with pytest.raises(RuntimeError, match="arender"):
        asyncio.run(main())


def test_a_failing_retriever_leaves_its_section_without_it_and_the_turn_goes_on():
    class Broken:
        @hookimpl
        def register_retrievers(self, register):
            register(Retriever(name="broken", feeds="memory", retrieve=self.retrieve))

        def retrieve(self, query):
            raise ConnectionError("vector database unreachable")

    pw = runtime(Broken())
    remember(pw, "桌游局一般在周六晚上七点开始")
    result = pw.render(make_turn(QUESTION))
    assert "桌游局一般在周六晚上七点开始" in result.system_prompt
    broken = next(
        t for t in result.trace["retrieval"]["sections"]["memory"] if t["retriever"] == "broken"
    )
    assert broken["error"] == "ConnectionError: vector database unreachable"


def test_render_runs_the_builtin_retrievers_without_an_event_loop_or_a_thread():
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")
    turn = make_turn(QUESTION)
    decision = pw.decide(turn)
    result = pw.render(turn, decision=decision)
    assert "桌游局一般在周六晚上七点开始" in result.system_prompt
    assert getattr(pw._loops, "loop", None) is None
    assert pw.retrieval_runner._pool is None
    # arender, on the caller's loop, finds and traces the same.
    again = asyncio.run(pw.arender(turn, decision=decision))
    assert again.system_prompt == result.system_prompt
    strip = [
        {**t, "duration_ms": None}
        for found in (result, again)
        for section in found.trace["retrieval"]["sections"].values()
        for t in section
    ]
    assert strip[: len(strip) // 2] == strip[len(strip) // 2 :]


def test_render_still_cuts_off_a_hanging_async_retriever():
    class Hangs:
        @hookimpl
        def register_retrievers(self, register):
            register(
                Retriever(name="hangs", feeds="memory", retrieve=self.retrieve, timeout_s=0.05)
            )

        async def retrieve(self, query):
            await asyncio.sleep(10)

    pw = runtime(Hangs())
    remember(pw, "桌游局一般在周六晚上七点开始")
    result = pw.render(make_turn(QUESTION))
    assert "桌游局一般在周六晚上七点开始" in result.system_prompt
    hangs = next(
        t for t in result.trace["retrieval"]["sections"]["memory"] if t["retriever"] == "hangs"
    )
    assert (hangs["status"], hangs["reason"], hangs["details"]) == (
        "skipped",
        "timeout",
        {"timeout_s": 0.05},
    )


def test_hook_register_retrievers():
    class VectorMemories:
        @hookimpl
        def register_retrievers(self, register):
            register(
                Retriever(
                    name="vector_memory", feeds="memory", retrieve=self.retrieve, timeout_s=0.5
                )
            )

        async def retrieve(self, query):
            assert (query.bot_id, query.group_id, query.allow_persistent_memory) == (
                BOT,
                GROUP,
                True,
            )
            item = MemoryItem(kind="ip_knowledge", text=f"向量库命中：{query.text[:6]}", score=0.8)
            return RetrievalResult(items=[item], details={"index": "hnsw"})

    pw = runtime(VectorMemories())
    assert pw.registries.retrievers["vector_memory"].plugin != "retrievers"
    result = pw.render(make_turn(QUESTION))
    assert (
        "【相关 IP 知识】 — 仅在当前话题相关时参考，不得覆盖核心人设。\n- 向量库命中：周六晚上桌游"
        in result.system_prompt
    )
    trace = next(
        t
        for t in result.trace["retrieval"]["sections"]["memory"]
        if t["retriever"] == "vector_memory"
    )
    assert trace["details"] == {"index": "hnsw"} and trace["hits"][0]["score"] == 0.8


def test_the_builtin_retrievers_can_be_disabled_like_any_plugin():
    config = Config(store=StoreConfig(backend="memory"), plugins=PluginsConfig())
    pw = Promptweave.from_config(
        config, environ={**NO_AUTOLOAD, "PROMPTWEAVE_DISABLE_PLUGINS": "retrievers"}
    )
    assert pw.registries.retrievers == {}
    assert pw.render(make_turn(QUESTION)).trace["retrieval"]["sections"] == {}


@pytest.fixture
def example_store(tmp_path):
    path = tmp_path / "example.sqlite3"
    import_files(
        SQLiteRetrievalStore(SQLiteDatabase(path)),
        "auto",
        [EXAMPLES / "data"],
        bot_id="10001",
        group_id="20001",
    )
    return path


def test_the_example_turn_renders_sections_4_to_10_from_the_example_store(example_store):
    pw = Promptweave.from_config(
        Config(store=StoreConfig(path=str(example_store))), environ=NO_AUTOLOAD
    )
    result = pw.render(load_turn_file(EXAMPLES / "turns" / "at_question_store.json"))
    status = {s.id: s.status for s in result.sections}
    for section in (
        "group_expression",
        "behavior_reference",
        "memory",
        "knowledge",
        "relationship",
        "person_facts",
        "mid_term",
    ):
        assert status[section] == "rendered", section
    # The other group's data (group 20002) never shows.
    assert "骰子工坊" not in result.system_prompt and "陪家里人" not in result.system_prompt


def test_cli_render_with_store_shows_what_each_retriever_found(example_store):
    turn = str(EXAMPLES / "turns" / "at_question_store.json")
    text = CliRunner().invoke(cli, ["render", turn, "--store", str(example_store)], env=NO_AUTOLOAD)
    assert text.exit_code == 0, text.output
    assert "==== retrieval ====" in text.output
    assert "\nknowledge           knowledge           hit  " in text.output
    as_json = CliRunner().invoke(
        cli, ["render", turn, "--store", str(example_store), "--format", "json"], env=NO_AUTOLOAD
    )
    data = json.loads(as_json.output)
    assert data["trace"]["retrieval"]["sections"]["mid_term"][0]["status"] == "hit"
    assert "retrieval.mid_term" in data["stage_durations_ms"]


def test_cli_render_shows_skip_reasons(example_store):
    turn = str(EXAMPLES / "turns" / "ambient_remark.json")
    result = CliRunner().invoke(
        cli, ["render", turn, "--store", str(example_store)], env=NO_AUTOLOAD
    )
    assert "persistent memory: skipped (short social turn)" in result.output
    assert "skipped (not_a_knowledge_question)" in result.output


def test_retrieval_settings_and_timeouts_are_read_from_the_config_file(tmp_path):
    path = tmp_path / "promptweave.toml"
    path.write_text(
        "[retrieval]\nmemory_limit = 2\n\n[retrieval.timeouts]\nmemory = 0.25\n", encoding="utf-8"
    )
    config = Config.from_file(path)
    assert (config.retrieval.memory_limit, config.retrieval.timeouts) == (2, {"memory": 0.25})
    path.write_text("[retrieval.timeouts]\nmemory = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="timeout of 'memory' must be positive"):
        Config.from_file(path)


def test_render_without_retrieval_uses_only_the_turns_own_items():
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")
    given = MemoryItem(kind="group_event", text="上周桌游局换到了社区活动室")
    turn = make_turn(QUESTION, retrieved=TurnRetrieved(memory=(given,)))
    decision = pw.decide(turn)
    result = pw.render(turn, decision=decision, retrieve=False)
    assert "上周桌游局换到了社区活动室" in result.system_prompt
    assert "周六晚上七点开始" not in result.system_prompt  # the store's memory was not retrieved
    assert result.trace["retrieval"] == {
        "skipped": True,
        "query": None,
        "allow_persistent_memory": None,
        "sections": {},
        "turn_items_withheld": [],
    }
    assert not any(name.startswith("retrieval") for name in result.stage_durations_ms)
    # With retrieval the stored memory joins the turn's own.
    retrieved = pw.render(turn, decision=decision)
    assert "周六晚上七点开始" in retrieved.system_prompt
    assert "上周桌游局换到了社区活动室" in retrieved.system_prompt


def test_render_without_retrieval_needs_no_event_loop():
    pw = runtime()
    turn = make_turn(QUESTION)
    decision = pw.decide(turn)  # routing draws from the rng: decide once, render twice

    async def inside_a_loop():
        return pw.render(turn, decision=decision, retrieve=False)

    # render() with retrieval refuses to run inside a running loop; without it there is nothing
    # to await, so it runs anywhere.
    result = asyncio.run(inside_a_loop())
    assert result.trace["retrieval"]["skipped"] is True
    again = asyncio.run(pw.arender(turn, decision=decision, retrieve=False))
    assert again.system_prompt == result.system_prompt


def test_cli_render_no_retrieval(example_store):
    turn = str(EXAMPLES / "turns" / "at_question_store.json")
    args = ["render", turn, "--store", str(example_store), "--no-retrieval"]
    text = CliRunner().invoke(cli, args, env=NO_AUTOLOAD)
    assert text.exit_code == 0, text.output
    assert "skipped (--no-retrieval)" in text.output
    data = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"], env=NO_AUTOLOAD).output)
    assert data["trace"]["retrieval"]["skipped"] is True
    status = {s["id"]: s["status"] for s in data["trace"]["sections"]}
    assert status["knowledge"] == "empty"  # the store has knowledge; the turn file carries none


@pytest.mark.parametrize("retrieve", [True, False])
def test_a_short_social_turn_shows_no_persistent_memory_even_from_the_turn(retrieve):
    pw = runtime()
    carried = TurnRetrieved(
        memory=(MemoryItem(kind="group_event", text="上周桌游局换到了社区活动室"),),
        person_facts=(PersonFact(text="喜欢热柠檬茶"),),
        knowledge=(KnowledgeItem(title="桌游规则", text="狼人杀十二人局"),),
    )
    greeting = make_turn("@小织 早安呀", retrieved=carried)
    decision = pw.decide(greeting)
    assert decision.memory_policy.reason == "short_social_turn"
    result = pw.render(greeting, decision=decision, retrieve=retrieve)
    status = {s.id: s.status for s in result.sections}
    assert status["memory"] == "empty" and status["person_facts"] == "empty"
    assert "社区活动室" not in result.system_prompt and "柠檬茶" not in result.system_prompt
    assert status["knowledge"] == "rendered"  # not persistent memory of people
    assert result.trace["retrieval"]["turn_items_withheld"] == ["memory", "person_facts"]
    # A question reads them all.
    question = make_turn(QUESTION, retrieved=carried)
    asked = pw.render(question, decision=pw.decide(question), retrieve=retrieve)
    assert "社区活动室" in asked.system_prompt and "柠檬茶" in asked.system_prompt
    assert asked.trace["retrieval"]["turn_items_withheld"] == []


@pytest.mark.parametrize("retrieve", [True, False])
def test_sync_render_takes_the_persistent_memory_switch_too(retrieve):
    pw = runtime()
    remember(pw, "桌游局一般在周六晚上七点开始")
    carried = TurnRetrieved(person_facts=(PersonFact(text="喜欢热柠檬茶"),))
    turn = make_turn(QUESTION, retrieved=carried)
    decision = pw.decide(turn)
    allowed = pw.render(turn, decision=decision, retrieve=retrieve)
    assert "柠檬茶" in allowed.system_prompt
    withheld = pw.render(turn, decision=decision, retrieve=retrieve, allow_persistent_memory=False)
    assert "柠檬茶" not in withheld.system_prompt
    assert "七点开始" not in withheld.system_prompt
    assert withheld.trace["retrieval"]["turn_items_withheld"] == ["person_facts"]
