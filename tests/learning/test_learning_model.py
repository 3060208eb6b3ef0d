"""The learning model: structured-output requests in every format, answers checked through the
cattrs converter, one more try after an invalid answer, the offline rules, the clients it uses
(``docs/learning.md``, the learning model)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import pytest

from promptweave.config import (
    Config,
    LearningBudgetConfig,
    LearningConfig,
    LearningModelConfig,
    ProviderConfig,
)
from promptweave.errors import ConfigError
from promptweave.learning.budget import BudgetSpent, LearningBudget
from promptweave.learning.model import (
    OFFLINE_LABEL,
    CallStatus,
    LearningModel,
    ModelTask,
    ModelUnavailable,
    RunModel,
    answer_schema,
    build_request,
    offline_usage,
)
from promptweave.providers.exchange import (
    ProviderApi,
    ProviderRequest,
    SubmitResult,
    ToolCall,
    Usage,
)
from promptweave.store.stores import Stores

NOW = dt.datetime(2026, 12, 5, 14, 30, tzinfo=dt.UTC)


def _short(_instance: object, _attribute: object, value: str) -> None:
    if not value.strip() or len(value) > 10:
        raise ValueError(f"word must be 1 to 10 characters, not {len(value)}")


@attrs.frozen(kw_only=True)
class WordAnswer:
    word: str = attrs.field(validator=_short)
    count: int


SCHEMA = answer_schema({"word": {"type": "string"}, "count": {"type": "integer"}})


def _task(*, images: tuple[str, ...] = (), offline: Any = None) -> ModelTask[WordAnswer]:
    return ModelTask(
        name="words",
        answer=WordAnswer,
        schema=SCHEMA,
        system="只回答 JSON。",
        user='数一数：\n输入（JSON）：\n{"text": "桌游 桌游"}',
        payload={"text": "桌游 桌游"},
        offline=offline or (lambda payload: {"word": payload["text"].split()[0], "count": 2}),
        images=images,
    )


def _model(submit: Any = None, **limits: int) -> LearningModel:
    return LearningModel(
        settings=LearningModelConfig(),
        api=ProviderApi.OPENAI_CHAT,
        model="tiny",
        submit=submit,
        budget=LearningBudget(limits=LearningBudgetConfig(**limits)),
        label="test",
        clock=lambda: NOW,
    )


def _answering(*texts: str, usage: Usage | None = None) -> tuple[Any, list[ProviderRequest]]:
    """An async submit answering ``texts`` in turn, and the requests it received."""
    seen: list[ProviderRequest] = []
    answers = list(texts)

    async def submit(request: ProviderRequest) -> SubmitResult:
        seen.append(request)
        return SubmitResult(sent=True, status="ok", text=answers.pop(0), usage=usage)

    return submit, seen


# -- the request ------------------------------------------------------------------------------


def test_an_openai_chat_request_asks_for_the_schema_as_response_format() -> None:
    request = build_request(_task(), LearningModelConfig(), ProviderApi.OPENAI_CHAT, "tiny")
    assert request.path == "/chat/completions"
    assert request.body["model"] == "tiny"
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "words", "schema": SCHEMA, "strict": True},
    }
    assert [m["role"] for m in request.body["messages"]] == ["system", "user"]
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 512


def test_json_object_mode_sends_the_schema_beside_the_type() -> None:
    settings = LearningModelConfig(structured="json_object", max_tokens=64)
    request = build_request(_task(), settings, ProviderApi.OPENAI_CHAT, "")
    assert "model" not in request.body
    assert request.body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert request.body["max_tokens"] == 64


def test_a_responses_request_asks_through_text_format() -> None:
    request = build_request(_task(), LearningModelConfig(), ProviderApi.OPENAI_RESPONSES, "m")
    assert request.path == "/responses"
    assert request.body["text"]["format"] == {
        "type": "json_schema",
        "name": "words",
        "schema": SCHEMA,
        "strict": True,
    }
    assert request.body["instructions"] == "只回答 JSON。"


def test_an_anthropic_request_forces_one_tool_whose_input_is_the_answer() -> None:
    request = build_request(_task(), LearningModelConfig(), ProviderApi.ANTHROPIC, "claude")
    assert request.path == "/messages"
    assert request.body["tools"][0]["input_schema"] == SCHEMA
    assert request.body["tool_choice"] == {"type": "tool", "name": "words"}
    assert request.body["system"] == "只回答 JSON。"


@pytest.mark.parametrize(
    ("api", "part"),
    [
        (ProviderApi.OPENAI_CHAT, {"type": "image_url", "image_url": {"url": "https://x/a.png"}}),
        (ProviderApi.OPENAI_RESPONSES, {"type": "input_image", "image_url": "https://x/a.png"}),
        (
            ProviderApi.ANTHROPIC,
            {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        ),
    ],
)
def test_an_image_goes_with_the_user_message_in_each_format(
    api: ProviderApi, part: Mapping[str, Any]
) -> None:
    request = build_request(_task(images=("https://x/a.png",)), LearningModelConfig(), api, "m")
    key = "input" if api is ProviderApi.OPENAI_RESPONSES else "messages"
    content = request.body[key][-1]["content"]
    assert content[0]["text"].startswith("数一数")
    assert content[1] == part


# -- the answer -------------------------------------------------------------------------------


def test_a_valid_answer_is_parsed_into_the_record_and_counted() -> None:
    submit, seen = _answering(
        '{"word": "桌游", "count": 2}', usage=Usage(prompt_tokens=90, output_tokens=10)
    )
    model = _model(submit)
    answer, call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer == WordAnswer(word="桌游", count=2)
    assert (call.status, call.attempts) == (CallStatus.OK, 1)
    assert (call.spend.calls, call.spend.tokens) == (1, 100)
    assert len(seen) == 1
    assert model.budget.spent(NOW)["words"].tokens == 100


def test_an_invalid_answer_is_asked_once_more_and_then_given_up() -> None:
    submit, seen = _answering("not json", '{"word": "一个很长很长很长的词语", "count": 1}')
    model = _model(submit)
    answer, call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer is None
    assert (call.status, call.attempts) == (CallStatus.INVALID, 2)
    assert "word must be 1 to 10 characters" in call.error
    assert call.preview.startswith('{"word"')
    assert (call.spend.calls, call.spend.invalid) == (2, 2)
    assert len(seen) == 2


def test_the_second_try_may_give_the_answer() -> None:
    submit, _seen = _answering('{"word": "桌游"}', '```json\n{"word": "桌游", "count": 2}\n```')
    answer, call = _model(submit).ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer == WordAnswer(word="桌游", count=2)
    assert (call.status, call.attempts, call.spend.invalid) == (CallStatus.OK, 2, 1)


def test_extra_keys_and_a_list_are_invalid() -> None:
    submit, _seen = _answering('{"word": "a", "count": 1, "more": 1}', "[1, 2]")
    answer, call = _model(submit).ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer is None
    assert "not a JSON object but list" in call.error


def test_a_forced_tool_call_is_the_answer_of_an_anthropic_model() -> None:
    async def submit(request: ProviderRequest) -> SubmitResult:
        call = ToolCall(id="toolu_1", name="words", arguments='{"word": "猫", "count": 1}')
        return SubmitResult(sent=True, status="ok", text=None, tool_calls=(call,))

    model = attrs.evolve(_model(submit), api=ProviderApi.ANTHROPIC)
    answer, _call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer == WordAnswer(word="猫", count=1)


def test_a_provider_failure_raises_and_is_traced() -> None:
    async def submit(request: ProviderRequest) -> SubmitResult:
        return SubmitResult(sent=True, status="error", detail="HTTP 500: down (after 3 attempts)")

    model = _model(submit)
    with pytest.raises(ModelUnavailable, match="HTTP 500: down") as raised:
        model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert raised.value.call is not None
    assert raised.value.call.status == CallStatus.ERROR
    assert model.calls[-1].status == CallStatus.ERROR


# -- offline ----------------------------------------------------------------------------------


def test_the_offline_model_answers_by_the_tasks_rule_and_estimates_its_tokens() -> None:
    model = _model()
    answer, call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer == WordAnswer(word="桌游", count=2)
    request = build_request(_task(), model.settings, model.api, model.model)
    expected = offline_usage(request.body_text(), '{"word":"桌游","count":2}')
    assert call.spend.prompt_tokens == expected.prompt_tokens
    assert call.spend.output_tokens == expected.output_tokens


def test_an_offline_rule_that_breaks_the_schema_is_invalid_like_any_answer() -> None:
    task = _task(offline=lambda payload: {"word": "", "count": 0})
    answer, call = _model().ask(task, learner="words", bot_id="1", group_id="2")
    assert answer is None
    assert call.status == CallStatus.INVALID


def test_a_task_without_an_offline_rule_is_not_answered_offline() -> None:
    task = attrs.evolve(_task(), offline=None)
    with pytest.raises(ModelUnavailable, match="no rule for words"):
        _model().ask(task, learner="words", bot_id="1", group_id="2")


# -- the budget -------------------------------------------------------------------------------


def test_a_run_model_stops_at_the_budget_and_traces_it() -> None:
    model = _model(group_calls_per_hour=1)
    run = RunModel(model=model, learner="words", bot_id="1", group_id="2", now=NOW)
    assert run.ask(_task()) == WordAnswer(word="桌游", count=2)
    with pytest.raises(BudgetSpent) as spent:
        run.ask(_task())
    assert spent.value.retry_at == dt.datetime(2026, 12, 5, 15, 0, tzinfo=dt.UTC)
    assert [call.status for call in run.calls] == [CallStatus.OK, CallStatus.BUDGET]
    # Another group has its own hourly budget.
    other = RunModel(model=model, learner="words", bot_id="1", group_id="3", now=NOW)
    assert other.ask(_task()) is not None


# -- from the configuration -------------------------------------------------------------------


def _budget() -> LearningBudget:
    return LearningBudget(limits=LearningBudgetConfig())


def test_auto_follows_the_offline_stand_in_of_the_turns() -> None:
    model, why = LearningModel.from_config(Config(), _budget(), enabled_plugins=("offline_model",))
    assert why is None and model is not None
    assert model.offline and model.label == OFFLINE_LABEL


def test_auto_without_a_client_plugin_says_why_there_is_no_model() -> None:
    model, why = LearningModel.from_config(Config(), _budget(), enabled_plugins=("learners",))
    assert model is None
    assert why is not None and 'client "auto" finds no client plugin of openai_chat' in why


def test_a_model_switched_off_is_none() -> None:
    config = Config(learning=LearningConfig(model=LearningModelConfig(enabled=False)))
    model, why = LearningModel.from_config(config, _budget(), enabled_plugins=("offline_model",))
    assert model is None and why == "[learning.model] enabled = false"


def test_learning_switched_off_uses_no_learning_model() -> None:
    config = Config(learning=LearningConfig(enabled=False))
    model, why = LearningModel.from_config(config, _budget(), enabled_plugins=("offline_model",))
    assert model is None and why == "[learning] enabled = false"


def test_an_unknown_client_is_a_configuration_error(tmp_path: Any) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text('[learning.model]\nclient = "gpt"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="client"):
        Config.from_file(path)


def test_the_openai_client_sends_the_schema_on_the_wire_and_retries() -> None:
    """Through the real contrib client on a mock transport: a 429, then the answer."""
    bodies: list[dict[str, Any]] = []
    statuses = [429, 200]

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        status = statuses.pop(0)
        if status != 200:
            return httpx.Response(status, headers={"retry-after": "0"}, json={"error": "slow"})
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": '{"word": "桌游", "count": 2}'}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7},
            },
        )

    config = Config(
        provider=ProviderConfig(model="turns-model"),
        learning=LearningConfig(
            model=LearningModelConfig(
                client="openai_compat", base_url="http://model.test/v1", model="learner-model"
            )
        ),
    )
    model, why = LearningModel.from_config(config, _budget())
    assert model is not None, why
    client = model.submit.__self__  # type: ignore[union-attr]
    client._http.transport = httpx.MockTransport(handle)
    client._http.retry = attrs.evolve(client._http.retry, sleep=lambda s: None)

    async def no_sleep(_seconds: float) -> None:
        return None

    client._http.retry = attrs.evolve(client._http.retry, async_sleep=no_sleep)
    try:
        answer, call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    finally:
        model.close()
    assert answer == WordAnswer(word="桌游", count=2)
    assert len(bodies) == 2
    assert bodies[0]["model"] == "learner-model"
    assert bodies[0]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert (call.spend.prompt_tokens, call.spend.output_tokens) == (50, 7)


def test_the_anthropic_client_is_chosen_for_the_anthropic_api() -> None:
    config = Config(
        learning=LearningConfig(
            model=LearningModelConfig(client="anthropic_messages", api="anthropic", api_key="k")
        )
    )
    model, _why = LearningModel.from_config(config, _budget())
    assert model is not None
    assert type(model.submit.__self__).__name__ == "AnthropicMessagesClient"  # type: ignore[union-attr]
    assert model.api is ProviderApi.ANTHROPIC


def test_spend_is_kept_in_the_learned_store() -> None:
    stores = Stores.in_memory()
    assert stores.learned is not None
    budget = LearningBudget(limits=LearningBudgetConfig(), store=stores.learned)
    model = attrs.evolve(_model(), budget=budget)
    model.ask(_task(), learner="words", bot_id="1", group_id="2")
    model.ask(_task(), learner="words", bot_id="1", group_id="2")
    (item,) = stores.learned.items("1", "2", kind="spend")
    assert item.fields["calls"] == 2
    assert item.fields["learner"] == "words"
    assert item.fields["hour"] == "2026-12-05T14:00:00+00:00"


def test_an_invalid_answer_is_not_asked_again_past_the_budget() -> None:
    submit, seen = _answering("not json", '{"word": "桌游", "count": 2}')
    model = _model(submit, group_calls_per_hour=1)
    answer, call = model.ask(_task(), learner="words", bot_id="1", group_id="2")
    assert answer is None
    assert (call.status, call.attempts, len(seen)) == (CallStatus.INVALID, 1, 1)
    assert "not asked again: learning budget spent (group calls per hour 1)" in call.error
