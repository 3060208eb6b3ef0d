"""The plugin boundary in the live loop: every hook the loop calls, made to raise, hang, answer
the wrong type, answer far too much, or be slow, for one group's turn while a second group's
turn runs beside it.

None of it may break the faulty group's turn (its reply goes out wherever a fallback exists,
and the fault is named in the outcome's ``plugin_faults`` and in a log line), and none of it
may stall the other group: its reply is sent while the faulty call is still running. No timing
is asserted, only what finished before what.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, strategies as st
from loop_support import T0, Certain, RecordingTransport, ScriptedModel

from promptweave import (
    BotLoop,
    Config,
    DecisionRule,
    FetchedImage,
    IncomingEvent,
    PhrasePool,
    Promptweave,
    ProviderApi,
    Section,
    Stores,
    hookimpl,
)
from promptweave.config import (
    LoopConfig,
    PluginsConfig,
    ProviderConfig,
    RoutingConfig,
    TurnContextConfig,
)
from promptweave.delivery.outgoing import ModelAnswer, Segment
from promptweave.loop.events import OutcomeStatus
from promptweave.plugins.contributions import RuleStage
from promptweave.providers.exchange import ProviderSpec
from promptweave.testing import TEST_ENVIRON

BOT = 10001
GROUP_A, GROUP_B = 20001, 20002
#: Text that only the faulty group's messages carry: hooks that are not told the group (the
#: answer reader, the text measure, compression) recognise its turn by it.
MARK = "甲组"
#: How long a hang waits at most, so a failing test cannot leave it behind for ever.
HANG_LIMIT_S = 30.0
#: The deadline of the hang cases: short, so the property stays fast.
HANG_DEADLINE_S = 0.3
#: The deadline of every other case: long, so a loaded machine never takes a slow or merely busy
#: plugin for a hung one.
PATIENT_S = 30.0
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010804000000b51c0c02"
    "0000000b4944415478da63646000000006000230819d0000000049454e44ae426082"
)
IMAGE_SPEC = ProviderSpec(api=ProviderApi.ANTHROPIC, model="m", supports_images=True)
#: Ten million characters: a value no trace or log line may carry whole.
HUGE = "大" * 10_000_000
FAULTS = ("raise", "hang", "wrong_type", "huge", "slow")
#: Where each hook's fault shows in the trace (``where`` of the fault).
WHERE = {
    "parse_event": "hook parse_event",
    "read_model_answer": "hook read_model_answer",
    "choose_sticker": "hook choose_sticker",
    "send_message": "hook send_message",
    "submit_request_async": "hook submit_request_async",
    "section": "section 'boundary'",
    "decision_rule": "decision rule 'boundary_gate'",
    "phrase_pool": "phrase pool 'boundary'",
    "override_section": "hook override_section",
    "measure_text": "hook measure_text",
    "collect_turn_notes": "hook collect_turn_notes",
    "collect_wording_hints": "hook collect_wording_hints",
    "compress_turn_messages": "hook compress_turn_messages",
    "decide_with_model": "hook decide_with_model",
    "fetch_image": "hook fetch_image",
    "fetch_message": "hook fetch_message",
}
HOOKS = tuple(WHERE)
#: A raising or hung model client has no one to fall back to: the turn ends without a reply,
#: the fault named. Every other hook has a fallback, and the reply goes out.
NO_FALLBACK = {("submit_request_async", "raise")}
#: Hooks whose answer is text anyway: ten million characters is a valid (if huge) answer. (A
#: phrase pool answers a sequence of phrases: one text alone is the wrong type.)
TEXT_HOOKS = {"section", "collect_turn_notes", "decide_with_model"}


@attrs.define(eq=False)
class Boundary:
    """A plugin in every hook the loop calls; it misbehaves in one hook, for the faulty group's
    turns only, once armed. Otherwise it declines (or gives what the built-ins would)."""

    hook: str
    fault: str
    wrong: Any
    armed: bool = False
    entered: threading.Event = attrs.field(factory=threading.Event)
    returned: threading.Event = attrs.field(factory=threading.Event)
    release: threading.Event = attrs.field(factory=threading.Event)

    def act(self, hook: str, faulty_group: bool, normal: Callable[[], Any]) -> Any:
        if not (self.armed and hook == self.hook and faulty_group):
            return normal()
        self.entered.set()
        try:
            if self.fault == "raise":
                raise RuntimeError("boom: the plugin failed " + "!" * 5000)
            if self.fault in ("hang", "slow"):
                # A hang outlives the deadline; a slow call returns once the other group was
                # served (within a patient deadline): both are in progress meanwhile.
                self.release.wait(HANG_LIMIT_S)
                return normal()
            if self.fault == "wrong_type":
                return self.wrong
            return HUGE
        finally:
            self.returned.set()

    # -- the hooks -----------------------------------------------------------------------

    @hookimpl
    def parse_event(self, platform: str, payload: Any, bot_id: str) -> Any:
        return self.act("parse_event", payload.get("group_id") == GROUP_A, lambda: None)

    @hookimpl
    def read_model_answer(self, text: str, shape: Any, system_prompt: str, config: Any) -> Any:
        return self.act("read_model_answer", MARK in text, lambda: None)

    @hookimpl
    def choose_sticker(self, intent: str, bot_id: str, group_id: Any, config: Any) -> Any:
        return self.act("choose_sticker", group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def send_message(self, message: Any, transport: Any) -> Any:
        return self.act("send_message", message.group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def submit_request_async(self, request: Any, config: Any) -> Any:
        faulty = f":{GROUP_A}:" in request.conversation_key
        return self.act("submit_request_async", faulty, lambda: None)

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        def render(context: Any) -> Any:
            faulty = context.turn.group_id == str(GROUP_A)
            return self.act("section", faulty, lambda: "【边界】一切如常")

        register(Section(id="boundary", title="边界", render=render))

    @hookimpl
    def register_decision_rules(self, register: Callable[[DecisionRule], None]) -> None:
        def evaluate(context: Any) -> Any:
            return self.act("decision_rule", context.turn.group_id == str(GROUP_A), lambda: None)

        register(DecisionRule(name="boundary_gate", stage=RuleStage.GATE, evaluate=evaluate))

    @hookimpl
    def register_low_engagement_pools(self, register: Callable[[PhrasePool], None]) -> None:
        def phrases_for(query: Any) -> Any:
            return self.act("phrase_pool", query.group_id == str(GROUP_A), lambda: ["确实"])

        register(PhrasePool(name="boundary", phrases=(), phrases_for=phrases_for))

    @hookimpl
    def override_section(
        self, section_id: str, text: str, bot_id: str, group_id: str, context: Any
    ) -> Any:
        return self.act("override_section", group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def measure_text(self, text: str) -> Any:
        return self.act("measure_text", MARK in text, lambda: len(text))

    @hookimpl
    def collect_turn_notes(self, context: Any) -> Any:
        return self.act("collect_turn_notes", context.turn.group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def collect_wording_hints(self, context: Any, history: Any) -> Any:
        faulty = context.turn.group_id == str(GROUP_A)
        return self.act("collect_wording_hints", faulty, lambda: None)

    @hookimpl
    def compress_turn_messages(
        self, messages: Any, pass_number: int, protect_first: int, protect_last: int
    ) -> Any:
        faulty = any(MARK in message.content for message in messages)
        return self.act("compress_turn_messages", faulty, lambda: None)

    @hookimpl
    def decide_with_model(self, context: Any) -> Any:
        return self.act("decide_with_model", context.turn.group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def fetch_message(self, message_id: str, bot_id: str, group_id: Any, transport: Any) -> Any:
        return self.act("fetch_message", group_id == str(GROUP_A), lambda: None)

    @hookimpl
    def fetch_image(self, url: str, limits: Any) -> Any:
        return self.act(
            "fetch_image",
            "a.example" in url,
            lambda: FetchedImage(url=url, media_type="image/png", data=PNG),
        )


def _settings(hook: str, fault: str) -> Config:
    deadline = HANG_DEADLINE_S if fault == "hang" else PATIENT_S
    return Config(
        routing=RoutingConfig(
            low_engagement=hook == "phrase_pool", model_decision=hook == "decide_with_model"
        ),
        loop=LoopConfig(turn_deadline_s=60.0, send_timeout_s=60.0),
        plugins=PluginsConfig(turn_deadline_s=deadline),
        # The image fetch is bounded by the provider's timeout (times two), not the deadline.
        provider=ProviderConfig(timeout_s=deadline / 2),
        # Compression on every turn with a history (the faulty group's has one).
        turn_context=TurnContextConfig(threshold_tokens=1, protect_first=0, protect_last=1)
        if hook == "compress_turn_messages"
        else TurnContextConfig(),
    )


def _payload(
    number: int, group: int, text: str, *, addressed: bool, quoting: str | None = None
) -> dict[str, Any]:
    segments: list[dict[str, Any]] = [{"type": "text", "data": {"text": text}}]
    if addressed:
        segments.insert(0, {"type": "at", "data": {"qq": str(BOT)}})
    if quoting is not None:  # a reply to a message neither the event nor the store holds
        segments.insert(0, {"type": "reply", "data": {"id": quoting}})
    host = "a.example" if group == GROUP_A else "b.example"
    segments.append({"type": "image", "data": {"url": f"https://{host}/{number}.png"}})
    return {
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "self_id": BOT,
        "group_id": group,
        "user_id": 30001,
        "message_id": number,
        "time": int(T0.timestamp()) + number,
        "sender": {"user_id": 30001, "nickname": "青柠汽水", "role": "member"},
        "message": segments,
    }


def _loop(plugin: Boundary, config: Config, hook: str) -> BotLoop:
    def answer(request: Any) -> str:
        # The faulty group's answer carries the mark, so the answer reader can tell it.
        faulty = f":{GROUP_A}:" in request.conversation_key
        return f"{MARK if faulty else ''}好的，周六见\n[表情：笑]"

    model = ScriptedModel(answers=[answer])
    runtime = Promptweave.from_config(
        config,
        contrib=["onebot"],
        extra_plugins=[model],
        environ=TEST_ENVIRON,
        stores=Stores.in_memory(),
        # The low-engagement exit always speaks, so the phrase pools are asked.
        rng=Certain() if hook == "phrase_pool" else None,  # type: ignore[arg-type]
        clock=lambda: T0,
    )
    runtime.watchdog.grace_s = 0.05
    runtime.add_plugin(plugin, name="boundary")

    async def no_pause(_seconds: float) -> None:
        return None

    return BotLoop(
        runtime=runtime,
        sleep=no_pause,
        learn=False,
        spec=IMAGE_SPEC if hook == "fetch_image" else ProviderSpec.from_config(config.provider),
    )


@attrs.frozen
class Run:
    faulty: Any
    other: Any
    other_served_while_in_progress: bool
    log: str


async def _scenario(loop: BotLoop, plugin: Boundary, hook: str, caplog: Any) -> Run:
    transport = RecordingTransport()
    numbers = iter(range(1, 100))

    async def send(
        group: int, text: str, *, addressed: bool = True, quoting: str | None = None
    ) -> Any:
        payload = _payload(next(numbers), group, text, addressed=addressed, quoting=quoting)
        return await loop.handle_payload("onebot", payload, str(BOT), transport)

    # A history for both groups first, with the plugin behaving.
    for text in ("周末有什么活动吗？", "几点开始呢？"):
        await send(GROUP_A, f"{MARK}：{text}")
    await send(GROUP_B, "乙组：晚上吃什么？")
    plugin.armed = True
    caplog.clear()
    # A low-value message for the phrase pools (the low-engagement exit answers it).
    text = "哈哈哈" if hook == "phrase_pool" else f"{MARK}：那我们约在哪里？"
    quoting = "777" if hook == "fetch_message" else None
    faulty = asyncio.ensure_future(
        send(GROUP_A, text, addressed=hook != "phrase_pool", quoting=quoting)
    )
    # The other group comes in once the faulty call is running (or the turn is past it).
    while not plugin.entered.is_set() and not faulty.done():
        await asyncio.sleep(0.005)
    other = await send(GROUP_B, "乙组：有人一起去吗？")
    in_progress = plugin.fault in ("hang", "slow") and not plugin.returned.is_set()
    if plugin.fault == "slow":
        plugin.release.set()  # a slow call returns in time, once the other group was served
    faulty_outcome = await faulty
    plugin.release.set()
    return Run(faulty_outcome, other, in_progress, caplog.text)


def _check(hook: str, fault: str, run: Run) -> None:
    # The other group was served, and while a hung or slow call was still running.
    assert run.other.status == OutcomeStatus.REPLIED, run.other
    if fault in ("hang", "slow"):
        assert run.other_served_while_in_progress
    faulty = run.faulty
    assert faulty.reason != "loop_error", faulty.trace
    expected_status = OutcomeStatus.PHRASE if hook == "phrase_pool" else OutcomeStatus.REPLIED
    if (hook, fault) in NO_FALLBACK:
        assert faulty.status == OutcomeStatus.FAILED and faulty.reason == "provider_error"
    else:
        assert faulty.status == expected_status, (faulty.status, faulty.reason, faulty.trace)
    trace_text = json.dumps(faulty.trace, ensure_ascii=False, default=str)
    # Nothing of a huge value or a long error reaches the trace or the log whole.
    assert len(trace_text) < 200_000
    assert len(run.log) < 200_000
    named = [f for f in faulty.trace.get("plugin_faults", []) if f["plugin"] == "boundary"]
    if fault == "slow" or (fault == "huge" and hook in TEXT_HOOKS):
        assert not named, named  # slow but in time, or text: not a fault
        return
    kinds = {"raise": {"raised"}, "hang": {"hung"}, "wrong_type": {"wrong_type"}}
    wanted = kinds.get(fault, {"wrong_type"})
    assert any(f["where"] == WHERE[hook] and f["kind"] in wanted for f in named), named
    # One log line names the plugin, the hook and what it did.
    assert any(
        "plugin 'boundary'" in line and WHERE[hook] in line and kind in line
        for line in run.log.splitlines()
        for kind in wanted
    ), run.log[-3000:]


class LogLines(logging.Handler):
    """The promptweave log of one example (Hypothesis runs many in one test: no ``caplog``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def clear(self) -> None:
        self.lines.clear()

    def __enter__(self) -> LogLines:
        logger = logging.getLogger("promptweave")
        self.level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("promptweave")
        logger.removeHandler(self)
        logger.setLevel(self.level)


def _run_example(hook: str, fault: str, wrong: Any) -> tuple[Boundary, Run]:
    plugin = Boundary(hook=hook, fault=fault, wrong=wrong)
    loop = _loop(plugin, _settings(hook, fault), hook)
    try:
        with LogLines() as log:
            run = asyncio.run(asyncio.wait_for(_scenario(loop, plugin, hook, log), 120))
    finally:
        plugin.release.set()
        loop.runtime.close()
    return plugin, run


#: Per hook, answers of the wrong type (one is drawn).
WRONG_VALUES = st.sampled_from([b"bytes", [1, 2], {"k": "v"}, 4.5, object()])


@given(
    hook=st.sampled_from(HOOKS),
    fault=st.sampled_from(FAULTS),
    wrong=WRONG_VALUES,
)
def test_no_plugin_fault_breaks_its_turn_or_stalls_another_group(hook, fault, wrong):
    plugin, run = _run_example(hook, fault, wrong)
    assert plugin.entered.is_set(), f"{hook} was never called for the faulty group"
    _check(hook, fault, run)


@pytest.mark.parametrize("hook", HOOKS)
def test_a_hung_hook_never_holds_the_other_group(hook):
    """Every hook once, hanging: the property above draws from them, this names each."""
    plugin, run = _run_example(hook, "hang", None)
    assert plugin.entered.is_set()
    _check(hook, "hang", run)


def test_a_hung_plugin_is_quarantined_after_it_returns():
    plugin = Boundary(hook="section", fault="hang", wrong=None)
    loop = _loop(plugin, _settings("section", "hang"), "section")
    loop.runtime.watchdog.quarantine_s = 600.0
    transport = RecordingTransport()

    async def scenario() -> tuple[Any, Any]:
        plugin.armed = True
        first = await loop.handle_payload(
            "onebot", _payload(1, GROUP_A, f"{MARK}：在吗？", addressed=True), str(BOT), transport
        )
        plugin.release.set()
        while loop.runtime.watchdog.hung():
            await asyncio.sleep(0.01)
        # Returned, yet still quarantined: its section is skipped, in the other group too.
        second = await loop.handle_payload(
            "onebot", _payload(2, GROUP_B, "乙组：在吗？", addressed=True), str(BOT), transport
        )
        return first, second

    try:
        first, second = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        plugin.release.set()
        loop.runtime.close()
    # The hang quarantines the whole plugin: its other hooks in the same turn are skipped too.
    kinds = [f["kind"] for f in first.trace["plugin_faults"]]
    assert kinds[0] == "hung" and set(kinds[1:]) == {"skipped"}
    later = second.trace["plugin_faults"]
    assert {f["kind"] for f in later} == {"skipped"}
    assert all("quarantined for" in f["detail"] for f in later)
    assert "section 'boundary'" in {f["where"] for f in later}
    assert second.status == OutcomeStatus.REPLIED


def test_a_wrong_sticker_drops_the_sticker_not_the_reply():
    plugin = Boundary(hook="choose_sticker", fault="wrong_type", wrong="笑")
    loop = _loop(plugin, _settings("choose_sticker", "wrong_type"), "choose_sticker")
    transport = RecordingTransport()
    plugin.armed = True
    try:
        outcome = asyncio.run(
            loop.handle_payload(
                "onebot",
                _payload(1, GROUP_A, f"{MARK}：在吗？", addressed=True),
                str(BOT),
                transport,
            )
        )
    finally:
        loop.runtime.close()
    assert outcome.status == OutcomeStatus.REPLIED and outcome.bubbles == (f"{MARK}好的，周六见",)
    [fault] = outcome.trace["plugin_faults"]
    assert fault["detail"] == "returned str, expected Segment or None"


def test_a_parsed_event_of_the_wrong_type_is_passed_over_to_the_next_parser():
    plugin = Boundary(hook="parse_event", fault="wrong_type", wrong={"an": "event"})
    loop = _loop(plugin, _settings("parse_event", "wrong_type"), "parse_event")
    plugin.armed = True
    try:
        outcome = asyncio.run(
            loop.handle_payload(
                "onebot",
                _payload(1, GROUP_A, f"{MARK}：在吗？", addressed=True),
                str(BOT),
                RecordingTransport(),
            )
        )
    finally:
        loop.runtime.close()
    assert isinstance(outcome.event, IncomingEvent)
    assert outcome.status == OutcomeStatus.REPLIED
    assert (
        outcome.trace["plugin_faults"][0]["detail"]
        == "returned dict, expected IncomingEvent or None"
    )


def test_a_send_receipt_of_the_wrong_type_keeps_the_reply():
    class OddReceipt:
        @hookimpl(tryfirst=True)
        def send_message(self, message: Any, transport: Any) -> Any:
            async def send() -> Any:
                await transport.call_api("send_group_msg", message=[])
                return {"message_id": 1}

            return send()

    plugin = Boundary(hook="none", fault="raise", wrong=None)
    loop = _loop(plugin, _settings("section", "raise"), "section")
    loop.runtime.add_plugin(OddReceipt(), name="odd_receipt")
    try:
        outcome = asyncio.run(
            loop.handle_payload(
                "onebot",
                _payload(1, GROUP_B, "乙组：在吗？", addressed=True),
                str(BOT),
                RecordingTransport(),
            )
        )
    finally:
        loop.runtime.close()
    assert outcome.status == OutcomeStatus.REPLIED
    [fault] = outcome.trace["plugin_faults"]
    assert (fault["plugin"], fault["kind"]) == ("odd_receipt", "wrong_type")
    assert outcome.trace["sends"][0]["ok"] is True


def test_a_model_answer_of_the_wrong_type_falls_back_to_the_built_in_reader():
    plugin = Boundary(hook="read_model_answer", fault="wrong_type", wrong=ModelAnswer)
    loop = _loop(plugin, _settings("read_model_answer", "wrong_type"), "read_model_answer")
    plugin.armed = True
    try:
        outcome = asyncio.run(
            loop.handle_payload(
                "onebot",
                _payload(1, GROUP_A, f"{MARK}：在吗？", addressed=True),
                str(BOT),
                RecordingTransport(),
            )
        )
    finally:
        loop.runtime.close()
    assert outcome.status == OutcomeStatus.REPLIED
    assert (
        outcome.trace["plugin_faults"][0]["detail"] == "returned type, expected ModelAnswer or None"
    )


def test_a_segment_is_a_right_sticker():
    plugin = Boundary(hook="choose_sticker", fault="wrong_type", wrong=None)
    plugin.wrong = Segment(kind="face", data={"id": "14"})
    loop = _loop(plugin, _settings("choose_sticker", "wrong_type"), "choose_sticker")
    transport = RecordingTransport()
    plugin.armed = True
    try:
        outcome = asyncio.run(
            loop.handle_payload(
                "onebot",
                _payload(1, GROUP_A, f"{MARK}：在吗？", addressed=True),
                str(BOT),
                transport,
            )
        )
    finally:
        loop.runtime.close()
    assert "plugin_faults" not in outcome.trace
    assert any(seg["type"] == "face" for _, params in transport.calls for seg in params["message"])
