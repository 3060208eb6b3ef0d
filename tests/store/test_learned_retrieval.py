"""What the sections read of learned items: ``LearnedRetrievalStore`` in front of the imported
retrieval data (``docs/learning.md``)."""

from __future__ import annotations

import datetime as dt

import pytest
from base_support import BOT, GROUP, T0

from promptweave.items import MemoryKind
from promptweave.store.learned import LearnedItem, item_key
from promptweave.store.learned_memory import MemoryLearnedStore
from promptweave.store.learned_retrieval import (
    FEEDBACK_HALF_LIFE_S,
    LearnedRetrievalStore,
    feedback_scores,
    learned_id,
)
from promptweave.store.retrieval import (
    ExpressionPairRecord,
    MemoryRecord,
    RetrievalBatch,
    RhythmRecord,
)
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.stores import Stores


def _pair(trigger: str, reply: str, *, group: str = GROUP, count: int = 1) -> LearnedItem:
    return LearnedItem(
        kind="expression_pair",
        bot_id=BOT.id,
        group_id=group,
        key=item_key(trigger, reply),
        fields={"trigger": trigger, "reply": reply, "how": "adjacent"},
        source_message_ids=(f"{trigger}-t", f"{reply}-r"),
        count=count,
        learned_at=T0,
    )


def _teaching(text: str, subject: str, user: str, *, at: dt.datetime = T0) -> LearnedItem:
    return LearnedItem(
        kind="teaching",
        bot_id=BOT.id,
        group_id=GROUP,
        key=item_key(subject),
        fields={"text": text, "subject": subject, "teacher_name": ""},
        user_id=user,
        source_message_ids=(f"m-{subject}",),
        learned_at=at,
    )


def _outcome(scored: list[tuple[str, str, float]], *, at: dt.datetime = T0) -> LearnedItem:
    return LearnedItem(
        kind="feedback",
        bot_id=BOT.id,
        group_id=GROUP,
        key=item_key(str(scored)),
        fields={
            "outcome_id": "b1",
            "scores": [{"type": t, "id": i, "delta": d, "preview": ""} for t, i, d in scored],
        },
        source_message_ids=(str(scored),),
        learned_at=at,
    )


@pytest.fixture
def store() -> LearnedRetrievalStore:
    imported = InMemoryRetrievalStore()
    imported.write(
        RetrievalBatch(
            expression_pairs=(
                ExpressionPairRecord(bot_id=BOT.id, group_id=GROUP, trigger="早", reply="早啊"),
            ),
            memories=(
                MemoryRecord(
                    bot_id=BOT.id,
                    group_id=GROUP,
                    kind=MemoryKind.GROUP_MEMORY,
                    text="群里周六常去格子桌游吧",
                    id="m-1",
                ),
            ),
        )
    )
    return LearnedRetrievalStore(imported=imported, learned=MemoryLearnedStore(), clock=lambda: T0)


def test_stores_with_a_learned_store_read_through_it_and_keep_the_imported_one_apart() -> None:
    stores = Stores.in_memory()
    assert isinstance(stores.retrieval, LearnedRetrievalStore)
    assert stores.imported is stores.retrieval.imported
    assert isinstance(Stores().retrieval, InMemoryRetrievalStore)  # no learned store: as it was


def test_learned_pairs_come_first_with_their_ids_then_the_imported_ones(
    store: LearnedRetrievalStore,
) -> None:
    store.learned.put_items([_pair("吃了吗", "还没呢", count=2), _pair("好困", "睡吧")])
    pairs = store.expression_pairs(BOT.id, GROUP, limit=10)
    assert [(p.trigger, p.reply, p.id) for p in pairs] == [
        ("吃了吗", "还没呢", f"learned:expression_pair:{item_key('吃了吗', '还没呢')}"),
        ("好困", "睡吧", f"learned:expression_pair:{item_key('好困', '睡吧')}"),
        ("早", "早啊", f"imported:expression_pair:{item_key('早', '早啊')}"),
    ]
    assert [p.trigger for p in store.expression_pairs(BOT.id, GROUP, limit=1)] == ["吃了吗"]
    assert store.expression_pairs(BOT.id, "other", limit=10) == []


def test_an_imported_rhythm_baseline_wins_and_a_learned_one_is_read_otherwise(
    store: LearnedRetrievalStore,
) -> None:
    rhythm = LearnedItem(
        kind="rhythm",
        bot_id=BOT.id,
        group_id=GROUP,
        key="rhythm",
        fields={"single_bubble_share": 0.75, "median_segment_chars": 9, "turns": 40},
        learned_at=T0,
    )
    store.learned.put_items([rhythm])
    assert store.rhythm_baseline(BOT.id, GROUP) == RhythmRecord(
        bot_id=BOT.id,
        group_id=GROUP,
        single_bubble_share=0.75,
        median_segment_chars=9,
        id="learned:rhythm:rhythm",
    )
    store.imported.write(
        RetrievalBatch(
            rhythms=(
                RhythmRecord(
                    bot_id=BOT.id,
                    group_id=GROUP,
                    single_bubble_share=0.5,
                    median_segment_chars=12,
                ),
            )
        )
    )
    baseline = store.rhythm_baseline(BOT.id, GROUP)
    assert baseline is not None and (baseline.single_bubble_share, baseline.id) == (0.5, "")


def test_teachings_are_searched_as_memories_next_to_the_imported_ones(
    store: LearnedRetrievalStore,
) -> None:
    store.learned.put_items([_teaching("阿蒙说：周六桌游局改到格子桌游吧", "周六桌游局", "7")])
    hits = store.search_memories(BOT.id, GROUP, ["桌游", "周六"], limit=5)
    taught = f"learned:teaching:{item_key('周六桌游局')}"
    assert {(h.record.kind, h.record.source, h.record.id) for h in hits} == {
        (MemoryKind.TEACHING, "teach", taught),
        (MemoryKind.GROUP_MEMORY, "", "m-1"),
    }
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert store.search_memories(BOT.id, GROUP, ["奶茶"], limit=5) == []


def test_a_members_own_teachings_go_with_their_messages(store: LearnedRetrievalStore) -> None:
    later = T0 + dt.timedelta(minutes=1)
    store.learned.put_items(
        [
            _teaching("阿蒙说：我叫阿蒙不叫阿猛", "name:7", "7"),
            _teaching("阿蒙说：我喝奶茶去冰", "我喝奶茶去冰", "7", at=later),
            _teaching("小林说：我叫小林", "name:8", "8"),
        ]
    )

    def texts(terms: list[str]) -> list[str]:
        return [r.text for r in store.member_teachings(BOT.id, GROUP, "7", terms, limit=2)]

    assert texts(["周末"]) == ["阿蒙说：我叫阿蒙不叫阿猛"]  # the name, whatever the message
    assert texts(["奶茶"]) == ["阿蒙说：我叫阿蒙不叫阿猛", "阿蒙说：我喝奶茶去冰"]
    assert store.member_teachings(BOT.id, GROUP, "9", ["奶茶"], limit=2) == []


def test_a_source_rejected_enough_is_not_read_again_and_scores_halve_with_time(
    store: LearnedRetrievalStore,
) -> None:
    bad = _pair("你好笨", "你才笨")
    store.learned.put_items([bad, _pair("好困", "睡吧")])
    store.learned.put_items([_outcome([("expression", learned_id(bad), -2.0)])])
    assert len(store.expression_pairs(BOT.id, GROUP, limit=10)) == 3  # -2: still read
    store.learned.put_items([_outcome([("expression", learned_id(bad), -1.5)])])
    assert [p.trigger for p in store.expression_pairs(BOT.id, GROUP, limit=10)] == ["好困", "早"]

    # An imported pair and an imported memory are dropped the same way, by their ids.
    store.learned.put_items(
        [_outcome([("expression", f"imported:expression_pair:{item_key('早', '早啊')}", -3.0)])]
    )
    assert [p.trigger for p in store.expression_pairs(BOT.id, GROUP, limit=10)] == ["好困"]
    assert [h.record.id for h in store.search_memories(BOT.id, GROUP, ["桌游"], limit=5)] == ["m-1"]
    store.learned.put_items([_outcome([("memory", "m-1", -3.0)])])
    assert store.search_memories(BOT.id, GROUP, ["桌游"], limit=5) == []

    old = T0 - dt.timedelta(seconds=FEEDBACK_HALF_LIFE_S)
    scores = feedback_scores([_outcome([("memory", "m-1", -4.0)], at=old)], T0)
    assert scores == {("memory", "m-1"): pytest.approx(-2.0)}


def test_what_is_derived_of_a_scope_is_rebuilt_when_either_side_changes(
    store: LearnedRetrievalStore,
) -> None:
    builds: list[int] = []

    def build() -> int:
        builds.append(1)
        return len(store.expression_pairs(BOT.id, GROUP, limit=10))

    def read() -> int:
        return store.cached(BOT.id, GROUP, "n", build, kinds=("expression_pairs",))

    assert (read(), read()) == (1, 1) and len(builds) == 1
    store.learned.put_items([_pair("好困", "睡吧")])
    assert read() == 2 and len(builds) == 2
    store.imported.write(
        RetrievalBatch(
            expression_pairs=(
                ExpressionPairRecord(bot_id=BOT.id, group_id=GROUP, trigger="晚", reply="晚安"),
            )
        )
    )
    assert read() == 3 and len(builds) == 3
