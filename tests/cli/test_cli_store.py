"""``promptweave store import``, ``store stats`` and ``render --store``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import attrs
from base_support import ROOT
from click.testing import CliRunner
from timeline_support import timeline_lines

from promptweave import ChatMessage, load_turn_file
from promptweave._convert import structure
from promptweave.cli.main import cli
from promptweave.text.rules import IMAGE_MARK

EXAMPLES = ROOT / "examples"
LOG = EXAMPLES / "logs" / "lunch_chat.jsonl"
TURN = EXAMPLES / "turns" / "from_store.json"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _logged(message_id: str) -> ChatMessage:
    """The message ``message_id`` of the example log."""
    for line in LOG.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "message" and event["message"]["id"] == message_id:
            return structure(event["message"], ChatMessage, str(LOG))
    raise LookupError(message_id)


def test_store_import_then_render_reads_timeline_history_and_quoted_text(tmp_path: Path) -> None:
    store = str(tmp_path / "lunch.sqlite3")
    code, out, _ = invoke("store", "import", str(LOG), "--store", store)
    assert code == 0, out
    assert "9 messages, 2 bot replies, 0 skipped" in out

    code, out, _ = invoke("render", str(TURN), "--store", store, "--format", "json")
    assert code == 0, out
    rendered = json.loads(out)
    prompt = rendered["system_prompt"]
    # The timeline shows the imported messages, one with its reply to the bot, one with its image.
    turn = load_turn_file(TURN)
    bot_reply = attrs.evolve(
        _logged("9310"),
        id="9309",
        sender_id=turn.bot.id,
        sender_name="",
        text="青柠说的那家米线可以试试，听说汤底是现熬的",
        reply_to=None,
    )
    shown = prompt.splitlines()
    assert timeline_lines(turn, bot_reply, _logged("9310"))[-1] in shown
    [with_image] = timeline_lines(turn, _logged("9307"))
    assert IMAGE_MARK in with_image and with_image in shown
    assert "【小织刚才说】\n青柠说的那家米线可以试试" in prompt
    assert "哪一家？就是地铁站旁边那家吗" not in prompt
    contents = [m["content"] for m in rendered["messages"]]
    assert contents[0].endswith("@小织 你推荐一个")
    assert contents[1] == "青柠说的那家米线可以试试，听说汤底是现熬的"
    assert rendered["trace"]["messages"]["sources"] == {
        "timeline": "store",
        "quoted_bot_text": "bot_reply_context",
        # the quoted bot message was found in the timeline, without an image
        "quoted_message_images": "recent_messages",
        "history": "store",
    }


def test_render_leaves_the_bot_reply_context_order_alone(tmp_path: Path) -> None:
    store = tmp_path / "lunch.sqlite3"
    invoke("store", "import", str(LOG), "--store", str(store))
    turn = json.loads(TURN.read_text(encoding="utf-8"))
    turn["message"]["reply_to"] = "9304"  # the older of the two bot messages
    turn_file = tmp_path / "turn.json"
    turn_file.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")

    def order() -> list[tuple[int, str]]:
        with sqlite3.connect(store) as connection:
            rows = connection.execute("SELECT seq, message_id FROM bot_reply_context ORDER BY seq")
            return list(rows)

    before = order()
    code, out, _ = invoke("render", str(turn_file), "--store", str(store), "--format", "json")
    assert code == 0, out
    assert "【小织刚才说】\n我不用吃饭哈哈" in json.loads(out)["system_prompt"]
    assert order() == before


def test_importing_twice_skips_what_is_stored(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite3")
    invoke("store", "import", str(LOG), "--store", store)
    code, out, _ = invoke("store", "import", str(LOG), "--store", store)
    assert code == 0
    assert out.endswith(": 0 messages, 0 bot replies, 11 skipped, 0 summaries written\n")
    code, out, _ = invoke("store", "stats", "--store", store, "--json")
    assert json.loads(out)["tables"]["group_messages"] == 11
    assert json.loads(out)["schema_versions"] == {
        "learning": 1,
        "retrieval": 2,
        "routing": 4,
        "sessions": 3,
        "turn_log": 1,
    }


def test_a_second_import_counts_only_its_new_events(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite3")
    invoke("store", "import", str(LOG), "--store", store)
    more = tmp_path / "more.jsonl"
    new_events = [
        {
            "event": "message",
            "bot_id": "10001",
            "group_id": "20001",
            "message": {
                "id": "9312",
                "sender_id": "30022",
                "text": "@小织 那家几点开门",
                "time": "2026-11-29T12:20:00+08:00",
            },
        },
        {
            "event": "bot_reply",
            "bot_id": "10001",
            "group_id": "20001",
            "text": "十一点就开了",
            "message_id": "9313",
            "time": "2026-11-29T12:20:09+08:00",
            "answering": "9312",
        },
    ]
    more.write_text(
        LOG.read_text(encoding="utf-8")
        + "".join(json.dumps(event, ensure_ascii=False) + "\n" for event in new_events),
        encoding="utf-8",
    )
    code, out, _ = invoke("store", "import", str(more), "--store", store)
    assert code == 0
    assert out.endswith(": 1 messages, 1 bot replies, 11 skipped, 0 summaries written\n")


def test_render_without_store_writes_no_file(tmp_path: Path) -> None:
    code, _, _ = invoke("render", str(TURN))
    assert code == 0
    assert list(Path.cwd().glob("*.sqlite3")) == []


def test_render_with_missing_store_is_an_input_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("render", str(TURN), "--store", "nope.sqlite3")
    assert code == 2 and err == "Error: nope.sqlite3: no such file\n"


def test_bad_import_line_names_file_and_line(tmp_path: Path) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text(
        '{"event": "message", "bot_id": "1", "group_id": "2", "message": {"sender_id": "3", "text": "早", "time": "2026-11-29T08:00:00+08:00"}}\n'
        '{"event": "bot_reply", "bot_id": "1", "group_id": "2", "text": "早", "time": "2026-11-29T08:00:05+08:00", "answering": "404"}\n',
        encoding="utf-8",
    )
    code, _, err = invoke("store", "import", str(events), "--store", str(tmp_path / "s.db"))
    assert code == 2
    assert f"{events}:2: answering='404' names no earlier message event" in err
    assert list(tmp_path.glob("s.db*")) == []


def test_a_bad_first_import_line_creates_no_store_file(tmp_path: Path) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text('{"event": "message", "bot_id": "1"\n', encoding="utf-8")
    code, _, err = invoke("store", "import", str(events), "--store", str(tmp_path / "s.db"))
    assert code == 2
    assert f"{events}:1: invalid JSON" in err
    assert list(tmp_path.glob("s.db*")) == []


def test_a_failed_import_leaves_an_existing_store_as_it_was(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite3")
    invoke("store", "import", str(LOG), "--store", store)
    _, before, _ = invoke("store", "stats", "--store", store, "--json")
    events = tmp_path / "bad.jsonl"
    events.write_text(
        '{"event": "message", "bot_id": "1", "group_id": "2", "message": {"id": "n1", "sender_id": "3", "text": "早", "time": "2026-11-29T08:00:00+08:00"}}\n'
        '{"event": "reaction", "bot_id": "1"}\n',
        encoding="utf-8",
    )
    code, _, err = invoke("store", "import", str(events), "--store", store)
    assert code == 2
    assert f"{events}:2: unknown event 'reaction'" in err
    _, after, _ = invoke("store", "stats", "--store", store, "--json")
    assert after == before


def test_import_compresses_long_sessions(tmp_path: Path) -> None:
    lines = []
    for number in range(24):
        minute = f"{number:02d}"
        lines.append(
            {
                "event": "message",
                "bot_id": "1",
                "group_id": "2",
                "message": {
                    "id": f"m{number}",
                    "sender_id": "3",
                    "text": f"我在学吉他第{number}天",
                    "time": f"2026-11-29T08:{minute}:00+08:00",
                },
            }
        )
        lines.append(
            {
                "event": "bot_reply",
                "bot_id": "1",
                "group_id": "2",
                "text": "坚持住",
                "message_id": f"r{number}",
                "time": f"2026-11-29T08:{minute}:10+08:00",
                "answering": f"m{number}",
            }
        )
    events = tmp_path / "long.jsonl"
    events.write_text(
        "\n".join(json.dumps(line, ensure_ascii=False) for line in lines), encoding="utf-8"
    )
    code, out, _ = invoke("store", "import", str(events), "--store", str(tmp_path / "s.db"))
    assert code == 0 and "1 summaries written" in out
    code, out, _ = invoke(
        "store", "import", str(events), "--store", str(tmp_path / "t.db"), "--no-compress"
    )
    assert "0 summaries written" in out
    # Run again, nothing is new: the compressed session is not compressed again, and the
    # uncompressed one is compressed as the replies are replayed.
    code, out, _ = invoke("store", "import", str(events), "--store", str(tmp_path / "s.db"))
    assert out.endswith(": 0 messages, 0 bot replies, 48 skipped, 0 summaries written\n")
    code, out, _ = invoke("store", "import", str(events), "--store", str(tmp_path / "t.db"))
    assert out.endswith(": 0 messages, 0 bot replies, 48 skipped, 1 summaries written\n")


def test_an_import_into_a_failing_store_reports_the_failures_and_exits_1(
    tmp_path: Path, monkeypatch
) -> None:
    from promptweave.store.sessions_sqlite import SQLiteGroupLog
    from promptweave.store.sqlite import StoreUnavailableError

    def broken(self, bot_id, group_id, message):
        raise StoreUnavailableError("disk full")

    monkeypatch.setattr(SQLiteGroupLog, "append_group_message", broken)
    code, out, err = invoke("store", "import", str(LOG), "--store", str(tmp_path / "s.sqlite3"))
    assert code == 1
    assert out.endswith(": 0 messages, 0 bot replies, 0 skipped, 0 summaries written, 11 failed\n")
    assert "11 events could not be stored" in err


def test_store_stats_counts_the_retrieval_data(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = EXAMPLES / "data"
    invoke("import", "auto", str(data), "--store", "s.sqlite3", "--bot", "10001", "--group", "1")
    code, out, _ = invoke("store", "stats", "--store", "s.sqlite3", "--json")
    assert code == 0
    retrieval = json.loads(out)["retrieval"]
    memories = len((data / "memories.jsonl").read_text(encoding="utf-8").splitlines())
    assert retrieval["memories"] == memories
    assert all(count > 0 for count in retrieval.values())
    code, out, _ = invoke("store", "stats", "--store", "s.sqlite3")
    lines = out.splitlines()
    assert lines[:2] == ["s.sqlite3", "  conversation"]
    assert lines[7] == "  retrieval"
    assert lines[8] == f"    memories             {memories:>8}"


def test_store_stats_prices_the_usage_kept_with_each_answer(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "promptweave.toml").write_text(
        '[prices."gpt-4o-mini"]\ninput = 0.15\ncached_input = 0.075\noutput = 0.6\n',
        encoding="utf-8",
    )
    invoke("store", "import", str(LOG), "--store", "s.sqlite3")
    connection = sqlite3.connect("s.sqlite3")
    answers = [
        seq
        for (seq,) in connection.execute(
            "SELECT seq FROM session_turns WHERE role = 'assistant' ORDER BY seq"
        )
    ]
    assert len(answers) == 2
    # The provider reported usage for the first answer (cached tokens too) and nothing for the
    # second; the group log's messages are what the figures per 1,000 messages divide by.
    usage = {"prompt_tokens": 2000, "output_tokens": 40, "cached_tokens": 1500}
    connection.execute(
        "UPDATE session_turns SET usage = ? WHERE seq = ?", (json.dumps(usage), answers[0])
    )
    connection.commit()
    messages = connection.execute("SELECT COUNT(*) FROM group_messages").fetchone()[0]
    connection.close()
    code, out, _ = invoke("store", "stats", "--store", "s.sqlite3", "--json")
    assert code == 0
    spend = json.loads(out)["spend"]
    assert spend["model"] == "gpt-4o-mini"
    assert (spend["answers"], spend["requests"], spend["without_usage"]) == (2, 1, 1)
    assert spend["cached_not_reported"] == 0
    assert (spend["prompt_tokens"], spend["cached_tokens"], spend["output_tokens"]) == (
        2000,
        1500,
        40,
    )
    expected = (500 * 0.15 + 1500 * 0.075 + 40 * 0.6) / 1e6
    assert abs(spend["cost"] - expected) < 1e-12
    assert abs(spend["per_1000_messages"]["cost"] - expected * 1000 / messages) < 1e-12
    assert spend["basis"] == dict.fromkeys(
        ("prompt", "cached", "cache_write", "output"), "reported"
    )
    code, out, _ = invoke("store", "stats", "--store", "s.sqlite3")
    lines = out.splitlines()
    assert (
        "  spend (1 answers with usage, at the price of gpt-4o-mini; tokens prompt reported, "
        "cached reported, output reported):" in lines
    )
    assert "    answers without usage (not priced): 1" in lines


def test_store_stats_counts_apart_the_answers_whose_provider_reported_no_cached_tokens(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite3"
    invoke("store", "import", str(LOG), "--store", str(store))
    connection = sqlite3.connect(store)
    connection.execute(
        "UPDATE session_turns SET usage = ? WHERE role = 'assistant'",
        (json.dumps({"prompt_tokens": 100, "output_tokens": 5}),),
    )
    connection.commit()
    connection.close()
    code, out, _ = invoke("store", "stats", "--store", str(store), "--json")
    spend = json.loads(out)["spend"]
    assert (spend["cached_not_reported"], spend["cached_tokens"]) == (2, 0)
    assert spend["cost"] is None  # no price table: the tokens, but no money
    code, out, _ = invoke("store", "stats", "--store", str(store))
    assert code == 0 and "no price for gpt-4o-mini in [prices]" in out
