"""Hostile and malformed input: a clear error, or a turn that goes on; never a crash or a hang."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from promptweave import Bot, ChatMessage, Config, Promptweave, Turn, TurnFileError
from promptweave.cli.route_batch import load_route_file
from promptweave.config import StoreConfig
from promptweave.store.retrieval_import import read_files
from promptweave.testing import TEST_ENVIRON
from promptweave.turn_context.preflight import run_preflight, should_run_preflight_estimate

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
BOT = Bot(id="10001", name="小织")


@pytest.fixture
def sqlite_runtime(tmp_path):
    config = Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3")))
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    yield runtime
    runtime.close()


def _turn(text: str, **message: object) -> Turn:
    return Turn(
        bot=BOT,
        group_id="20001",
        trigger="mention",
        message=ChatMessage(
            id="m1", sender_id="30017", text=text, time=NOW, addressed=True, **message
        ),
    )


def test_lone_surrogates_never_reach_a_store(sqlite_runtime):
    runtime = sqlite_runtime
    hostile = "好的\ud800\udfff\udc00呀"
    earlier = ChatMessage(
        id="m0",
        sender_id="30022",
        sender_name="阿\ud800蒙",
        text=hostile,
        time=NOW - dt.timedelta(minutes=1),
    )
    assert runtime.recorder.record_message(BOT.id, "20001", earlier)
    assert runtime.recorder.record_bot_reply(
        BOT.id, "20001", "收到\ud801", message_id="r0", answering=earlier
    )
    rendered = runtime.render(_turn(hostile))
    assert "\ud800" not in rendered.system_prompt
    assert all("\ud800" not in m.content for m in rendered.messages)


@pytest.mark.parametrize(
    "text", ["，" * 64000 + "x", "[CQ:" * 250000, "~" * 100000, "[CQ:at,qq=" * 100000]
)
def test_long_hostile_text_is_routed_in_linear_time(text):
    # A quadratic regex took minutes here; with the test suite's default timeout this would hang.
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    decision = runtime.decide(_turn(text))
    assert decision.action.value in ("reply", "pass", "follow_up")


def test_the_bot_never_answers_its_own_message():
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    turn = _turn("@小织 今晚几点？")
    own = Turn(
        bot=BOT,
        group_id="20001",
        trigger="mention",
        message=ChatMessage(id="m2", sender_id=BOT.id, text="今晚几点？", time=NOW, addressed=True),
    )
    assert runtime.decide(turn).action.value == "reply"
    decision = runtime.decide(own)
    assert (decision.action.value, decision.reason) == ("pass", "own_message")


@pytest.mark.parametrize("group_id", ["", "   "])
def test_a_blank_group_id_is_refused(group_id, sqlite_runtime):
    with pytest.raises(ValueError, match="group_id must be a group's id"):
        Turn(bot=BOT, group_id=group_id, message=ChatMessage(sender_id="u", text="x", time=NOW))
    message = ChatMessage(id="m9", sender_id="u", text="x", time=NOW)
    assert not sqlite_runtime.recorder.record_message(BOT.id, group_id, message)
    assert not sqlite_runtime.recorder.record_bot_reply(
        BOT.id, group_id, "y", message_id="r9", answering=message
    )


def test_a_string_where_a_list_belongs_is_an_error_not_characters(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "bot": {"id": "1", "name": "小织", "aliases": "织织"},
                "group_id": "2",
                "message": {
                    "sender_id": "3",
                    "text": "x",
                    "time": "2026-11-29T12:00:00+08:00",
                    "images": "https://img.example/a.jpg",
                },
            }
        ),
        encoding="utf-8",
    )
    from promptweave import load_turn_file

    with pytest.raises(TurnFileError, match="expected a list of strings, not"):
        load_turn_file(path)


def test_jsonl_lines_may_hold_unicode_line_separators(tmp_path):
    memories = tmp_path / "memories.jsonl"
    memories.write_text(
        json.dumps({"kind": "teaching", "text": "第一句\u2028第二句"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    batch = read_files("memories", [memories], bot_id="1", group_id="2")
    assert len(batch.memories) == 1
    route = tmp_path / "route.jsonl"
    route.write_text(
        json.dumps({"text": "在吗\u2028有人吗"}, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    assert len(load_route_file(route, bot=Bot(id="1", name="小织"))) == 1


def test_a_route_file_with_bad_bytes_or_times_names_the_problem(tmp_path):
    binary = tmp_path / "bad.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    with pytest.raises(TurnFileError, match="not UTF-8"):
        load_route_file(binary)
    naive = tmp_path / "naive.jsonl"
    naive.write_text(
        json.dumps({"text": "在吗", "time": "2026-11-29T12:00:00"}) + "\n", encoding="utf-8"
    )
    with pytest.raises(TurnFileError, match=r"naive\.jsonl:1"):
        load_route_file(naive, bot=Bot(id="1", name="小织"))


def test_the_preflight_counts_the_timeline_images():
    from promptweave import PromptMessage

    messages = [PromptMessage(role="user", content="看这个", source="current")]
    assert not should_run_preflight_estimate(messages, 1, 1, 4000)
    assert should_run_preflight_estimate(messages, 1, 1, 4000, extra_images=3)
    _, result = run_preflight(
        messages,
        "系统",
        lambda rows, n: rows,
        protect_first=1,
        protect_last=1,
        threshold_tokens=4000,
        extra_images=3,
    )
    assert result.estimated and result.tokens >= 3 * 1500


def test_nan_affinity_and_inverted_lengths_are_refused():
    from promptweave import RelationshipNote, ReplyShape

    with pytest.raises(ValueError, match="NaN"):
        RelationshipNote(affinity=float("nan"))
    with pytest.raises(ValueError, match="max_chars \\(2\\) is below min_chars \\(50\\)"):
        ReplyShape(min_chars=50, max_chars=2)


def test_an_unknown_time_zone_is_logged(caplog):
    import attrs

    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    turn = _turn("@小织 几点了")
    turn = attrs.evolve(turn, bot=attrs.evolve(turn.bot, timezone="Mars/Olympus"))
    runtime.render(turn)
    assert "unknown time zone 'Mars/Olympus'" in caplog.text


def test_importing_a_directory_without_data_files_is_an_error(tmp_path):
    from promptweave.store.retrieval_import import RetrievalImportError

    (tmp_path / "notes.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(RetrievalImportError, match="no file to import"):
        read_files("auto", [tmp_path], bot_id="1", group_id="2")


def test_a_turn_at_the_start_of_the_calendar_renders():
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")), environ=TEST_ENVIRON
    )
    early = dt.datetime(1, 1, 1, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=14)))
    turn = Turn(
        bot=BOT, group_id=None, message=ChatMessage(id="m", sender_id="u", text="你好", time=early)
    )
    assert runtime.render(turn).messages


def test_store_import_names_bad_bytes_and_naive_times(tmp_path):
    from click.testing import CliRunner

    from promptweave.cli.main import cli

    binary = tmp_path / "events.jsonl"
    binary.write_bytes(b'\xff\xfe{"event": "message"}\n')
    result = CliRunner().invoke(
        cli, ["store", "import", str(binary), "--store", str(tmp_path / "s.sqlite3")]
    )
    assert (
        result.exit_code == 2
        and "events.jsonl:1: not UTF-8 at column 1 (byte 0xff)" in result.output
    )
    assert not (tmp_path / "s.sqlite3").exists()
    naive = tmp_path / "naive.jsonl"
    naive.write_text(
        json.dumps(
            {
                "event": "bot_reply",
                "bot_id": "1",
                "group_id": "2",
                "text": "好",
                "time": "2026-11-29T12:00:00",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        cli, ["store", "import", str(naive), "--store", str(tmp_path / "s.sqlite3")]
    )
    assert result.exit_code == 2 and "no UTC offset" in result.output


def test_a_huge_message_is_stored_in_the_session_cut_at_the_content_cap(sqlite_runtime):
    runtime = sqlite_runtime
    cap = runtime.config.session.max_content_chars
    huge = ChatMessage(id="m9", sender_id="30022", text="长" * (cap * 3), time=NOW)
    assert runtime.recorder.record_bot_reply(
        BOT.id,
        "20001",
        "好" * (cap * 2),
        message_id="r9",
        answering=huge,
        time=NOW + dt.timedelta(seconds=10),
    )
    assert runtime.stores.sessions is not None
    rows = runtime.stores.sessions.user_turns(
        BOT.id, "20001", "30022", until=NOW + dt.timedelta(minutes=1), limit=10
    )
    assert [(row.role, len(row.content)) for row in rows] == [("user", cap), ("assistant", cap)]
