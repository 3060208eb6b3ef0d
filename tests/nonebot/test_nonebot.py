"""The NoneBot2 plugin under nonebug, with the OneBot v11 adapter's real event models."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from base_support import NONEBOT_CONFIG
from loop_support import ScriptedModel
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent
from nonebug import App
from onebot_events import SELF_ID, at, group_message_json, parse, preprocess, reply, text

from promptweave import BotLoop, Config, PhrasePool, Promptweave, Stores, SubmitResult, hookimpl
from promptweave.config import ProviderConfig, RoutingConfig
from promptweave.providers.exchange import ToolCall

GROUP_A, GROUP_B = 20001, 20002


def _send(group: int, *segments: dict[str, Any]) -> dict[str, Any]:
    return {"group_id": group, "message": list(segments)}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": value}}


class _OnePhrase:
    @hookimpl
    def register_low_engagement_pools(self, register):  # type: ignore[no-untyped-def]
        register(PhrasePool(name="only_this", phrases=("确实",)))


def _bot_texts(group: int) -> list[tuple[str, str | None]]:
    import datetime as dt

    from promptweave.contrib.nonebot import promptweave_loop

    rows = promptweave_loop().runtime.stores.group_log.recent_group_messages(  # type: ignore[union-attr]
        str(SELF_ID), str(group), until=dt.datetime(2100, 1, 1, tzinfo=dt.UTC), limit=50
    )
    return [(row.text, row.id) for row in rows if row.sender_id == str(SELF_ID)]


async def test_start_up_opens_one_loop_with_the_configured_promptweave(app: App) -> None:
    from promptweave.contrib.nonebot import promptweave_loop

    loop = promptweave_loop()
    assert loop.runtime.config.source == str(NONEBOT_CONFIG)
    assert loop.runtime.config.store.backend == "memory"
    assert "group_tools" in loop.runtime.plugins.infos
    assert loop.fallback_names == ("小织",)
    assert loop.runtime.bot_for(str(SELF_ID), loop.fallback_names).name == "小织"


async def test_an_at_question_is_answered_in_bubbles_with_the_ids_recorded(
    app: App, use_loop: Any
) -> None:
    from promptweave.contrib.nonebot import messages

    model = use_loop("周六晚上七点桌游局\n在格子桌游吧")
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = await preprocess(
            bot,
            parse(
                group_message_json(
                    group_id=GROUP_A, segments=[at(SELF_ID), text(" 周末有什么活动吗？")]
                )
            ),
        )
        assert event.to_me
        ctx.receive_event(bot, event)
        ctx.should_call_api(
            "send_group_msg",
            _send(GROUP_A, _text("周六晚上七点桌游局")),
            result={"message_id": 9001},
        )
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_A, _text("在格子桌游吧")), result={"message_id": 9002}
        )
    assert _bot_texts(GROUP_A) == [("周六晚上七点桌游局", "9001"), ("在格子桌游吧", "9002")]
    # the question reached the model with the @ taken from original_message: addressed
    assert "周末有什么活动吗" in model.requests[0].body_text()


async def test_a_reply_to_a_candidate_is_quoted(app: App, use_loop: Any) -> None:
    from promptweave.contrib.nonebot import messages

    use_loop(
        "土豆比鸡多",
        routing=RoutingConfig(low_engagement=False, quote_probability=1.0, quote_cooldown_s=0),
    )
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        earlier = parse(
            group_message_json(
                group_id=GROUP_A,
                user_id=30031,
                message_id=555,
                segments=[text("今天食堂又是土豆烧鸡")],
            )
        )
        ctx.receive_event(bot, await preprocess(bot, earlier))
        ctx.should_call_api(
            "get_msg",
            {"message_id": 555},
            result={
                "time": 1764417600,
                "message_type": "group",
                "message_id": 555,
                "real_id": 555,
                "sender": {"user_id": 30031, "nickname": "阿蒙"},
                "message": [{"type": "text", "data": {"text": "今天食堂又是土豆烧鸡"}}],
            },
        )
        question = parse(
            group_message_json(
                group_id=GROUP_A,
                time=1764417660,
                segments=[reply(555), at(SELF_ID), text(" 你怎么看？")],
            )
        )
        ctx.receive_event(bot, await preprocess(bot, question))
        ctx.should_call_api(
            "send_group_msg",
            _send(GROUP_A, {"type": "reply", "data": {"id": "555"}}, _text("土豆比鸡多")),
            result={"message_id": 9003},
        )


#: A quoted photo the store never saw (sent before the bot joined), and its id as newer QQ
#: clients give it.
QUOTED_PHOTO = "https://multimedia.nt.qq.com.cn/download?appid=1407&fileid=quoted-cat"
QUOTED_ID = -2147480001
SEES_IMAGES = ProviderConfig(supports_images=True, inline_images=False)


def _quoted_photo_answer() -> dict[str, Any]:
    """What ``get_msg`` answers for the quoted photo (NapCat's shape)."""
    return {
        "time": 1764000000,
        "message_type": "group",
        "message_id": QUOTED_ID,
        "real_id": QUOTED_ID,
        "sender": {"user_id": 30077, "nickname": "老王"},
        "message": [
            {
                "type": "image",
                "data": {"file": "cat.jpg", "url": QUOTED_PHOTO, "summary": "[图片]"},
            }
        ],
    }


def _sent_images(model: ScriptedModel) -> list[str]:
    return [
        part["image_url"]["url"]
        for request in model.requests
        for entry in request.body["messages"]
        if isinstance(entry["content"], list)
        for part in entry["content"]
        if part["type"] == "image_url"
    ]


async def test_the_image_of_the_quoted_message_comes_from_event_reply(
    app: App, use_loop: Any
) -> None:
    from promptweave.contrib.nonebot import incoming_event, messages

    model = use_loop("是只橘猫", provider=SEES_IMAGES)
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        question = parse(
            group_message_json(
                group_id=GROUP_A, segments=[reply(QUOTED_ID), at(SELF_ID), text(" 这是什么猫")]
            )
        )
        # the adapter reads the replied-to message itself (get_msg) into event.reply
        ctx.should_call_api("get_msg", {"message_id": QUOTED_ID}, result=_quoted_photo_answer())
        event = await preprocess(bot, question)
        assert event.reply is not None
        quoted = incoming_event(bot, event).quoted  # type: ignore[arg-type]
        assert quoted is not None
        assert (quoted.id, quoted.images) == (str(QUOTED_ID), (QUOTED_PHOTO,))
        ctx.receive_event(bot, event)
        # no second get_msg: the event's reply was the source
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_A, _text("是只橘猫")), result={"message_id": 9011}
        )
    assert _sent_images(model) == [QUOTED_PHOTO]


async def test_without_event_reply_the_plugin_asks_get_msg_itself(app: App, use_loop: Any) -> None:
    from promptweave.contrib.nonebot import messages

    model = use_loop("是只橘猫", provider=SEES_IMAGES)
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        question = parse(
            group_message_json(
                group_id=GROUP_B, segments=[reply(QUOTED_ID), at(SELF_ID), text(" 这是什么猫")]
            )
        )
        # the adapter's own get_msg failed (the implementation was busy): no event.reply
        ctx.should_call_api("get_msg", {"message_id": QUOTED_ID}, exception=TimeoutError("busy"))
        event = await preprocess(bot, question)
        assert event.reply is None
        ctx.receive_event(bot, event)
        # neither the event nor the store has the photo: the loop asks the platform
        ctx.should_call_api("get_msg", {"message_id": QUOTED_ID}, result=_quoted_photo_answer())
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_B, _text("是只橘猫")), result={"message_id": 9012}
        )
    assert _sent_images(model) == [QUOTED_PHOTO]


async def test_a_canned_phrase_is_sent_without_a_model_call(app: App, use_loop: Any) -> None:
    from promptweave.contrib.nonebot import messages

    # random.Random(1) first draws 0.134 < 0.35: the low-engagement exit speaks.
    model = use_loop("不该被调用", routing=RoutingConfig(), plugins=(_OnePhrase(),), seed=1)
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(group_message_json(group_id=GROUP_A, segments=[text("哈哈哈哈")]))
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_A, _text("确实")), result={"message_id": 9004}
        )
    assert model.requests == []
    assert _bot_texts(GROUP_A) == [("确实", "9004")]


async def test_bystander_chatter_gets_silence(app: App, use_loop: Any) -> None:
    from promptweave.contrib.nonebot import messages

    model = use_loop("不该被调用")
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(group_message_json(group_id=GROUP_A, segments=[text("今天好热啊大家")]))
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_pass_rule(messages)
    assert model.requests == [] and _bot_texts(GROUP_A) == []


async def test_a_tool_request_runs_the_tool_and_answers_with_its_result(
    app: App, use_loop: Any
) -> None:
    from promptweave.contrib.nonebot import messages

    model = use_loop(
        SubmitResult(
            sent=True,
            status="ok",
            tool_calls=(ToolCall(id="c1", name="roll_dice", arguments='{"count": 2}'),),
        ),
        "掷好了",
    )
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(
            group_message_json(group_id=GROUP_A, segments=[at(SELF_ID), text(" 帮我掷骰子")])
        )
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_A, _text("掷好了")), result={"message_id": 9005}
        )
    assert '"roll_dice"' in model.requests[0].body_text()
    assert "2d6:" in model.requests[1].body_text()


async def test_the_model_down_means_silence(app: App, use_loop: Any) -> None:
    from promptweave.contrib.nonebot import messages

    use_loop(SubmitResult(sent=True, status="error", detail="HTTP 503: overloaded"))
    async with app.test_matcher(messages) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = parse(group_message_json(group_id=GROUP_A, segments=[at(SELF_ID), text(" 在吗？")]))
        ctx.receive_event(bot, await preprocess(bot, event))
        ctx.should_pass_rule(messages)
    assert _bot_texts(GROUP_A) == []


async def test_two_groups_at_once_each_get_their_own_answer(app: App, use_loop: Any) -> None:
    gate = asyncio.Event()

    async def answer(request):  # type: ignore[no-untyped-def]
        if "第一组" in request.body_text():
            await gate.wait()  # group A waits until group B has been answered
            return SubmitResult(sent=True, status="ok", text="答第一组")
        gate.set()
        return SubmitResult(sent=True, status="ok", text="答第二组")

    use_loop(answer)
    async with app.test_api() as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        first = parse(
            group_message_json(group_id=GROUP_A, segments=[at(SELF_ID), text(" 第一组的问题？")])
        )
        second = parse(
            group_message_json(group_id=GROUP_B, segments=[at(SELF_ID), text(" 第二组的问题？")])
        )
        assert isinstance(first, GroupMessageEvent) and isinstance(second, GroupMessageEvent)
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_B, _text("答第二组")), result={"message_id": 9102}
        )
        ctx.should_call_api(
            "send_group_msg", _send(GROUP_A, _text("答第一组")), result={"message_id": 9101}
        )
        await asyncio.gather(bot.handle_event(first), bot.handle_event(second))
    assert _bot_texts(GROUP_A) == [("答第一组", "9101")]
    assert _bot_texts(GROUP_B) == [("答第二组", "9102")]


def test_what_the_learners_did_and_could_not_do_is_in_nonebots_log() -> None:
    import datetime as dt

    from nonebot import logger

    from promptweave import ChatMessage, Learner
    from promptweave.contrib.nonebot import _forward_logs
    from promptweave.learning.stage import LearningStage

    def broken(_batch: object) -> None:
        raise RuntimeError("cannot read the group")

    # As the plugin's start-up does: a CLI test earlier in the same process replaced the
    # handlers of the promptweave logger with its own.
    _forward_logs()
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="INFO")
    try:
        stores = Stores.in_memory()
        stage = LearningStage(
            learners=[Learner(name="broken", writes=("note",), run=broken, min_batch=1)],
            stores=stores,
            config=Config(),
        )
        when = dt.datetime(2026, 12, 1, 20, 0, tzinfo=dt.UTC)
        message = ChatMessage(sender_id="7", text="早", time=when, id="m1")
        assert stores.group_log is not None
        stores.group_log.append_group_message(str(SELF_ID), str(GROUP_A), message)
        stage.note(str(SELF_ID), str(GROUP_A), when)
        stage.run_due(when, threads=False)
    finally:
        logger.remove(sink)
    [line] = [line for line in lines if "promptweave.learning" in line]
    assert "WARNING" in line
    assert f"learner broken in group {GROUP_A} (bot {SELF_ID}) failed on 1 messages" in line
    assert "RuntimeError: cannot read the group" in line


@pytest.fixture
def nonebot_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """NoneBot's log lines of WARNING and above, with a fresh per-cause limiter."""
    from nonebot import logger

    import promptweave.contrib.nonebot as plugin
    from promptweave.contrib.nonebot.failure_log import FailureLog

    monkeypatch.setattr(plugin._state, "failures", FailureLog(warn=logger.warning))
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    yield lines
    logger.remove(sink)


async def _ask(app: App, *questions: str) -> None:
    from promptweave.contrib.nonebot import messages

    async with app.test_api() as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        for question in questions:
            event = parse(
                group_message_json(group_id=GROUP_A, segments=[at(SELF_ID), text(question)])
            )
            await bot.handle_event(await preprocess(bot, event))
    assert messages is not None


async def test_the_model_down_is_one_warning_with_the_reason_and_the_fix(
    app: App, use_loop: Any, nonebot_warnings: list[str]
) -> None:
    use_loop(
        SubmitResult(sent=False, status="error", detail="ConnectError: Connection refused"),
        SubmitResult(sent=False, status="error", detail="ConnectError: Connection refused"),
    )
    await _ask(app, " 在吗？", " 还在吗？")
    [line] = [line for line in nonebot_warnings if "got no answer" in line]
    assert "WARNING" in line
    assert "the model failed (unreachable): ConnectError: Connection refused" in line
    assert "Fix: start the model server, or correct [provider] base_url" in line
    assert _bot_texts(GROUP_A) == []


async def test_no_api_key_is_warned_of_naming_the_keys_to_set(
    app: App, nonebot_warnings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import promptweave.contrib.nonebot as plugin
    from promptweave.config import PluginsConfig

    for name in (
        "PROMPTWEAVE_API_KEY",
        "OPENAI_API_KEY",
        "PROMPTWEAVE_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    config = Config(
        plugins=PluginsConfig(contrib=("openai_compat",)),
        provider=ProviderConfig(api="openai_chat", model="gpt-4o-mini"),
        routing=RoutingConfig(low_engagement=False),
    )
    runtime = Promptweave.from_config(config, contrib=["onebot"], stores=Stores.in_memory())
    monkeypatch.setattr(plugin._state, "loop", BotLoop(runtime=runtime, fallback_names=("小织",)))
    try:
        await _ask(app, " 周末有什么活动吗？")
    finally:
        runtime.close()
    [line] = [line for line in nonebot_warnings if "got no answer" in line]
    assert "the model failed (no_key): no API key for the endpoint" in line
    assert "PROMPTWEAVE_API_KEY in .env" in line


def test_what_the_loop_warns_of_is_in_nonebots_log() -> None:
    import logging

    from nonebot import logger

    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="INFO")
    try:
        logging.getLogger("promptweave.loop").warning("message %s: turn deadline reached", "m9")
        logging.getLogger("promptweave.stages").debug("not for the operator")
    finally:
        logger.remove(sink)
    assert len(lines) == 1
    assert "WARNING" in lines[0]
    assert "[promptweave.loop] message m9: turn deadline reached" in lines[0]


async def test_a_config_mistake_stops_the_start_with_one_error_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nonebot import logger

    import promptweave.contrib.nonebot as plugin
    from promptweave.contrib.nonebot.settings import PluginConfig
    from promptweave.errors import ConfigError

    broken = tmp_path / "promptweave.toml"
    broken.write_text("[provider]\nmodle = 'x'\n", encoding="utf-8")
    monkeypatch.setattr(
        plugin, "get_plugin_config", lambda _cls: PluginConfig(promptweave_config=str(broken))
    )
    opened = plugin._state.loop
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="ERROR")
    try:
        with pytest.raises(ConfigError):
            await plugin._open()
    finally:
        logger.remove(sink)
    assert plugin._state.loop is opened
    [line] = lines
    assert "promptweave cannot start:" in line
    assert f"{broken}: extra fields found (modle); did you mean model? @ $.provider" in line
