"""One error style across the command: ``Error: FILE:LINE: field.path: problem``, exit status 2
for the command line and its input files, 1 for the configuration and the run, one line per
distinct problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.cli.problems import Problem, parse_problem, report_lines

EXAMPLES = ROOT / "examples"
AT_QUESTION = EXAMPLES / "turns" / "at_question.json"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        (
            "turn.json",
            "required field missing @ $.bot.name",
            Problem(file="turn.json", path="bot.name", text="required field missing"),
        ),
        (
            "ev.jsonl:3",
            "invalid JSON at column 5: Expecting value",
            Problem(file="ev.jsonl", line=3, text="invalid JSON at column 5: Expecting value"),
        ),
        (
            None,
            "m.jsonl: line 2: required field missing @ $.bot_id (give --bot or a bot_id field)",
            Problem(
                file="m.jsonl",
                line=2,
                path="bot_id",
                text="required field missing (give --bot or a bot_id field)",
            ),
        ),
        (
            "turn.json",
            "invalid JSON at line 4 column 2: Expecting ',' delimiter",
            Problem(
                file="turn.json", line=4, text="invalid JSON at column 2: Expecting ',' delimiter"
            ),
        ),
        (
            "o.toml",
            "expected one of replace, append, disable, not 'apend' "
            "@ $.bots['10001'].groups['20001'].sections['persona'].mode",
            Problem(
                file="o.toml",
                path="bots.10001.groups.20001.sections.persona.mode",
                text="expected one of replace, append, disable, not 'apend'",
            ),
        ),
        (
            "t.json",
            "extra fields found (colour) @ $",
            Problem(file="t.json", text="extra fields found (colour)"),
        ),
        (
            "t.json",
            "cannot read: No such file or directory",
            Problem(file="t.json", text="no such file"),
        ),
    ],
)
def test_library_errors_are_read_into_file_line_path_and_problem(source, text, expected):
    assert parse_problem(source, text) == expected
    # The library's words and the command's agree on where the problem is.
    assert expected.where().startswith(f"{expected.file}")


def test_a_problem_repeated_on_many_lines_is_one_line_with_the_count():
    problems = [
        Problem(file="m.jsonl", line=line, path="bot_id", text="required field missing")
        for line in (1, 2, 3, 7)
    ] + [Problem(file="m.jsonl", line=5, path="text", text="required field missing")]
    assert report_lines(problems) == [
        "m.jsonl:1: bot_id: required field missing (4 lines: 1-3, 7)",
        "m.jsonl:5: text: required field missing",
    ]


def test_a_flood_of_distinct_problems_is_cut_with_a_count():
    problems = [Problem(file="m.jsonl", line=n, text=f"problem {n}") for n in range(1, 31)]
    lines = report_lines(problems)
    assert len(lines) == 21
    assert lines[-1] == "… and 10 more problems"


@pytest.mark.parametrize(
    "args",
    [
        ["render", "nope.json"],
        ["render", str(AT_QUESTION), "--previous", "nope.json"],
        ["render", str(AT_QUESTION), "--store", "nope.json"],
        ["route", "nope.json"],
        ["store", "import", "nope.json", "--store", "s.sqlite3"],
        ["store", "stats", "--store", "nope.json"],
        ["import", "memories", "nope.json", "--store", "s.sqlite3", "--bot", "1", "--group", "2"],
        ["replay", "nope.json", "--no-progress"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_every_missing_input_file_is_the_same_error_with_status_2(args):
    result = invoke(*args)
    assert (result.exit_code, result.output) == (2, "Error: nope.json: no such file\n")
    assert not Path("s.sqlite3").exists()


def test_a_missing_config_file_is_a_config_error_with_status_1():
    result = invoke("sections", "--config", "nope.toml")
    assert (result.exit_code, result.output) == (1, "Error: nope.toml: no such file\n")


def test_a_directory_given_as_a_file_says_so():
    result = invoke("render", str(EXAMPLES))
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {EXAMPLES}: is a directory, not a file\n",
    )


def test_import_without_scope_reports_each_missing_field_once_with_its_lines(tmp_path):
    data = EXAMPLES / "data" / "memories.jsonl"
    result = invoke("import", "memories", str(data), "--store", str(tmp_path / "s.sqlite3"))
    assert result.exit_code == 2
    total = len(data.read_text(encoding="utf-8").splitlines())
    assert result.output.splitlines() == [
        f"Error: {data}:1: bot_id: required field missing (give --bot or a bot_id field) "
        f"({total} lines: 1-{total})",
        f"Error: {data}:1: group_id: required field missing (give --group or a group_id field) "
        "(13 lines: 1-13)",
    ]
    assert not (tmp_path / "s.sqlite3").exists()


def test_line_numbers_read_the_same_in_data_files_and_event_logs(tmp_path):
    data = tmp_path / "m.jsonl"
    data.write_text('{"kind": "teaching", "text": "x"}\n{"kind": "teaching"}\n', encoding="utf-8")
    imported = invoke("import", "memories", str(data), "--bot", "1", "--group", "2")
    events = tmp_path / "ev.jsonl"
    events.write_text('\n{"event": "message"}\n', encoding="utf-8")
    stored = invoke("store", "import", str(events), "--store", str(tmp_path / "s.sqlite3"))
    assert imported.output == f"Error: {data}:2: text: required field missing\n"
    assert stored.output.startswith(f"Error: {events}:2: ")
    assert (imported.exit_code, stored.exit_code) == (2, 2)


def test_every_problem_of_an_invalid_turn_file_is_its_own_error_line(tmp_path):
    turn = json.loads(AT_QUESTION.read_text(encoding="utf-8"))
    del turn["bot"]["name"]
    turn["colour"] = "red"
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    result = invoke("render", str(path))
    assert result.exit_code == 2
    assert sorted(result.output.splitlines()) == [
        f"Error: {path}: bot.name: required field missing",
        f"Error: {path}: extra fields found (colour)",
    ]


def test_a_blank_bot_id_in_a_turn_file_is_an_input_error(tmp_path):
    turn = json.loads(AT_QUESTION.read_text(encoding="utf-8"))
    turn["bot"]["id"] = " "
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    result = invoke("render", str(path))
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {path}: bot: id must be the bot's account id, not blank\n",
    )


@pytest.mark.parametrize(("option", "value"), [("--bot", ""), ("--bot", " "), ("--group", " ")])
def test_import_refuses_a_blank_scope_as_a_usage_error(tmp_path, option, value):
    data = tmp_path / "m.jsonl"
    data.write_text('{"kind": "teaching", "text": "x", "bot_id": "1", "group_id": "2"}\n')
    result = invoke("import", "memories", str(data), option, value)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}': must not be blank" in result.output
    assert result.output.count("Error:") == 1


def test_import_takes_an_empty_group_as_the_private_chat_scope(tmp_path):
    data = tmp_path / "m.jsonl"
    data.write_text('{"kind": "teaching", "text": "x"}\n', encoding="utf-8")
    result = invoke("import", "memories", str(data), "--bot", "1", "--group", "", "--store", "s.db")
    assert result.exit_code == 0, result.output


def test_a_store_failure_repeated_per_event_is_warned_once_with_a_count(tmp_path, monkeypatch):
    from promptweave.store.sessions_sqlite import SQLiteGroupLog
    from promptweave.store.sqlite import StoreUnavailableError

    def broken(self, bot_id, group_id, message):
        raise StoreUnavailableError("disk full")

    monkeypatch.setattr(SQLiteGroupLog, "append_group_message", broken)
    log = EXAMPLES / "logs" / "lunch_chat.jsonl"
    result = invoke("store", "import", str(log), "--store", "s.sqlite3")
    assert result.exit_code == 1
    message = "warning: importing a message of group 20001 failed: disk full"
    reply = "warning: recording a reply of bot 10001 failed: disk full"
    assert result.stderr.splitlines() == [
        message,
        reply,
        f"{message} (repeated 8 more times)",
        f"{reply} (repeated once more)",
        "Error: s.sqlite3: 11 events could not be stored (the store failed; "
        "see the warnings above)",
    ]


def test_a_bad_line_of_a_replayed_log_is_an_input_error(tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_text('{"event": "message", "bot_id": "1"}\n', encoding="utf-8")
    result = invoke("replay", str(log), "--no-progress")
    assert (result.exit_code, result.output.splitlines()) == (
        2,
        [
            f"Error: {log}:1: group_id: required field missing",
            f"Error: {log}:1: message: required field missing",
        ],
    )
