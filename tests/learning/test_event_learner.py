"""The ``group_events`` learner (``builtin_plugins/event_learner.py``, ``docs/learning.md``, group
events): a plan two other members confirmed becomes a dated event, through the offline learning
model; and both model learners over the bundled chat."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from learning_support import BOT, PEER, offline_learning_config

from promptweave import ChatMessage, Config, Promptweave, Stores, Turn
from promptweave.builtin_plugins.event_learner import (
    EventAnswer,
    EventsAnswer,
    offline_group_events,
    resolve_date,
)
from promptweave.cli.main import cli
from promptweave.learning.stage import LearnerRun
from promptweave.providers.exchange import SubmitResult
from promptweave.store.learned import LearnedItem

GROUP = "20001"
CST = dt.timezone(dt.timedelta(hours=8))
T0 = dt.datetime(2026, 11, 25, 20, 0, tzinfo=CST)  # a Wednesday
ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CHAT_CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"


_config = offline_learning_config


@attrs.define
class Chat:
    runtime: Promptweave
    counter: int = 0

    def say(self, sender: str, text: str, t: float, **extra: Any) -> ChatMessage:
        self.counter += 1
        message = ChatMessage(
            sender_id=sender,
            sender_name=f"群友{sender}",
            text=text,
            time=T0 + dt.timedelta(seconds=t),
            id=f"m{self.counter}",
            **extra,
        )
        self.runtime.recorder.record_message(BOT, GROUP, message)
        return message

    def learn(self, seconds: float = 7200) -> list[LearnerRun]:
        runs = self.runtime.learning.run_all(T0 + dt.timedelta(seconds=seconds))
        return [run for run in runs if run.learner == "group_events"]

    def events(self) -> list[LearnedItem]:
        learned = self.runtime.stores.learned
        assert learned is not None
        return learned.items(BOT, GROUP, kind="group_event")


def _chat(config: Config | None = None) -> Iterator[Chat]:
    config = config or _config()
    runtime = Promptweave.from_config(config, stores=Stores.in_memory(config), clock=lambda: T0)
    try:
        yield Chat(runtime=runtime)
    finally:
        runtime.close()


@pytest.fixture
def chat() -> Iterator[Chat]:
    yield from _chat()


def test_a_plan_two_members_confirmed_is_learned_with_its_date(chat: Chat) -> None:
    chat.say("7", "周六下午两点桌游店集合，来的说一声", 0)
    chat.say("8", "好", 60)
    chat.say("7", "还有谁", 90)  # the proposer's own line confirms nothing
    chat.say("9", "+1 算我一个", 120)
    (run,) = chat.learn()
    assert run.learned == {"group_event": 1}
    (call,) = run.model_calls
    assert call.status == "ok" and call.spend.tokens > 0
    (event,) = chat.events()
    assert event.fields == {
        "text": "2026-11-28：周六下午两点桌游店集合，来的说一声",
        "date": "2026-11-28",
        "confirmed_by": ["8", "9"],
    }
    assert event.user_id == ""
    assert event.source_message_ids == ("m1", "m2", "m4")


def test_one_confirmation_is_not_enough_and_no_model_is_asked(chat: Chat) -> None:
    chat.say("7", "明晚八点开黑，谁来", 0)
    chat.say("8", "可以", 30)
    chat.say("9", "明晚我没空，不行", 60)
    chat.say(PEER, "好", 70)  # a peer bot confirms nothing
    (run,) = chat.learn()
    assert run.model_calls == () and chat.events() == []


def test_a_plan_confirmed_over_two_batches_is_learned_the_second_run(chat: Chat) -> None:
    chat.say("7", "下周六去爬山，早上八点集合", 0)
    chat.say("8", "好", 30)
    assert chat.learn(60)[0].model_calls == ()
    chat.say("9", "没问题", 600)
    (run,) = chat.learn(700)
    assert run.learned == {"group_event": 1}
    assert chat.events()[0].fields["date"] == "2026-12-05"


def _fake_answer(chat: Chat, events: list[dict[str, Any]]) -> list[str]:
    model = chat.runtime.learning.model
    assert model is not None
    sent: list[str] = []

    async def answer(request: Any) -> SubmitResult:
        sent.append(request.body_text())
        return SubmitResult(sent=True, status="ok", text=json.dumps({"events": events}))

    model.submit = answer
    return sent


def test_the_models_invented_confirmers_are_rejected(chat: Chat) -> None:
    sent = _fake_answer(
        chat,
        [
            {"text": "周六桌游", "date": "2026-11-28", "confirmed_by": ["8", "424242"]},
            {"text": "周日火锅", "date": "2026-11-29", "confirmed_by": ["8", PEER]},
            {"text": "周六晚上桌游", "date": "2026-11-28", "confirmed_by": ["8", "9"]},
        ],
    )
    chat.say("7", "周六晚上桌游", 0)
    chat.say("8", "好", 10)
    chat.say("9", "可以", 20)
    (run,) = chat.learn()
    assert len(sent) == 1
    (event,) = chat.events()
    assert event.fields["text"] == "2026-11-28：周六晚上桌游"  # the date prefixed
    assert any("unknown_confirmers 2" in note for note in run.notes)


def test_an_invalid_events_answer_stores_nothing(chat: Chat) -> None:
    sent = _fake_answer(chat, [{"text": "周六桌游", "date": "周六", "confirmed_by": ["8", "9"]}])
    chat.say("7", "周六晚上桌游", 0)
    chat.say("8", "好", 10)
    chat.say("9", "可以", 20)
    (run,) = chat.learn()
    assert len(sent) == 2 and run.model_calls[0].status == "invalid"
    assert chat.events() == []


def test_the_answers_limits_hold() -> None:
    EventAnswer(text="x", date="2026-11-28", confirmed_by=("1", "2"))
    for bad in (
        {"text": " ", "date": "2026-11-28", "confirmed_by": ("1", "2")},
        {"text": "x" * 81, "date": "2026-11-28", "confirmed_by": ("1", "2")},
        {"text": "x", "date": "2026-02-30", "confirmed_by": ("1", "2")},
        {"text": "x", "date": "2026-11-28", "confirmed_by": ("1",)},
    ):
        with pytest.raises(ValueError):
            EventAnswer(**bad)
    one = EventAnswer(text="x", date="2026-11-28", confirmed_by=("1", "2"))
    with pytest.raises(ValueError):
        EventsAnswer(events=(one,) * 6)


def test_relative_dates_resolve_against_the_day() -> None:
    wednesday = dt.date(2026, 11, 25)
    cases = {
        "今晚吃火锅": "2026-11-25",
        "明天去爬山": "2026-11-26",
        "后天开会": "2026-11-27",
        "周六桌游": "2026-11-28",
        "星期三聚餐": "2026-11-25",
        "下周二集合": "2026-12-01",
        "30号聚": "2026-11-30",
        "3号聚": "2026-12-03",
        "周六的桌游改到周日": "2026-11-29",
    }
    assert {text: str(resolve_date(text, wednesday)) for text in cases} == cases
    assert resolve_date("开会", wednesday) is None


def test_the_offline_rule_reads_the_windows() -> None:
    line = {"bot": False, "reply_to": "", "time": "2026-11-25T20:00+08:00"}
    payload = {
        "today": "2026-11-26",
        "windows": [
            {
                "day": "2026-11-25",
                "lines": [
                    {**line, "id": "1", "user_id": "7", "text": "明天晚上七点火锅，定了！"},
                    {**line, "id": "2", "user_id": "7", "text": "好"},
                    {**line, "id": "3", "user_id": "8", "text": "好的"},
                    {**line, "id": "4", "user_id": "9", "text": "ok我去"},
                ],
            }
        ],
    }
    assert offline_group_events(payload) == {
        "events": [
            {
                "text": "2026-11-26：明天晚上七点火锅，定了",
                "date": "2026-11-26",
                "confirmed_by": ["8", "9"],
            }
        ]
    }


def test_a_confirmed_event_reaches_the_memory_section_for_a_related_message(chat: Chat) -> None:
    chat.say("7", "周六下午两点桌游店集合", 0)
    chat.say("8", "好", 60)
    chat.say("9", "可以", 120)
    chat.learn()

    def prompt(text: str) -> str:
        turn = Turn(
            bot=chat.runtime.bot_for(BOT),
            group_id=GROUP,
            message=ChatMessage(
                sender_id="10",
                text=text,
                time=T0 + dt.timedelta(hours=3),
                id="now",
                addressed=True,
            ),
        )
        return chat.runtime.render(turn).system_prompt

    related = prompt("小织，周六的桌游店集合是几点来着，我忘了")
    assert "【已确认群事件】" in related and "2026-11-28：周六下午两点桌游店集合" in related
    unrelated = prompt("小织，推荐一本好看的科幻小说吧，最近书荒")
    assert "【已确认群事件】" not in unrelated


def test_an_opted_out_group_learns_no_event() -> None:
    for chat in _chat(_config(opt_out_groups=(GROUP,))):
        chat.say("7", "周六下午两点桌游店集合", 0)
        chat.say("8", "好", 60)
        chat.say("9", "可以", 120)
        runs = chat.learn()
        assert all(run.model_calls == () for run in runs) and chat.events() == []


# -- the bundled chat ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The bundled chat replayed with both model learners (the offline learning model)."""
    tmp = tmp_path_factory.mktemp("replay")
    config = tmp / "promptweave.toml"
    config.write_text(
        CHAT_CONFIG.read_text(encoding="utf-8") + '\n[learning.model]\nclient = "offline"\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            str(CHAT),
            "--config",
            str(config),
            "--seed",
            "1",
            "--no-progress",
            "--data",
            str(tmp / "no-data"),
            "--format",
            "jsonl",
        ],
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_bundled_chat_teaches_members_and_events(replayed: list[dict[str, Any]]) -> None:
    *records, summary = replayed
    assert summary["learning"]["failures"] == []
    assert {"members", "group_events"} <= set(summary["learning"]["learners"])
    counts = {g["group_id"]: g["counts"] for g in summary["learning"]["groups"]}
    items = {g["group_id"]: g["items"] for g in summary["learning"]["groups"]}
    runs = [run for record in records for run in record["learned"]]
    calls = [
        call
        for run in runs
        if run["learner"] in ("members", "group_events")
        for call in run["model_calls"]
    ]
    report = {
        "counts": {
            group: {
                k: n for k, n in c.items() if k in ("person_fact", "relationship", "group_event")
            }
            for group, c in counts.items()
        },
        "calls": {
            task: sum(1 for call in calls if call["task"] == task)
            for task in ("members", "group_events")
        },
        "tokens": sum(call["spend"]["tokens"] for call in calls),
    }
    assert all(call["status"] == "ok" for call in calls)
    # What the offline learning model's rules produce over the bundled chat: the one stable
    # preference a member tells the bot (栗子: 我喜欢推理类的桌游…); one relationship per member
    # who talked with the bot; the confirmed plans with their dates.
    assert report["counts"] == {
        "20001": {"group_event": 4, "person_fact": 1, "relationship": 8},
        "20002": {"group_event": 1, "relationship": 5},
    }
    liked = next(i for i in items["20001"] if i["kind"] == "person_fact")
    assert (liked["user_id"], liked["text"]) == ("30063", "ta 喜欢推理类的桌游")
    assert report["calls"] == {"members": 34, "group_events": 5}
    assert report["tokens"] > 0
    events = {i["date"] for i in items["20001"] if i["kind"] == "group_event"}
    assert events == {"2026-12-05", "2026-12-12"}
    dinner = next(i for i in items["20001"] if "年终聚餐" in i.get("text", ""))
    assert dinner["date"] == "2026-12-12" and len(set(dinner["confirmed_by"])) == 2
    rejected = next(
        i for i in items["20001"] if i["kind"] == "relationship" and i["user_id"] == "30017"
    )
    assert rejected["affinity"] == pytest.approx(-0.03) and rejected["exchanges"] == 5
    for group in items.values():
        for item in group:
            if item["kind"] == "relationship":
                assert item["user_id"] and item["key"]
