"""The promptweave command: plugins, sections, render."""

from __future__ import annotations

import itertools
import json

import click
import pytest
from base_support import EXAMPLES, without_group_messages
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.plugins.manager import DEFAULT_PLUGINS


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def test_plugins_all_lists_builtins_with_their_hooks(run):
    result = run("plugins", "--all", "--json")
    assert result.exit_code == 0
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["static_sections"]["kind"] == "builtin"
    assert rows["static_sections"]["distribution"] == "promptweave"
    assert rows["static_sections"]["hooks"] == ["register_sections"]
    assert rows["overrides_file"]["hooks"] == ["override_section"]


def test_plugins_without_all_hides_builtins(run):
    assert json.loads(run("plugins", "--json").output) == []


def test_plugins_filter_by_hook(run):
    rows = json.loads(run("plugins", "--all", "--hook", "override_section", "--json").output)
    assert [row["name"] for row in rows] == ["overrides_file"]
    text = run("plugins", "--all", "--hook", "register_persona_packs").output
    assert text.startswith("persona_packs  [builtin]  promptweave")


def test_sections_shows_the_effective_order(run):
    result = run("sections", "--bot", "10001", "--group", "20001", "--json")
    rows = json.loads(result.output)
    assert [row["id"] for row in rows][:3] == ["injection_guard", "persona", "identity"]
    assert len(rows) == 15
    assert rows[13] == {
        "id": "current_time",
        "title": "【当前时间】",
        "plugin": "turn_sections",
        "volatility": "turn",
        "override": None,
    }


def test_sections_shows_overrides_and_reports_a_broken_file(run, tmp_path):
    (tmp_path / "promptweave.toml").write_text('overrides_file = "o.toml"\n', encoding="utf-8")
    (tmp_path / "o.toml").write_text(
        '[bots."10001".groups."20001".sections.memory]\nmode = "disable"\n', encoding="utf-8"
    )
    text = run("sections", "--bot", "10001", "--group", "20001").output
    assert " 6. memory" in text and "override: disable" in text
    (tmp_path / "o.toml").write_text("[bots\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["sections", "--bot", "10001", "--group", "20001"])
    assert result.exit_code == 0
    assert result.output.count("warning: overrides not applied:") == 1
    assert "o.toml: invalid TOML" in result.output


def test_render_text_prints_prompt_messages_decision_and_sections(run):
    result = run("render", str(EXAMPLES / "at_question.json"))
    assert result.exit_code == 0
    assert "==== system prompt ====\n【安全约束】" in result.output
    assert "【工具上下文】" in result.output
    assert "==== decision ====" in result.output
    assert "\ntool_context        rendered    140 chars  turn_sections\n" in result.output


TEXT_BLOCKS = [
    "system prompt",
    "messages",
    "budget",
    "wording hints",
    "decision",
    "turn context",
    "sections",
    "retrieval",
    "stages",
]
RENDER_STAGES = ["session", "route", "retrieval"]
LATER_STAGES = [
    "sections",
    "messages",
    "turn_context",
    "turn_context.notes",
    "turn_context.preflight",
    "turn_context.budget",
    "request",
]


def blocks(output):
    """The text output's blocks: ``{title: [lines]}``, in order."""
    found: dict[str, list[str]] = {}
    title = None
    for line in output.splitlines():
        if line.startswith("==== ") and line.endswith(" ===="):
            title = line.strip("= ")
            found[title] = []
        elif title is not None and line:
            found[title].append(line)
    return found


def stage_rows(lines):
    rows = []
    for line in lines:
        name, milliseconds, unit = line.split()
        assert unit == "ms"
        rows.append((name, float(milliseconds)))
    return rows


def test_render_text_blocks_come_in_the_documented_order(run):
    assert list(blocks(run("render", str(EXAMPLES / "at_question.json")).output)) == TEXT_BLOCKS


def test_render_text_shows_what_the_budget_dropped(run, tmp_path):
    (tmp_path / "promptweave.toml").write_text("[budget]\nchars = 1997\n", encoding="utf-8")
    result = run(
        "render",
        str(without_group_messages("at_question", tmp_path)),
        "--config",
        str(tmp_path / "promptweave.toml"),
    )
    budget = blocks(result.output)["budget"]
    assert budget == [
        "total: 1971 / 1997 chars (system prompt 1915, before trimming 2073)",
        "  dropped: history ×3",
        "  cut: none",
        "preflight: skipped, threshold 24000 tokens",
        "sent: the same as total",
    ]


def test_render_text_budget_with_the_defaults_says_once_that_nothing_was_trimmed(run, tmp_path):
    turn = without_group_messages("at_question", tmp_path)
    budget = blocks(run("render", str(turn)).output)["budget"]
    assert budget == [
        "total: 2073 / 12000 chars (system prompt 1915), nothing trimmed",
        "preflight: skipped, threshold 24000 tokens",
        "sent: the same as total",
    ]


def test_render_text_budget_says_when_the_current_message_was_cut(run, tmp_path):
    turn = json.loads((EXAMPLES / "at_question.json").read_text(encoding="utf-8"))
    turn["message"]["text"] = "@小织 " + "周六晚上桌游局还照常吗？" * 40
    (tmp_path / "long.json").write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "promptweave.toml").write_text("[budget]\nchars = 2200\n", encoding="utf-8")
    budget = blocks(run("render", str(tmp_path / "long.json")).output)["budget"]
    assert " / 2200 chars " in budget[0]
    assert budget[1] == "  dropped: history ×3"
    assert budget[2] == "  cut: current message"


def test_render_text_budget_shows_each_preflight_pass(run, tmp_path):
    config = tmp_path / "promptweave.toml"
    config.write_text("[turn_context]\nthreshold_tokens = 30\n", encoding="utf-8")
    result = run("render", str(EXAMPLES / "at_question.json"), "--config", str(config))
    budget = blocks(result.output)["budget"]
    # Each token figure says how it was found: here by the estimate, no tokenizer being loaded.
    assert budget[1].startswith("preflight: no_progress, ")
    assert budget[1].endswith(" / 30 tokens (estimated)")
    assert budget[2].startswith("  pass 1: 4 -> 4 messages, ")
    assert budget[2].endswith(" tokens (estimated) (no progress)")


def test_render_text_budget_counts_in_the_unit_of_a_measure_text_plugin(monkeypatch):
    import types

    from promptweave import hookimpl

    module = types.ModuleType("word_count")

    @hookimpl
    def measure_text(text):
        return len(text.split())

    module.measure_text = measure_text
    monkeypatch.setattr("promptweave.runtime.build_plugin_manager", _with_extra(module))
    result = CliRunner().invoke(cli, ["render", str(EXAMPLES / "at_question.json")])
    assert result.exit_code == 0
    assert " / 12000 measure_text units " in blocks(result.output)["budget"][0]


def test_render_text_shows_every_stage_in_milliseconds(run):
    lines = blocks(run("render", str(EXAMPLES / "at_question.json")).output)["stages"]
    rows = stage_rows(lines)
    names = [name for name, _ in rows]
    retrievers = [name for name in names if name.startswith("retrieval.")]
    assert retrievers and all(
        line.startswith("  retrieval.") for line in lines[3 : 3 + len(retrievers)]
    )
    assert names == [*RENDER_STAGES, *retrievers, *LATER_STAGES, "total"]
    assert all(milliseconds >= 0 for _, milliseconds in rows)


def test_render_text_stages_without_retrieval(run):
    result = run("render", str(EXAMPLES / "at_question.json"), "--no-retrieval")
    names = [name for name, _ in stage_rows(blocks(result.output)["stages"])]
    assert names == ["session", "route", *LATER_STAGES, "total"]


def test_render_json_carries_the_turn_context_and_request_durations(run):
    data = json.loads(run("render", str(EXAMPLES / "at_question.json"), "--format", "json").output)
    assert list(data["turn_context"]["stage_durations_ms"]) == LATER_STAGES[2:6]
    assert list(data["request"]["stage_durations_ms"]) == ["request"]
    for durations in (
        data["stage_durations_ms"],
        data["turn_context"]["stage_durations_ms"],
        data["request"]["stage_durations_ms"],
    ):
        assert all(isinstance(ms, float) and ms >= 0 for ms in durations.values())


def test_render_json_has_the_documented_keys(run):
    data = json.loads(run("render", str(EXAMPLES / "at_question.json"), "--format", "json").output)
    assert {"sections", "system_prompt", "messages", "decision", "trace"} <= set(data)
    assert len(data["sections"]) == 15
    first = data["sections"][0]
    assert {"id", "plugin", "text", "chars"} <= set(first)
    assert first["chars"] == len(first["text"])
    assert data["messages"][-1]["role"] == "user"
    assert set(data["decision"]) == {
        "action",
        "social_action",
        "delivery_style",
        "source",
        "reason",
    }


def test_render_group_option_switches_overrides_scope(run, tmp_path):
    (tmp_path / "promptweave.toml").write_text('overrides_file = "o.toml"\n', encoding="utf-8")
    (tmp_path / "o.toml").write_text(
        '[bots."10001".groups."777".sections.persona]\nmode = "replace"\ncontent = "【测试人格】"\n',
        encoding="utf-8",
    )
    turn = str(EXAMPLES / "ambient_remark.json")
    assert "【测试人格】" not in run("render", turn).output
    assert "【测试人格】" in run("render", turn, "--group", "777").output


def test_invalid_turn_file_exits_2_naming_file_and_problem(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"bot": {"id": "1", "name": "x"}}', encoding="utf-8")
    result = CliRunner().invoke(cli, ["render", str(path)])
    assert result.exit_code == 2
    assert result.output == f"Error: {path}: message: required field missing\n"
    missing = CliRunner().invoke(cli, ["render", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2
    assert missing.output == f"Error: {tmp_path / 'nope.json'}: no such file\n"


def test_broken_config_is_a_clear_error(tmp_path):
    (tmp_path / "promptweave.toml").write_text("[budget]\nchars = -1\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["sections"])
    assert result.exit_code == 1
    assert "promptweave.toml" in result.output and "chars" in result.output


def test_volatility_warning_is_printed_once(tmp_path, monkeypatch):
    import types

    from promptweave import Section, hookimpl

    module = types.ModuleType("late_static")

    @hookimpl
    def register_sections(register):
        register(
            Section(
                id="late_static",
                title="x",
                render=lambda c: "x",
                after="tool_context",
                volatility="static",
            )
        )

    module.register_sections = register_sections
    monkeypatch.setattr("promptweave.runtime.build_plugin_manager", _with_extra(module))
    result = CliRunner().invoke(cli, ["sections"])
    assert result.exit_code == 0
    assert result.output.count("'late_static' (static") == 1


def _with_extra(module):
    from promptweave.plugins.manager import build_plugin_manager

    def build(**kwargs):
        return build_plugin_manager(**{**kwargs, "extra_plugins": [module]})

    return build


def test_inspection_commands_create_no_store_file(run, tmp_path):
    for args in (
        ["plugins", "--all"],
        ["sections"],
        ["render", str(EXAMPLES / "at_question.json")],
    ):
        assert run(*args).exit_code == 0
    assert list(tmp_path.glob("*.sqlite3")) == []


def test_render_with_a_store_leaves_its_routing_state_alone(run, tmp_path):
    from promptweave import Config, Stores
    from promptweave.config import StoreConfig

    config = Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3")))
    Stores.from_config(config)  # an existing, migrated store
    result = run(
        "render", str(EXAMPLES / "at_question.json"), "--store", str(tmp_path / "s.sqlite3")
    )
    assert result.exit_code == 0
    assert Stores.from_config(config).routing.candidates("10001", "20001") == ()


def test_import_into_a_disabled_store_is_an_error(tmp_path):
    (tmp_path / "promptweave.toml").write_text("[store]\nenabled = false\n", encoding="utf-8")
    (tmp_path / "m.jsonl").write_text(
        '{"kind": "teaching", "text": "七点开始"}\n', encoding="utf-8"
    )
    result = CliRunner().invoke(
        cli, ["import", "memories", str(tmp_path / "m.jsonl"), "--bot", "1", "--group", "2"]
    )
    assert result.exit_code == 1
    assert "the store is disabled" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["render", str(EXAMPLES / "at_question.json"), "--group", ""],
        ["render", str(EXAMPLES / "at_question.json"), "--bot", " "],
        ["sections", "--group", " "],
        ["sections", "--bot", ""],
    ],
)
def test_blank_bot_or_group_is_a_usage_error(args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "must not be blank" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_plugins_on_a_fresh_install_says_the_builtins_are_hidden():
    result = CliRunner().invoke(cli, ["plugins"])
    assert (result.exit_code, result.stdout) == (0, "")
    builtins = len(DEFAULT_PLUGINS)
    assert result.stderr == (
        f"No plugin besides the built-in ones ({builtins}); add --all to list them.\n"
    )


def test_plugins_hint_names_the_hook_filter():
    result = CliRunner().invoke(cli, ["plugins", "--hook", "override_section"])
    assert result.stderr == (
        "No plugin implementing override_section besides the built-in ones (1); "
        "add --all to list them.\n"
    )
    nothing = CliRunner().invoke(cli, ["plugins", "--all", "--hook", "measure_text"])
    assert nothing.stderr == "No plugin implementing measure_text is loaded.\n"


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("nonexistent_hook", ""), ("overide_section", "; did you mean 'override_section'?")],
)
def test_plugins_refuses_a_hook_that_does_not_exist(name, suggestion):
    result = CliRunner().invoke(cli, ["plugins", "--all", "--hook", name])
    assert result.exit_code == 2
    assert (
        f"Error: Invalid value for '--hook': no hook is named {name!r}{suggestion}" in result.output
    )


def test_render_retrieval_says_there_is_no_store_and_lists_the_turn_files_items(run):
    lines = blocks(run("render", str(EXAMPLES / "at_question.json")).output)["retrieval"]
    assert lines[2] == (
        "store: none (no file promptweave.sqlite3): the built-in retrievers had no data to search"
    )
    assert lines[3] == "group_expression    (turn file)         given    3 items"
    assert "memory              (turn file)         given    4 items" in lines
    assert "knowledge           (turn file)         given    1 item" in lines


def test_render_retrieval_names_the_store_it_searched(run, tmp_path):
    data = tmp_path / "memories.jsonl"
    data.write_text('{"kind": "teaching", "text": "桌游局周六晚上七点开始"}\n', encoding="utf-8")
    run(
        "import",
        "memories",
        str(data),
        "--store",
        "s.sqlite3",
        "--bot",
        "10001",
        "--group",
        "20001",
    )
    result = run("render", str(EXAMPLES / "at_question.json"), "--store", "s.sqlite3")
    lines = blocks(result.output)["retrieval"]
    assert lines[2] == "store: s.sqlite3"
    assert any(line.startswith("memory              memory              hit") for line in lines)


def test_render_warns_when_a_turn_that_needs_the_store_has_none():
    turn = EXAMPLES / "from_store.json"
    result = CliRunner().invoke(cli, ["render", str(turn)])
    assert result.exit_code == 0
    assert result.stderr == (
        f"warning: {turn}: there is no store to read (store: none (no file "
        "promptweave.sqlite3)) and the turn file gives no recent_messages or history: only the "
        "current message is sent; give --store FILE, or --config with the [store] that holds "
        "them\n"
    )
    assert CliRunner().invoke(cli, ["render", str(EXAMPLES / "at_question.json")]).stderr == ""


def test_render_sections_print_a_broken_override_source_once(tmp_path):
    (tmp_path / "promptweave.toml").write_text('overrides_file = "o.toml"\n', encoding="utf-8")
    (tmp_path / "o.toml").write_text(
        '[bots."10001".groups."20001".sections.persona]\nmode = "apend"\n', encoding="utf-8"
    )
    result = CliRunner().invoke(cli, ["render", str(EXAMPLES / "at_question.json")])
    lines = blocks(result.output)["sections"]
    assert len(lines) == 16
    assert all(line.endswith("  error [1]") for line in lines[:15])
    assert lines[15] == (
        "[1] o.toml: bots.10001.groups.20001.sections.persona.mode: expected one "
        "of replace, append, disable, not 'apend' (every section)"
    )


def _commands(group, path=()):
    # Through list_commands and get_command: the subcommands imported on first use count too.
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


COMMANDS = list(_commands(cli))


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS]
)
def test_help_never_breaks_a_choice_mid_word(path, command, width):
    import click

    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=width)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    choices = [
        str(choice)
        for param in command.params
        if isinstance(param.type, click.Choice)
        for choice in param.type.choices
    ]
    broken = [
        (ends, starts)
        for ends, starts in itertools.pairwise(lines)
        for choice in choices
        for cut in range(1, len(choice))
        if ends.endswith(choice[:cut])
        and not ends[: -cut or None][-1:].isalnum()
        and starts.lstrip().startswith(choice[cut:])
    ]
    assert not broken, f"{' '.join(path)} --help at {width} columns breaks {broken}"


def test_render_text_shows_the_wording_hints_sent_and_trimmed(run, tmp_path):
    turn = json.loads((EXAMPLES / "at_question.json").read_text(encoding="utf-8"))
    turn["message"]["text"] = "小织早上好"
    turn["recent_messages"] = [
        {"sender_id": "10001", "text": "哈哈确实", "time": f"2026-11-28T20:3{minute}:00+08:00"}
        for minute in range(3)
    ]
    path = tmp_path / "hinted.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    output = blocks(run("render", str(path)).output)
    hints = output["wording hints"]
    assert [line.split()[:3] for line in hints] == [
        ["sent", "repeat", "wording_hints"],
        ["sent", "opening", "wording_hints"],
        ["sent", "closing", "wording_hints"],
        ["sent", "scene_tone", "wording_hints"],
    ]
    assert hints[0].endswith("same_reply x3") and hints[-1].endswith("greeting")
    assert "--- user (wording_hint:repeat) ---" in output["messages"]
    # With room for the current message and one hint alone, the older hints are trimmed.
    rendered = json.loads(run("render", str(path), "--format", "json").output)
    system = len(rendered["system_prompt"])
    current, newest = rendered["messages"][-1], rendered["messages"][-2]
    room = system + len(current["content"]) + len(newest["content"])
    (tmp_path / "promptweave.toml").write_text(f"[budget]\nchars = {room}\n", encoding="utf-8")
    tight = blocks(run("render", str(path), "--config", str(tmp_path / "promptweave.toml")).output)[
        "wording hints"
    ]
    assert [line.split()[:2] for line in tight] == [
        ["sent", "scene_tone"],
        ["trimmed", "repeat"],
        ["trimmed", "opening"],
        ["trimmed", "closing"],
    ]


def test_render_text_says_when_a_turn_has_no_wording_hint(run, tmp_path):
    output = blocks(run("render", str(without_group_messages("at_question", tmp_path))).output)
    assert output["wording hints"] == ["(none)"]
