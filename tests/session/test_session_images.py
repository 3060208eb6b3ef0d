"""Images in the session history and ``[session] describe_images`` (``docs/design.md#images``).

On (the default), a user message's images enter the session with their URLs, read ``[图片]`` and
are described once, when the session is compressed. Off, they enter as plain ``[图片]`` marks with
no URL, and compression describes nothing, also in rows recorded while it was on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import pytest
from base_support import BOT, GROUP, T0, Clock, redis_config, sqlite_config
from support_turn_context import PNG_BYTES

from promptweave import (
    IMAGE_WITHOUT_URL,
    ChatMessage,
    Config,
    FetchedImage,
    ImageLimits,
    Promptweave,
    ProviderApi,
    SessionTurn,
    Stores,
    Turn,
    build_provider_request,
    build_turn_context,
    hookimpl,
)
from promptweave.config import SessionConfig
from promptweave.providers.exchange import ProviderSpec

CAT = "https://img.example.net/cat-1.jpg"
USER = "30022"
WITHOUT_DESCRIPTIONS = SessionConfig(describe_images=False)


class Recorder:
    """Records what compression hands to the summarizer and the image describer."""

    def __init__(self) -> None:
        self.turns: list[Sequence[SessionTurn]] = []
        self.urls: list[str] = []

    @hookimpl
    def summarize_session(self, turns: Sequence[SessionTurn]) -> str | None:
        self.turns.append(turns)
        return "对方：聊了猫"

    @hookimpl
    def describe_image(self, url: str, bot_id: str, group_id: str | None) -> str | None:
        self.urls.append(url)
        return "一只橘猫"


class Fetcher:
    """Records every image a request downloads."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    @hookimpl
    def fetch_image(self, url: str, limits: ImageLimits) -> FetchedImage:
        self.urls.append(url)
        return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)


def photo(clock: Clock, *images: str, message_id: str = "photo") -> ChatMessage:
    return ChatMessage(
        id=message_id,
        sender_id=USER,
        sender_name="阿蒙",
        text="看我家猫",
        images=images or (CAT,),
        time=clock.advance(30),
        addressed=True,
    )


def answer(runtime: Promptweave, group_id: str | None, asked: ChatMessage) -> None:
    runtime.recorder.record_bot_reply(
        BOT.id, group_id, "好可爱", message_id=f"r-{asked.id}", answering=asked
    )


def chat(runtime: Promptweave, clock: Clock, exchanges: int) -> None:
    """``exchanges`` text messages of the user in the group, each answered by the bot."""
    for number in range(exchanges):
        asked = ChatMessage(
            id=f"text-{number}",
            sender_id=USER,
            text=f"第{number}次说起我家的猫",
            time=clock.advance(60),
            addressed=True,
        )
        answer(runtime, GROUP, asked)


def stored_rows(runtime: Promptweave, group_id: str | None = GROUP) -> list[SessionTurn]:
    assert runtime.stores.sessions is not None
    far = T0 + dt.timedelta(days=30)
    return runtime.stores.sessions.user_turns(BOT.id, group_id or "", USER, until=far, limit=50)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def runtime_without_descriptions(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> Iterator[Promptweave]:
    """A runtime with ``describe_images = false`` on each backend."""
    if request.param == "memory":
        config = attrs.evolve(Config(), session=WITHOUT_DESCRIPTIONS)
        runtime = Promptweave.from_config(config, stores=Stores.in_memory(), clock=clock)
    elif request.param == "sqlite":
        config = sqlite_config(tmp_path / "s.db", session=WITHOUT_DESCRIPTIONS)
        runtime = Promptweave.from_config(config, clock=clock)
    else:
        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")
        config = redis_config(url, prefix, session=WITHOUT_DESCRIPTIONS)
        runtime = Promptweave.from_config(config, clock=clock)
    yield runtime
    runtime.close()


# -- recording --------------------------------------------------------------------------------


def test_a_recorded_image_keeps_its_url_in_the_session_by_default(
    runtime: Promptweave, clock: Clock
) -> None:
    answer(runtime, GROUP, photo(clock, CAT, IMAGE_WITHOUT_URL))
    user_row = stored_rows(runtime)[0]
    assert user_row.images == (CAT, IMAGE_WITHOUT_URL)
    assert user_row.display_text() == "[图片] 看我家猫"


def test_without_descriptions_a_recorded_image_is_stored_as_a_plain_mark(
    runtime_without_descriptions: Promptweave, clock: Clock
) -> None:
    runtime = runtime_without_descriptions
    asked = photo(clock, CAT, IMAGE_WITHOUT_URL)
    assert runtime.recorder.record_message(BOT.id, GROUP, asked)
    answer(runtime, GROUP, asked)
    user_row, reply_row = stored_rows(runtime)
    assert user_row.images == (IMAGE_WITHOUT_URL, IMAGE_WITHOUT_URL)
    assert CAT not in repr(user_row) and CAT not in repr(reply_row)
    assert user_row.display_text() == "[图片] 看我家猫"
    # The group log is not session history: the timeline and quoted images still read its URLs.
    assert runtime.stores.group_log is not None
    logged = runtime.stores.group_log.find_group_message(BOT.id, GROUP, "photo")
    assert logged is not None and logged.images == (CAT, IMAGE_WITHOUT_URL)


def test_without_descriptions_the_history_shows_the_mark(
    runtime_without_descriptions: Promptweave, clock: Clock
) -> None:
    runtime = runtime_without_descriptions
    answer(runtime, None, photo(clock))
    current = ChatMessage(id="next", sender_id=USER, text="它叫什么好", time=clock.advance(60))
    rendered = runtime.render(Turn(bot=BOT, group_id=None, message=current))
    history = [m for m in rendered.messages if m.source == "history"]
    assert history[0].content.endswith("\n[图片] 看我家猫") and history[0].images == ()
    assert CAT not in repr(rendered.messages)


# -- compression ------------------------------------------------------------------------------


def test_without_descriptions_compression_describes_no_image(tmp_path: Path, clock: Clock) -> None:
    recorder = Recorder()
    config = sqlite_config(tmp_path / "s.db", session=WITHOUT_DESCRIPTIONS)
    runtime = Promptweave.from_config(config, clock=clock, extra_plugins=[recorder])
    answer(runtime, GROUP, photo(clock))
    chat(runtime, clock, 23)
    runtime.background.wait(timeout=30)
    assert recorder.urls == []
    first = recorder.turns[0][0]
    assert first.content == "[图片] 看我家猫" and first.images == ()
    assert stored_rows(runtime)[0].is_summary
    runtime.close()


def test_turns_recorded_with_descriptions_are_not_described_once_they_are_off(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "s.db"
    before = Promptweave.from_config(sqlite_config(path), clock=clock)
    answer(before, GROUP, photo(clock))
    assert stored_rows(before)[0].images == (CAT,)
    before.close()

    recorder = Recorder()
    config = sqlite_config(path, session=WITHOUT_DESCRIPTIONS)
    after = Promptweave.from_config(config, clock=clock, extra_plugins=[recorder])
    chat(after, clock, 23)
    after.background.wait(timeout=30)
    assert recorder.urls == []
    assert recorder.turns[0][0].content == "[图片] 看我家猫"
    assert not any(CAT in repr(turn) for turn in recorder.turns[0])
    after.close()


def test_with_descriptions_compression_describes_the_stored_url(
    tmp_path: Path, clock: Clock
) -> None:
    recorder = Recorder()
    runtime = Promptweave.from_config(
        sqlite_config(tmp_path / "s.db"), clock=clock, extra_plugins=[recorder]
    )
    answer(runtime, GROUP, photo(clock))
    runtime.background.wait(timeout=30)
    assert recorder.urls == []  # not described on arrival
    chat(runtime, clock, 23)
    runtime.background.wait(timeout=30)
    assert recorder.urls == [CAT]
    assert recorder.turns[0][0].content == "[图片：一只橘猫] 看我家猫"
    runtime.close()


def test_an_image_sent_in_several_turns_is_described_once(tmp_path: Path, clock: Clock) -> None:
    recorder = Recorder()
    runtime = Promptweave.from_config(
        sqlite_config(tmp_path / "s.db"), clock=clock, extra_plugins=[recorder]
    )
    sticker = "https://img.example.net/sticker.gif"
    answer(runtime, GROUP, photo(clock, sticker, message_id="p1"))
    answer(runtime, GROUP, photo(clock, CAT, f" {sticker} ", message_id="p2"))
    chat(runtime, clock, 22)
    runtime.background.wait(timeout=30)
    assert recorder.urls == [sticker, CAT]
    first, _, second = recorder.turns[0][:3]
    assert first.content == "[图片：一只橘猫] 看我家猫"
    assert second.content == "[图片：一只橘猫] 看我家猫"
    runtime.close()


# -- what a provider receives -----------------------------------------------------------------


def _request_after_photo(
    describe_images: bool, group_id: str | None, clock: Clock, *, current_images: tuple[str, ...]
) -> tuple[dict[str, object], str, list[str], list[object]]:
    """Record a photo and its answer, then build the next turn's request for a provider that
    declares images. :returns: the request's image trace, its body text, the fetched URLs and
    the body's messages after the system prompt."""
    fetcher = Fetcher()
    config = attrs.evolve(Config(), session=SessionConfig(describe_images=describe_images))
    runtime = Promptweave.from_config(
        config, stores=Stores.in_memory(), clock=clock, extra_plugins=[fetcher]
    )
    answer(runtime, group_id, photo(clock))
    current = ChatMessage(
        id="next",
        sender_id=USER,
        text="它叫什么好",
        images=current_images,
        time=clock.advance(60),
        addressed=True,
    )
    turn = Turn(bot=BOT, group_id=group_id, message=current)
    context = build_turn_context(runtime, turn, runtime.render(turn))
    spec = ProviderSpec(api=ProviderApi.OPENAI_CHAT, model="m", supports_images=True)
    request = build_provider_request(runtime, context, spec)
    runtime.close()
    messages = [m for m in request.body["messages"] if m["role"] != "system"]
    return request.trace["images"], request.body_text(), fetcher.urls, messages


@pytest.mark.parametrize("group_id", [GROUP, None], ids=["group", "private"])
def test_without_descriptions_no_history_image_reaches_the_provider(
    group_id: str | None, clock: Clock
) -> None:
    images, body, fetched, _messages = _request_after_photo(
        False, group_id, clock, current_images=()
    )
    assert CAT not in body and fetched == []
    assert images["sent"] == 0
    assert "[图片] 看我家猫" in body


@pytest.mark.parametrize("group_id", [GROUP, None], ids=["group", "private"])
def test_the_history_is_sent_as_text_with_or_without_descriptions(
    group_id: str | None, clock: Clock
) -> None:
    # A history row is text: its image reads [图片] and is neither downloaded nor sent, whatever
    # the switch says; the switch decides what the session keeps for compression.
    on_images, _, on_fetched, on_messages = _request_after_photo(
        True, group_id, clock, current_images=()
    )
    off_images, _, off_fetched, off_messages = _request_after_photo(
        False, group_id, Clock(), current_images=()
    )
    assert on_images == off_images and on_images["sent"] == 0
    assert on_fetched == off_fetched == []
    assert on_messages == off_messages
    assert "[图片] 看我家猫" in on_messages[0]["content"]


@pytest.mark.parametrize("describe_images", [True, False])
def test_the_current_messages_own_image_is_sent_either_way(
    describe_images: bool, clock: Clock
) -> None:
    board = "https://img.example.net/board.jpg"
    images, body, fetched, _messages = _request_after_photo(
        describe_images, None, clock, current_images=(board,)
    )
    assert fetched == [board] and images["sent"] == 1
    assert CAT not in body
