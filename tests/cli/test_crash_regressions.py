"""Inputs that once ended in a Python traceback: each now gets a clear error naming the file, the
line and the field (the CLI exits 2 for input, 1 for config), or a result."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from promptweave import Bot, ChatMessage, Config, ConfigError, Promptweave, Turn, TurnFileError
from promptweave._convert import MAX_JSON_DEPTH
from promptweave._dates import EARLIEST, LATEST, from_timestamp, shifted
from promptweave.cli.main import cli
from promptweave.cli.route_batch import CaseState, load_route_file
from promptweave.config import RoutingConfig, StoreConfig
from promptweave.contrib.onebot import parse_event
from promptweave.replay.chat_log import MessageIndex, scan_events
from promptweave.routing.model import ModelAnswerError, parse_model_answer
from promptweave.store.retrieval_import import RetrievalImportError, read_files
from promptweave.testing import TEST_ENVIRON

TURN = {
    "bot": {"id": "10001", "name": "小织"},
    "group_id": "20001",
    "message": {"sender_id": "30017", "text": "@小织 在吗？", "time": "2026-11-29T12:00:00+08:00"},
}
DEEP = "[" * 100_000 + "]" * 100_000
EDGE = "0001-01-01T00:00:00+14:00"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def write(path: Path, data: object) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def assert_clean_exit(result: Result, code: int, *phrases: str) -> None:
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    assert result.exit_code == code, result.output
    for phrase in phrases:
        assert phrase in result.output


# -- deeply nested JSON ----------------------------------------------------------------------


def test_a_deeply_nested_turn_file_is_refused_naming_the_depth(tmp_path):
    turn = write(tmp_path / "deep.json", DEEP)
    assert_clean_exit(invoke("render", turn), 2, str(turn), f"deeper than {MAX_JSON_DEPTH}")


def test_a_deeply_nested_previous_file_is_refused(tmp_path):
    turn = write(tmp_path / "turn.json", TURN)
    previous = write(tmp_path / "previous.json", DEEP)
    result = invoke("render", turn, "--previous", previous)
    assert_clean_exit(result, 2, str(previous), "nested deeper")


def test_a_deeply_nested_route_line_is_refused_naming_its_line(tmp_path):
    route = write(tmp_path / "route.jsonl", '{"text": "在吗"}\n' + DEEP + "\n")
    assert_clean_exit(invoke("route", route), 2, f"{route}:2", "nested deeper")


def test_nesting_just_within_the_limit_is_read(tmp_path):
    raw = {"deep": []}
    inner = raw["deep"]
    for _ in range(MAX_JSON_DEPTH - 5):
        inner.append([])
        inner = inner[0]
    data = {**TURN, "message": {**TURN["message"], "raw": raw}}
    turn = write(tmp_path / "turn.json", data)
    assert_clean_exit(invoke("render", turn, "--format", "json"), 0)


def test_deeply_nested_store_import_and_retrieval_files_are_refused(tmp_path):
    events = write(tmp_path / "events.jsonl", DEEP + "\n")
    result = invoke("store", "import", events, "--store", tmp_path / "s.sqlite3")
    assert_clean_exit(result, 2, f"{events}:1", "nested deeper")
    for name in ("memories.jsonl", "memories.json"):
        data = write(tmp_path / name, DEEP if name.endswith("l") else f"[{DEEP}]")
        with pytest.raises(RetrievalImportError, match="nested deeper"):
            read_files("memories", [data], bot_id="1", group_id="2")


def test_a_deeply_nested_model_answer_is_an_invalid_answer():
    with pytest.raises(ModelAnswerError, match="nested deeper"):
        parse_model_answer("[" * 1000 + "]" * 1000)
    with pytest.raises(ModelAnswerError, match="200000 characters long"):
        parse_model_answer(DEEP)


# -- bytes that are not UTF-8 ----------------------------------------------------------------


def test_a_config_that_is_not_utf8_names_the_line_and_column(tmp_path):
    config = tmp_path / "promptweave.toml"
    config.write_bytes(b"[budget]\nchars = 100\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 at line 3 column 6 \(byte 0xe9\)"):
        Config.from_file(config)
    assert_clean_exit(invoke("sections", "--config", config), 1, config.name, "not UTF-8")


def test_a_persona_pack_that_is_not_utf8_is_a_config_error(tmp_path):
    pack = tmp_path / "pack.toml"
    pack.write_bytes(b'[persona]\nname = "\xff"\n')
    config = write(tmp_path / "promptweave.toml", 'persona_pack = "pack.toml"\n')
    result = invoke("render", write(tmp_path / "t.json", TURN), "--config", config)
    assert_clean_exit(result, 1, pack.name, "not UTF-8 at line 2 column 9")


# -- dates at the edge of the calendar --------------------------------------------------------


def test_a_group_turn_at_the_start_of_the_calendar_is_routed_recorded_and_rendered(tmp_path):
    data = {**TURN, "message": {**TURN["message"], "time": EDGE, "id": "m1"}}
    turn_file = write(tmp_path / "t.json", data)
    assert_clean_exit(invoke("render", turn_file, "--format", "json"), 0)
    config = Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3")))
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    try:
        early = dt.datetime.fromisoformat(EDGE)
        earlier = ChatMessage(id="m0", sender_id="30022", text="早", time=early)
        assert runtime.recorder.record_message("10001", "20001", earlier)
        turn = Turn(
            bot=Bot(id="10001", name="小织"),
            group_id="20001",
            trigger="mention",
            message=ChatMessage(id="m1", sender_id="30017", text="@小织 在吗？", time=early),
        )
        rendered = runtime.render(turn)
        assert "早" in rendered.system_prompt
        assert runtime.recorder.record_bot_reply(
            "10001", "20001", "在", message_id="r1", answering=turn.message, time=early
        )
    finally:
        runtime.close()


def test_windows_and_cooldowns_stop_at_the_ends_of_the_calendar():
    early = dt.datetime.fromisoformat(EDGE)
    assert shifted(early, -600) == EARLIEST
    assert shifted(early, 1e18) == LATEST
    assert shifted(early, math.inf) == LATEST
    assert shifted(early, 60) == early + dt.timedelta(seconds=60)
    assert from_timestamp(early.timestamp(), 14 * 3600) == early
    latest = from_timestamp(LATEST.timestamp(), -14 * 3600)  # a float: rounded to the second
    assert abs(latest - LATEST) < dt.timedelta(seconds=1)
    assert (from_timestamp(1e18), from_timestamp(-1e18)) == (LATEST, EARLIEST)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_an_infinite_window_is_refused_in_the_file_and_in_code(tmp_path, value):
    config = write(tmp_path / "c.toml", f"[routing]\nbot_reply_window_s = {value}\n")
    with pytest.raises(ConfigError, match=r"finite number.* @ \$\.routing\.bot_reply_window_s"):
        Config.from_file(config)
    with pytest.raises(ValueError, match="bot_reply_window_s must be a finite number"):
        RoutingConfig(bot_reply_window_s=float(value))


def test_integers_beyond_what_a_store_holds_are_refused(tmp_path):
    config = write(tmp_path / "c.toml", "[session]\nstorage_window = 100000000000000000000\n")
    with pytest.raises(ConfigError, match=r"integer between .* @ \$\.session\.storage_window"):
        Config.from_file(config)


def test_route_state_far_beyond_the_calendar_still_decides(tmp_path):
    lines = [
        {"id": "s", "text": "在吗", "state": {"silence_s": 1e18}},
        {"id": "c", "text": "在吗", "state": {"cooldown_s": 1e18}},
        {"id": "q", "text": "在吗", "state": {"last_quote_ago_s": 1e18}},
        {"id": "a", "text": "在吗", "context": [{"text": "早", "ago_s": 1e18}]},
    ]
    route = write(tmp_path / "r.jsonl", "\n".join(json.dumps(line) for line in lines))
    result = invoke("route", route, "--json")
    assert_clean_exit(result, 0)
    reasons = [json.loads(row)["decision"]["reason"] for row in result.output.splitlines()]
    assert reasons[:2] == ["shut_up_silence", "cooldown"]


def test_a_route_line_cannot_ask_for_millions_of_bot_replies(tmp_path):
    route = write(tmp_path / "r.jsonl", json.dumps({"text": "在吗", "state": {"bot_replies": 3e6}}))
    assert_clean_exit(invoke("route", route), 2, f"{route}:1", "bot_replies", "state:")
    with pytest.raises(ValueError, match="bot_replies"):
        CaseState(bot_replies=-1)


# -- lone surrogates in ids ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("group_id",), "group_id"),
        (("message", "sender_id"), "sender_id"),
        (("message", "id"), "id"),
        (("bot", "id"), "id"),
    ],
)
def test_an_id_with_a_lone_surrogate_is_refused_in_a_turn_file(tmp_path, where, field):
    data = json.loads(json.dumps(TURN))
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = "20\ud800"
    turn = tmp_path / "t.json"
    turn.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: "\ud800" as an escape
    for output in ("text", "json"):
        result = invoke("render", turn, "--format", output)
        assert_clean_exit(result, 2, str(turn), f"{field} '20\\ud800' holds a lone surrogate")


def test_ids_with_lone_surrogates_in_a_route_line_are_refused(tmp_path):
    for key in ("id", "sender_id", "group_id", "message_id"):
        route = tmp_path / f"{key}.jsonl"
        route.write_text(json.dumps({"text": "在吗", key: "x\udc00"}) + "\n", encoding="utf-8")
        result = invoke("route", route, "--json")
        assert_clean_exit(result, 2, f"{route}:1", "lone surrogate")


def test_recording_calls_refuse_ids_with_lone_surrogates(tmp_path):
    config = Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3")))
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    message = ChatMessage(id="m1", sender_id="30017", text="早", time=now)
    try:
        assert not runtime.recorder.record_message("1\ud800", "20001", message)
        assert not runtime.recorder.record_message("10001", "2\udfff", message)
        assert not runtime.recorder.record_bot_reply("10001", "20001", "在", message_id="r\ud800")
        assert runtime.recorder.record_message("10001", "20001", message)
    finally:
        runtime.close()
    with pytest.raises(ValueError, match="lone surrogate"):
        ChatMessage(sender_id="3", text="x", time=now, mentions=("\ud800",))


def test_a_store_import_with_a_lone_surrogate_id_is_refused(tmp_path):
    event = {
        "event": "message",
        "bot_id": "10001",
        "group_id": "2\ud800",
        "message": {"id": "m1", "sender_id": "3", "text": "x", "time": "2026-11-29T12:00:00Z"},
    }
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(event) + "\n", encoding="utf-8")
    result = invoke("store", "import", events, "--store", tmp_path / "s.sqlite3")
    assert_clean_exit(result, 2, f"{events}:1", "lone surrogate")


# -- malformed route and OneBot input --------------------------------------------------------


@pytest.mark.parametrize(
    ("defaults", "path"), [("x", "$.defaults"), ({"bot": 3}, "$.defaults.bot")]
)
def test_a_defaults_line_that_is_not_an_object_names_its_path(tmp_path, defaults, path):
    route = write(tmp_path / "r.jsonl", json.dumps({"defaults": defaults}) + "\n")
    with pytest.raises(TurnFileError, match=rf"r\.jsonl:1: expected an object, got .* @ \{path}"):
        load_route_file(route)
    assert_clean_exit(invoke("route", route), 2, "expected an object")


@pytest.mark.parametrize("sender", ["x", 3, ["card"]])
def test_a_onebot_sender_that_is_not_an_object_is_a_value_error(sender):
    event = {
        "post_type": "message",
        "message_type": "group",
        "group_id": 20001,
        "user_id": 30017,
        "self_id": 10001,
        "message": "在吗",
        "time": 1764390000,
        "sender": sender,
    }
    with pytest.raises(ValueError, match="'sender' must be an object"):
        parse_event(event)
    with pytest.raises(ValueError, match="a OneBot event is a JSON object"):
        parse_event("x")  # type: ignore[arg-type]
    assert parse_event({**event, "sender": {"card": "阿蒙"}}).message.sender_name == "阿蒙"


def test_a_record_given_a_string_is_an_error_with_its_path(tmp_path):
    turn = write(tmp_path / "t.json", {**TURN, "bot": "小织"})
    assert_clean_exit(invoke("render", turn), 2, "bot: expected an object, got a string")


# -- found by the fuzz properties -------------------------------------------------------------


def test_a_contrib_plugin_named_twice_is_loaded_once(tmp_path):
    config = write(tmp_path / "c.toml", '[plugins]\ncontrib = ["onebot", "onebot"]\n')
    runtime = Promptweave.from_config(
        Config.from_file(config), environ=TEST_ENVIRON, contrib=["onebot"]
    )
    try:
        assert list(runtime.plugins.infos).count("onebot") == 1
    finally:
        runtime.close()


def test_an_extra_plugin_given_twice_is_a_plugin_import_error():
    from promptweave import PluginImportError

    class Plugin:
        pass

    plugin = Plugin()
    with pytest.raises(PluginImportError, match="already loaded"):
        Promptweave.from_config(environ=TEST_ENVIRON, extra_plugins=[plugin, plugin])


def test_an_attrs_validator_error_reads_as_its_message(tmp_path):
    config = write(tmp_path / "c.toml", '[turn_context]\nturn_sections = "x"\n')
    with pytest.raises(ConfigError) as raised:
        Config.from_file(config)
    assert str(raised.value) == (
        f"{config}: 'turn_sections' must be in ('system', 'user') (got 'x') @ $.turn_context"
    )


def test_an_image_entry_with_a_lone_surrogate_still_stands_for_an_image():
    message = ChatMessage(
        sender_id="3", text="看", time=dt.datetime(2026, 11, 29, tzinfo=dt.UTC), images=("a\ud800",)
    )
    assert message.images == ("a",)
    index = MessageIndex()
    try:
        events = [
            json.dumps(
                {
                    "event": "message",
                    "bot_id": "1",
                    "group_id": "2",
                    "message": {
                        "id": "m",
                        "sender_id": "3",
                        "text": "看",
                        "time": "2026-11-29T12:00:00Z",
                        "images": ["\ud800"],
                    },
                }
            )
        ]
        assert scan_events(events, source="log", index=index) == 1
    finally:
        index.close()
