"""The delivery hooks: read_model_answer, choose_sticker, send_message; their built-ins."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest

import promptweave
from promptweave import (
    Config,
    ModelAnswer,
    OutgoingMessage,
    Promptweave,
    ReplyShape,
    Segment,
    SendReceipt,
    hookimpl,
)
from promptweave.config import DeliveryConfig
from promptweave.delivery.onebot import OneBotTransport

SHAPE = ReplyShape(max_bubbles=2, max_chars=18)


def group_message(text: str = "好耶") -> OutgoingMessage:
    return OutgoingMessage(
        bot_id="10001",
        group_id="20001",
        user_id="30017",
        segments=(Segment.text(text),),
        bubble_index=0,
    )


@attrs.define
class FakeOneBot:
    """A OneBot connection that records each call and answers with ``result`` (or raises it)."""

    result: Any = attrs.field(factory=lambda: {"message_id": 4242})
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    async def call_api(self, api: str, **params: Any) -> Any:
        self.calls.append((api, params))
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


@attrs.define
class OtherPlatform:
    platform: str = "telegram"

    async def call_api(self, api: str, **params: Any) -> Any:
        raise AssertionError("the OneBot built-in must not call another platform")


def send(runtime: Promptweave, message: OutgoingMessage, transport: Any) -> SendReceipt | None:
    pending = runtime.plugins.pm.hook.send_message(message=message, transport=transport)
    if pending is None:
        return None
    return asyncio.run(pending)


def test_what_the_delivery_hooks_pass_is_public() -> None:
    # The records a read_model_answer, choose_sticker or send_message plugin receives and returns,
    # and the built-in reader it may call; planning and OneBot stay in their modules.
    for name in (
        "ModelAnswer",
        "ReplyShape",
        "Segment",
        "OutgoingMessage",
        "SendReceipt",
        "Transport",
        "read_model_answer_default",
    ):
        assert name in promptweave.__all__ and hasattr(promptweave, name), name


def test_the_delivery_internals_are_found_in_their_modules() -> None:
    for module, names in {
        "promptweave.delivery.outgoing": ("DeliveryPlan",),
        "promptweave.delivery.plan": ("PauseConfig", "plan_delivery", "plan_phrase"),
        "promptweave.delivery.onebot": (
            "ONEBOT_V11",
            "OneBotTransport",
            "cq_escape",
            "cq_unescape",
            "onebot_action",
            "onebot_segments",
        ),
        "promptweave.config": ("DeliveryConfig",),
    }.items():
        defining = importlib.import_module(module)
        assert [name for name in names if name not in defining.__all__] == [], module


def test_the_delivery_builtin_is_registered_like_the_others(
    promptweave_runtime: Promptweave,
) -> None:
    plugin = promptweave_runtime.plugins.pm.get_plugin("delivery")
    assert plugin is not None
    hooks = {
        impl.plugin_name
        for impl in promptweave_runtime.plugins.pm.hook.send_message.get_hookimpls()
    }
    assert "delivery" in hooks


# -- read_model_answer ----------------------------------------------------------------------------


def test_hook_read_model_answer(register_plugin: Callable[..., Promptweave]) -> None:
    class Reader:
        @hookimpl
        def read_model_answer(self, text: str, shape: ReplyShape) -> ModelAnswer | None:
            if not text.startswith("<think>"):
                return None
            spoken = text.split("</think>", 1)[1].strip()
            return ModelAnswer(bubbles=tuple(spoken.splitlines()[: shape.max_bubbles]))

    runtime = register_plugin(Reader(), name="reasoning_reader")
    hook = runtime.plugins.pm.hook.read_model_answer
    found = hook(
        text="<think>对方在问时间</think>\n八点\n别迟到",
        shape=SHAPE,
        system_prompt="",
        config=runtime.config,
    )
    assert found.bubbles == ("八点", "别迟到")
    # Returning None hands the answer to the built-in reply contract.
    builtin = hook(text="**好的**", shape=SHAPE, system_prompt="", config=runtime.config)
    assert (builtin.bubbles, builtin.removed) == (("好的",), ("markdown",))


def test_the_builtin_reader_drops_stickers_when_configured(
    promptweave_runtime: Promptweave,
) -> None:
    hook = promptweave_runtime.plugins.pm.hook.read_model_answer
    text = "好耶\n[表情：开心]"
    kept = hook(text=text, shape=SHAPE, system_prompt="", config=Config())
    dropped = hook(
        text=text,
        shape=SHAPE,
        system_prompt="",
        config=Config(delivery=DeliveryConfig(sticker="drop")),
    )
    assert (kept.sticker, dropped.sticker) == ("开心", None)


def test_the_builtin_reader_guards_against_a_leak_of_the_given_prompt(
    promptweave_runtime: Promptweave,
) -> None:
    found = promptweave_runtime.plugins.pm.hook.read_model_answer(
        text="【本轮策略】\n- 回复目标：闲聊",
        shape=SHAPE,
        system_prompt="【本轮策略】\n- 回复目标：闲聊",
        config=Config(),
    )
    assert (found.silent, found.reason) == (True, "leak")


# -- choose_sticker -------------------------------------------------------------------------------


def test_hook_choose_sticker(register_plugin: Callable[..., Promptweave]) -> None:
    class ImageStickers:
        @hookimpl
        def choose_sticker(self, intent: str, group_id: str | None) -> Segment | None:
            if group_id != "20001" or intent != "狗头":
                return None
            return Segment(kind="image", data={"file": "https://stickers.example/doge.gif"})

    runtime = register_plugin(ImageStickers(), name="image_stickers")
    hook = runtime.plugins.pm.hook.choose_sticker
    config = Config(delivery=DeliveryConfig(faces={"笑": "178"}))
    doge = hook(intent="狗头", bot_id="10001", group_id="20001", config=config)
    assert doge == Segment(kind="image", data={"file": "https://stickers.example/doge.gif"})
    # Another intent falls through to the built-in faces table.
    assert hook(intent="笑", bot_id="10001", group_id="20001", config=config) == Segment.face("178")


def test_the_builtin_sticker_is_dropped_unless_mapped(promptweave_runtime: Promptweave) -> None:
    hook = promptweave_runtime.plugins.pm.hook.choose_sticker
    assert hook(intent="笑", bot_id="1", group_id="2", config=Config()) is None
    faces = DeliveryConfig(faces={"笑": 178})  # type: ignore[dict-item]
    assert hook(
        intent=" 笑 ", bot_id="1", group_id=None, config=Config(delivery=faces)
    ) == Segment.face("178")
    drop = DeliveryConfig(sticker="drop", faces={"笑": "178"})
    assert hook(intent="笑", bot_id="1", group_id="2", config=Config(delivery=drop)) is None


# -- send_message ---------------------------------------------------------------------------------


def test_hook_send_message(register_plugin: Callable[..., Promptweave]) -> None:
    sent: list[str] = []

    class Telegram:
        @hookimpl
        def send_message(
            self, message: OutgoingMessage, transport: Any
        ) -> Awaitable[SendReceipt] | None:
            if transport.platform != "telegram":
                return None
            return self._send(message)

        async def _send(self, message: OutgoingMessage) -> SendReceipt:
            sent.append(message.text)
            return SendReceipt(ok=True, message_id="tg-1")

    runtime = register_plugin(Telegram(), name="telegram")
    assert send(runtime, group_message("hi"), OtherPlatform()) == SendReceipt(
        ok=True, message_id="tg-1"
    )
    assert sent == ["hi"]
    # A OneBot transport is not this plugin's: the built-in sends it.
    bot = FakeOneBot()
    assert send(runtime, group_message("嗯"), OneBotTransport(bot)) == SendReceipt(
        ok=True, message_id="4242"
    )
    assert bot.calls == [
        (
            "send_group_msg",
            {"group_id": 20001, "message": [{"type": "text", "data": {"text": "嗯"}}]},
        )
    ]


def test_no_implementation_handles_an_unknown_platform(promptweave_runtime: Promptweave) -> None:
    assert send(promptweave_runtime, group_message(), OtherPlatform(platform="matrix")) is None


@pytest.mark.parametrize("result", [{"message_id": 4242}, 4242, "4242", {"message_id": "4242"}])
def test_the_builtin_reads_the_message_id_of_a_dict_or_a_bare_id(
    promptweave_runtime: Promptweave, result: Any
) -> None:
    receipt = send(promptweave_runtime, group_message(), OneBotTransport(FakeOneBot(result=result)))
    assert receipt == SendReceipt(ok=True, message_id="4242")


@pytest.mark.parametrize("result", [None, {}, {"message_id": None}, {"retcode": 100}, True])
def test_a_result_without_a_message_id_is_a_failed_receipt(
    promptweave_runtime: Promptweave, result: Any
) -> None:
    receipt = send(promptweave_runtime, group_message(), OneBotTransport(FakeOneBot(result=result)))
    assert receipt is not None and receipt.ok is False
    assert receipt.message_id is None
    assert "no message id" in receipt.detail


def test_a_call_that_raises_is_a_failed_receipt_not_an_exception(
    promptweave_runtime: Promptweave,
) -> None:
    bot = FakeOneBot(result=ConnectionError("websocket closed"))
    receipt = send(promptweave_runtime, group_message(), OneBotTransport(bot))
    assert receipt == SendReceipt(ok=False, detail="ConnectionError: websocket closed")


def test_a_private_message_is_sent_with_send_private_msg(promptweave_runtime: Promptweave) -> None:
    bot = FakeOneBot()
    private = attrs.evolve(group_message("在的"), group_id=None)
    assert send(promptweave_runtime, private, OneBotTransport(bot)).ok  # type: ignore[union-attr]
    assert bot.calls[0][0] == "send_private_msg"
    assert bot.calls[0][1]["user_id"] == 30017
