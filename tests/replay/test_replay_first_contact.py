"""What a new operator meets first in ``promptweave replay`` (``docs/replay.md``): a log with
nothing to replay and a report folder that does not exist are one error line before anything
runs; image-only messages show their ``[图片]`` marks; a model that gives no answer is named
with its cause and fix in the JSONL, the summary and the report; the report says in which time
zone its times are and when the necessity score was not applied."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from promptweave.cli.main import cli
from promptweave.replay.report import render_report

T0 = 1796378520  # 2026-12-04 10:02:00 UTC, 18:02:00 in Asia/Shanghai


def _message(message_id: int, segments: list[dict[str, Any]], at_offset: int = 0) -> str:
    return json.dumps(
        {
            "post_type": "message",
            "message_type": "group",
            "time": T0 + at_offset,
            "self_id": 10001,
            "sub_type": "normal",
            "message_id": message_id,
            "user_id": 30045,
            "group_id": 20001,
            "message": segments,
            "raw_message": "",
            "font": 0,
            "sender": {"user_id": 30045, "nickname": "北风", "card": "", "role": "member"},
        },
        ensure_ascii=False,
    )


IMAGE = {"type": "image", "data": {"file": "a.png", "url": "https://img.example/a.png"}}
OTHER_IMAGE = {"type": "image", "data": {"file": "b.png", "url": "https://img.example/b.png"}}
AT_BOT = {"type": "at", "data": {"qq": "10001"}}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": value}}


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["replay", "--no-progress", *args])


def _log(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ((), "no message events to replay (the file is empty)"),
        (("",), "no message events to replay (the file is empty)"),
        (
            ('{"post_type":"meta_event","meta_event_type":"heartbeat","self_id":1,"time":1}',),
            "no message events to replay (1 meta, notice or request events, nothing else)",
        ),
    ],
)
def test_a_log_with_no_message_events_is_one_error_line(
    tmp_path: Path, lines: tuple[str, ...], said: str
) -> None:
    result = _run(str(_log(tmp_path, *lines)))
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    [line] = result.output.splitlines()
    assert line.startswith("Error: ") and said in line
    assert "Traceback" not in result.output


def test_a_report_into_a_missing_folder_fails_before_the_replay(tmp_path: Path) -> None:
    log = _log(tmp_path, _message(1, [_text("有人在吗")]))
    report = tmp_path / "missing" / "replay.html"
    result = _run(str(log), "--report", str(report))
    assert result.exit_code == 1
    [line] = result.output.splitlines()  # no "replaying …" line: nothing ran
    assert "cannot write the report: the folder" in line and "does not exist" in line
    assert not report.parent.exists()


def test_an_image_only_message_shows_its_marks_in_text_jsonl_and_report(tmp_path: Path) -> None:
    log = _log(
        tmp_path,
        _message(1, [IMAGE, OTHER_IMAGE]),
        _message(2, [IMAGE, _text("看这个")], at_offset=10),
    )
    text = _run(str(log))
    assert text.exit_code == 0, text.output
    assert "18:02:00 [20001] 北风: [图片][图片]" in text.output
    assert "18:02:10 [20001] 北风: [图片] 看这个" in text.output
    jsonl = _run(str(log), "--format", "jsonl")
    first, second = (json.loads(line) for line in jsonl.output.splitlines()[:2])
    assert (first["text"], first["images"]) == ("[图片][图片]", 2)
    assert (second["text"], second["images"]) == ("[图片] 看这个", 1)
    report = tmp_path / "replay.html"
    assert _run(str(log), "--report", str(report)).exit_code == 0
    page = report.read_text(encoding="utf-8")
    assert "<td class='text'>[图片][图片]</td>" in page
    assert "times in the bot's time zone, Asia/Shanghai" in page


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_model_that_gives_no_answer_is_named_in_the_jsonl_summary_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "PROMPTWEAVE_API_KEY",
        "OPENAI_API_KEY",
        "PROMPTWEAVE_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "promptweave.toml"
    config.write_text(
        f'[provider]\napi = "openai_chat"\nmodel = "m"\n'
        f'base_url = "http://127.0.0.1:{_closed_port()}/v1"\nmax_attempts = 1\n',
        encoding="utf-8",
    )
    log = _log(tmp_path, _message(1, [AT_BOT, _text(" 周末有什么活动吗？")]))
    args = (str(log), "--model", "openai", "--config", str(config), "--no-learn")
    jsonl = _run(*args, "--format", "jsonl")
    assert jsonl.exit_code == 0, jsonl.output
    record, summary = (json.loads(line) for line in jsonl.output.splitlines())
    assert record["status"] == "failed"
    assert record["model_failure"]["cause"] == "unreachable"
    assert "ConnectError" in record["model_failure"]["reason"]
    assert summary["model_failures"]["unreachable"]["count"] == 1
    assert summary["model_failures"]["unreachable"]["first"] == 0
    text = _run(*args)
    assert (
        "the model gave no answer (unreachable) 1 times, first at #0: ConnectError" in text.output
    )
    assert "Fix: start the model server, or correct [provider] base_url" in text.output
    report = tmp_path / "replay.html"
    assert _run(*args, "--report", str(report)).exit_code == 0
    page = report.read_text(encoding="utf-8")
    assert "the model gave no answer (unreachable): ConnectError" in page
    assert "fix: start the model server" in page
    assert "the model gave no answer <b>unreachable</b> 1 times (first at #0)" in page


def test_an_addressed_message_records_that_it_bypassed_the_necessity_score(tmp_path: Path) -> None:
    log = _log(tmp_path, _message(1, [AT_BOT, _text(" 嗯")]))
    result = _run(str(log), "--format", "jsonl", "--no-learn")
    record = json.loads(result.output.splitlines()[0])
    assert record["necessity"]["bypassed"] == "addressed"


def _reply_record(score: int, bypassed: str | None) -> dict[str, Any]:
    return {
        "type": "message",
        "index": 0,
        "time": "2026-12-04T18:02:00+08:00",
        "group_id": "20001",
        "sender_id": "30045",
        "sender_name": "北风",
        "text": "@小织 嗯",
        "status": "replied",
        "action": "reply",
        "reason": "rule_reply_obligation",
        "necessity": {"score": score, "threshold": 50, "bypassed": bypassed, "terms": []},
        "bubbles": ["在的"],
    }


def test_the_report_says_when_a_reply_below_the_threshold_bypassed_the_score() -> None:
    page = render_report([_reply_record(20, "addressed")], title="t")
    assert "<b class='under'>20</b> / 50" in page
    assert (
        "below the threshold, not applied: the message addresses the bot (@, its name, a reply "
        "to it), which bypasses the score" in page
    )
    assert "not applied" not in render_report([_reply_record(80, "addressed")], title="t")
    assert "not applied" not in render_report([_reply_record(20, None)], title="t")


def test_the_report_shows_learned_times_in_the_bots_zone_and_names_it() -> None:
    summary = {
        "type": "summary",
        "model": "offline",
        "timezone": "Asia/Shanghai",
        "learning": {
            "enabled": True,
            "learners": ["teachings"],
            "runs": {"learned": 1},
            "groups": [
                {
                    "group_id": "20001",
                    "counts": {"teaching": 1},
                    "items": [
                        {
                            "kind": "teaching",
                            "count": 1,
                            "source_message_ids": ["m1"],
                            "learned_at": "2026-12-04T12:19:15+00:00",
                        }
                    ],
                }
            ],
        },
    }
    page = render_report([_reply_record(80, None), summary], title="t")
    assert "times in the bot's time zone, Asia/Shanghai" in page
    assert ">12-04 20:19:15</span>" in page
    assert ">12-04 12:19:15</span>" not in page


def test_a_log_whose_every_message_is_rejected_says_why_in_its_error_line(tmp_path: Path) -> None:
    event = json.loads(_message(1, [_text("有人在吗")]))
    del event["group_id"]  # a group message the live loop rejects
    result = _run(str(_log(tmp_path, json.dumps(event, ensure_ascii=False))))
    assert result.exit_code == 2
    [error] = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert "no message events to replay (1 rejected as the live loop would" in error
    assert "has no group_id" in error
    assert "Traceback" not in result.output
