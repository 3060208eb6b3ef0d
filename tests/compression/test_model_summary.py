"""Session summaries and image descriptions by the learning model (``docs/learning.md``,
summaries and image descriptions): the built-in ``model_summary`` plugin over a runtime whose
sessions grow long enough to be compressed."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from base_support import BOT, GROUP, ROOT, T0, Clock

from promptweave import ChatMessage, Config, Promptweave, SessionTurn, Stores, hookimpl
from promptweave._convert import structure
from promptweave.builtin_plugins import model_summary
from promptweave.builtin_plugins.model_tasks import default_pack
from promptweave.builtin_plugins.session_summary import extractive_summary
from promptweave.compression.summary import CompressionStatus
from promptweave.config import (
    LearningBudgetConfig,
    LearningConfig,
    LearningModelConfig,
    SessionConfig,
)
from promptweave.errors import ConfigError
from promptweave.learning.model import ModelCall, RunModel
from promptweave.providers.exchange import ProviderRequest, SubmitResult, Usage
from promptweave.store.session_rows import SUMMARY_MARK

USER = "30022"
PHOTO = "https://img.example/notice.png"
TOPICS = [
    "最近在准备考研复试，好紧张",
    "想报南大的计算机",
    "我喜欢做算法题，动态规划最拿手",
    "你觉得面试老师会问项目吗",
    "我打算周末去图书馆复习",
    "英语口语是我的弱项",
]


class Spy:
    """Notes the turns and previous summary every ``summarize_session`` call is given, and
    leaves the answer to the other plugins."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[SessionTurn, ...], str | None, int]] = []

    @hookimpl(tryfirst=True)
    def summarize_session(
        self, turns: Sequence[SessionTurn], previous_summary: str | None, max_chars: int
    ) -> str | None:
        self.calls.append((tuple(turns), previous_summary, max_chars))
        return None

    def extractive(self, call: int = -1) -> str | None:
        """What the built-in extractive summarizer writes for call ``call``."""
        turns, previous, max_chars = self.calls[call]
        return extractive_summary(turns, previous, max_chars)


@attrs.define
class FakeServer:
    """An async submit answering each task with the next of its texts (the last one repeats),
    noting every request it receives."""

    answers: dict[str, list[str]]
    requests: list[ProviderRequest] = attrs.field(factory=list)
    status: str = "ok"

    async def __call__(self, request: ProviderRequest) -> SubmitResult:
        self.requests.append(request)
        if self.status != "ok":
            return SubmitResult(sent=True, status=self.status, detail="HTTP 503")
        task = request.body["response_format"]["json_schema"]["name"]
        texts = self.answers[task]
        text = texts.pop(0) if len(texts) > 1 else texts[0]
        return SubmitResult(
            sent=True,
            status="ok",
            text=text,
            usage=Usage(prompt_tokens=300, output_tokens=40, cached_tokens=0),
        )

    def of(self, task: str) -> list[ProviderRequest]:
        return [r for r in self.requests if r.conversation_key == f"learning:{task}"]


def make_runtime(
    clock: Clock,
    *,
    model: LearningModelConfig | None = None,
    budget: LearningBudgetConfig | None = None,
    session: SessionConfig | None = None,
    server: FakeServer | None = None,
    persona_pack: str = "default",
    opt_out: tuple[str, ...] = (),
) -> tuple[Promptweave, Spy]:
    """A runtime on in-memory stores with ``model_summary`` registered, compressing at 8 user
    turns (4 rows kept); with ``server``, the learning model asks it instead of the offline
    rules."""
    config = attrs.evolve(
        Config(persona_pack=persona_pack),
        session=session or SessionConfig(summary_threshold=8, summary_keep=4),
        learning=LearningConfig(
            model=model or LearningModelConfig(client="offline"),
            budget=budget or LearningBudgetConfig(),
            opt_out_groups=opt_out,
        ),
    )
    runtime = Promptweave.from_config(config, stores=Stores.in_memory(config), clock=clock)
    spy = Spy()
    runtime.add_plugin(spy, name="spy")
    if server is not None:
        assert runtime.learning_model is not None
        runtime.learning_model = attrs.evolve(
            runtime.learning_model, submit=server, label="fake server"
        )
    return runtime, spy


def chat(runtime: Promptweave, clock: Clock, turns: int, *, start: int = 0) -> None:
    """``turns`` user messages, each answered by the bot five seconds later, one a minute."""
    for number in range(start, start + turns):
        asked = ChatMessage(
            id=f"{USER}-{number}",
            sender_id=USER,
            sender_name="阿蒙",
            text=TOPICS[number % len(TOPICS)],
            time=clock.advance(60),
            addressed=True,
        )
        runtime.recorder.record_message(BOT.id, GROUP, asked)
        clock.advance(5)
        runtime.recorder.record_bot_reply(
            BOT.id, GROUP, f"加油，第{number}次给你打气", message_id=f"r{number}", answering=asked
        )
    assert runtime.background.wait(timeout=30)


def send_photo(runtime: Promptweave, clock: Clock) -> None:
    photo = ChatMessage(
        id="img", sender_id=USER, text="看我收到的", images=(PHOTO,), time=clock.advance(30)
    )
    runtime.recorder.record_bot_reply(BOT.id, GROUP, "恭喜！", message_id="r-img", answering=photo)
    assert runtime.background.wait(timeout=30)


def summary_text(runtime: Promptweave) -> str:
    """The text of the session's summary row, which must come first."""
    assert runtime.stores.sessions is not None
    rows = runtime.stores.sessions.user_turns(BOT.id, GROUP, USER, until=runtime.clock(), limit=500)
    assert rows and rows[0].is_summary
    assert rows[0].content.startswith(SUMMARY_MARK + "\n")
    return rows[0].content.removeprefix(SUMMARY_MARK + "\n")


def calls(runtime: Promptweave, task: str) -> list[ModelCall]:
    assert runtime.learning_model is not None
    return [call for call in runtime.learning_model.calls if call.task == task]


def test_offline_model_writes_the_summary_and_counts_the_call(clock: Clock) -> None:
    runtime, spy = make_runtime(clock)
    chat(runtime, clock, 8)
    text = summary_text(runtime)
    assert 0 < len(text) <= 120
    # The offline rule is the extractive summary of the turns it was sent, within 120.
    assert text == spy.extractive()
    [call] = calls(runtime, "summary")
    assert (call.status, call.learner, call.attempts) == ("ok", "summary", 1)
    assert (call.bot_id, call.group_id) == (BOT.id, GROUP)
    assert call.spend.calls == 1 and call.spend.prompt_tokens > 0 and call.spend.output_tokens > 0
    assert runtime.learning_model is not None
    spent = runtime.learning_model.budget.spent(clock(), bot_id=BOT.id, group_id=GROUP)
    assert spent["summary"].calls == 1
    assert spent["summary"].tokens == call.spend.tokens
    runtime.close()


def test_the_model_summary_is_stored_as_answered(clock: Clock) -> None:
    answer = "对方在准备考研复试，  想报南大的计算机，\n擅长动态规划；你一直在给他打气。"
    server = FakeServer({"summary": [json.dumps({"summary": answer}, ensure_ascii=False)]})
    runtime, spy = make_runtime(clock, server=server)
    chat(runtime, clock, 8)
    assert summary_text(runtime) == " ".join(answer.split())
    assert summary_text(runtime) != spy.extractive()
    [request] = server.of("summary")
    body = request.body
    prompt = default_pack().learning_prompts["summary"]
    system, user = body["messages"]
    assert system == {"role": "system", "content": default_pack().format(prompt.system)}
    assert "不超过 120 字" in user["content"]
    sent = json.loads(user["content"].split("输入（JSON）：\n", 1)[1])
    turns, _previous, _max = spy.calls[0]
    assert sent["previous_summary"] == ""
    assert sent["turns"][:2] == [
        {"speaker": "对方", "text": TOPICS[0]},
        {"speaker": "你", "text": "加油，第0次给你打气"},
    ]
    assert len(sent["turns"]) == len(turns) == 12
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["summary"]
    [call] = calls(runtime, "summary")
    assert call.status == "ok" and call.spend.prompt_tokens == 300
    runtime.close()


def test_a_shorter_summary_limit_is_asked_and_held(clock: Clock) -> None:
    long = "对方在准备考研复试" * 5  # 45 characters: more than the limit of 30
    server = FakeServer({"summary": [json.dumps({"summary": long}, ensure_ascii=False)]})
    runtime, spy = make_runtime(
        clock,
        server=server,
        session=SessionConfig(summary_threshold=8, summary_keep=4, summary_max_chars=30),
    )
    chat(runtime, clock, 8)
    assert "不超过 30 字" in server.of("summary")[0].body["messages"][1]["content"]
    [call] = calls(runtime, "summary")
    assert (call.status, call.attempts) == ("invalid", 2)
    assert "more than 30" in call.error
    assert summary_text(runtime) == spy.extractive()
    runtime.close()


def test_invalid_answers_twice_leave_the_extractive_summary(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer({"summary": ["这不是 JSON", '{"summary": "【此前对话摘要】套娃"}']})
    runtime, spy = make_runtime(clock, server=server)
    with caplog.at_level(logging.INFO, logger="promptweave.learning"):
        chat(runtime, clock, 8)
    assert summary_text(runtime) == spy.extractive()
    [call] = calls(runtime, "summary")
    assert (call.status, call.attempts) == ("invalid", 2)
    assert call.spend.calls == 2 and call.spend.invalid == 2
    assert "summary mark" in call.error
    assert len(server.of("summary")) == 2
    assert any(
        f"session summary of user {USER} in group {GROUP}" in record.getMessage()
        and "no valid answer" in record.getMessage()
        and "the extractive summary is written" in record.getMessage()
        for record in caplog.records
    )
    runtime.close()


def test_a_failing_provider_leaves_the_extractive_summary(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer({}, status="error")
    runtime, spy = make_runtime(clock, server=server)
    with caplog.at_level(logging.INFO, logger="promptweave.learning"):
        chat(runtime, clock, 8)
    assert summary_text(runtime) == spy.extractive()
    [call] = calls(runtime, "summary")
    assert call.status == "error" and "HTTP 503" in call.error
    assert any(
        record.levelno == logging.WARNING
        and "the learning model failed" in record.getMessage()
        and "the extractive summary is written" in record.getMessage()
        for record in caplog.records
    )
    runtime.close()


def test_a_spent_budget_falls_back_to_the_extractive_summary(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer({"summary": ['{"summary": "对方在备考，你在打气"}']})
    runtime, spy = make_runtime(
        clock, server=server, budget=LearningBudgetConfig(group_calls_per_hour=1)
    )
    chat(runtime, clock, 8)
    assert summary_text(runtime) == "对方在备考，你在打气"
    chat(runtime, clock, 8, start=8)  # within the cooldown: not compressed yet
    with caplog.at_level(logging.INFO, logger="promptweave.learning"):
        result = runtime.recorder.compress_session(BOT.id, GROUP, USER, now=clock.advance(600))
    assert result.status is CompressionStatus.COMPRESSED
    assert summary_text(runtime) == spy.extractive() != "对方在备考，你在打气"
    assert spy.calls[-1][1] == "对方在备考，你在打气"  # the model's summary is carried on
    assert [call.status for call in calls(runtime, "summary")] == ["ok", "budget"]
    budget_call = calls(runtime, "summary")[-1]
    assert budget_call.spend.calls == 0 and "group calls per hour" in budget_call.error
    assert len(server.requests) == 1
    assert any(
        record.levelno == logging.INFO
        and f"session summary of user {USER} in group {GROUP}: learning budget spent"
        in record.getMessage()
        and record.getMessage().endswith("the extractive summary is written")
        for record in caplog.records
    )
    runtime.close()


def test_vision_describes_the_images_of_the_summarized_turns(clock: Clock) -> None:
    server = FakeServer(
        {
            "describe_image": ['{"description": "一张复试通知的截图"}'],
            "summary": ['{"summary": "对方收到了复试通知"}'],
        }
    )
    runtime, spy = make_runtime(
        clock, server=server, model=LearningModelConfig(client="offline", vision=True)
    )
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    turns, _previous, _max = spy.calls[0]
    assert turns[0].content == "[图片：一张复试通知的截图] 看我收到的"
    [request] = server.of("describe_image")
    user = request.body["messages"][1]
    assert user["role"] == "user"
    text, image = user["content"]
    assert text["type"] == "text" and "不超过 60 字" in text["text"]
    assert image == {"type": "image_url", "image_url": {"url": PHOTO}}
    [call] = calls(runtime, "describe_image")
    assert (call.status, call.learner) == ("ok", "describe_image")
    # The summary task reads the described turn.
    sent = server.of("summary")[0].body["messages"][1]["content"]
    assert "[图片：一张复试通知的截图] 看我收到的" in sent
    assert summary_text(runtime) == "对方收到了复试通知"
    runtime.close()


def test_the_offline_model_says_it_saw_no_image(clock: Clock) -> None:
    runtime, spy = make_runtime(clock, model=LearningModelConfig(client="offline", vision=True))
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    turns, _previous, _max = spy.calls[0]
    assert turns[0].content == "[图片：图片（离线模型未看图）] 看我收到的"
    [call] = calls(runtime, "describe_image")
    assert call.status == "ok" and call.spend.calls == 1
    runtime.close()


def test_without_vision_images_stay_placeholders(clock: Clock) -> None:
    server = FakeServer({"summary": ['{"summary": "对方收到了复试通知"}']})
    runtime, spy = make_runtime(clock, server=server)
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    assert spy.calls[0][0][0].content == "[图片] 看我收到的"
    assert calls(runtime, "describe_image") == [] and server.of("describe_image") == []
    assert summary_text(runtime) == "对方收到了复试通知"
    runtime.close()


def test_describe_images_off_asks_no_description_even_with_vision(clock: Clock) -> None:
    server = FakeServer(
        {
            "describe_image": ['{"description": "一张复试通知的截图"}'],
            "summary": ['{"summary": "对方收到了复试通知"}'],
        }
    )
    runtime, spy = make_runtime(
        clock,
        server=server,
        model=LearningModelConfig(client="offline", vision=True),
        session=SessionConfig(summary_threshold=8, summary_keep=4, describe_images=False),
    )
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    assert "图片：" not in spy.calls[0][0][0].content
    assert calls(runtime, "describe_image") == [] and server.of("describe_image") == []
    assert [call.status for call in calls(runtime, "summary")] == ["ok"]
    runtime.close()


def test_describe_image_falls_back_to_the_placeholder(clock: Clock) -> None:
    server = FakeServer(
        {
            "describe_image": ['{"description": ""}'],  # blank: invalid twice
            "summary": ['{"summary": "对方收到了复试通知"}'],
        }
    )
    runtime, spy = make_runtime(
        clock, server=server, model=LearningModelConfig(client="offline", vision=True)
    )
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    assert spy.calls[0][0][0].content == "[图片] 看我收到的"
    [call] = calls(runtime, "describe_image")
    assert (call.status, call.attempts) == ("invalid", 2)
    runtime.close()


def test_no_learning_model_keeps_the_extractive_summary(clock: Clock) -> None:
    runtime, spy = make_runtime(clock, model=LearningModelConfig(enabled=False, vision=True))
    assert runtime.learning_model is None and runtime.recorder.model_for is None
    send_photo(runtime, clock)
    chat(runtime, clock, 7)
    assert spy.calls[0][0][0].content == "[图片] 看我收到的"
    assert summary_text(runtime) == spy.extractive()
    runtime.close()


# -- the hooks, the answers and the offline rules on their own --------------------------------


def turn(role: str, content: str) -> SessionTurn:
    return SessionTurn(
        bot_id=BOT.id, group_id=GROUP, user_id=USER, role=role, content=content, time=T0
    )


def test_the_hooks_answer_nothing_without_a_model() -> None:
    turns = [turn("user", "我打算周末去图书馆复习")]
    assert model_summary.summarize_session(BOT.id, GROUP, USER, turns, None, 120, None) is None
    assert model_summary.describe_image(PHOTO, BOT.id, GROUP, None) is None


def test_describe_image_needs_vision(clock: Clock) -> None:
    runtime, _spy = make_runtime(clock)
    assert runtime.learning_model is not None
    model = RunModel(
        model=runtime.learning_model,
        learner="describe_image",
        bot_id=BOT.id,
        group_id=GROUP,
        now=clock(),
    )
    assert not model.vision
    assert model_summary.describe_image(PHOTO, BOT.id, GROUP, model) is None
    assert model.calls == []
    runtime.close()


def test_summary_answer_rules() -> None:
    answer = structure({"summary": " 对方\n在备考  "}, model_summary.SummaryAnswer, "answer")
    assert answer.summary == "对方 在备考"
    for bad in ["   ", "字" * 121, f"{SUMMARY_MARK}对方在备考"]:
        with pytest.raises(ConfigError):
            structure({"summary": bad}, model_summary.SummaryAnswer, "answer")
    limited = model_summary.summary_answer(30)
    assert structure({"summary": "字" * 30}, limited, "answer").summary == "字" * 30
    with pytest.raises(ConfigError):
        structure({"summary": "字" * 31}, limited, "answer")
    assert model_summary.summary_answer(500) is model_summary.SummaryAnswer


def test_image_answer_rules() -> None:
    answer = structure({"description": "一张 截图"}, model_summary.ImageAnswer, "answer")
    assert answer.description == "一张 截图"
    for bad in ["", "字" * 61]:
        with pytest.raises(ConfigError):
            structure({"description": bad}, model_summary.ImageAnswer, "answer")


def test_offline_rules_are_the_extractive_summary_and_an_honest_label() -> None:
    turns = [
        turn("user", "我下个月要去杭州面试"),
        turn("assistant", "我会记得提醒你带简历"),
        turn("user", "面试是后端岗位，" + "细节" * 150),
        turn("user", "哈哈"),
    ]
    task = model_summary.summary_task(turns, "对方在找工作", 120)
    payload: dict[str, Any] = dict(task.payload)
    assert [t["speaker"] for t in payload["turns"]] == ["对方", "你", "对方", "对方"]
    assert len(payload["turns"][2]["text"]) == model_summary.TURN_CHARS
    assert task.offline is not None
    offline = task.offline(payload)
    assert offline == task.offline(payload)  # deterministic
    cut = [attrs.evolve(t, content=t.content[: model_summary.TURN_CHARS]) for t in turns]
    assert offline == {"summary": extractive_summary(cut, "对方在找工作", 120)}
    assert model_summary.offline_summary({"turns": [], "previous_summary": ""}) == {"summary": ""}
    short = model_summary.summary_task(turns, None, 40)
    assert short.offline is not None
    assert len(short.offline(short.payload)["summary"]) <= 40
    image = model_summary.image_task(PHOTO)
    assert image.images == (PHOTO,) and image.payload == {"url": PHOTO}
    assert image.offline is not None
    assert image.offline(image.payload) == {"description": model_summary.OFFLINE_DESCRIPTION}


def test_model_summary_is_not_trylast() -> None:
    for hook in (model_summary.summarize_session, model_summary.describe_image):
        marks = hook.__dict__["promptweave_impl"]  # what @hookimpl noted
        assert marks["trylast"] is False and marks["tryfirst"] is False


def test_the_runtime_s_persona_pack_gives_the_summary_prompt(clock: Clock, tmp_path: Path) -> None:
    default = (ROOT / "builtin_plugins" / "persona_packs" / "default.toml").read_text("utf-8")
    pack = tmp_path / "ajiu.toml"
    pack.write_text(
        default.replace("你把一段较早的群聊对话压成摘要", "阿玖的摘要员：把较早的对话压成摘要"),
        encoding="utf-8",
    )
    server = FakeServer({"summary": ['{"summary": "对方在准备复试"}']})
    runtime, _spy = make_runtime(clock, server=server, persona_pack=str(pack))
    chat(runtime, clock, 8)
    [request] = server.of("summary")
    assert request.body["messages"][0]["content"].startswith("阿玖的摘要员：")
    runtime.close()


def test_a_group_that_opted_out_is_summarized_without_the_model(clock: Clock) -> None:
    server = FakeServer({"summary": ['{"summary": "对方在准备复试"}']})
    runtime, spy = make_runtime(clock, server=server, opt_out=(GROUP,))
    chat(runtime, clock, 8)
    assert server.requests == []
    assert summary_text(runtime) == spy.extractive()
    assert calls(runtime, "summary") == []
    runtime.close()
