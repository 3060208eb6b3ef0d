"""Without its store the bot keeps working: only the current message is sent, and the trace says why
(``docs/design.md#degradation``, 运行态不可用时的退化)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import attrs
import pytest
from base_support import BOT, GROUP, T0, MessageFactory

from promptweave import ChatMessage, Config, HistoryEntry, Promptweave, Stores, Turn
from promptweave.config import StoreConfig
from promptweave.store.sqlite import StoreUnavailableError
from promptweave.turn import SpeakTrigger


def only_current(runtime: Promptweave, message: MessageFactory) -> dict[str, object]:
    turn = Turn(
        bot=BOT,
        group_id=GROUP,
        message=message("30022", "在吗", minute=1),
        trigger=SpeakTrigger.MENTION,
        history=(HistoryEntry(role="user", content="之前的话"),),
    )
    rendered = runtime.render(turn)
    assert [m.source for m in rendered.messages] == ["current"]
    assert rendered.messages[0].content.endswith("在吗")
    return dict(rendered.trace)


def test_disabled_store_sends_only_the_current_message(message: MessageFactory) -> None:
    config = attrs.evolve(Config(), store=StoreConfig(enabled=False))
    runtime = Promptweave.from_config(config)
    assert runtime.stores.sessions is None
    trace = only_current(runtime, message)
    assert trace["degraded"] == "store_disabled"
    assert trace["messages"] == {
        "degraded": "store_disabled",
        "sources": {},
        "sent": [
            {
                "role": "user",
                "source": "current",
                "chars": len(runtime.persona.format(runtime.persona.user_turn.prefix)) + 3,
            }
        ],
    }
    assert not Path("promptweave.sqlite3").exists()


def test_store_that_cannot_be_opened_degrades_without_raising(
    tmp_path: Path, message: MessageFactory
) -> None:
    config = attrs.evolve(
        Config(), store=StoreConfig(path=str(tmp_path / "missing" / "dir" / "s.db"))
    )
    runtime = Promptweave.from_config(config)
    trace = only_current(runtime, message)
    assert str(trace["degraded"]).startswith("store_unavailable: ")


def test_corrupt_store_file_degrades_without_raising(
    tmp_path: Path, message: MessageFactory
) -> None:
    path = tmp_path / "corrupt.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    runtime = Promptweave.from_config(attrs.evolve(Config(), store=StoreConfig(path=str(path))))
    assert str(only_current(runtime, message)["degraded"]).startswith("store_unavailable")


class FailingStore:
    """A store whose every call fails, as a locked or vanished database would."""

    def __getattr__(self, name: str) -> object:
        def fail(*_args: object, **_kwargs: object) -> object:
            raise StoreUnavailableError("database is locked")

        return fail


def test_store_failing_mid_turn_degrades_and_recording_never_raises(
    message: MessageFactory,
) -> None:
    broken = FailingStore()
    stores = Stores(
        group_log=broken, sessions=broken, summaries=broken, bot_replies=broken, feedback=broken
    )  # type: ignore[arg-type]
    runtime = Promptweave.from_config(Config(), stores=stores)
    trace = only_current(runtime, message)
    assert trace["degraded"] == "store_unavailable: database is locked"
    current = message("30022", "在吗", minute=2)
    assert runtime.recorder.record_message(BOT.id, GROUP, current) is False
    assert (
        runtime.recorder.record_bot_reply(BOT.id, GROUP, "在的", message_id="1", answering=current)
        is False
    )
    runtime.background.wait()
    assert runtime.background.failures == 0


def test_recording_into_a_disabled_store_is_a_no_op(message: MessageFactory) -> None:
    runtime = Promptweave.from_config(attrs.evolve(Config(), store=StoreConfig(enabled=False)))
    current = message("30022", "在吗")
    assert runtime.recorder.record_message(BOT.id, GROUP, current) is False
    assert (
        runtime.recorder.record_bot_reply(BOT.id, GROUP, "在的", message_id="1", answering=current)
        is False
    )


def test_timeline_given_by_the_turn_still_shows_when_degraded(message: MessageFactory) -> None:
    runtime = Promptweave.from_config(attrs.evolve(Config(), store=StoreConfig(enabled=False)))
    recent = (message("30017", "楼下新开了家米线", minute=0),)
    rendered = runtime.render(
        Turn(
            bot=BOT,
            group_id=GROUP,
            message=message("30022", "哪家", minute=1),
            trigger=SpeakTrigger.MENTION,
            recent_messages=recent,
        )
    )
    assert "楼下新开了家米线" in rendered.system_prompt
    assert [m.source for m in rendered.messages] == ["current"]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
def test_working_store_is_not_degraded(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = StoreConfig(backend=backend, path=str(tmp_path / "s.db"))
    if backend == "redis":
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        store = attrs.evolve(store, url=url, prefix=prefix)
    config = attrs.evolve(Config(), store=store)
    runtime = Promptweave.from_config(config)
    message = ChatMessage(sender_id="30022", text="在吗", time=T0 + dt.timedelta(minutes=1))
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=message))
    assert rendered.trace["degraded"] is None
