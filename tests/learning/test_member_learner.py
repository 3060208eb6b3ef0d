"""The ``members`` learner (``builtin_plugins/member_learner.py``, ``docs/learning.md``, person
facts and relationships): a member's exchanges with the bot become their facts and one
relationship, through the offline learning model, on runtimes over in-memory stores."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from learning_support import BOT, PEER, offline_learning_config

from promptweave import ChatMessage, Config, Promptweave, Stores, Turn
from promptweave.builtin_plugins.member_learner import (
    MembersAnswer,
    RelationshipAnswer,
    bigram_similarity,
    offline_members,
)
from promptweave.learning.model import ModelTask
from promptweave.learning.stage import LearnerRun
from promptweave.providers.exchange import SubmitResult, Usage
from promptweave.store.learned import LearnedItem, item_key

GROUP = "20001"
CST = dt.timezone(dt.timedelta(hours=8))
T0 = dt.datetime(2026, 11, 25, 12, 0, tzinfo=CST)


_config = offline_learning_config


@attrs.define
class Chat:
    """A runtime with the ``members`` learner; messages recorded as a live bot records them."""

    runtime: Promptweave
    counter: int = 0

    def say(self, sender: str, text: str, t: float, **extra: Any) -> ChatMessage:
        self.counter += 1
        message = ChatMessage(
            sender_id=sender,
            sender_name={"7": "阿蒙", "8": "小林"}.get(sender, f"群友{sender}"),
            text=text,
            time=T0 + dt.timedelta(seconds=t),
            id=f"m{self.counter}",
            **extra,
        )
        self.runtime.recorder.record_message(BOT, GROUP, message)
        return message

    def bot(self, text: str, t: float, answering: ChatMessage | None, sender: str = BOT) -> str:
        self.counter += 1
        message_id = f"b{self.counter}"
        if sender == BOT:
            self.runtime.recorder.record_bot_reply(
                BOT,
                GROUP,
                text,
                message_id=message_id,
                answering=answering,
                time=T0 + dt.timedelta(seconds=t),
            )
        else:  # a peer bot's message, as the group log records it
            self.say(sender, text, t)
        return message_id

    def exchange(self, t: float, said: str, answer: str, reaction: str | None) -> None:
        asked = self.say("7", said, t, addressed=True)
        self.bot(answer, t + 10, asked)
        if reaction is not None:
            self.say("7", reaction, t + 20)

    def learn(self, seconds: float = 3600) -> list[LearnerRun]:
        runs = self.runtime.learning.run_all(T0 + dt.timedelta(seconds=seconds))
        return [run for run in runs if run.learner == "members"]

    def items(self, kind: str, user_id: str = "7") -> list[LearnedItem]:
        learned = self.runtime.stores.learned
        assert learned is not None
        return learned.items(BOT, GROUP, kind=kind, user_id=user_id)

    def relationship(self, user_id: str = "7") -> LearnedItem:
        learned = self.runtime.stores.learned
        assert learned is not None
        found = learned.item(BOT, GROUP, "relationship", item_key("relationship", user_id))
        assert found is not None
        return found

    def prompt(self, sender: str, text: str) -> str:
        turn = Turn(
            bot=self.runtime.bot_for(BOT),
            group_id=GROUP,
            message=ChatMessage(
                sender_id=sender,
                sender_name="阿蒙" if sender == "7" else "小林",
                text=text,
                time=T0 + dt.timedelta(hours=3),
                id="now",
                addressed=True,
            ),
        )
        return self.runtime.render(turn).system_prompt


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


def test_facts_and_a_relationship_are_learned_from_a_members_exchanges(chat: Chat) -> None:
    chat.exchange(0, "小织，我喜欢桌游", "桌游好玩呀，你喜欢哪种", "哈哈谢谢，我最近在学围棋")
    chat.exchange(100, "小织我养了一只橘猫", "橘猫超可爱", "确实")
    (run,) = chat.learn()
    assert run.learned == {"person_fact": 3, "relationship": 1}
    assert [call.status for call in run.model_calls] == ["ok"]
    facts = {item.fields["text"]: item for item in chat.items("person_fact")}
    assert set(facts) == {"ta 喜欢桌游", "ta 最近在学围棋", "ta 养了一只橘猫"}
    assert all(item.user_id == "7" for item in facts.values())
    assert facts["ta 喜欢桌游"].key == item_key("7", "ta喜欢桌游")
    relationship = chat.relationship()
    assert relationship.user_id == "7"
    assert relationship.fields == {
        "facts": ["和小织聊过我喜欢桌游"],
        "guidance": [],
        "affinity": 0.06,
        "exchanges": 2,
    }
    assert relationship.source_message_ids == ("m1", "b2", "m3", "m4", "b5", "m6")


def test_three_positive_exchanges_move_the_affinity_by_three_steps(chat: Chat) -> None:
    for n in range(3):
        chat.exchange(n * 100, f"小织，第{n}个问题怎么办", "这样试试看", "哈哈好耶")
    chat.learn()
    assert chat.relationship().fields["affinity"] == pytest.approx(0.09)
    assert chat.relationship().fields["exchanges"] == 3


def test_a_negative_reaction_moves_it_down_and_says_what_not_to_do(chat: Chat) -> None:
    chat.exchange(0, "小织，讲个笑话", "从前有座山，山里有座庙", "无语，别讲冷笑话了")
    chat.learn()
    fields = chat.relationship().fields
    assert fields["affinity"] == pytest.approx(-0.03)
    assert fields["guidance"] == ["ta 不喜欢被这样回：从前有座山"]


def test_a_question_back_asks_for_concrete_answers(chat: Chat) -> None:
    chat.exchange(0, "小织推荐个游戏", "可以玩卡坦岛", "为什么是卡坦岛？")
    chat.learn()
    assert chat.relationship().fields["guidance"] == ["ta 爱追问，回答要具体"]


def test_the_affinity_is_clamped_at_its_bounds() -> None:
    for chat in _chat(_config(learners={"members": {"affinity_step": 0.3}})):
        for n in range(5):
            chat.exchange(n * 100, f"小织，问题{n}", "好的", "谢谢")
        chat.learn()
        assert chat.relationship().fields["affinity"] == 1.0
        for n in range(8):
            chat.exchange(5000 + n * 100, f"小织，又一个问题{n}", "嗯", "别这样")
        chat.learn(9000)
        assert chat.relationship().fields["affinity"] == -1.0
        assert chat.relationship().fields["exchanges"] == 13


def test_an_exchange_split_across_batches_is_finished_by_the_next_run(chat: Chat) -> None:
    asked = chat.say("7", "小织，我讨厌下雨天", 0, addressed=True)
    first = chat.learn(5)  # only the request so far: it waits in the state
    assert first[0].learned == {} and first[0].model_calls == ()
    chat.bot("下雨天适合在家看书", 10, asked)
    assert chat.learn(15)[0].model_calls == ()  # the reaction may still come
    chat.say("7", "哈哈也是", 30)
    (run,) = chat.learn(3600)
    assert run.learned == {"person_fact": 1, "relationship": 1}
    assert [i.fields["text"] for i in chat.items("person_fact")] == ["ta 讨厌下雨天"]
    assert chat.relationship().source_message_ids == ("m1", "b2", "m3")
    assert chat.relationship().fields["affinity"] == pytest.approx(0.03)


def test_a_peer_bots_lines_are_never_a_members(chat: Chat) -> None:
    chat.say(PEER, "小织，我喜欢唱歌", 0, addressed=True)
    chat.bot("我也喜欢", 5, None, sender=PEER)
    asked = chat.say("7", "小织在吗", 50, addressed=True)
    chat.bot("在呢", 60, asked)
    chat.bot("我是机器人，我喜欢广告", 65, None, sender=PEER)  # not 阿蒙's reaction
    (run,) = chat.learn()
    learned = chat.runtime.stores.learned
    assert learned is not None
    assert learned.items(BOT, GROUP, user_id=PEER) == []
    assert chat.items("person_fact") == []
    assert run.learned == {"relationship": 1}


def test_a_phone_number_fact_is_dropped(chat: Chat) -> None:
    chat.exchange(0, "小织，我是13812345678的机主，我喜欢爬山", "记下啦", None)
    (run,) = chat.learn()
    assert [i.fields["text"] for i in chat.items("person_fact")] == ["ta 喜欢爬山"]
    assert any("fact_phone 1" in note for note in run.notes)


def test_known_facts_are_not_learned_again(chat: Chat) -> None:
    chat.exchange(0, "小织，我喜欢桌游", "好呀", None)
    chat.learn()
    chat.exchange(5000, "小织，我超喜欢桌游的", "知道啦", None)
    chat.exchange(5100, "小织，我喜欢桌游啊", "嗯嗯", None)
    (run,) = chat.learn(9000)
    assert [i.fields["text"] for i in chat.items("person_fact")] == ["ta 喜欢桌游"]
    assert "person_fact" not in run.learned
    assert chat.relationship().fields["exchanges"] == 3


def test_an_invalid_answer_twice_stores_nothing(chat: Chat) -> None:
    model = chat.runtime.learning.model
    assert model is not None
    sent: list[str] = []

    async def invalid(request: Any) -> SubmitResult:
        if request.turn_id == "learning:members":  # the other model learners ask too
            sent.append(request.body_text())
        return SubmitResult(
            sent=True, status="ok", text="{not json", usage=Usage(prompt_tokens=10, output_tokens=2)
        )

    model.submit = invalid
    chat.exchange(0, "小织，我喜欢桌游", "好呀", "哈哈")
    (run,) = chat.learn()
    assert len(sent) == 2
    (call,) = run.model_calls
    assert (call.status, call.attempts, call.spend.invalid) == ("invalid", 2, 2)
    assert run.learned == {}
    assert chat.items("person_fact") == [] and chat.items("relationship") == []


def test_an_answer_over_the_limits_is_invalid() -> None:
    from promptweave.learning.model import _parse

    task = ModelTask(name="members", answer=MembersAnswer, schema={}, system="", user="")
    ok = '{"facts":["ta 喜欢桌游"],"relationship":{"facts":[],"guidance":[]},"outcome":"positive"}'
    assert _parse(task, ok).facts == ("ta 喜欢桌游",)
    over = [
        '{"facts":["a","b","c","d","e","f"],"relationship":{"facts":[],"guidance":[]},"outcome":"neutral"}',
        '{"facts":["'
        + "长" * 61
        + '"],"relationship":{"facts":[],"guidance":[]},"outcome":"neutral"}',
        '{"facts":[" "],"relationship":{"facts":[],"guidance":[]},"outcome":"neutral"}',
        '{"facts":[],"relationship":{"facts":["a","b","c","d"],"guidance":[]},"outcome":"neutral"}',
        '{"facts":[],"relationship":{"facts":[],"guidance":[]},"outcome":"great"}',
    ]
    for text in over:
        with pytest.raises(ValueError):
            _parse(task, text)
    with pytest.raises(ValueError):
        RelationshipAnswer(facts=(), guidance=("x" * 61,))


def test_forget_member_removes_their_facts_and_relationship(chat: Chat) -> None:
    chat.exchange(0, "小织，我喜欢桌游", "好呀", "哈哈")
    asked = chat.say("8", "小织，我养了两只狗", 300, addressed=True)
    chat.bot("狗狗真好", 310, asked)
    chat.learn()
    assert chat.items("person_fact") and chat.items("person_fact", "8")
    gone = chat.runtime.learning.forget_member(BOT, GROUP, "7")
    assert {"person_fact", "relationship"} <= {item.kind for item in gone}
    assert chat.items("person_fact") == [] and chat.items("relationship") == []
    assert [i.fields["text"] for i in chat.items("person_fact", "8")] == ["ta 养了两只狗"]


def test_what_was_learned_reaches_that_members_turns_only(chat: Chat) -> None:
    chat.exchange(0, "小织，我喜欢桌游", "好呀", "哈哈谢谢")
    chat.learn()
    own = chat.prompt("7", "小织周末有什么安排呀，给点建议")
    assert "【当前对话者的稳定偏好" in own and "- ta 喜欢桌游" in own
    assert "【与当前对话者的关系备注" in own and "和小织聊过我喜欢桌游" in own
    other = chat.prompt("8", "小织周末有什么安排呀，给点建议")
    assert "ta 喜欢桌游" not in other and "和小织聊过" not in other


def test_an_opted_out_group_learns_nothing() -> None:
    for chat in _chat(_config(opt_out_groups=(GROUP,))):
        chat.exchange(0, "小织，我喜欢桌游", "好呀", "哈哈")
        runs = chat.learn()
        assert all(run.status in ("opted_out", "nothing_new") for run in runs)
        assert chat.items("person_fact") == [] and chat.items("relationship") == []


def test_the_offline_rule_reads_the_payload_only() -> None:
    payload = {
        "self": "小织",
        "member": {"user_id": "7", "name": "阿蒙"},
        "exchanges": [
            {"member": "我不喜欢香菜，我是程序员", "bot": "了解", "reaction": "别再推荐香菜了"},
            {"member": "我是说真的吗？我喜欢猫", "bot": "猫很好", "reaction": "谢谢"},
        ],
        "known_facts": ["ta 是程序员"],
        "relationship": {},
    }
    answer = offline_members(payload)
    assert answer == {
        "facts": ["ta 不喜欢香菜"],
        "relationship": {
            "facts": ["和小织聊过我不喜欢香菜"],
            "guidance": ["ta 不喜欢被这样回：了解"],
        },
        "outcome": "neutral",
    }
    assert offline_members(payload) == answer  # deterministic
    assert bigram_similarity("ta 喜欢桌游", "ta 喜欢桌游的") >= 0.6
    assert bigram_similarity("ta 喜欢桌游", "ta 喜欢爬山") < 0.6
