"""What learning may spend: limits per group and overall, per rolling hour and day; model
learners wait while a budget is spent, and turns never do (``docs/learning.md``, the budget)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import attrs
import pytest
from learning_support import BOT, GROUP, OTHER_GROUP, at

from promptweave.config import (
    BotConfig,
    Config,
    LearningBudgetConfig,
    LearningConfig,
    LearningModelConfig,
)
from promptweave.learning.budget import BudgetSpent, LearningBudget, Spend, spend_totals
from promptweave.learning.model import LearningModel, ModelTask, answer_schema
from promptweave.learning.stage import LearningStage, RunStatus
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem, item_key
from promptweave.store.stores import Stores
from promptweave.turn import ChatMessage

H = dt.datetime(2026, 12, 5, 14, 30, tzinfo=dt.UTC)


def _hours(n: float) -> dt.datetime:
    return H + dt.timedelta(hours=n)


def test_a_group_hourly_call_limit_waits_for_the_next_hour() -> None:
    budget = LearningBudget(limits=LearningBudgetConfig(group_calls_per_hour=2))
    budget.record("b", "g", "strategies", H, Spend(calls=2))
    with pytest.raises(BudgetSpent, match="group calls per hour 2") as spent:
        budget.check("b", "g", H)
    assert spent.value.retry_at == dt.datetime(2026, 12, 5, 15, 0, tzinfo=dt.UTC)
    budget.check("b", "g", _hours(0.5))  # the next hour: free again
    budget.check("b", "other", H)  # another group's budget is its own


def test_a_daily_token_limit_frees_when_its_oldest_hour_leaves_the_day() -> None:
    budget = LearningBudget(limits=LearningBudgetConfig(group_tokens_per_day=1000))
    budget.record("b", "g", "members", H, Spend(calls=1, prompt_tokens=600))
    budget.record(
        "b", "g", "members", _hours(5), Spend(calls=1, prompt_tokens=300, output_tokens=100)
    )
    with pytest.raises(BudgetSpent, match="group tokens per day 1000") as spent:
        budget.check("b", "g", _hours(6))
    assert spent.value.retry_at == dt.datetime(2026, 12, 6, 14, 0, tzinfo=dt.UTC)
    budget.check("b", "g", _hours(24))  # the first hour has left the rolling day


def test_the_overall_limits_count_every_group() -> None:
    budget = LearningBudget(limits=LearningBudgetConfig(calls_per_hour=3))
    for group in ("g1", "g2", "g3"):
        budget.record("b", group, "strategies", H, Spend(calls=1))
    with pytest.raises(BudgetSpent, match="overall calls per hour 3"):
        budget.check("b", "g4", H)


def test_zero_is_no_limit() -> None:
    limits = LearningBudgetConfig(
        calls_per_hour=0, calls_per_day=0, group_calls_per_hour=0, group_calls_per_day=0
    )
    budget = LearningBudget(limits=limits)
    budget.record("b", "g", "x", H, Spend(calls=10_000))
    budget.check("b", "g", H)


def test_the_spend_survives_a_restart_through_the_store() -> None:
    stores = Stores.in_memory()
    assert stores.learned is not None
    limits = LearningBudgetConfig(group_calls_per_day=3)
    first = LearningBudget(limits=limits, store=stores.learned)
    first.record("b", "g", "strategies", H, Spend(calls=2, prompt_tokens=10))
    first.record("b", "g", "members", _hours(1), Spend(calls=1, output_tokens=5))
    again = LearningBudget(limits=limits, store=stores.learned)
    assert again.prime(_hours(2)) == 2
    with pytest.raises(BudgetSpent):
        again.check("b", "g", _hours(2))
    totals = spend_totals(stores.learned.items("b", "g", kind="spend"))
    assert totals[("b", "g", "strategies")].calls == 2
    assert totals[("b", "g", "members")].output_tokens == 5
    # A day later, nothing of it is read back.
    assert LearningBudget(limits=limits, store=stores.learned).prime(_hours(30)) == 0


# -- the stage: a learner that uses the model --------------------------------------------------


@attrs.frozen(kw_only=True)
class Echo:
    text: str


def _ask(batch: LearnerBatch) -> LearnerResult:
    assert batch.model is not None
    task = ModelTask(
        name="echo",
        answer=Echo,
        schema=answer_schema({"text": {"type": "string"}}),
        system="",
        user="",
        payload={"text": batch.messages[-1].message.text},
        offline=lambda payload: {"text": payload["text"]},
    )
    answer = batch.model.ask(task)
    if answer is None:
        return LearnerResult(notes=("no valid answer",))
    item = LearnedItem(
        kind="echo",
        bot_id=batch.bot_id,
        group_id=batch.group_id,
        key=item_key(answer.text),
        fields={"text": answer.text},
        source_message_ids=[m.message.id or "" for m in batch.messages],
        learned_at=batch.now,
    )
    return LearnerResult(items=(item,))


ECHO = Learner(name="echo", writes=("echo",), run=_ask, uses_model=True, min_batch=1)


def _stage(**budget: int) -> tuple[LearningStage, Stores]:
    config = Config(
        bots={BOT: BotConfig(name="小织")},
        learning=LearningConfig(
            model=LearningModelConfig(client="offline"), budget=LearningBudgetConfig(**budget)
        ),
    )
    stores = Stores.in_memory(config)
    assert stores.learned is not None
    model, why = LearningModel.from_config(
        config, LearningBudget(limits=config.learning.budget, store=stores.learned)
    )
    assert model is not None, why
    return LearningStage(learners=[ECHO], stores=stores, config=config, model=model), stores


def _say(stage: LearningStage, stores: Stores, text: str, t: float, group: str = GROUP) -> None:
    assert stores.group_log is not None
    message = ChatMessage(sender_id="30001", text=text, time=at(t), id=f"m{t:g}{group}")
    stores.group_log.append_group_message(BOT, group, message)
    stage.note(BOT, group, message.time)


def test_a_model_learner_waits_for_the_budget_and_keeps_its_cursor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage, stores = _stage(group_calls_per_hour=1)
    _say(stage, stores, "第一句", 1)
    (first,) = stage.run_due(at(2), threads=False)
    assert first.status == RunStatus.LEARNED
    assert [call.status for call in first.model_calls] == ["ok"]
    assert "1 model call" in first.describe()
    _say(stage, stores, "第二句", 3)
    with caplog.at_level(logging.WARNING, logger="promptweave.learning"):
        (second,) = stage.run_due(at(4), threads=False)
    assert second.status == RunStatus.WAITING_BUDGET
    assert second.retry_at == dt.datetime(2024, 5, 1, 13, 0, tzinfo=dt.UTC)
    assert "waits: learning budget spent (group calls per hour 1)" in caplog.text
    assert stores.learned is not None
    assert stores.learned.cursor("echo", BOT, GROUP).position == 1
    assert stage.due(at(600)) == []  # it waits for the hour, not for a backoff
    (third,) = stage.run_due(at(3601), threads=False)
    assert third.status == RunStatus.LEARNED
    assert {item.fields["text"] for item in stores.learned.items(BOT, GROUP, kind="echo")} == {
        "第一句",
        "第二句",
    }


def test_the_budget_of_one_group_does_not_stop_another() -> None:
    stage, stores = _stage(group_calls_per_hour=1)
    _say(stage, stores, "甲", 1)
    _say(stage, stores, "乙", 1, group=OTHER_GROUP)
    runs = stage.run_due(at(2), threads=False)
    assert sorted(run.status for run in runs) == [RunStatus.LEARNED, RunStatus.LEARNED]


def test_a_model_learner_without_a_model_does_not_run_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = Config(learning=LearningConfig(model=LearningModelConfig(enabled=False)))
    with caplog.at_level(logging.INFO, logger="promptweave.learning"):
        stage = LearningStage(
            learners=[ECHO],
            stores=Stores.in_memory(config),
            config=config,
            model_unavailable="[learning.model] enabled = false",
        )
    assert stage.plans == ()
    assert stage.skipped == {"echo": "[learning.model] enabled = false"}
    assert "learner echo does not run: [learning.model] enabled = false" in caplog.text


def test_a_model_failure_keeps_the_cursor_and_retries_with_backoff() -> None:
    stage, stores = _stage()
    assert stage.model is not None

    async def down(_request: Any) -> Any:
        from promptweave.providers.exchange import SubmitResult

        return SubmitResult(sent=False, status="error", detail="ConnectError: refused")

    stage.model = attrs.evolve(stage.model, submit=down)
    _say(stage, stores, "第一句", 1)
    (run,) = stage.run_due(at(2), threads=False)
    assert run.status == RunStatus.FAILED
    assert "learning model: echo: ConnectError: refused" in run.error
    assert [call.status for call in run.model_calls] == ["error"]
    assert run.retry_at == at(7)
    assert stores.learned is not None
    assert stores.learned.cursor("echo", BOT, GROUP).position == 0


def test_forgetting_a_group_keeps_what_learning_spent_there() -> None:
    stage, stores = _stage()
    _say(stage, stores, "第一句", 1)
    stage.run_due(at(2), threads=False)
    assert stores.learned is not None
    assert stores.learned.items(BOT, GROUP, kind="spend")
    gone = stage.forget(BOT, GROUP)
    assert {item.kind for item in gone} == {"echo"}
    assert stores.learned.items(BOT, GROUP, kind="echo") == []
    assert len(stores.learned.items(BOT, GROUP, kind="spend")) == 1  # the budget still counts it
    assert [item.kind for item in stage.forget(BOT, GROUP, kind="spend")] == ["spend"]


def test_the_first_check_reads_back_the_day_s_spend() -> None:
    stores = Stores.in_memory()
    assert stores.learned is not None
    limits = LearningBudgetConfig(group_calls_per_hour=2)
    LearningBudget(limits=limits, store=stores.learned).record(
        "b", "g", "members", H, Spend(calls=2)
    )
    restarted = LearningBudget(limits=limits, store=stores.learned)
    with pytest.raises(BudgetSpent):
        restarted.check("b", "g", H)
    restarted.check("b", "g", _hours(1))  # read once, counted once: the next hour is free
