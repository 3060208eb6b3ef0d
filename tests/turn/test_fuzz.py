"""Property-based fuzzing of everything a bot reads from outside: turn files, route files,
OneBot v11 events and CQ codes, ``promptweave.toml``, overrides files, persona packs and the chat
logs ``store import`` reads.

The one property: every generated input ends in a result or the documented error (a
``ConfigError`` or ``TurnFileError`` naming the file, a ``ValueError`` from the OneBot parser),
never another exception; and a result goes on through a whole turn (render, turn context,
provider request, the JSON the CLI prints) without one either. How many inputs each property
gets is the Hypothesis profile's (``tests/conftest.py``: ``default`` and ``ci``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from base_support import EXAMPLES
from click.testing import CliRunner
from fuzz_support import (
    cq_strings,
    event_logs,
    onebot_events,
    overrides_documents,
    persona_documents,
    route_documents,
    texts,
    toml_documents,
    turn_documents,
    valid_turns,
)
from hypothesis import HealthCheck, given, settings

from promptweave import (
    Bot,
    ChatMessage,
    Config,
    ConfigError,
    Promptweave,
    PromptweaveError,
    Turn,
    TurnFileError,
    build_provider_request,
    build_turn_context,
    load_turn_file,
)
from promptweave._convert import structure
from promptweave.cli.main import cli
from promptweave.cli.route_batch import decide_cases, load_route_file
from promptweave.config import PluginsConfig, StoreConfig
from promptweave.contrib.onebot import (
    escape_cq,
    parse_cq_string,
    parse_event,
    parse_message,
    unescape_cq,
)
from promptweave.prompt.overrides import OverridesFile
from promptweave.replay.chat_log import MessageIndex, scan_events, stream_events
from promptweave.testing import TEST_ENVIRON
from promptweave.text.persona import PersonaPack

TURN = load_turn_file(EXAMPLES / "at_question.json")
_names = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def shared() -> Iterator[Promptweave]:
    config = Config(
        store=StoreConfig(backend="memory"),
        plugins=PluginsConfig(contrib=("onebot",), turn_deadline_s=0),
    )
    built = Promptweave.from_config(config, environ=TEST_ENVIRON)
    yield built
    built.close()


def _file(folder: Path, suffix: str, data: bytes) -> Path:
    path = folder / f"input-{next(_names)}{suffix}"
    path.write_bytes(data)
    return path


def _whole_turn(runtime: Promptweave, turn: Turn) -> None:
    """Render, build the turn context and the request, and write what the CLI would print: none
    of it may raise, and all of it must be valid UTF-8 JSON."""
    rendered = runtime.render(turn, retrieve=False)
    context = build_turn_context(runtime, turn, rendered)
    request = build_provider_request(runtime, context)
    printed = {**rendered.to_json(), "turn_context": context.trace, "request": request.trace}
    json.dumps(printed, ensure_ascii=False).encode("utf-8")
    request.body_bytes().decode("utf-8")


@given(document=turn_documents)
def test_a_turn_file_loads_or_names_its_problem_and_a_loaded_turn_renders(document, folder, shared):
    path = _file(folder, ".json", document)
    try:
        turn = load_turn_file(path)
    except TurnFileError as exc:
        assert str(path) in str(exc)
        return
    _whole_turn(shared, turn)


@given(document=turn_documents)
def test_render_exits_0_or_2_on_any_turn_file(document, folder):
    path = _file(folder, ".json", document)
    result = CliRunner().invoke(cli, ["render", str(path), "--format", "json", "--no-retrieval"])
    assert result.exit_code in (0, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


@given(document=route_documents)
def test_a_route_file_loads_or_names_its_line_and_every_case_decides(document, folder, shared):
    path = _file(folder, ".jsonl", document)
    try:
        cases = load_route_file(path, bot=Bot(id="10001", name="小织"))
    except TurnFileError as exc:
        assert str(path) in str(exc)
        return
    for result in decide_cases(shared, cases):
        json.dumps(result.to_json(), ensure_ascii=False).encode("utf-8")


@given(event=onebot_events)
def test_a_onebot_event_parses_or_is_a_value_error_and_its_message_renders(event, shared):
    try:
        parsed = parse_event(event)
    except ValueError:
        return
    try:
        message = shared.plugins.hooks.parse_message("onebot", event, parsed.bot_id)
    except ValueError:
        return  # a value a Turn refuses (a blank group id, an id that is not text)
    try:
        turn = Turn(
            bot=Bot(id=parsed.bot_id, name="小织"), group_id=parsed.group_id, message=message
        )
    except ValueError:
        return
    _whole_turn(shared, turn)


@given(text=texts)
def test_cq_escaping_round_trips_any_text(text):
    assert unescape_cq(escape_cq(text)) == text
    assert unescape_cq(escape_cq(text, in_param=True)) == text


@given(message=cq_strings)
def test_any_cq_string_parses_into_segments_and_a_message(message):
    segments = parse_cq_string(message)
    assert all(isinstance(segment["type"], str) for segment in segments)
    try:
        parsed = parse_message(message, bot_id="10001", sender_id="3", time=TURN.message.time)
    except ValueError:
        return  # text that is not text (a lone surrogate in an id of an at or reply code)
    assert isinstance(parsed, ChatMessage)


@given(document=toml_documents)
def test_a_config_file_loads_or_names_its_problem_and_a_loaded_config_runs(document, folder):
    path = _file(folder, ".toml", document)
    try:
        config = Config.from_file(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    try:
        runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    except PromptweaveError:
        return  # an unknown contrib plugin, a persona pack that cannot be read: named
    try:
        _whole_turn(runtime, TURN)
    finally:
        runtime.close()


@given(document=overrides_documents)
def test_an_overrides_file_loads_or_names_its_problem_and_never_breaks_a_turn(
    document, folder, shared
):
    path = _file(folder, ".toml", document)
    try:
        OverridesFile.from_file(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
    config = Config(
        store=StoreConfig(backend="memory"),
        overrides_file=str(path),
        plugins=PluginsConfig(turn_deadline_s=0),
    )
    with_overrides = Promptweave.from_config(config, environ=TEST_ENVIRON)
    try:
        _whole_turn(with_overrides, TURN)
    finally:
        with_overrides.close()


@given(document=persona_documents)
def test_a_persona_pack_loads_or_names_its_problem_and_a_loaded_pack_renders(document, folder):
    path = _file(folder, ".toml", document)
    try:
        PersonaPack.from_file(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    config = Config(
        store=StoreConfig(backend="memory"),
        persona_pack=str(path),
        plugins=PluginsConfig(turn_deadline_s=0),
    )
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    try:
        _whole_turn(runtime, TURN)
    finally:
        runtime.close()


@given(lines=event_logs)
def test_a_chat_log_is_checked_line_by_line_and_a_valid_one_imports(lines, shared):
    index = MessageIndex()
    try:
        try:
            count = scan_events(lines, source="log.jsonl", index=index)
        except TurnFileError as exc:
            assert "log.jsonl:" in str(exc)
            return
        report = stream_events(shared, lines, source="log.jsonl", index=index, compress=False)
    finally:
        index.close()
    assert report.messages + report.replies + report.skipped + report.failed == count


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=valid_turns)
def test_a_valid_turn_is_recorded_and_rendered_on_every_backend(data, runtime):
    """The fixture ``runtime`` here is conftest's: memory, SQLite and Redis in turn; every example
    writes to the same store, so each sees what the others left."""
    turn = structure(data, Turn, "turn")
    group = turn.group_id
    for earlier in (*turn.recent_messages, turn.message):
        runtime.recorder.record_message(turn.bot.id, group, earlier)
    runtime.recorder.record_bot_reply(
        turn.bot.id,
        group,
        "收到【安全约束】\ud800",
        message_id="fuzz-reply",
        answering=turn.message,
    )
    _whole_turn(runtime, turn)
