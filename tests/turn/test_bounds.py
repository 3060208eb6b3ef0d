"""Bounds: what one message, one import, one retriever or one write may cost stays bounded."""

from __future__ import annotations

import datetime as dt
import gc
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from base_support import BOT, GROUP, T0, Clock, redis_config, sqlite_config

from promptweave import ChatMessage, MemoryItem, Promptweave
from promptweave.pipeline.stages import _merge
from promptweave.replay.chat_log import MessageIndex, read_events, scan_events, stream_events
from promptweave.store.session_rows import SessionTurn
from promptweave.store.sessions import TRIM_BATCH, GroupLog, SessionStore
from promptweave.testing import TEST_ENVIRON

HUGE = "长" * 1_000_000


def test_the_group_log_keeps_a_message_cut_at_the_content_cap(runtime):
    cap = runtime.config.session.max_content_chars
    huge = ChatMessage(id="m-huge", sender_id="30022", text=HUGE, time=T0)
    assert runtime.recorder.record_message(BOT.id, GROUP, huge)
    assert runtime.recorder.record_bot_reply(
        BOT.id, GROUP, HUGE, message_id="r-huge", answering=huge, time=T0 + dt.timedelta(seconds=5)
    )
    logged = runtime.stores.group_log.recent_group_messages(
        BOT.id, GROUP, until=T0 + dt.timedelta(minutes=1), limit=10
    )
    assert [len(m.text) for m in logged] == [cap, cap]
    quoted = runtime.stores.bot_replies.lookup(BOT.id, GROUP, "r-huge", now=T0)
    assert quoted is not None and len(quoted) <= cap  # the context has a cap of its own


# -- store import -------------------------------------------------------------------------------


def _log_lines(count: int) -> list[str]:
    """``count`` message events, every tenth answered by the bot, in one group."""
    lines = []
    for number in range(count):
        time = T0 + dt.timedelta(seconds=number)
        lines.append(
            json.dumps(
                {
                    "event": "message",
                    "bot_id": BOT.id,
                    "group_id": GROUP,
                    "message": {
                        "id": f"m{number}",
                        "sender_id": f"3{number % 7}",
                        "text": f"第{number}条",
                        "time": time.isoformat(),
                    },
                }
            )
        )
        if number % 10 == 9:
            lines.append(
                json.dumps(
                    {
                        "event": "bot_reply",
                        "bot_id": BOT.id,
                        "group_id": GROUP,
                        "text": "收到",
                        "message_id": f"r{number}",
                        "time": (time + dt.timedelta(milliseconds=500)).isoformat(),
                        "answering": f"m{number - 9}",
                    }
                )
            )
    return lines


def _live_messages() -> int:
    return sum(1 for item in gc.get_objects() if isinstance(item, ChatMessage))


def test_a_streamed_import_never_holds_the_log(tmp_path: Path) -> None:
    lines = _log_lines(3000)
    held = read_events(lines, source="log")  # what the whole-file reader keeps: every message
    assert _live_messages() >= 3000
    del held  # freed at once: records hold no cycles
    before = _live_messages()
    index = MessageIndex()
    runtime = Promptweave.from_config(sqlite_config(tmp_path / "s.sqlite3"), environ=TEST_ENVIRON)
    alive: list[int] = []

    def sample(_done: int) -> None:
        if len(alive) < 40:
            alive.append(_live_messages() - before)

    try:
        assert scan_events(iter(lines), source="log", index=index) == len(lines)
        assert _live_messages() - before < 10
        report = stream_events(
            runtime, iter(lines), source="log", index=index, compress=False, progress=sample
        )
    finally:
        index.close()
        runtime.close()
    assert (report.messages, report.replies, report.failed) == (3000, 300, 0)
    assert max(alive) < 50, "the import kept the messages it had recorded"


def test_a_reply_may_answer_a_message_any_number_of_lines_back(tmp_path: Path) -> None:
    lines = _log_lines(2000)
    lines.append(
        json.dumps(
            {
                "event": "bot_reply",
                "bot_id": BOT.id,
                "group_id": GROUP,
                "text": "回到最早那条",
                "message_id": "r-first",
                "time": (T0 + dt.timedelta(hours=2)).isoformat(),
                "answering": "m0",
            }
        )
    )
    runtime = Promptweave.from_config(sqlite_config(tmp_path / "s.sqlite3"), environ=TEST_ENVIRON)
    index = MessageIndex()
    try:
        scan_events(lines, source="log", index=index)
        report = stream_events(runtime, lines, source="log", index=index, compress=False)
        assert runtime.stores.sessions is not None
        rows = runtime.stores.sessions.user_turns(
            BOT.id, GROUP, "30", until=T0 + dt.timedelta(days=1), limit=500
        )
    finally:
        index.close()
        runtime.close()
    assert report.replies == 201
    assert (rows[-1].content, rows[-1].reply_to) == ("回到最早那条", "m0")


def test_the_import_command_streams_and_says_what_it_recorded(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from promptweave.cli.main import cli

    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(_log_lines(200)) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["store", "import", str(events), "--store", str(tmp_path / "s.sqlite3")]
    )
    assert result.exit_code == 0, result.output
    assert "200 messages, 20 bot replies" in result.output
    assert "importing" not in result.output  # no progress bar off a terminal


# -- merging retrieved items ----------------------------------------------------------------------


@attrs.frozen
class Counted:
    """An item that counts how often it is compared."""

    text: str
    comparisons: list[int] = attrs.field(eq=False, hash=False, repr=False)

    def __eq__(self, other: object) -> bool:
        self.comparisons[0] += 1
        return isinstance(other, Counted) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def test_merging_twenty_thousand_items_compares_each_about_once() -> None:
    comparisons = [0]
    found = tuple(Counted(f"m{n}", comparisons) for n in range(20_000))
    given = (Counted("m5", comparisons),)
    merged = _merge({"memory": given}, {"memory": found})
    assert [item.text for item in merged["memory"][:3]] == ["m5", "m0", "m1"]
    assert len(merged["memory"]) == 20_000
    assert comparisons[0] < 2 * len(found)  # a list scan would make about 200 million


def test_merging_keeps_unhashable_items_once_and_in_order() -> None:
    given = ({"text": "a"},)
    found = ({"text": "a"}, {"text": "b"}, MemoryItem(kind="teaching", text="c"), {"text": "b"})
    merged = _merge({"memory": given}, {"memory": found})
    assert merged["memory"] == ({"text": "a"}, {"text": "b"}, MemoryItem(kind="teaching", text="c"))


# -- trimming -------------------------------------------------------------------------------------


def _backlogged(store: Any, count: int) -> None:
    """``count`` messages written under a window of ``count``: a backlog for a smaller one."""
    wide = attrs.evolve(store, max_per_group=count)
    for number in range(count):
        wide.append_group_message(
            BOT.id,
            GROUP,
            ChatMessage(
                id=f"old{number}",
                sender_id="3",
                text="旧",
                time=T0 + dt.timedelta(seconds=number),
            ),
        )


@pytest.fixture(params=["sqlite", "redis"])
def store_runtime(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Promptweave:
    if request.param == "sqlite":
        config = sqlite_config(tmp_path / "s.sqlite3")
    else:
        config = redis_config(
            request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        )
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON, clock=clock)
    request.addfinalizer(runtime.close)
    return runtime


def test_a_backlog_of_the_group_log_is_trimmed_a_batch_per_append(store_runtime) -> None:
    group_log: GroupLog = store_runtime.stores.group_log
    _backlogged(group_log, 600)
    narrow = attrs.evolve(group_log, max_per_group=100)

    def count() -> int:
        return len(
            narrow.recent_group_messages(
                BOT.id, GROUP, until=T0 + dt.timedelta(days=1), limit=10_000
            )
        )

    late = T0 + dt.timedelta(hours=1)
    assert narrow.append_group_message(
        BOT.id, GROUP, ChatMessage(id="new1", sender_id="3", text="新", time=late)
    )
    assert count() == 601 - TRIM_BATCH
    # A message older than the whole window is not kept, even with the backlog still there.
    ancient = ChatMessage(id="ancient", sender_id="3", text="古", time=T0 - dt.timedelta(days=1))
    assert not narrow.append_group_message(BOT.id, GROUP, ancient)
    assert narrow.find_group_message(BOT.id, GROUP, "ancient") is None
    for number in range(2, 12):
        narrow.append_group_message(
            BOT.id,
            GROUP,
            ChatMessage(
                id=f"new{number}",
                sender_id="3",
                text="新",
                time=late + dt.timedelta(seconds=number),
            ),
        )
    assert count() == 100
    newest = narrow.recent_group_messages(
        BOT.id, GROUP, until=late + dt.timedelta(hours=1), limit=1
    )
    assert newest[0].id == "new11"


def test_a_backlog_of_a_session_is_trimmed_a_batch_per_append(store_runtime) -> None:
    sessions: SessionStore = store_runtime.stores.sessions

    def turn(number: int, time: dt.datetime) -> SessionTurn:
        return SessionTurn(
            bot_id=BOT.id,
            group_id=GROUP,
            user_id="30022",
            role="user",
            content=f"第{number}条",
            message_id=f"s{number}",
            time=time,
        )

    sessions.append_turns(
        [turn(n, T0 + dt.timedelta(seconds=n)) for n in range(500)], storage_window=500
    )

    def count() -> int:
        return len(
            sessions.user_turns(
                BOT.id, GROUP, "30022", until=T0 + dt.timedelta(days=1), limit=10_000
            )
        )

    late = T0 + dt.timedelta(hours=1)
    assert sessions.append_turns([turn(1000, late)], storage_window=50) == 1
    assert count() == 501 - TRIM_BATCH
    assert sessions.append_turns([turn(999, T0 - dt.timedelta(days=1))], storage_window=50) == 0
    for number in range(1001, 1010):
        sessions.append_turns(
            [turn(number, late + dt.timedelta(seconds=number))], storage_window=50
        )
    assert count() == 50


def test_the_import_shows_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from promptweave.cli.data import _progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with _progress(4) as update:
        for _ in range(4):
            update(1)
    assert "importing" in terminal.getvalue() and "100%" in terminal.getvalue()
