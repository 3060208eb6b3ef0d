"""The evaluation set: every labelled message must get its expected decision; and the route CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from base_support import DATA, ROOT
from click.testing import CliRunner
from routing_support import TEST_BOT, make_runtime

from promptweave import TurnFileError
from promptweave.cli.main import cli
from promptweave.cli.route_batch import confusion_table, decide_cases, load_route_file

EVAL = DATA / "routing_eval.jsonl"
EXAMPLES = ROOT / "examples" / "turns"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI finds no promptweave.toml, no entry points, and writes its store in tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROMPTWEAVE_CONFIG", raising=False)
    monkeypatch.setenv("PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture(scope="module")
def results():
    return decide_cases(make_runtime(), load_route_file(EVAL))


def test_the_evaluation_set_has_at_least_150_labelled_messages(results):
    assert len([r for r in results if r.case.expect is not None]) >= 150


def test_the_evaluation_set_covers_every_action_and_every_gate(results):
    decided = {(r.decision.action.value, r.decision.reason) for r in results}
    actions = {action for action, _ in decided}
    assert actions == {"reply", "pass", "tool", "follow_up"}
    reasons = {reason for _, reason in decided}
    for reason in (
        "shut_up", "face", "noise", "incomplete", "bystander", "short", "group_switched_off",
        "shut_up_silence", "cooldown", "necessity_below_threshold", "required_tool_intent",
        "rule_short_vent_ack", "rule_reply_quote", "rule_low_value_social_pass",
        "rule_follow_up_missing_object", "rule_reply_obligation", "rule_default_reply",
    ):  # fmt: skip
        assert reason in reasons


def test_every_label_of_the_evaluation_set_matches(results):
    mismatches = [
        f"line {r.case.line} {r.case.id}: {r.decision.trace()}" for r in results if not r.matched
    ]
    assert not mismatches, "\n".join(mismatches)


def test_the_confusion_table_counts_expected_against_decided(results):
    table = confusion_table(results)
    assert f"{len(results)}/{len(results)} labels matched" in table
    assert "follow_up" in table.splitlines()[0]


def test_a_mismatch_is_listed_under_the_table(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(
        json.dumps({"id": "x1", "text": "[doge]", "expect": {"action": "reply"}}) + "\n",
        encoding="utf-8",
    )
    table = confusion_table(decide_cases(make_runtime(), load_route_file(path, bot=TEST_BOT)))
    assert "0/1 labels matched" in table
    assert "x1: expected reply/*, decided pass/face" in table


def test_cli_route_prints_one_decision_per_line():
    result = CliRunner().invoke(cli, ["route", str(EVAL)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == len(load_route_file(EVAL))
    assert lines[0].split("\t")[:4] == [
        "q01",
        "reply/answer/plain",
        "rule",
        "rule_reply_obligation",
    ]
    assert all(line.endswith("ok") for line in lines)


def test_cli_route_json_and_confusion():
    result = CliRunner().invoke(cli, ["route", str(EVAL), "--json", "--confusion"])
    assert result.exit_code == 0
    first = json.loads(result.stdout.splitlines()[0])
    assert first["decision"]["reason"] == "rule_reply_obligation" and first["matched"] is True
    assert "labels matched" in result.stderr


def test_cli_route_reads_whole_turns_and_streams(tmp_path):
    turns = [
        json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
        for name in ("at_question.json", "ambient_remark.json")
    ]
    turns[0]["expect"] = {"action": "reply", "reason": "rule_reply_obligation"}
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in turns), encoding="utf-8")
    result = CliRunner().invoke(cli, ["route", str(path), "--stream", "--seed", "3"])
    assert result.exit_code == 0, result.output
    first, second = result.output.splitlines()
    assert first.startswith("9108\treply/answer/plain") and first.endswith("ok")
    assert second.split("\t")[3] == "necessity_below_threshold"


def test_a_bad_line_names_the_file_line_and_key(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "好"}\n{"text": "好", "colour": "red"}\n', encoding="utf-8")
    with pytest.raises(TurnFileError, match=r"bad.jsonl:2: extra fields found \(colour\)"):
        load_route_file(path, bot=TEST_BOT)
    result = CliRunner().invoke(cli, ["route", str(path)])
    assert result.exit_code == 2 and "bad.jsonl:2" in result.output


def test_cli_render_shows_the_decision_and_its_trace():
    result = CliRunner().invoke(cli, ["render", str(EXAMPLES / "ambient_remark.json")])
    assert result.exit_code == 0, result.output
    decision = result.output.split("==== decision ====")[1]
    assert '"reason": "necessity_below_threshold"' in decision
    assert "necessity: -30 / 50  terms: low_value_social-35 length+5" in decision
    assert "memory: persistent=no" in decision


def test_cli_render_json_has_the_route_trace():
    result = CliRunner().invoke(
        cli, ["render", str(EXAMPLES / "at_question.json"), "--format", "json"]
    )
    data = json.loads(result.output)
    assert data["decision"]["reason"] == "rule_reply_obligation"
    assert data["trace"]["route"]["necessity"]["bypassed"] == "addressed"


def test_compact_lines_take_the_bot_and_group_of_the_defaults_line_before_them(tmp_path):
    from promptweave import Bot

    path = tmp_path / "route.jsonl"
    lines = [
        {"text": "在吗"},
        {"defaults": {"bot": {"id": "7", "name": "阿卷", "aliases": ["卷卷"]}, "group_id": "88"}},
        {"text": "卷卷 在吗"},
        {"text": "在吗", "bot": {"id": "9", "name": "小灯"}, "group_id": "99"},
    ]
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n")
    first, second, third = load_route_file(path, bot=Bot(id="1", name="小织"))
    assert (first.turn.bot.name, first.turn.group_id) == ("小织", "20001")
    assert (second.turn.bot.id, second.turn.bot.aliases, second.turn.group_id) == (
        "7",
        ("卷卷",),
        "88",
    )
    assert (third.turn.bot.name, third.turn.group_id) == ("小灯", "99")


def test_a_compact_line_without_any_bot_or_a_crowded_defaults_line_is_an_error(tmp_path):
    from promptweave import TurnFileError

    path = tmp_path / "route.jsonl"
    path.write_text(json.dumps({"text": "在吗"}) + "\n", encoding="utf-8")
    with pytest.raises(TurnFileError, match=r"route\.jsonl:1.*no bot"):
        load_route_file(path)
    path.write_text(json.dumps({"defaults": {}, "text": "在吗"}) + "\n", encoding="utf-8")
    with pytest.raises(TurnFileError, match="a defaults line holds nothing else"):
        load_route_file(path, bot=TEST_BOT)
    path.write_text(json.dumps({"defaults": {"robot": {}}}) + "\n", encoding="utf-8")
    with pytest.raises(TurnFileError, match="robot"):
        load_route_file(path, bot=TEST_BOT)


def test_cli_route_names_the_default_bot_after_the_persona_pack():
    from promptweave.cli.route_batch import default_route_bot

    bot = default_route_bot(make_runtime().persona)
    assert bot.name == make_runtime().persona.persona.name
    assert bot.name not in bot.aliases
