"""The quoted message's images in the live loop: the event's, the store's, then the platform's
(``fetch_message``; contrib ``onebot``: ``get_msg``), bounded, cached per message id, each source
traced (``docs/messages.md``, the quoted images)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import attrs
import pytest
from loop_support import BOT, GROUP, T0, event, make_loop, message

from promptweave import ChatMessage, Config, IncomingEvent, Promptweave, Stores, hookimpl
from promptweave.config import LoopConfig, ProviderConfig, RoutingConfig
from promptweave.contrib.onebot import fetch_quoted_message
from promptweave.loop.quoted import QuotedFetches

PHOTO = "https://img.example.net/quoted-cat.jpg"
SEEN = "https://img.example.net/seen-before.jpg"
#: A message id as newer QQ clients send them.
NEGATIVE = "-2147480001"


def _config(**loop: Any) -> Config:
    return Config(
        routing=RoutingConfig(low_engagement=False),
        loop=LoopConfig(turn_deadline_s=5.0, **loop),
        provider=ProviderConfig(supports_images=True, inline_images=False),
    )


def _get_msg_answer(message_id: int, *urls: str) -> dict[str, Any]:
    return {
        "time": int((T0 - dt.timedelta(days=3)).timestamp()),
        "message_type": "group",
        "message_id": message_id,
        "real_id": message_id,
        "sender": {"user_id": 30077, "nickname": "老王"},
        "message": [
            {"type": "text", "data": {"text": "看这个"}},
            *({"type": "image", "data": {"file": "a.image", "url": url}} for url in urls),
        ],
    }


@attrs.define(eq=False)
class Platform:
    """A OneBot v11 transport that knows some messages (``get_msg``) and sends anything."""

    known: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    #: seconds ``get_msg`` takes to answer; ``None``: at once.
    delay_s: float | None = None
    fail: BaseException | None = None
    platform: str = "onebot.v11"
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    async def call_api(self, api: str, **params: Any) -> Any:
        self.calls.append((api, params))
        if api != "get_msg":
            return {"message_id": 9000 + len(self.calls)}
        if self.delay_s is not None:
            await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        return self.known.get(params["message_id"])

    def get_msg_calls(self) -> list[dict[str, Any]]:
        return [params for api, params in self.calls if api == "get_msg"]


def _asking(reply_to: str, **fields: Any) -> IncomingEvent:
    return event("这是什么猫", addressed=True, reply_to=reply_to, **fields)


def _sent_images(model: Any) -> list[str]:
    return [
        part["image_url"]["url"]
        for request in model.requests
        for entry in request.body["messages"]
        if isinstance(entry["content"], list)
        for part in entry["content"]
        if part["type"] == "image_url"
    ]


async def test_a_quoted_message_no_source_holds_is_fetched_with_get_msg_and_its_image_sent() -> (
    None
):
    loop, model = make_loop("橘猫", config=_config(), contrib=["onebot"])
    platform = Platform(known={-2147480001: _get_msg_answer(-2147480001, PHOTO)})
    outcome = await loop.handle(_asking(NEGATIVE), platform)
    assert outcome.status == "replied"
    # the negative id goes to get_msg as the number it is
    assert platform.get_msg_calls() == [{"message_id": -2147480001}]
    assert outcome.trace["quoted"] == {"source": "get_msg", "result": "found"}
    assert _sent_images(model) == [PHOTO]
    assert "quoted" in outcome.stage_durations_ms


async def test_the_platform_is_asked_once_per_message_id() -> None:
    loop, model = make_loop("橘猫", config=_config(), contrib=["onebot"])
    platform = Platform(known={4242: _get_msg_answer(4242, PHOTO)})
    first = await loop.handle(_asking("4242"), platform)
    second = await loop.handle(_asking("4242", sender="30002"), platform)
    assert len(platform.get_msg_calls()) == 1
    assert first.trace["quoted"] == {"source": "get_msg", "result": "found"}
    assert second.trace["quoted"] == {"source": "get_msg", "result": "found", "cached": True}
    assert _sent_images(model) == [PHOTO, PHOTO]


async def test_a_slow_platform_costs_the_timeout_and_the_turn_goes_on_without_the_image() -> None:
    loop, model = make_loop(
        "看不到图呢", config=_config(quoted_fetch_timeout_s=0.05), contrib=["onebot"]
    )
    platform = Platform(known={4243: _get_msg_answer(4243, PHOTO)}, delay_s=2.0)
    outcome = await loop.handle(_asking("4243"), platform)
    assert outcome.status == "replied"
    assert outcome.trace["quoted"] == {"source": "get_msg", "result": "timeout"}
    assert _sent_images(model) == []
    # a timeout is not kept: the next turn asks again
    platform.delay_s = None
    again = await loop.handle(_asking("4243", sender="30002"), platform)
    assert again.trace["quoted"] == {"source": "get_msg", "result": "found"}
    assert len(platform.get_msg_calls()) == 2


async def test_a_failing_get_msg_is_traced_and_never_fatal() -> None:
    loop, model = make_loop("嗯？", config=_config(), contrib=["onebot"])
    platform = Platform(fail=ConnectionError("the platform went away"))
    outcome = await loop.handle(_asking("4244"), platform)
    assert outcome.status == "replied"
    assert outcome.trace["quoted"] == {
        "source": "get_msg",
        "result": "error: ConnectionError: the platform went away",
    }
    assert _sent_images(model) == []


async def test_a_message_the_platform_does_not_know_is_missing_and_remembered() -> None:
    loop, _model = make_loop("嗯？", config=_config(), contrib=["onebot"])
    platform = Platform()
    first = await loop.handle(_asking("4245"), platform)
    second = await loop.handle(_asking("4245", sender="30002"), platform)
    assert first.trace["quoted"] == {"source": "get_msg", "result": "missing"}
    assert second.trace["quoted"]["cached"] is True
    assert len(platform.get_msg_calls()) == 1


async def test_the_event_comes_first_then_the_store_and_the_platform_is_not_asked() -> None:
    loop, model = make_loop("橘猫", "还是橘猫", config=_config(), contrib=["onebot"])
    platform = Platform(known={4246: _get_msg_answer(4246, SEEN)})
    quoted = attrs.evolve(
        message("看这个", message_id="4246", at=T0 - dt.timedelta(days=2)), images=(PHOTO,)
    )
    from_event = attrs.evolve(_asking("4246"), quoted=quoted)
    outcome = await loop.handle(from_event, platform)
    assert "quoted" not in outcome.trace
    assert _sent_images(model) == [PHOTO]
    # the store: a photo the group log recorded
    stored = attrs.evolve(
        message("拍到了", message_id="4247", at=T0 - dt.timedelta(minutes=1)), images=(SEEN,)
    )
    await loop.handle(
        IncomingEvent(platform="onebot", bot_id=BOT, group_id=GROUP, message=stored), platform
    )
    await loop.handle(_asking("4247", sender="30002"), platform)
    assert platform.get_msg_calls() == []
    assert _sent_images(model)[-1] == SEEN


async def test_no_plugin_fetching_from_the_platform_is_traced_as_unsupported() -> None:
    loop, _model = make_loop("嗯？", config=_config())  # contrib onebot not enabled
    platform = Platform(known={4248: _get_msg_answer(4248, PHOTO)})
    outcome = await loop.handle(_asking("4248"), platform)
    assert outcome.trace["quoted"] == {"source": "get_msg", "result": "unsupported"}
    assert platform.get_msg_calls() == []


async def test_a_silent_turn_asks_the_platform_nothing() -> None:
    loop, _model = make_loop(config=_config(), contrib=["onebot"])
    platform = Platform(known={4249: _get_msg_answer(4249, PHOTO)})
    bystander = event("哈哈哈", sender="30003", reply_to="4249")
    outcome = await loop.handle(bystander, platform)
    assert outcome.status == "silent"
    assert platform.get_msg_calls() == []


async def test_the_cache_keeps_the_newest_answers_only() -> None:
    fetches = QuotedFetches(entries=2)
    platform = Platform(known={n: _get_msg_answer(n, PHOTO) for n in (1, 2, 3)})
    loop, _model = make_loop(config=_config(), contrib=["onebot"])
    hooks = loop.runtime.plugins.hooks

    async def fetch(message_id: str) -> Any:
        return await fetches.fetch(
            hooks, message_id, bot_id=BOT, group_id=GROUP, transport=platform, timeout_s=1.0
        )

    for message_id in ("1", "2", "3"):
        assert (await fetch(message_id)).images == (PHOTO,)
    assert len(fetches) == 2
    assert (await fetch("3")).cached and (await fetch("2")).cached
    assert not (await fetch("1")).cached  # the oldest went first
    assert len(platform.get_msg_calls()) == 4


async def test_onebot_fetch_parses_the_get_msg_result_like_an_incoming_message() -> None:
    platform = Platform(known={-5: _get_msg_answer(-5, PHOTO, "file:///tmp/local.png")})
    pending = fetch_quoted_message("-5", BOT, GROUP, platform)
    assert pending is not None
    found = await pending
    assert isinstance(found, ChatMessage)
    assert (found.id, found.sender_id, found.text) == ("-5", "30077", "看这个")
    assert found.images[0] == PHOTO and len(found.images) == 2  # the local file is [图片] only
    other = attrs.evolve(platform, platform="telegram")
    assert fetch_quoted_message("-5", BOT, GROUP, other) is None


@pytest.mark.parametrize("result", [{"message_id": 1}, "not a message"])
async def test_a_get_msg_result_that_is_no_message_is_an_error(result: Any) -> None:
    loop, _model = make_loop("嗯？", config=_config(), contrib=["onebot"])
    platform = Platform(known={4250: result})
    outcome = await loop.handle(_asking("4250"), platform)
    assert outcome.trace["quoted"]["result"].startswith("error: ValueError")


async def test_hook_fetch_message() -> None:
    """Through the hook: contrib ``onebot`` answers for OneBot v11, a plugin's own wins, and no
    one answers for a platform no plugin speaks."""

    class Elsewhere:
        @hookimpl
        def fetch_message(
            self, message_id: str, bot_id: str, group_id: str | None, transport: Any
        ) -> Any:
            if transport.platform != "elsewhere":
                return None

            async def found() -> ChatMessage:
                return ChatMessage(id=message_id, sender_id="1", text="远方", time=T0)

            return found()

    runtime = Promptweave.from_config(
        Config(), contrib=["onebot"], extra_plugins=[Elsewhere()], stores=Stores.in_memory()
    )
    hooks = runtime.plugins.hooks
    onebot = Platform(known={-9: _get_msg_answer(-9, PHOTO)})
    pending = hooks.fetch_message("-9", BOT, GROUP, onebot)
    assert pending is not None and (await pending).images == (PHOTO,)  # type: ignore[union-attr]
    pending = hooks.fetch_message("7", BOT, GROUP, attrs.evolve(onebot, platform="elsewhere"))
    assert pending is not None and (await pending).text == "远方"  # type: ignore[union-attr]
    assert hooks.fetch_message("7", BOT, GROUP, attrs.evolve(onebot, platform="nowhere")) is None
    runtime.close()
