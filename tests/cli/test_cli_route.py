"""``promptweave route``: what it accepts and refuses."""

from __future__ import annotations

import json

import pytest
from base_support import DATA, ROOT
from click.testing import CliRunner

from promptweave import Bot
from promptweave.cli.event_cases import is_event_log, load_route_input
from promptweave.cli.main import cli

EXAMPLES = ROOT / "examples"
LOG = EXAMPLES / "logs" / "lunch_chat.jsonl"
BOT = Bot(id="10001", name="小织", aliases=("织织",))


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"text": 1}, "text: expected a string, got int"),
        (
            {"text": "早", "context": [{"text": ["嗯"]}]},
            "context[0].text: expected a string, got list",
        ),
        (
            {
                "bot": {"id": "10001", "name": "小织"},
                "message": {"sender_id": 1, "text": 2, "time": "2026-11-29T12:00:00+08:00"},
            },
            "message.text: expected a string, got int",
        ),
    ],
)
def test_route_refuses_a_text_that_is_not_a_string(tmp_path, line, problem):
    route = tmp_path / "r.jsonl"
    route.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    result = invoke("route", str(route))
    assert (result.exit_code, result.output) == (2, f"Error: {route}:1: {problem}\n")


def test_a_turn_file_text_that_is_not_a_string_is_an_input_error(tmp_path):
    turn = json.loads((EXAMPLES / "turns" / "ambient_remark.json").read_text(encoding="utf-8"))
    turn["message"]["text"] = 1
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    result = invoke("render", str(path))
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {path}: message.text: expected a string, got int\n",
    )


def test_store_import_refuses_a_reply_text_that_is_not_a_string(tmp_path):
    events = tmp_path / "ev.jsonl"
    events.write_text(
        '{"event": "bot_reply", "bot_id": "1", "group_id": "2", "text": 7, '
        '"time": "2026-11-29T08:00:05+08:00"}\n',
        encoding="utf-8",
    )
    result = invoke("store", "import", str(events), "--store", "s.sqlite3")
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {events}:1: text: expected a string, got int\n",
    )


def test_the_store_event_log_is_recognised_and_a_route_file_is_not():
    assert is_event_log(LOG)
    assert not is_event_log(DATA / "routing_eval.jsonl")


def test_route_decides_every_message_event_of_an_event_log():
    messages = [
        json.loads(line)["message"]["id"]
        for line in LOG.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["event"] == "message"
    ]
    result = invoke("route", str(LOG))
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.output.splitlines()] == messages
    rows = [json.loads(line) for line in invoke("route", str(LOG), "--json").output.splitlines()]
    decided = {row["id"]: row["decision"]["action"] for row in rows}
    # An @ of the bot and an answer to its reply are answered; group chatter is not.
    assert (decided["9308"], decided["9311"], decided["9301"]) == ("reply", "reply", "pass")


def test_an_event_log_case_sees_the_earlier_messages_and_replies_of_its_group():
    cases = {case.id: case for case in load_route_input(LOG, bot=BOT)}
    last = cases["9311"]
    assert last.line == 11
    assert last.turn.bot == BOT
    assert last.turn.group_id == "20001"
    recent = [(m.id, m.sender_id) for m in last.turn.recent_messages]
    assert recent[-3:] == [("9308", "30022"), ("9309", "10001"), ("9310", "30017")]
    assert [(h.role, h.content) for h in last.turn.history] == [
        ("user", "@小织 你推荐一个"),
        ("assistant", "青柠说的那家米线可以试试，听说汤底是现熬的"),
    ]
    assert cases["9301"].turn.recent_messages == ()


def test_a_bad_event_log_line_is_named_like_a_route_file_line(tmp_path):
    log = tmp_path / "ev.jsonl"
    log.write_text(
        LOG.read_text(encoding="utf-8").split("\n")[0] + "\n\n" + '{"event": "reaction"}\n',
        encoding="utf-8",
    )
    result = invoke("route", str(log))
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {log}:3: unknown event 'reaction' (expected message or bot_reply)\n",
    )


@pytest.mark.parametrize(
    "command", [["route", "{log}"], ["store", "import", "{log}", "--store", "s.sqlite3"]]
)
def test_an_event_with_a_blank_bot_id_is_an_input_error(tmp_path, command):
    log = tmp_path / "ev.jsonl"
    event = json.loads(LOG.read_text(encoding="utf-8").split("\n")[0])
    event["bot_id"] = " "
    log.write_text(json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    result = invoke(*(part.format(log=log) for part in command))
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {log}:1: bot_id must be the bot's account id, not blank\n",
    )
