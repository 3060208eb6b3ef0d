"""The built-in learners through the stage on every store backend (``docs/learning.md``): a chat
recorded as a bot records it teaches the same items on memory, SQLite and Redis; a forgotten item
is not learned back; a rejected reply delivered by the live loop becomes a ``feedback`` item and
blacklisted phrases."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from base_support import Clock
from learning_backends_support import (
    T0,
    Line,
    Scope,
    ScopeTransport,
    Site,
    catch_up,
    feed,
    learned,
    learning_config,
    open_site,
    shape,
)
from runtime_fixtures import redis_prefix, redis_url

from promptweave import BotLoop, ChatMessage, Promptweave

__all__ = ["redis_prefix", "redis_url"]

BOT, GROUP = "10001", "20001"
LATER = T0 + dt.timedelta(hours=1)
#: The rhythm is written after three turns here, not twenty.
LEARNING = learning_config(tables={"rhythm": {"min_turns": 3}})


def _at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def _said(sender: str, name: str, text: str, id: str, t: float, **extra: Any) -> ChatMessage:
    return ChatMessage(id=id, sender_id=sender, sender_name=name, text=text, time=_at(t), **extra)


def _record_chat(runtime: Promptweave) -> None:
    """A small chat as the recorder stores it: members' messages and one delivered reply."""
    recorder = runtime.recorder
    teaching = _said("301", "阿蒙", "小织记住，我叫阿蒙不叫阿猛", "m4", 30, addressed=True)
    for message in (
        _said("301", "阿蒙", "今天去爬山吗", "m1", 0),
        _said("302", "小林", "爬哪座山啊", "m2", 10),
        _said("303", "老王", "香山红叶正好", "m3", 20),
        teaching,
    ):
        assert recorder.record_message(BOT, GROUP, message)
    assert recorder.record_bot_reply(
        BOT, GROUP, "好嘞收到", message_id="b1", answering=teaching, time=_at(31)
    )
    for message in (
        _said("302", "小林", "哈哈哈被记住了", "m5", 40),
        _said("302", "小林", "红叶拍照超好看", "m6", 50, reply_to="m3"),
        _said("301", "阿蒙", "那就香山走起", "m7", 55),
        _said("303", "老王", "今天去爬山吗", "m8", 300),
        _said("302", "小林", "爬哪座山啊", "m9", 310),
    ):
        assert recorder.record_message(BOT, GROUP, message)


def _learn_chat(site: Site) -> Promptweave:
    runtime = site.runtime(learning=LEARNING)
    _record_chat(runtime)
    catch_up(runtime, LATER)
    return runtime


@pytest.fixture(params=["memory", "sqlite", "redis"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    opened = open_site(request, request.param, tmp_path, "site")
    request.addfinalizer(opened.close)
    return opened


@pytest.fixture
def reference(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    opened = open_site(request, "memory", tmp_path, "reference")
    request.addfinalizer(opened.close)
    return opened


def test_every_built_in_learner_learns_the_same_items_on_every_backend(
    site: Site, reference: Site
) -> None:
    items = learned(_learn_chat(site).stores.learned, BOT, GROUP)
    assert shape(items) == shape(learned(_learn_chat(reference).stores.learned, BOT, GROUP))
    # What the chat teaches, whatever the store: the pairs (one of them seen twice), the group's
    # rhythm, the bot's pick-up and the teaching.
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in shape(items):
        by_kind.setdefault(item["kind"], []).append(item)
    pairs = {(p["trigger"], p["reply"], p["how"]): p for p in by_kind["expression_pair"]}
    assert pairs[("今天去爬山吗", "爬哪座山啊", "adjacent")]["count"] == 2
    assert pairs[("今天去爬山吗", "爬哪座山啊", "adjacent")]["source_message_ids"] == [
        "m1",
        "m2",
        "m8",
        "m9",
    ]
    assert pairs[("香山红叶正好", "红叶拍照超好看", "quote")]["source_message_ids"] == ["m3", "m6"]
    [rhythm] = by_kind["rhythm"]
    assert rhythm["turns"] >= 3 and rhythm["segments"] >= rhythm["turns"]
    [pickup] = by_kind["pickup"]
    assert (pickup["situation"], pickup["bot_reply"], pickup["reaction"]) == (
        "小织记住，我叫阿蒙不叫阿猛",
        "好嘞收到",
        "哈哈哈被记住了",
    )
    assert pickup["source_message_ids"] == ["m4", "b1", "m5"]
    [teaching] = by_kind["teaching"]
    assert (teaching["user_id"], teaching["subject"], teaching["text"]) == (
        "301",
        "name:301",
        "阿蒙说：我叫阿蒙不叫阿猛",
    )
    assert teaching["source_message_ids"] == ["m4"]


def test_a_forgotten_item_is_not_learned_again_from_the_same_messages(site: Site) -> None:
    runtime = _learn_chat(site)
    store = runtime.stores.learned
    assert store is not None
    before = shape(learned(store, BOT, GROUP))
    quote = next(i for i in learned(store, BOT, GROUP) if i.fields.get("how") == "quote")
    assert [i.key for i in runtime.learning.forget(BOT, GROUP, kind=quote.kind, key=quote.key)] == [
        quote.key
    ]
    # Every learner reads the whole chat again, from the start (its cursors deleted), and in a
    # new process.
    store.reset(BOT, GROUP)
    again = site.runtime(learning=LEARNING)
    runs = again.learning.run_all(LATER + dt.timedelta(hours=1))
    assert sum(run.messages for run in runs) > 0
    after = shape(learned(again.stores.learned, BOT, GROUP))
    assert after == [item for item in before if item["key"] != quote.key]
    assert store.forgotten(BOT, GROUP, "expression_pair") == {quote.key: ("m3", "m6")}


#: A chat where the bot repeats a member's line and is told off for it, quoting its answer.
REJECTED = Scope(
    bot_id=BOT,
    group_id=GROUP,
    tag="f",
    base=7_000_000,
    lines=(
        Line("302", "小林", "这家奶茶太甜了齁死人"),
        Line("301", "阿蒙", "小织你觉得奶茶怎么样"),
        Line("301", "阿蒙", "不可以，别这样说话", quotes_reply=1),
    ),
)
ANSWER = "奶茶太甜了齁死人哈哈"


def _rejected(site: Site) -> tuple[Promptweave, ScopeTransport]:
    clock = Clock(T0)
    runtime = site.runtime(learning=learning_config(), clock=clock, answer=ANSWER)
    transport = ScopeTransport(REJECTED.base)

    async def run() -> None:
        loop = BotLoop(runtime=runtime, sleep=_no_pause, learn=False)
        await feed(loop, (REJECTED,), {"f": transport}, range(3), clock=clock)
        await loop.aclose()

    asyncio.run(run())
    catch_up(runtime, LATER)
    return runtime, transport


async def _no_pause(_seconds: float) -> None:
    return None


def test_a_rejected_reply_is_scored_and_its_phrases_blacklisted_on_every_backend(
    site: Site, reference: Site
) -> None:
    runtime, transport = _rejected(site)
    store, ledger = runtime.stores.learned, runtime.stores.feedback
    assert store is not None and ledger is not None
    answered = transport.delivered[0]
    kept = store.injection(BOT, GROUP, answered)
    assert kept is not None and kept.text == ANSWER
    assert any(source["type"] == "ambient" for source in kept.sources)
    [outcome] = store.items(BOT, GROUP, kind="feedback")
    assert (outcome.user_id, outcome.fields["outcome_id"], outcome.fields["reaction"]) == (
        "301",
        answered,
        "不可以，别这样说话",
    )
    assert outcome.fields["reply"] == ANSWER
    ambient = [s for s in outcome.fields["scores"] if s["type"] == "ambient"]
    assert [(s["preview"], s["delta"]) for s in ambient] == [("这家奶茶太甜了齁死人", -1.0)]
    # The longest run the reply shares with the ambient line, its function word left out.
    assert outcome.fields["phrases"] == ["奶茶太甜齁死人"]
    phrases = ledger.blacklisted_phrases(BOT, GROUP)
    assert phrases == ("奶茶太甜齁死人",)
    # The same outcome and ledger on every backend.
    expected, expected_transport = _rejected(reference)
    assert expected_transport.delivered == transport.delivered
    assert shape(learned(store, BOT, GROUP)) == shape(learned(expected.stores.learned, BOT, GROUP))
    assert expected.stores.feedback is not None
    assert phrases == expected.stores.feedback.blacklisted_phrases(BOT, GROUP)
