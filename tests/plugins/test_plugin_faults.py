"""The fault matrix: every kind of plugin raising, hanging, answering the wrong type, answering far
too much, or changing what it was given. None of it may break or stall a turn: the turn goes on,
the fault is named (the plugin, and where), and a hung plugin is skipped until it returns.

Kinds that receive nothing but strings (``measure_text``, ``describe_image``) or the caller's own
objects (``parse_event``) have nothing of the runtime's to change, so they have no mutation
case.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from base_support import EXAMPLES

from promptweave import (
    ChatMessage,
    Config,
    DecisionRule,
    FetchedImage,
    GateSkip,
    IncomingEvent,
    MemoryItem,
    PhrasePool,
    PromptMessage,
    Promptweave,
    ProviderApi,
    Retriever,
    Section,
    SectionOverride,
    Stores,
    SubmitResult,
    Turn,
    build_provider_request,
    build_turn_context,
    hookimpl,
    load_turn_file,
    submit_request,
)
from promptweave.config import (
    PluginsConfig,
    ProviderConfig,
    RoutingConfig,
    SessionConfig,
    StoreConfig,
    TurnContextConfig,
)
from promptweave.plugins.contributions import RuleStage
from promptweave.providers.exchange import ProviderSpec
from promptweave.testing import TEST_ENVIRON
from promptweave.turn_context.conversation_state import conversation_key

#: The deadline of the hang cases: short, so the matrix stays fast.
DEADLINE_S = 0.2
#: The deadline of every other case: long, so that a slow machine never takes a plugin that is
#: merely slow (building ten megabytes of text) for a hung one.
PATIENT_S = 60.0
GRACE_S = 0.05
#: How long a hung plugin waits at most, so a failing test cannot leave it behind for ever.
HANG_LIMIT_S = 30.0
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010804000000b51c0c02"
    "0000000b4944415478da63646000000006000230819d0000000049454e44ae426082"
)
TURN = load_turn_file(EXAMPLES / "at_question.json")


class Faulty:
    """A plugin function that plays one fault, and tells what happened to it."""

    def __init__(
        self,
        fault: str,
        *,
        normal: Callable[..., Any],
        wrong: Any,
        huge: Callable[..., Any],
        mutate: Callable[..., Any] | None = None,
    ) -> None:
        self.fault = fault
        self.normal, self.wrong, self.huge, self.mutate = normal, wrong, huge, mutate
        self.calls = 0
        self.entered = threading.Event()
        self.returned = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.entered.set()
        try:
            if self.fault == "raise":
                raise RuntimeError("boom: the plugin failed")
            if self.fault == "hang":
                self.release.wait(HANG_LIMIT_S)
                return self.normal(*args, **kwargs)
            if self.fault == "wrong_type":
                return self.wrong
            if self.fault == "huge":
                return self.huge(*args, **kwargs)
            assert self.mutate is not None
            return self.mutate(*args, **kwargs)
        finally:
            self.returned.set()


@attrs.define
class Outcome:
    """What an operation gave, and every trace and log line that could name the fault."""

    result: Any
    evidence: str


def runtime_with(plugin: object, deadline_s: float = DEADLINE_S, **sections: Any) -> Promptweave:
    defaults = {
        "store": StoreConfig(backend="memory"),
        "plugins": PluginsConfig(turn_deadline_s=deadline_s),
        "provider": ProviderConfig(timeout_s=deadline_s / 2),
    }
    config = attrs.evolve(Config(), **{**defaults, **sections})
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    runtime.watchdog.grace_s = GRACE_S
    # Called again as soon as its hung call returned (the quarantine after it has a test of its
    # own), so the matrix can see the plugin come back.
    runtime.watchdog.quarantine_s = 0
    runtime.add_plugin(plugin, name="faulty")
    return runtime


def _dump(*parts: Any) -> str:
    return "\n".join(json.dumps(part, ensure_ascii=False, default=str) for part in parts)


# -- the kinds ---------------------------------------------------------------------------------


def section_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(context: Any) -> str:
        context.retrieved.clear()
        return "never"

    faulty = Faulty(
        fault,
        normal=lambda context: "【天气】晴",
        wrong=42,
        huge=lambda context: "【天气】" + "晴" * 10_000_000,
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            register(Section(id="weather", title="天气", render=faulty, after="current_time"))

    def run(runtime: Promptweave) -> Outcome:
        rendered = runtime.render(TURN, retrieve=False)
        return Outcome(rendered, _dump(rendered.trace))

    return faulty, Plugin(), run


def retriever_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(query: Any) -> list[MemoryItem]:
        query.text = "改过了"
        return []

    faulty = Faulty(
        fault,
        normal=lambda query: [MemoryItem(kind="teaching", text="周六改到格子桌游吧")],
        wrong=42,
        huge=lambda query: (
            MemoryItem(kind="teaching", text=f"第{n}条") for n in itertools.count()
        ),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def register_retrievers(self, register: Callable[[Retriever], None]) -> None:
            register(Retriever(name="faulty_memory", feeds="memory", retrieve=faulty))

    def run(runtime: Promptweave) -> Outcome:
        rendered = runtime.render(TURN)
        return Outcome(rendered, _dump(rendered.trace))

    return faulty, Plugin(), run


def rule_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(context: Any) -> None:
        context.signals.addressed = False

    faulty = Faulty(
        fault,
        normal=lambda context: None,
        wrong="skip",
        huge=lambda context: GateSkip(reason="x" * 1_000_000, silence_s=1e300),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def register_decision_rules(self, register: Callable[[DecisionRule], None]) -> None:
            register(DecisionRule(name="faulty_gate", stage=RuleStage.GATE, evaluate=faulty))

    def run(runtime: Promptweave) -> Outcome:
        decision = runtime.decide(TURN)
        return Outcome(decision, _dump(decision.trace(), list(decision.notes)))

    return faulty, Plugin(), run


LOW_VALUE = Turn(
    bot=TURN.bot,
    group_id=TURN.group_id,
    trigger="ambient",  # type: ignore[arg-type]
    message=ChatMessage(
        id="9200", sender_id="30022", text="哈哈哈哈", time=TURN.message.time, sender_name="阿蒙"
    ),
)


def pool_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(query: Any) -> list[str]:
        query.learned_replies.append("被改了")
        return ["嗯嗯"]

    faulty = Faulty(
        fault,
        normal=lambda query: ["热到化了"],
        wrong=42,
        huge=lambda query: ("热" * n for n in itertools.count(1)),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def register_low_engagement_pools(self, register: Callable[[PhrasePool], None]) -> None:
            register(PhrasePool(name="faulty_pool", phrases_for=faulty))

    def run(runtime: Promptweave) -> Outcome:
        decision = runtime.decide(LOW_VALUE)
        return Outcome(decision, _dump(decision.details(), list(decision.notes)))

    return faulty, Plugin(), run


def override_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(**arguments: Any) -> None:
        arguments["context"].retrieved.clear()

    faulty = Faulty(
        fault,
        normal=lambda **arguments: None,
        wrong="replace",
        huge=lambda **arguments: (
            SectionOverride(mode="replace", content="替" * 10_000_000)
            if arguments["section_id"] == "persona"
            else None
        ),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def override_section(
            self, section_id: str, text: str, bot_id: str, group_id: str, context: Any
        ) -> Any:
            return faulty(
                section_id=section_id, text=text, bot_id=bot_id, group_id=group_id, context=context
            )

    return faulty, Plugin(), section_kind("raise")[2]


def measure_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    faulty = Faulty(fault, normal=len, wrong="12", huge=lambda text: 10**15)

    class Plugin:
        @hookimpl
        def measure_text(self, text: str) -> Any:
            return faulty(text)

    return faulty, Plugin(), section_kind("raise")[2]


def _turn_context(runtime: Promptweave) -> Outcome:
    rendered = runtime.render(TURN, retrieve=False)
    context = build_turn_context(runtime, TURN, rendered)
    return Outcome(context, _dump(context.trace))


def notes_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(context: Any) -> str:
        context.retrieved.clear()
        return "never"

    faulty = Faulty(
        fault,
        normal=lambda context: "[系统备注：首次对话]",
        wrong=[1, 2],
        huge=lambda context: (f"[系统备注：第{n}条]" for n in itertools.count()),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def collect_turn_notes(self, context: Any) -> Any:
            return faulty(context)

    return faulty, Plugin(), _turn_context


def compress_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(messages: Any) -> list[PromptMessage]:
        messages.append(PromptMessage(role="user", content="插进来的"))
        return list(messages)

    faulty = Faulty(
        fault,
        normal=lambda messages: [messages[-1]],
        wrong="compressed",
        huge=lambda messages: list(messages) * 2_000,
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def compress_turn_messages(
            self, messages: Any, pass_number: int, protect_first: int, protect_last: int
        ) -> Any:
            return faulty(messages)

    return faulty, Plugin(), _turn_context


def model_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(context: Any) -> str:
        context.candidates.append(None)
        return "never"

    faulty = Faulty(
        fault,
        normal=lambda context: '{"action": "reply"}',
        wrong=42,
        huge=lambda context: "{" * 1_000_000,
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def decide_with_model(self, context: Any) -> Any:
            return faulty(context)

    return faulty, Plugin(), rule_kind("raise")[2]


IMAGE_SPEC = ProviderSpec(api=ProviderApi.ANTHROPIC, model="m", supports_images=True)


def fetch_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(url: str, limits: Any) -> FetchedImage:
        limits.max_bytes = 10**12
        return FetchedImage(url=url, media_type="image/png", data=PNG)

    faulty = Faulty(
        fault,
        normal=lambda url, limits: FetchedImage(url=url, media_type="image/png", data=PNG),
        wrong="image",
        huge=lambda url, limits: FetchedImage(
            url=url, media_type="image/png", data=PNG + bytes(limits.max_bytes)
        ),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def fetch_image(self, url: str, limits: Any) -> Any:
            return faulty(url, limits)

    def run(runtime: Promptweave) -> Outcome:
        context = build_turn_context(runtime, TURN, runtime.render(TURN, retrieve=False))
        request = build_provider_request(runtime, context, IMAGE_SPEC)
        return Outcome(request, _dump(request.trace))

    return faulty, Plugin(), run


def submit_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(request: Any, config: Any) -> SubmitResult:
        request.body.clear()
        return SubmitResult(sent=True, status="ok", text="好")

    faulty = Faulty(
        fault,
        normal=lambda request, config: SubmitResult(sent=True, status="ok", text="好"),
        wrong="好",
        huge=lambda request, config: SubmitResult(sent=True, status="ok", text="好" * 10_000_000),
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def submit_request(self, request: Any, config: Any) -> Any:
            return faulty(request, config)

    def run(runtime: Promptweave) -> Outcome:
        context = build_turn_context(runtime, TURN, runtime.render(TURN, retrieve=False))
        request = build_provider_request(runtime, context)
        result = submit_request(runtime, request)
        return Outcome(result, _dump(attrs.asdict(result, filter=lambda a, v: a.name != "text")))

    return faulty, Plugin(), run


_USERS = itertools.count(40000)


def _long_session(stores: Stores, user: str) -> None:
    """24 recorded exchanges of ``user``, the first with an image, through a runtime that never
    compresses them itself."""
    recorder = Promptweave.from_config(
        Config(session=SessionConfig(summary_enabled=False)), environ=TEST_ENVIRON, stores=stores
    )
    start = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    for number in range(24):
        asked = ChatMessage(
            id=f"u{user}-{number}",
            sender_id=user,
            text=f"第{number}个问题",
            time=start + dt.timedelta(minutes=number),
            images=("https://img.example/p.png",) if number == 0 else (),
            addressed=True,
        )
        recorder.recorder.record_bot_reply(
            TURN.bot.id,
            TURN.group_id,
            f"第{number}个回答",
            message_id=f"r{user}-{number}",
            answering=asked,
            time=asked.time + dt.timedelta(seconds=5),
        )
    recorder.close()


def _compress(runtime: Promptweave) -> Outcome:
    """A fresh long session, compressed."""
    user = str(next(_USERS))
    _long_session(runtime.stores, user)
    result = runtime.recorder.compress_session(
        TURN.bot.id, TURN.group_id, user, now=dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    )
    return Outcome(result, _dump(attrs.asdict(result)))


def summarize_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def mutate(**arguments: Any) -> str:
        arguments["turns"][0].content = "改过了"
        return "never"

    faulty = Faulty(
        fault,
        normal=lambda **arguments: "聊了二十四个问题",
        wrong=42,
        huge=lambda **arguments: "聊" * 10_000_000,
        mutate=mutate,
    )

    class Plugin:
        @hookimpl
        def summarize_session(
            self,
            bot_id: str,
            group_id: str | None,
            user_id: str,
            turns: Any,
            previous_summary: str | None,
            max_chars: int,
        ) -> Any:
            return faulty(turns=turns, max_chars=max_chars)

    return faulty, Plugin(), _compress


def describe_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    faulty = Faulty(
        fault, normal=lambda url: "一张截图", wrong=42, huge=lambda url: "图" * 10_000_000
    )

    class Plugin:
        @hookimpl
        def describe_image(self, url: str, bot_id: str, group_id: str | None) -> Any:
            return faulty(url)

    return faulty, Plugin(), _compress


def parse_kind(fault: str) -> tuple[Faulty, object, Callable[[Promptweave], Outcome]]:
    def event(payload: Any) -> IncomingEvent:
        message = ChatMessage(sender_id="3", text=payload["text"], time=TURN.message.time)
        return IncomingEvent(platform="test", bot_id="10001", group_id="g", message=message)

    faulty = Faulty(
        fault,
        normal=event,
        wrong="在吗",
        huge=lambda payload: event({"text": "在" * 10_000_000}),
    )

    class Plugin:
        @hookimpl
        def parse_event(self, platform: str, payload: Any, bot_id: str) -> Any:
            return faulty(payload) if platform == "test" else None

    def run(runtime: Promptweave) -> Outcome:
        try:
            parsed = runtime.plugins.hooks.parse_message(
                "test", {"text": "在吗"}, "10001", watchdog=runtime.watchdog
            )
        except ValueError as exc:
            return Outcome(exc, str(exc))
        return Outcome(parsed, "")

    return faulty, Plugin(), run


KINDS: dict[str, Callable[[str], tuple[Faulty, object, Callable[[Promptweave], Outcome]]]] = {
    "section": section_kind,
    "retriever": retriever_kind,
    "decision_rule": rule_kind,
    "pool": pool_kind,
    "override": override_kind,
    "measure_text": measure_kind,
    "collect_turn_notes": notes_kind,
    "compress_turn_messages": compress_kind,
    "decide_with_model": model_kind,
    "fetch_image": fetch_kind,
    "submit_request": submit_kind,
    "summarize_session": summarize_kind,
    "describe_image": describe_kind,
    "parse_event": parse_kind,
}
NO_MUTATION = {"measure_text", "describe_image", "parse_event"}
#: The settings a kind needs to be called at all.
SETTINGS: dict[str, dict[str, Any]] = {
    "pool": {"routing": RoutingConfig(low_engagement_probabilities=(1.0, 1.0, 1.0, 1.0))},
    "measure_text": {},
    "compress_turn_messages": {
        "turn_context": TurnContextConfig(threshold_tokens=200, protect_first=1, protect_last=1)
    },
    "decide_with_model": {"routing": RoutingConfig(model_decision=True)},
    "summarize_session": {"session": SessionConfig(summary_cooldown_s=0)},
    "describe_image": {"session": SessionConfig(summary_cooldown_s=0)},
}


@pytest.fixture
def hung() -> Iterator[list[Faulty]]:
    """Plugins left hanging by a test are let go afterwards."""
    plugins: list[Faulty] = []
    yield plugins
    for plugin in plugins:
        plugin.release.set()


def _build(kind: str, fault: str, hung: list[Faulty]) -> tuple[Faulty, Promptweave, Any]:
    faulty, plugin, run = KINDS[kind](fault)
    hung.append(faulty)
    deadline = DEADLINE_S if fault == "hang" else PATIENT_S
    runtime = runtime_with(plugin, deadline, **SETTINGS.get(kind, {}))
    return faulty, runtime, run


CASES = [
    (kind, fault)
    for kind in KINDS
    for fault in ("raise", "hang", "wrong_type", "huge", "mutation")
    if not (fault == "mutation" and kind in NO_MUTATION)
]


@pytest.mark.parametrize(("kind", "fault"), CASES)
def test_no_plugin_fault_breaks_or_stalls_a_turn(kind, fault, hung, caplog):
    faulty, runtime, run = _build(kind, fault, hung)
    caplog.set_level("INFO", logger="promptweave")
    try:
        outcome = run(runtime)
        assert faulty.entered.is_set(), "the plugin was never called"
        evidence = outcome.evidence + "\n" + caplog.text
        caplog.clear()

        def rerun(runtime: Promptweave) -> Outcome:
            again = run(runtime)
            logged = caplog.text
            caplog.clear()
            return Outcome(again.result, f"{again.evidence}\n{again.result}\n{logged}")

        CHECKS[fault](kind, faulty, runtime, rerun, outcome, evidence)
    finally:
        faulty.release.set()
        runtime.close()


# -- what each fault must give -----------------------------------------------------------------


def _completed(kind: str, outcome: Outcome) -> None:
    """The operation gave its normal kind of result (``parse_event`` answers an error)."""
    if kind == "parse_event":
        assert isinstance(outcome.result, ValueError | ChatMessage)
    else:
        assert outcome.result is not None


def check_raise(kind, faulty, runtime, run, outcome, evidence) -> None:
    _completed(kind, outcome)
    assert "boom: the plugin failed" in evidence
    assert "faulty" in evidence


def check_wrong_type(kind, faulty, runtime, run, outcome, evidence) -> None:
    _completed(kind, outcome)
    assert type(faulty.wrong).__name__ in evidence
    assert "faulty" in evidence


def check_hang(kind, faulty, runtime, run, outcome, evidence) -> None:
    _completed(kind, outcome)
    # The turn went on while the plugin was still inside its call.
    assert not faulty.returned.is_set()
    assert "faulty" in evidence
    assert ("timeout" if kind == "retriever" else "hung") in evidence
    calls = faulty.calls
    again = run(runtime)
    _completed(kind, again)
    assert faulty.calls == calls, "a hung plugin was called again before it returned"
    assert "faulty" in again.evidence
    assert ("hung" if kind == "retriever" else "skipped") in again.evidence
    faulty.release.set()
    assert faulty.returned.wait(HANG_LIMIT_S)
    _wait_until_forgotten(runtime, kind)
    run(runtime)
    assert faulty.calls > calls, "a plugin that returned was not called again"


def _wait_until_forgotten(runtime: Promptweave, kind: str) -> None:
    """The hung call's thread has noted its return (it does so right after the plugin returns)."""
    for _ in range(1000):
        if not runtime.watchdog.hung() and not runtime.retrieval_runner._hung:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{kind}: the returned call is still counted as hung")


def check_huge(kind, faulty, runtime, run, outcome, evidence) -> None:
    _completed(kind, outcome)
    result = outcome.result
    if kind in ("section", "override", "measure_text"):
        assert all(len(section.text) <= 12000 for section in result.sections)
    elif kind == "retriever":
        entries = result.trace["retrieval"]["sections"]["memory"]
        cut = [e for e in entries if e["retriever"] == "faulty_memory"]
        assert cut[0]["details"] == {"items_cut_at": 1000} and len(cut[0]["hits"]) <= 50
    elif kind == "decision_rule":
        assert result.reason == "x" * 200
    elif kind == "pool":
        assert result.low_engagement.phrase and len(result.low_engagement.phrase) <= 12
    elif kind == "collect_turn_notes":
        assert len(result.notes) == 32
    elif kind == "compress_turn_messages":
        assert result.preflight.outcome == "no_progress"
    elif kind == "decide_with_model":
        assert result.reason == "invalid_model_response"
    elif kind == "fetch_image":
        assert "outside the limits" in evidence and result.trace["images"]["sent"] == 0
    elif kind == "submit_request":
        assert result.status == "ok"
    elif kind == "summarize_session":
        assert result.status.value == "compressed" and len(result.summary) <= 120
    elif kind == "describe_image":
        assert result.status.value == "compressed"
    else:
        assert len(result.text) == 10_000_000  # a long message is still a message


def check_mutation(kind, faulty, runtime, run, outcome, evidence) -> None:
    _completed(kind, outcome)
    result = outcome.result
    if kind in ("section", "override"):
        memory = next(section for section in result.sections if section.id == "memory")
        assert memory.status == "rendered", "a plugin emptied the sections after it"
        assert "mappingproxy" in evidence
    elif kind == "collect_turn_notes":
        assert "mappingproxy" in evidence and result.trace["note_failures"]
    elif kind == "submit_request":
        # The body is the plugin's to send; what the conversation keeps of the request (for the
        # next turn's prefix report) is its own bytes, untouched.
        remembered = runtime.conversations.last_requests.get(
            (conversation_key(TURN), "openai_chat")
        )
        assert remembered is not None and json.loads(remembered)["messages"]
    else:
        assert any(name in evidence for name in ("FrozenInstanceError", "AttributeError"))


CHECKS = {
    "raise": check_raise,
    "hang": check_hang,
    "wrong_type": check_wrong_type,
    "huge": check_huge,
    "mutation": check_mutation,
}


EXIT_SCRIPT = """
import sys, threading
from promptweave import Promptweave, Retriever, Section, hookimpl, load_turn_file
from promptweave.config import Config, PluginsConfig, StoreConfig
from promptweave.testing import TEST_ENVIRON

never = threading.Event()

class Stuck:
    @hookimpl
    def register_sections(self, register):
        register(Section(id="stuck", title="stuck", render=lambda context: never.wait()))

    @hookimpl
    def register_retrievers(self, register):
        register(Retriever(name="stuck", feeds="memory", retrieve=lambda q: never.wait()))

    @hookimpl
    def summarize_session(self, bot_id, group_id, user_id, turns, previous_summary, max_chars):
        never.wait()

config = Config(store=StoreConfig(backend="memory"), plugins=PluginsConfig(turn_deadline_s=0.2))
runtime = Promptweave.from_config(config, environ=TEST_ENVIRON, extra_plugins=[Stuck()])
turn = load_turn_file(sys.argv[1])
rendered = runtime.render(turn)
print(sorted({fault["kind"] for fault in rendered.trace["plugin_faults"]}))
print(rendered.trace["retrieval"]["sections"]["memory"][-1]["reason"])
if sys.argv[2] == "close":
    runtime.close()
print("left", threading.active_count() > 1)
"""


@pytest.mark.parametrize("ending", ["close", "exit"])
def test_the_process_exits_with_a_hung_plugin_thread(ending, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "stuck.py"
    script.write_text(EXIT_SCRIPT, encoding="utf-8")
    finished = subprocess.run(
        [sys.executable, str(script), str(EXAMPLES / "at_question.json"), ending],
        capture_output=True,
        text=True,
        timeout=120,  # a guard: the process must end by itself, and does so at once
        cwd=tmp_path,
        env={"PYTHONPATH": str(EXAMPLES.parent.parent), "PATH": ""},
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.splitlines() == ["['hung']", "timeout", "left True"]


def test_a_hang_is_named_with_its_plugin_and_place_in_the_trace_and_the_decision(hung):
    faulty, plugin, _run = rule_kind("hang")
    hung.append(faulty)
    runtime = runtime_with(plugin)
    try:
        rendered = runtime.render(TURN, retrieve=False)
    finally:
        faulty.release.set()
        runtime.close()
    [fault] = rendered.trace["plugin_faults"]
    assert (fault["plugin"], fault["where"], fault["kind"]) == (
        "faulty",
        "decision rule 'faulty_gate'",
        "hung",
    )
    assert "deadline of 0.2 s" in fault["detail"]
    assert any(
        "decision rule 'faulty_gate' of plugin 'faulty' hung" in n for n in rendered.decision.notes
    )


def test_without_a_deadline_plugins_run_on_the_callers_thread():
    threads: list[str] = []

    class Where:
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            def render(context: Any) -> str:
                threads.append(threading.current_thread().name)
                return "【在哪】这里"

            register(Section(id="where", title="在哪", render=render))

    bounded = runtime_with(Where())
    unbounded = runtime_with(Where(), plugins=PluginsConfig(turn_deadline_s=0))
    try:
        bounded.render(TURN, retrieve=False)
        unbounded.render(TURN, retrieve=False)
    finally:
        bounded.close()
        unbounded.close()
    caller = threading.current_thread().name
    assert threads[0].startswith("promptweave-stage") and threads[1] == caller


def test_a_stage_calls_trusted_plugins_on_its_own_thread_and_bounds_the_others():
    from promptweave.plugins.watchdog import Deadline, Watchdog, call_plugin

    watchdog = Watchdog(deadline_s=DEADLINE_S, trusted=lambda plugin: plugin == "shipped")
    threads: dict[str, str] = {}

    def note(plugin: str) -> str:
        threads[plugin] = threading.current_thread().name
        return plugin

    def stage() -> list[str]:
        return [call_plugin(name, "hook x", note, name) for name in ("shipped", "other")]

    assert watchdog.run(stage, Deadline(seconds=DEADLINE_S)) == ["shipped", "other"]
    assert threads["shipped"] == threading.current_thread().name
    assert threads["other"].startswith("promptweave-stage")


def test_a_hung_call_leaves_the_rest_of_its_stage_on_the_callers_thread():
    from promptweave.plugins.watchdog import Deadline, PluginHungError, Watchdog, call_plugin

    watchdog = Watchdog(deadline_s=DEADLINE_S, grace_s=GRACE_S)
    release = threading.Event()
    after: list[str] = []

    def stage() -> str:
        try:
            call_plugin("stuck", "hook x", release.wait, HANG_LIMIT_S)
        except PluginHungError as exc:
            after.append(threading.current_thread().name)
            return exc.fault.kind
        return "returned"

    deadline = Deadline(seconds=DEADLINE_S)
    try:
        assert watchdog.run(stage, deadline) == "hung"
        assert after == [threading.current_thread().name]
        assert watchdog.hung() == [("stuck", "hook x")]
        with pytest.raises(PluginHungError, match="skipped"):
            watchdog.run(lambda: call_plugin("stuck", "hook x", release.wait, 0), deadline)
    finally:
        release.set()
    for _ in range(1000):
        if not watchdog.hung():
            break
        threading.Event().wait(0.01)
    assert watchdog.hung() == []


def test_the_plugins_shipped_with_promptweave_are_trusted_and_no_other():
    class Bystander:
        """A third-party plugin with nothing to do."""

    config = Config(store=StoreConfig(backend="memory"))
    runtime = Promptweave.from_config(
        config, environ=TEST_ENVIRON, contrib=["group_tools"], extra_plugins=[Bystander()]
    )
    try:
        kinds = {name: info.kind for name, info in runtime.plugins.infos.items()}
        assert kinds["routing_rules"] == "builtin" and kinds["group_tools"] == "contrib"
        assert "extra" in kinds.values()
        for name, kind in kinds.items():
            assert runtime.watchdog.trusted(name) == (kind in ("builtin", "contrib")), name
        assert not runtime.watchdog.trusted("no_such_plugin")
    finally:
        runtime.close()


@pytest.mark.parametrize("value", ["-1", "inf", "nan"])
def test_the_turn_deadline_is_a_finite_number_of_seconds(tmp_path, value):
    from promptweave import ConfigError

    config = tmp_path / "promptweave.toml"
    config.write_text(f"[plugins]\nturn_deadline_s = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"turn_deadline_s"):
        Config.from_file(config)


def test_what_plugins_must_not_change_is_read_only():
    runtime = runtime_with(object())
    try:
        context = runtime.context_for(TURN)
        with pytest.raises(TypeError):
            context.retrieved["memory"] = ()  # type: ignore[index]
        with pytest.raises(TypeError):
            runtime.persona.display_names["30017"] = "改名"  # type: ignore[index]
        with pytest.raises(TypeError):
            runtime.config.retrieval.timeouts["memory"] = 1.0  # type: ignore[index]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            context.turn.message.text = "改"  # type: ignore[misc]
        context.extras["acme"] = "the one place meant for writing"
    finally:
        runtime.close()


def _raising_contributor(hook: str) -> object:
    def contribute(self: object, register: Callable[..., None]) -> None:
        raise RuntimeError("boom at start-up")

    contribute.__name__ = hook
    return type("Contributor", (), {hook: hookimpl(contribute)})()


@pytest.mark.parametrize(
    "hook",
    [
        "register_sections",
        "register_retrievers",
        "register_decision_rules",
        "register_low_engagement_pools",
        "register_persona_packs",
    ],
)
def test_a_contribution_hook_that_raises_is_a_clear_error_naming_the_plugin(hook):
    from promptweave import PluginRegistrationError

    with pytest.raises(PluginRegistrationError, match=f"failed in {hook}: RuntimeError: boom"):
        Promptweave.from_config(environ=TEST_ENVIRON, extra_plugins=[_raising_contributor(hook)])
    # Also what a wrong record raised before: a TypeError.
    assert issubclass(PluginRegistrationError, TypeError)


@pytest.mark.parametrize(("name", "path"), [("pack", 5), (5, "pack.toml"), ("pack", ["a.toml"])])
def test_a_persona_pack_registered_without_a_name_and_a_path_is_refused(name, path):
    from promptweave import PluginRegistrationError

    class Packs:
        @hookimpl
        def register_persona_packs(self, register: Callable[..., None]) -> None:
            register(name, path)

    with pytest.raises(PluginRegistrationError, match="expected a name and a path"):
        Promptweave.from_config(environ=TEST_ENVIRON, extra_plugins=[Packs()])


@pytest.mark.parametrize("value", [42, b"bytes", ["a", "list"]])
def test_a_section_rendering_anything_but_text_is_left_out_and_named(value):
    class Plugin:
        @hookimpl
        def register_sections(self, register: Callable[[Section], None]) -> None:
            register(Section(id="odd", title="odd", render=lambda context: value))

    runtime = runtime_with(Plugin())
    try:
        rendered = runtime.render(TURN, retrieve=False)
    finally:
        runtime.close()
    odd = next(section for section in rendered.sections if section.id == "odd")
    expected = f"render returned {type(value).__name__}, expected str or None"
    assert (odd.status, odd.error) == ("error", expected)
    assert sum(section.status == "rendered" for section in rendered.sections) >= 10


@pytest.mark.parametrize("value", ["replace", {"mode": "replace", "content": "x"}])
def test_an_override_answering_anything_but_a_section_override_is_ignored_and_named(value):
    class Plugin:
        @hookimpl
        def override_section(self, section_id: str) -> Any:
            return value

    runtime = runtime_with(Plugin())
    try:
        rendered = runtime.render(TURN, retrieve=False)
    finally:
        runtime.close()
    persona = next(section for section in rendered.sections if section.id == "persona")
    assert persona.status == "rendered" and persona.override is None
    assert persona.error == (
        f"override_section returned {type(value).__name__}, expected SectionOverride or None "
        "(plugin 'faulty')"
    )


def test_a_contribution_hook_that_hangs_stops_start_up_with_an_error_naming_the_plugin():
    from promptweave import PluginRegistrationError

    release = threading.Event()

    class Stalls:
        @hookimpl
        def register_sections(self, register):  # type: ignore[no-untyped-def]
            release.wait(HANG_LIMIT_S)

    config = Config(
        store=StoreConfig(backend="memory"), plugins=PluginsConfig(register_deadline_s=0.2)
    )
    runtime = Promptweave.from_config(config, environ=TEST_ENVIRON)
    try:
        with pytest.raises(PluginRegistrationError) as raised:
            runtime.add_plugin(Stalls(), name="stalls")
        assert str(raised.value).startswith(
            "plugin 'stalls' did not finish register_sections within 0.2 s"
        )
        assert "register_deadline_s" in str(raised.value)
        assert runtime.plugins.pm.get_plugin("stalls") is None  # left out again
    finally:
        release.set()
        runtime.close()


def test_the_built_in_contributions_are_called_on_the_callers_thread():
    from promptweave.plugins.registry import collect_registries

    threads: list[str] = []

    class Notes:
        @hookimpl
        def register_sections(self, register):  # type: ignore[no-untyped-def]
            threads.append(threading.current_thread().name)

    runtime = runtime_with(Notes())
    try:
        collect_registries(runtime.plugins.pm, trusted=lambda plugin: plugin == "faulty")
        collect_registries(runtime.plugins.pm, deadline_s=0)
    finally:
        runtime.close()
    caller = threading.current_thread().name
    # Added as an extra plugin: on a worker; trusted, or without a deadline: right here.
    assert threads[0].startswith("promptweave-stage")
    assert threads[1:] == [caller, caller]


def test_a_trusted_call_is_made_here_its_error_named_and_a_quarantine_still_skips_it():
    from promptweave.plugins.watchdog import (
        Deadline,
        PluginHungError,
        Watchdog,
        current_stage,
    )

    watchdog = Watchdog(deadline_s=DEADLINE_S, trusted=lambda plugin: plugin == "shipped")
    deadline = Deadline(seconds=DEADLINE_S)
    threads: list[str] = []

    def note(value: str) -> str:
        threads.append(threading.current_thread().name)
        return value

    def fail(value: str) -> str:
        raise ValueError(value)

    def stage() -> list[object]:
        run = current_stage()
        assert run is not None
        assert run.trusts("shipped") and not run.trusts("other")
        found: list[object] = [run.call_trusted("shipped", "section 'a'", note, "a")]
        with pytest.raises(ValueError, match="broken"):
            run.call_trusted("shipped", "section 'b'", fail, "broken")
        return found

    assert current_stage() is None
    assert watchdog.run(stage, deadline) == ["a"]
    assert threads == [threading.current_thread().name]
    [fault] = deadline.faults
    assert (fault.plugin, fault.where, fault.kind) == ("shipped", "section 'b'", "raised")

    # Quarantined (a call of it hung elsewhere and returned a moment ago): skipped, as by call.
    watchdog._quarantined["shipped"] = (time.monotonic() + 60, "hook x")
    skipped = Deadline(seconds=DEADLINE_S)

    def quarantined_stage() -> None:
        run = current_stage()
        assert run is not None
        run.call_trusted("shipped", "section 'a'", note, "a")

    with pytest.raises(PluginHungError, match="quarantined"):
        watchdog.run(quarantined_stage, skipped)
    assert threads == [threading.current_thread().name]
    assert [fault.kind for fault in skipped.faults] == ["skipped"]
