"""The learner stage (``promptweave.learning.stage``): when a learner runs, what it is given, and
what a failing, hanging or misbehaving learner costs (nothing but its own run)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable

import pytest
from base_support import BOT, GROUP, T0

from promptweave import ChatMessage, Config
from promptweave.config import LearningConfig
from promptweave.delivery.outgoing import InjectedSource, ReplyInjection
from promptweave.learning.stage import LearningStage, RunStatus, delivered_injection
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem
from promptweave.store.stores import Stores


def _message(n: int, sender: str = "30001", *, at: dt.datetime | None = None) -> ChatMessage:
    return ChatMessage(
        sender_id=sender,
        text=f"第{n}条",
        time=at or T0 + dt.timedelta(seconds=n),
        id=f"m{n}",
    )


class Counting:
    """A learner that writes one item per message it is given and keeps a running count."""

    def __init__(self) -> None:
        self.batches: list[LearnerBatch] = []

    def __call__(self, batch: LearnerBatch) -> LearnerResult:
        self.batches.append(batch)
        seen = int(batch.state.get("seen", 0)) + len(batch.messages)
        items = [
            LearnedItem(
                kind="note",
                bot_id=batch.bot_id,
                group_id=batch.group_id,
                key=logged.message.id or "",
                fields={"text": logged.message.text},
                source_message_ids=(logged.message.id or "",),
                learned_at=batch.now,
            )
            for logged in batch.messages
        ]
        return LearnerResult(items=items, state={"seen": seen})


def _stage(
    run: Callable[[LearnerBatch], object],
    *,
    stores: Stores | None = None,
    min_batch: int = 3,
    interval_s: float = 60.0,
    max_batch: int = 10,
    timeout_s: float = 5.0,
    **learning: object,
) -> LearningStage:
    learner = Learner(
        name="notes",
        writes=("note",),
        run=run,
        min_batch=min_batch,
        interval_s=interval_s,
        max_batch=max_batch,
        timeout_s=timeout_s,
    )
    config = Config(learning=LearningConfig(**learning))  # type: ignore[arg-type]
    return LearningStage(learners=[learner], stores=stores or Stores.in_memory(), config=config)


def _append(stage: LearningStage, group: str, *numbers: int) -> None:
    log = stage.stores.group_log
    assert log is not None
    for n in numbers:
        message = _message(n)
        log.append_group_message(BOT.id, group, message)
        stage.note(BOT.id, group, message.time)


def test_a_learner_runs_once_enough_messages_wait_or_enough_time_passed() -> None:
    learner = Counting()
    stage = _stage(learner, min_batch=3, interval_s=60)
    _append(stage, GROUP, 1, 2)
    assert stage.due(T0 + dt.timedelta(seconds=10)) == []
    _append(stage, GROUP, 3)
    runs = stage.run_due(T0 + dt.timedelta(seconds=10), threads=False)
    assert [(r.status, r.messages, dict(r.learned)) for r in runs] == [
        (RunStatus.LEARNED, 3, {"note": 3})
    ]
    _append(stage, GROUP, 4)
    assert stage.due(T0 + dt.timedelta(seconds=30)) == []
    runs = stage.run_due(T0 + dt.timedelta(seconds=70), threads=False)
    assert [r.messages for r in runs] == [1]
    assert [len(b.messages) for b in learner.batches] == [3, 1]
    assert learner.batches[1].state == {"seen": 3}


def test_the_cursor_is_kept_in_the_store_so_a_new_stage_resumes_without_learning_twice() -> None:
    stores = Stores.in_memory()
    first = _stage(Counting(), stores=stores, min_batch=1)
    _append(first, GROUP, 1, 2, 3)
    first.run_due(T0 + dt.timedelta(minutes=1), threads=False)
    # A restart: a new stage over the same stores, told of nothing yet.
    learner = Counting()
    second = _stage(learner, stores=stores, min_batch=1, interval_s=0)
    _append(second, GROUP, 4)
    assert second.prime(T0 + dt.timedelta(minutes=2)) == 1
    runs = second.run_due(T0 + dt.timedelta(minutes=2), threads=False)
    assert [[m.message.id for m in b.messages] for b in learner.batches] == [["m4"]]
    assert runs[0].position == 4
    assert stores.learned is not None
    assert stores.learned.cursor("notes", BOT.id, GROUP).state == {"seen": 4}


def test_a_group_waiting_longest_goes_first_and_a_busy_group_cannot_starve_another() -> None:
    learner = Counting()
    stage = _stage(learner, min_batch=1, max_batch=2, max_runs_per_tick=1)
    _append(stage, "busy", *range(1, 11))  # a backlog of five full batches
    quiet_at = T0 + dt.timedelta(seconds=30)
    stage.stores.group_log.append_group_message(BOT.id, "quiet", _message(99, at=quiet_at))  # type: ignore[union-attr]
    stage.note(BOT.id, "quiet", quiet_at)
    served: list[str] = []
    now = T0 + dt.timedelta(minutes=1)
    for _tick in range(4):
        for run in stage.run_due(now, threads=False):
            served.append(run.group_id)
        now += dt.timedelta(seconds=5)
    # The busy group's full batch sends it to the back: the quiet group is served second.
    assert served[:2] == ["busy", "quiet"]
    assert served.count("busy") == 3


def test_a_failing_learner_keeps_its_cursor_and_is_retried_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def flaky(batch: LearnerBatch) -> LearnerResult:
        calls.append(len(batch.messages))
        if len(calls) < 3:
            raise RuntimeError("model of the world not ready")
        return LearnerResult()

    stage = _stage(flaky, min_batch=1, retry_s=10, retry_max_s=15)
    _append(stage, GROUP, 1, 2)
    caplog.set_level(logging.WARNING, logger="promptweave.learning")
    first = stage.run_due(T0, threads=False)
    assert first[0].status == RunStatus.FAILED
    assert first[0].error == "RuntimeError: model of the world not ready"
    assert first[0].retry_at == T0 + dt.timedelta(seconds=10)
    assert "learner notes in group 20001 (bot 10001) failed on 2 messages" in caplog.text
    assert stage.run_due(T0 + dt.timedelta(seconds=9), threads=False) == []
    second = stage.run_due(T0 + dt.timedelta(seconds=10), threads=False)
    assert second[0].retry_at == T0 + dt.timedelta(seconds=25)  # doubled, held at retry_max_s
    third = stage.run_due(T0 + dt.timedelta(seconds=25), threads=False)
    assert third[0].status == RunStatus.LEARNED
    assert calls == [2, 2, 2]  # the same batch each time: the cursor stayed


def test_a_hanging_learner_loses_its_run_and_nothing_it_returns_late_is_kept() -> None:
    release = threading.Event()
    learner = Counting()

    def hang(batch: LearnerBatch) -> LearnerResult:
        release.wait(5)
        return learner(batch)

    stage = _stage(hang, min_batch=1, timeout_s=0.05)
    _append(stage, GROUP, 1)
    (run,) = stage.run_due(T0, threads=False)
    release.set()
    assert run.status == RunStatus.FAILED
    assert run.error == "timed out after 0.05 s"
    assert stage.stores.learned is not None
    assert stage.stores.learned.items(BOT.id, GROUP) == []
    assert stage.stores.learned.cursor("notes", BOT.id, GROUP).position == 0


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        ("learned!", "TypeError: returned str, not a promptweave LearnerResult"),
        (LearnerResult(items=["x"]), "TypeError: returned an item str, not a LearnedItem"),
        (
            LearnerResult(
                items=[
                    LearnedItem(
                        kind="note", bot_id=BOT.id, group_id="other", key="k", learned_at=T0
                    )
                ]
            ),
            "ValueError: returned an item of bot 10001 group other, outside its batch's scope",
        ),
        (
            LearnerResult(
                items=[
                    LearnedItem(
                        kind="secret", bot_id=BOT.id, group_id=GROUP, key="k", learned_at=T0
                    )
                ]
            ),
            "ValueError: returned an item of kind 'secret', not one it writes",
        ),
    ],
)
def test_a_learner_returning_the_wrong_thing_fails_its_run_by_name(
    returned: object, error: str
) -> None:
    stage = _stage(lambda _batch: returned, min_batch=1)
    _append(stage, GROUP, 1)
    (run,) = stage.run_due(T0, threads=False)
    assert (run.status, run.error) == (RunStatus.FAILED, error)
    assert stage.stores.learned is not None
    assert stage.stores.learned.counts() == {}


def test_another_holder_of_the_lease_learns_the_batch_alone() -> None:
    stores = Stores.in_memory()
    one, other = Counting(), Counting()
    first = _stage(one, stores=stores, min_batch=1)
    second = _stage(other, stores=stores, min_batch=1)
    _append(first, GROUP, 1, 2)
    second.note(BOT.id, GROUP, T0, count=2)
    assert stores.learned is not None
    assert stores.learned.claim("notes", BOT.id, GROUP, first.holder, now=T0)
    (refused,) = second.run_due(T0, threads=False)
    assert refused.status == RunStatus.LEASED_ELSEWHERE
    stores.learned.release("notes", BOT.id, GROUP, first.holder)
    first.run_due(T0, threads=False)
    # The second stage tries again later and finds the batch learned already.
    (later,) = second.run_due(T0 + dt.timedelta(minutes=2), threads=False)
    assert later.status == RunStatus.NOTHING_NEW
    assert (len(one.batches), len(other.batches)) == (1, 0)


def test_a_group_that_opted_out_is_not_learned_and_what_was_learned_of_it_is_deleted() -> None:
    stores = Stores.in_memory()
    before = _stage(Counting(), stores=stores, min_batch=1)
    _append(before, GROUP, 1)
    before.run_due(T0, threads=False)
    assert stores.learned is not None and stores.learned.counts() == {"note": 1}
    after = _stage(Counting(), stores=stores, min_batch=1, opt_out_groups=[GROUP])
    after.prime(T0)
    assert stores.learned.counts() == {}
    assert stores.learned.cursor("notes", BOT.id, GROUP).position == 0
    _append(after, GROUP, 2)
    assert after.run_due(T0 + dt.timedelta(minutes=5), threads=False) == []  # never due
    assert stores.learned.counts() == {}
    # A run asked for anyway (promptweave learn) learns nothing of it either.
    (learner,) = after.plans
    assert after.run_one(learner, BOT.id, GROUP, T0).status == RunStatus.OPTED_OUT


def test_learner_settings_come_from_its_table_and_unknown_keys_reach_the_learner() -> None:
    learner = Counting()
    stage = _stage(
        learner, min_batch=50, learners={"notes": {"min_batch": 1, "max_items": 2, "window": 7}}
    )
    _append(stage, GROUP, 1, 2, 3)
    (run,) = stage.run_due(T0, threads=False)
    assert learner.batches[0].settings == {"window": 7}
    assert dict(run.evicted) == {"note": 1}
    assert stage.stores.learned is not None
    assert [i.key for i in stage.stores.learned.items(BOT.id, GROUP)] == ["m2", "m3"]


def test_a_learner_switched_off_does_not_run_and_a_bad_setting_names_its_key() -> None:
    off = _stage(Counting(), learners={"notes": {"enabled": False}})
    assert not off.enabled and off.unavailable == "every learner is off"
    with pytest.raises(ValueError, match=r"learning\.learners\.notes\.min_batch must be a number"):
        _stage(Counting(), learners={"notes": {"min_batch": "lots"}})


def test_private_chats_are_never_learned_from() -> None:
    stage = _stage(Counting(), min_batch=1)
    stage.note(BOT.id, None, T0)
    stage.note(BOT.id, "", T0)
    assert stage.due(T0 + dt.timedelta(days=1)) == []


def test_the_injection_of_a_delivered_reply_is_kept_with_every_source_typed() -> None:
    stage = _stage(Counting())
    injection = ReplyInjection(
        sections=(InjectedSource(section="persona", text_hash="p"),),
        retrieved=(
            InjectedSource(
                section="group_expression",
                retriever="group_expression",
                id="pair:1",
                text_hash="h1",
                preview="触发「早」时：早呀",
            ),
        ),
        ambient=(
            InjectedSource(section="ambient", id="ambient:x", text_hash="h2", preview="哈哈"),
        ),
        self_aliases=("小织", "织织"),
    )
    answering = _message(1)
    stage.note_reply(BOT.id, GROUP, "b1", "早呀", answering, injection, T0)
    assert stage.stores.learned is not None
    kept = stage.stores.learned.injection(BOT.id, GROUP, "b1")
    assert kept == delivered_injection(BOT.id, GROUP, "b1", "早呀", answering, injection, T0)
    assert kept is not None
    assert [(s["type"], s["id"]) for s in kept.sources] == [
        ("ambient", "ambient:x"),
        ("expression", "pair:1"),
        ("self_alias", "小织"),
        ("self_alias", "织织"),
        ("section", "persona"),
    ]
    assert kept.answering == "m1"
