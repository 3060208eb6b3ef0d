"""The live loop: one incoming event carried through to delivered, recorded bubbles."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
from typing import Any

import attrs
import pytest
from loop_support import (
    BOT,
    GROUP,
    T0,
    AlwaysPhrase,
    Certain,
    RecordingTransport,
    event,
    make_loop,
    message,
)

from promptweave import BotLoop, Config, SubmitResult, Tool, hookimpl
from promptweave.config import (
    HistoryConfig,
    LoopConfig,
    RoutingConfig,
    SessionConfig,
    TurnContextConfig,
)
from promptweave.loop.events import IncomingEvent, OutcomeStatus
from promptweave.pipeline import stages
from promptweave.session.reader import read_session

EVERYONE = {"type": "object", "properties": {}}


def _later(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def _group_log(loop: BotLoop, group: str = GROUP) -> list[tuple[str, str, str | None]]:
    rows = loop.runtime.stores.group_log.recent_group_messages(  # type: ignore[union-attr]
        BOT, group, until=_later(3600), limit=50
    )
    return [(row.sender_id, row.text, row.id) for row in rows]


def test_addressed_question_is_answered_in_bubbles_and_recorded() -> None:
    loop, model = make_loop("周六晚上七点有桌游局\n在格子桌游吧")
    transport = RecordingTransport()
    question = event("小织 周末有什么活动吗？", addressed=True, message_id="7001")

    outcome = _run(loop.handle(question, transport))

    assert outcome.status == OutcomeStatus.REPLIED
    assert outcome.bubbles == ("周六晚上七点有桌游局", "在格子桌游吧")
    assert outcome.message_ids == ("9001", "9002")
    assert [api for api, _ in transport.calls] == ["send_group_msg", "send_group_msg"]
    assert transport.calls[0][1]["group_id"] == int(GROUP)
    assert transport.texts() == ["周六晚上七点有桌游局", "在格子桌游吧"]
    # the model saw the assembled system prompt
    assert "【安全约束】" in model.requests[0].body_text()
    # the group log holds the question and each bubble under its platform id
    assert _group_log(loop) == [
        ("30001", "小织 周末有什么活动吗？", "7001"),
        (BOT, "周六晚上七点有桌游局", "9001"),
        (BOT, "在格子桌游吧", "9002"),
    ]
    stores = loop.runtime.stores
    assert stores.bot_replies.lookup(BOT, GROUP, "9002", now=T0) == "在格子桌游吧"  # type: ignore[union-attr]
    session = stores.sessions.user_turns(BOT, GROUP, "30001", until=_later(60), limit=10)  # type: ignore[union-attr]
    assert [(row.role, row.content) for row in session] == [
        ("user", "小织 周末有什么活动吗？"),
        ("assistant", "周六晚上七点有桌游局\n在格子桌游吧"),
    ]
    assert set(outcome.stage_durations_ms) >= {"record", "route", "render", "submit", "deliver"}


def test_a_reply_turn_reads_the_session_once_for_its_route_and_its_assembly(monkeypatch) -> None:
    reads = []

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(args[3].message.text)
        return read_session(*args, **kwargs)

    monkeypatch.setattr(stages, "read_session", counted)
    loop, _ = make_loop("在的")
    outcome = _run(loop.handle(event("小织 在吗？", addressed=True), RecordingTransport()))
    assert outcome.status == OutcomeStatus.REPLIED
    assert reads == ["小织 在吗？"]


def test_the_providers_usage_is_traced_and_kept_with_the_answer_in_the_session() -> None:
    from promptweave.providers.exchange import Usage

    usage = Usage(
        prompt_tokens=1800, output_tokens=20, cached_tokens=1536, cache_creation_tokens=None
    )
    loop, _ = make_loop(SubmitResult(sent=True, status="ok", text="有的\n周六桌游", usage=usage))
    outcome = _run(loop.handle(event("小织 周末有活动吗？", addressed=True), RecordingTransport()))
    assert outcome.usage == usage
    rows = loop.runtime.stores.sessions.user_turns(BOT, GROUP, "30001", until=_later(60), limit=10)  # type: ignore[union-attr]
    assert [row.usage for row in rows] == [
        None,
        {"prompt_tokens": 1800, "output_tokens": 20, "cached_tokens": 1536},
    ]


def test_bystander_chatter_stays_silent_without_a_model_call() -> None:
    loop, model = make_loop("不该被调用")
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("今天食堂又是土豆烧鸡"), transport))
    assert outcome.status == OutcomeStatus.SILENT
    assert outcome.decision is not None and outcome.decision.action.value == "pass"
    assert transport.calls == [] and model.requests == []
    assert _group_log(loop)[-1][1] == "今天食堂又是土豆烧鸡"


def test_low_engagement_phrase_is_sent_then_recorded_without_a_model_call() -> None:
    config = Config(loop=LoopConfig(turn_deadline_s=5.0))
    loop, model = make_loop("不该被调用", config=config, plugins=[AlwaysPhrase()])
    loop.runtime.rng = Certain()  # type: ignore[assignment]
    loop.runtime.router = loop.runtime._build_router()
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("哈哈哈"), transport))
    assert outcome.status == OutcomeStatus.PHRASE
    assert model.requests == []
    assert len(transport.calls) == 1 and transport.texts()[0] in outcome.bubbles
    assert _group_log(loop)[-1] == (BOT, outcome.bubbles[0], "9001")


def test_model_pass_and_an_empty_answer_mean_silence_and_nothing_is_recorded() -> None:
    loop, _ = make_loop("PASS", "```\n\n```")
    transport = RecordingTransport()
    first = _run(loop.handle(event("小织 你在吗？", addressed=True), transport))
    second = _run(loop.handle(event("小织 说句话？", addressed=True), transport))
    assert (first.status, first.reason) == (OutcomeStatus.SILENT, "model_pass")
    assert second.status == OutcomeStatus.SILENT
    assert transport.calls == []
    assert all(sender != BOT for sender, _, _ in _group_log(loop))


def test_a_leaked_section_header_is_not_sent() -> None:
    loop, _ = make_loop("【当前时间】\n- 本轮时间：2026-11-28 20:41")
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("小织 现在几点？", addressed=True), transport))
    assert (outcome.status, outcome.reason) == (OutcomeStatus.SILENT, "model_leak")
    assert transport.calls == []


def test_provider_failure_ends_in_silence_traced_and_the_loop_goes_on() -> None:
    loop, _ = make_loop(
        SubmitResult(sent=True, status="error", detail="HTTP 503: overloaded"), "好的"
    )
    transport = RecordingTransport()
    failed = _run(loop.handle(event("小织 在吗？", addressed=True), transport))
    assert (failed.status, failed.reason) == (OutcomeStatus.FAILED, "provider_error")
    assert failed.trace["submit"]["detail"] == "HTTP 503: overloaded"
    answered = _run(loop.handle(event("小织 在吗？？", addressed=True), transport))
    assert answered.status == OutcomeStatus.REPLIED


def test_a_plugin_raising_in_submission_is_isolated() -> None:
    loop, _ = make_loop(RuntimeError("the client crashed"))
    outcome = _run(loop.handle(event("小织 在吗？", addressed=True), RecordingTransport()))
    assert outcome.status == OutcomeStatus.FAILED


def test_a_failed_send_is_not_recorded_and_stops_the_later_bubbles() -> None:
    loop, _ = make_loop("第一句\n第二句\n第三句")
    transport = RecordingTransport(fail_on={2})
    outcome = _run(loop.handle(event("小织 讲讲？", addressed=True), transport))
    assert outcome.status == OutcomeStatus.REPLIED
    assert outcome.bubbles == ("第一句",)
    assert len(transport.calls) == 2
    assert [text for sender, text, _ in _group_log(loop) if sender == BOT] == ["第一句"]
    assert outcome.trace["sends"][1]["ok"] is False


def test_quote_decision_quotes_the_candidate_the_user_replied_to() -> None:
    config = Config(
        routing=RoutingConfig(low_engagement=False, quote_probability=1.0, quote_cooldown_s=0),
        loop=LoopConfig(turn_deadline_s=5.0),
    )
    loop, _ = make_loop("土豆比鸡多", config=config)
    transport = RecordingTransport()
    _run(loop.handle(event("今天食堂又是土豆烧鸡", message_id="8001", sender="30031"), transport))
    outcome = _run(
        loop.handle(
            event("小织 这个你怎么看？", addressed=True, reply_to="8001", at=_later(30)),
            transport,
        )
    )
    assert outcome.decision is not None and outcome.decision.delivery_style.value == "quote"
    first = transport.calls[-1][1]["message"]
    assert first[0] == {"type": "reply", "data": {"id": "8001"}}


def test_private_chat_is_answered_with_send_private_msg() -> None:
    loop, _ = make_loop("在的")
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("在吗", group=None, sender="40004"), transport))
    assert outcome.status == OutcomeStatus.REPLIED
    assert transport.calls[0][0] == "send_private_msg"
    assert transport.calls[0][1]["user_id"] == 40004


def test_turns_of_one_group_run_in_order_and_groups_run_concurrently() -> None:
    order: list[str] = []
    gate = asyncio.Event()

    async def answer(request):  # type: ignore[no-untyped-def]
        text = request.body_text()
        # the question is the request's last user message (earlier ones are in its history)
        latest = max(
            ("A1", "第一个问题"),
            ("A2", "第二个问题"),
            ("B", "别的群"),
            key=lambda t: text.rfind(t[1]),
        )
        tag = latest[0]
        order.append(f"start {tag}")
        if tag == "A1":
            await gate.wait()  # group A's first turn holds until group B has answered
        order.append(f"end {tag}")
        return SubmitResult(sent=True, status="ok", text=f"答{tag}")

    loop, _ = make_loop(answer)

    async def scenario() -> None:
        transport = RecordingTransport()
        first = asyncio.create_task(
            loop.handle(event("小织 第一个问题？", addressed=True), transport)
        )
        await asyncio.sleep(0.05)
        second = asyncio.create_task(
            loop.handle(event("小织 第二个问题？", addressed=True, at=_later(1)), transport)
        )
        other = await loop.handle(
            event("小织 别的群的问题？", addressed=True, group="20002"), transport
        )
        assert other.status == OutcomeStatus.REPLIED
        gate.set()
        assert (await first).status == OutcomeStatus.REPLIED
        assert (await second).status == OutcomeStatus.REPLIED

    _run(scenario())
    assert order == ["start A1", "start B", "end B", "end A1", "start A2", "end A2"]


def _past_a_full_queue(texts: list[str]) -> tuple[list[Any], BotLoop]:
    """``texts`` sent to a conversation whose queue (one place) is full: one turn waits on the
    model, one message waits behind it. The outcomes of ``texts``, and the loop."""
    gate = asyncio.Event()

    async def slow(request):  # type: ignore[no-untyped-def]
        await gate.wait()
        return SubmitResult(sent=True, status="ok", text="好")

    config = Config(
        routing=RoutingConfig(low_engagement=False),
        loop=LoopConfig(queue_per_conversation=1, turn_deadline_s=5.0),
    )
    loop, _ = make_loop(slow, config=config)

    async def scenario() -> list[Any]:
        transport = RecordingTransport()
        running = asyncio.create_task(loop.handle(event("小织 一？", addressed=True), transport))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(loop.handle(event("小织 二？", addressed=True), transport))
        await asyncio.sleep(0.05)
        dropped = [await loop.handle(event(text, addressed=True), transport) for text in texts]
        gate.set()
        await running
        await waiting
        return dropped

    return _run(scenario()), loop


def test_a_full_conversation_queue_drops_the_event_but_records_it() -> None:
    [dropped], loop = _past_a_full_queue(["小织 三？"])
    assert [dropped.status, dropped.reason] == [OutcomeStatus.DROPPED, "queue_full"]
    assert "小织 三？" in [text for _, text, _ in _group_log(loop)]


def test_a_flood_into_a_full_queue_is_logged_in_two_lines_not_one_a_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flood = [f"小织 {n}？" for n in ("三", "四", "五", "六")]
    with caplog.at_level(logging.WARNING, logger="promptweave.loop"):
        dropped, loop = _past_a_full_queue(flood)
    assert [outcome.reason for outcome in dropped] == ["queue_full"] * 4
    lines = [record.getMessage() for record in caplog.records if "queue" in record.getMessage()]
    assert len(lines) == 2, lines
    assert "queue full, message" in lines[0] and "recorded but not answered" in lines[0]
    assert "3 more messages recorded but not answered while its queue was full" in lines[1]
    texts = [text for _, text, _ in _group_log(loop)]
    assert all(text in texts for text in flood)  # recorded, every one


def test_a_hung_model_is_cut_at_the_turn_deadline_naming_the_stage() -> None:
    async def hangs(request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)

    config = Config(
        routing=RoutingConfig(low_engagement=False), loop=LoopConfig(turn_deadline_s=0.3)
    )
    loop, _ = make_loop(hangs, config=config)
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("小织 在吗？", addressed=True), transport))
    assert (outcome.status, outcome.reason) == (OutcomeStatus.FAILED, "deadline")
    assert outcome.trace["deadline"]["stage"] == "submit"
    assert transport.calls == []


def test_a_malformed_payload_is_rejected_with_the_problem_named() -> None:
    loop, _ = make_loop(contrib=["onebot"])
    outcome = _run(
        loop.handle_payload("onebot", {"post_type": "message"}, BOT, RecordingTransport())
    )
    assert outcome.status == OutcomeStatus.REJECTED
    assert "lacks" in outcome.reason
    unknown = _run(loop.handle_payload("matrix", {}, BOT, RecordingTransport()))
    assert unknown.status == OutcomeStatus.REJECTED and "matrix" in unknown.reason


def test_the_bots_own_message_is_recorded_not_answered() -> None:
    loop, model = make_loop()
    own = IncomingEvent(
        platform="onebot",
        bot_id=BOT,
        group_id=GROUP,
        message=message("我刚说的话", sender=BOT, message_id="6001"),
        self_sent=True,
    )
    outcome = _run(loop.handle(own, RecordingTransport()))
    assert outcome.status == OutcomeStatus.RECORDED and model.requests == []
    assert loop.runtime.stores.bot_replies.lookup(BOT, GROUP, "6001", now=T0) == "我刚说的话"  # type: ignore[union-attr]


class _Dice:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    @hookimpl
    def register_tools(self, register):  # type: ignore[no-untyped-def]
        def roll(arguments, context):  # type: ignore[no-untyped-def]
            self.calls.append(dict(arguments))
            return "1d6: 4"

        register(
            Tool(
                name="roll_dice",
                description="Roll dice.",
                parameters=EVERYONE,
                call=roll,
                intent_words=("掷骰子",),
            )
        )


def test_a_tool_turn_runs_the_models_call_and_feeds_the_result_back() -> None:
    from promptweave.providers.exchange import ToolCall

    dice = _Dice()
    loop, model = make_loop(
        SubmitResult(
            sent=True,
            status="ok",
            text=None,
            tool_calls=(ToolCall(id="call_1", name="roll_dice", arguments='{"count": 1}'),),
        ),
        "掷出来是 4",
        "好",
        plugins=[dice],
    )
    transport = RecordingTransport()
    outcome = _run(loop.handle(event("小织 帮我掷骰子", addressed=True), transport))
    assert outcome.decision is not None and outcome.decision.action.value == "tool"
    assert dice.calls == [{"count": 1}]
    assert outcome.bubbles == ("掷出来是 4",)
    first, second = model.requests[0].body_text(), model.requests[1].body_text()
    assert '"roll_dice"' in first and "1d6: 4" in second
    assert outcome.trace["tools"] == [{"name": "roll_dice", "status": "ok"}]
    # the result reaches the conversation's next turn in section tool_context
    _run(loop.handle(event("小织 然后呢？", addressed=True, at=_later(20)), transport))
    assert "1d6: 4" in model.requests[-1].body_text()


def test_every_turn_offers_the_same_tools_so_they_stay_in_the_cached_prefix() -> None:
    loop, model = make_loop("好", "嗯", plugins=[_Dice()])
    transport = RecordingTransport()
    first = _run(loop.handle(event("小织 今天好累", addressed=True), transport))
    second = _run(loop.handle(event("小织 帮我掷骰子", addressed=True, at=_later(20)), transport))
    assert first.decision is not None and first.decision.action.value != "tool"
    assert second.decision is not None and second.decision.action.value == "tool"
    offered = [request.body["tools"] for request in model.requests]
    assert offered[0] == offered[1] and offered[0][0]["function"]["name"] == "roll_dice"
    # The tools sit before the messages: offered on both turns, they never break the prefix.
    assert model.requests[1].prefix.first_difference != "tools"


def _history_per_request(turn_sections: str) -> list[list[str]]:
    """The history messages of each request of one conversation of 8 turns, with a window of 4
    rows that moves in steps of 4."""
    config = Config(
        routing=RoutingConfig(low_engagement=False),
        loop=LoopConfig(turn_deadline_s=5.0),
        history=HistoryConfig(user_window=4, window_step=4),
        session=SessionConfig(summary_threshold=100),
        turn_context=TurnContextConfig(turn_sections=turn_sections),
    )
    # Answers that end differently, so no wording hint joins the messages.
    answers = ("在的", "好呀", "可以", "懂了", "是吗", "对啊", "行吧", "嗯嗯")
    loop, model = make_loop(*answers, config=config)
    transport = RecordingTransport()
    for number in range(8):
        # One clock for the turns and the replies: the rows keep the order they were written.
        _run(loop.handle(event(f"小织 第 {number} 个问题", addressed=True), transport))
    return [
        [str(m["content"]) for m in request.body["messages"][1:-1]] for request in model.requests
    ]


def test_the_cache_modes_history_window_moves_in_steps() -> None:
    windows = _history_per_request("user")
    # Two rows a turn (the question and its answer); at most 4 + 4 - 1 = 7 rows, then the
    # oldest 4 leave together.
    assert [len(rows) for rows in windows] == [0, 2, 4, 6, 4, 6, 4, 6]
    firsts = [rows[0] for rows in windows if rows]
    moves = [n for n in range(1, len(firsts)) if firsts[n] != firsts[n - 1]]
    assert moves == [3, 5]  # the window's first row changes once per step, not every turn
    # Between two moves each request's history starts with the previous request's whole.
    for before, after in itertools.pairwise(windows):
        if after and before and after[0] == before[0]:
            assert after[: len(before)] == before


def test_the_system_modes_history_window_slides_by_one_row() -> None:
    assert [len(rows) for rows in _history_per_request("system")] == [0, 2, 4, 4, 4, 4, 4, 4]


def test_the_bot_identity_comes_from_config_then_framework_names_then_the_persona() -> None:
    from promptweave.config import BotConfig

    config = Config(bots={BOT: BotConfig(name="阿织", aliases=("织织",))})
    loop, _ = make_loop(config=config)
    assert loop.runtime.bot_for(BOT).name == "阿织"
    assert loop.runtime.bot_for(BOT).aliases == ("织织",)
    assert loop.runtime.bot_for("99", ("牛牛", "小牛")).name == "牛牛"
    assert loop.runtime.bot_for("99", ("牛牛", "小牛")).aliases == ("小牛",)
    persona = loop.runtime.persona
    assert loop.runtime.bot_for("99").name == persona.persona.name
    assert attrs.asdict(loop.runtime.bot_for("99"))["aliases"] == persona.identity.generic_aliases


def test_the_bot_record_is_made_once_until_the_config_changes() -> None:
    from promptweave.config import BotConfig

    loop, _ = make_loop(config=Config(bots={BOT: BotConfig(name="阿织")}))
    runtime = loop.runtime
    assert runtime.bot_for(BOT) is runtime.bot_for(BOT)
    assert runtime.bot_for(BOT, ("牛牛",)) is not runtime.bot_for(BOT, ("小牛",))
    runtime.config = attrs.evolve(runtime.config, bots={BOT: BotConfig(name="织织")})
    assert runtime.bot_for(BOT).name == "织织"


class _MentionModel:
    """A routing model that answers an addressed message with a mention, anything else with a
    pass."""

    @hookimpl
    def decide_with_model(self, context):  # type: ignore[no-untyped-def]
        if context.signals.addressed:
            return '{"action": "reply", "social_action": "answer", "delivery_style": "mention"}'
        return '{"action": "pass"}'


def test_a_mention_goes_out_once_per_group_within_the_mention_cooldown() -> None:
    from promptweave.config import DeliveryConfig

    now = [T0]
    config = Config(
        routing=RoutingConfig(low_engagement=False, model_decision=True, reply_cooldown_s=0),
        loop=LoopConfig(turn_deadline_s=5.0),
        delivery=DeliveryConfig(mention_cooldown_s=900),
    )
    loop, _ = make_loop("在的", config=config, plugins=[_MentionModel()])
    loop.runtime.clock = lambda: now[0]
    transport = RecordingTransport()

    def ask(group: str, seconds: float) -> list[dict[str, object]]:
        now[0] = _later(seconds)
        _run(
            loop.handle(event("今天谁去吃火锅", group=group, sender="30031", at=now[0]), transport)
        )
        question = event("小织 你去吗？", group=group, addressed=True, at=_later(seconds + 1))
        outcome = _run(loop.handle(question, transport))
        assert outcome.status == OutcomeStatus.REPLIED, outcome
        return transport.calls[-1][1]["message"]  # type: ignore[return-value]

    first = ask(GROUP, 0)
    assert first[0] == {"type": "at", "data": {"qq": "30001"}}
    within = ask(GROUP, 600)
    assert [segment["type"] for segment in within] == ["text"]
    assert ask("20002", 601)[0]["type"] == "at"
    assert ask(GROUP, 1000)[0]["type"] == "at"
