"""The learners' tests (tests/learning): a group log, a learned store and a real
:class:`LearningStage` running one built-in learner, and batches for calling a learner directly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import attrs

from promptweave.builtin_plugins.learners import LEARNERS
from promptweave.config import BotConfig, Config, LearningConfig, LearningModelConfig
from promptweave.learning.stage import LearnerRun, LearningStage
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import DeliveredInjection, LearnedItem, LoggedMessage
from promptweave.store.stores import Stores
from promptweave.turn import ChatMessage

BOT = "10001"
PEER = "10002"
GROUP = "5550"
OTHER_GROUP = "5551"
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def offline_learning_config(**learning: Any) -> Config:
    """The bot 小织 (with its peer bot) learning with the offline learning model."""
    return Config(
        bots={BOT: BotConfig(name="小织", aliases=("织织",), peer_bot_ids=(PEER,))},
        learning=LearningConfig(model=LearningModelConfig(client="offline"), **learning),
    )


def learner_named(name: str) -> Learner:
    return next(learner for learner in LEARNERS if learner.name == name)


@attrs.define
class Group:
    """One learner over in-memory stores; messages are appended to the group log and noted."""

    learner: Learner
    stores: Stores
    stage: LearningStage
    config: Config
    counter: int = 0

    def say(
        self,
        sender: str,
        text: str,
        *,
        t: float,
        id: str | None = None,
        group: str = GROUP,
        name: str = "",
        **extra: Any,
    ) -> ChatMessage:
        self.counter += 1
        message = ChatMessage(
            sender_id=sender,
            text=text,
            time=at(t),
            id=id or f"m{self.counter}",
            sender_name=name or f"member{sender}",
            **extra,
        )
        assert self.stores.group_log is not None
        assert self.stores.group_log.append_group_message(BOT, group, message)
        self.stage.note(BOT, group, message.time)
        return message

    def run(self, t: float = 10_000.0) -> list[LearnerRun]:
        return self.stage.run_all(at(t))

    def items(self, kind: str, group: str = GROUP) -> list[LearnedItem]:
        assert self.stores.learned is not None
        return sorted(
            self.stores.learned.items(BOT, group, kind=kind),
            key=lambda item: item.source_message_ids,
        )

    def deliver(self, message_id: str, text: str, sources: list[dict[str, Any]]) -> None:
        self.stage.note_delivered(
            DeliveredInjection(
                bot_id=BOT,
                group_id=GROUP,
                message_id=message_id,
                text=text,
                sources=sources,
                delivered_at=T0,
            )
        )


def make_group(name: str, settings: Mapping[str, Any] | None = None) -> Group:
    """The built-in learner ``name`` in a stage of its own, over fresh in-memory stores."""
    learner = learner_named(name)
    config = Config(
        bots={BOT: BotConfig(name="小织", aliases=("织织",), peer_bot_ids=(PEER,))},
        learning=LearningConfig(learners={name: dict(settings or {})}),
    )
    stores = Stores.in_memory(config)
    stage = LearningStage(learners=[learner], stores=stores, config=config)
    return Group(learner=learner, stores=stores, stage=stage, config=config)


def batch_of(
    name: str,
    messages: list[ChatMessage],
    *,
    state: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    stores: Stores | None = None,
    group_id: str = GROUP,
) -> LearnerBatch:
    """A batch for calling a learner's run directly (positions from 1)."""
    config = Config(bots={BOT: BotConfig(name="小织", aliases=("织织",), peer_bot_ids=(PEER,))})
    return LearnerBatch(
        learner=name,
        bot_id=BOT,
        group_id=group_id,
        messages=tuple(
            LoggedMessage(position=i, message=m) for i, m in enumerate(messages, start=1)
        ),
        state=state or {},
        now=at(10_000),
        bot_ids=frozenset({BOT, PEER}),
        settings=settings or {},
        stores=stores or Stores.in_memory(),
        config=config,
    )


def message(sender: str, text: str, *, t: float, id: str, **extra: Any) -> ChatMessage:
    return ChatMessage(sender_id=sender, text=text, time=at(t), id=id, **extra)


def run(name: str, batch: LearnerBatch) -> LearnerResult:
    result = learner_named(name).run(batch)
    assert isinstance(result, LearnerResult)
    return result
