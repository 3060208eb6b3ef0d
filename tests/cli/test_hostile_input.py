"""Hostile input files: each gives one clean error line (exit status 2) or its documented
result, never a traceback; an error line echoes at most a bounded part of the input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from promptweave.cli.main import cli
from promptweave.text.sanitize import ECHO_MAX_CHARS, ERROR_MAX_CHARS, shorten_error

DEEP = "[" * 100_000 + "]" * 100_000
EVENT = {
    "event": "message",
    "bot_id": "10001",
    "group_id": "20001",
    "message": {"sender_id": "3", "text": "在吗", "time": "2026-11-29T12:00:00+08:00"},
}
ONEBOT = {
    "post_type": "message",
    "message_type": "group",
    "self_id": 10001,
    "user_id": 30017,
    "group_id": 20001,
    "message": "大家好",
    "time": 1764390000,
    "message_id": 5,
}


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def error_lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error:")]


def assert_one_error(result: Result, *phrases: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    lines = error_lines(result)
    assert len(lines) == 1, result.output
    for phrase in phrases:
        assert phrase in lines[0]
    return lines[0]


@pytest.mark.parametrize("first", [json.dumps(EVENT), json.dumps({"text": "在吗"})])
def test_a_byte_that_is_not_utf8_past_the_first_8kb_is_the_same_clean_error(tmp_path, first):
    body = "\n".join([first] * 400).encode()
    assert len(body) > 8192
    late = tmp_path / "late.jsonl"
    late.write_bytes(body + b'\n{"text": "caf\xe9"}\n')
    early = tmp_path / "early.jsonl"
    early.write_bytes(b'{"text": "caf\xe9"}\n' + body + b"\n")
    assert_one_error(invoke("route", late), "not UTF-8 at line 401 column 14 (byte 0xe9)")
    assert_one_error(invoke("route", early), "not UTF-8 at line 1 column 14 (byte 0xe9)")


@pytest.mark.parametrize("where", ["first", "second"])
def test_a_route_file_nested_100000_levels_deep_is_one_error_line(tmp_path, where):
    lines = [DEEP] if where == "first" else [json.dumps({"text": "在吗"}), DEEP]
    route = tmp_path / "deep.jsonl"
    route.write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = assert_one_error(invoke("route", route), "nested deeper")
    assert f"deep.jsonl:{len(lines)}" in line


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
@pytest.mark.parametrize(
    ("kind", "record"),
    [
        ("memories", {"kind": "group_event", "text": "x"}),
        ("topic_summaries", {"user_id": "3", "text": "x"}),
    ],
)
def test_an_import_dated_at_the_edge_of_the_calendar_is_one_error_line(
    tmp_path, when, kind, record
):
    data = tmp_path / f"{kind}.jsonl"
    data.write_text(json.dumps({**record, "created_at": when}) + "\n", encoding="utf-8")
    store = tmp_path / "s.sqlite3"
    result = invoke("import", kind, data, "--store", store, "--bot", "1", "--group", "2")
    assert_one_error(result, f"{kind}.jsonl:1", "created_at", "outside the calendar in UTC")


def test_an_import_dated_just_inside_the_calendar_is_imported(tmp_path):
    data = tmp_path / "memories.jsonl"
    record = {"kind": "group_event", "text": "x", "created_at": "0001-01-01T00:00:00Z"}
    data.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = invoke(
        "import", "memories", data, "--store", tmp_path / "s.sqlite3", "--bot", "1", "--group", "2"
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("self_id", ["", "  ", None])
def test_a_replayed_event_with_a_blank_self_id_is_one_error_line(tmp_path, self_id):
    log = tmp_path / "chat.jsonl"
    log.write_text(json.dumps({**ONEBOT, "self_id": self_id}) + "\n", encoding="utf-8")
    assert_one_error(invoke("replay", log, "--no-learn"), "chat.jsonl:1", "self_id", "--bot")
    assert invoke("replay", log, "--no-learn", "--bot", "10001").exit_code == 0


def test_a_replayed_group_event_without_a_group_is_rejected_and_said_in_the_summary(tmp_path):
    no_group = {key: value for key, value in ONEBOT.items() if key != "group_id"}
    guild = {**ONEBOT, "message_type": "guild", "guild_id": "1", "channel_id": "2"}
    log = tmp_path / "chat.jsonl"
    lines = [ONEBOT, {**no_group, "message_id": 6}, {**guild, "message_id": 7}]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = invoke("replay", log, "--no-learn", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    summary = records[-1]
    assert summary["messages"] == 1 and summary["rejected"] == 2
    assert [r["line"] for r in summary["rejected_lines"]] == [f"{log}:2", f"{log}:3"]
    assert "has no group_id" in summary["rejected_lines"][0]["reason"]
    assert "'guild'" in summary["rejected_lines"][1]["reason"]
    # no record of a private chat was made of them
    assert all(r.get("group_id") == "20001" for r in records[:-1])
    report = tmp_path / "report.html"
    text = invoke("replay", log, "--no-learn", "--report", report)
    assert "rejected, not replayed (as the live loop would): 2" in text.output
    assert f"{log}:2: OneBot group message has no group_id" in text.output
    page = report.read_text(encoding="utf-8")
    assert "<div class='label'>rejected</div><div class='value'>2</div>" in page
    assert "OneBot group message has no group_id" in page


def test_a_store_log_event_with_a_blank_group_is_rejected_not_a_private_chat(tmp_path):
    log = tmp_path / "events.jsonl"
    blank = {**EVENT, "group_id": " ", "message": {**EVENT["message"], "id": "m2"}}
    log.write_text(json.dumps(EVENT) + "\n" + json.dumps(blank) + "\n", encoding="utf-8")
    result = invoke("replay", log, "--no-learn", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.splitlines()[-1])
    assert (summary["messages"], summary["rejected"]) == (1, 1)
    assert summary["rejected_lines"][0]["line"] == f"{log}:2"


def test_an_error_line_echoes_at_most_the_documented_length_of_the_input(tmp_path):
    huge = "x" * 200_000
    route = tmp_path / "r.jsonl"
    route.write_text(json.dumps({"text": "在吗", "sender_id": huge + "\udc00"}) + "\n")
    line = assert_one_error(invoke("route", route), "lone surrogate")
    assert len(line) < ERROR_MAX_CHARS + 100
    assert "x" * (ECHO_MAX_CHARS + 1) not in line
    assert "(200006 characters) holds a lone surrogate" in line  # the repr, escape included


def test_shorten_error_cuts_quoted_values_and_keeps_words_around_them():
    text = f"group_id {'a' * 500!r} holds a lone surrogate"
    short = shorten_error(text)
    assert short.startswith("group_id 'aaa") and short.endswith("holds a lone surrogate")
    assert "(500 characters)" in short and len(short) < 150
    plain = "the bot's answer isn't " + "y" * 100 + " here"
    assert shorten_error(plain) == plain  # apostrophes are no quotes
    assert len(shorten_error("z" * 10_000)) <= ERROR_MAX_CHARS + 30
    assert shorten_error("short 'x'") == "short 'x'"


def test_a_replayed_log_nested_too_deep_or_not_utf8_is_one_error_line(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP + "\n", encoding="utf-8")
    assert_one_error(invoke("replay", deep, "--no-learn"), "deep.jsonl:1", "nested deeper")
    late = tmp_path / "late.jsonl"
    body = "\n".join([json.dumps(ONEBOT)] * 100).encode()
    late.write_bytes(body + b'\n{"post_type": "caf\xe9"}\n')
    assert_one_error(invoke("replay", late, "--no-learn"), "not UTF-8 at line 101 column 19")
