"""The ``negative_feedback`` learner: rejected replies, their scored sources, blacklisted
phrases in the feedback ledger, and the undo when an outcome is forgotten."""

from __future__ import annotations

import pytest
from learning_support import BOT, GROUP, OTHER_GROUP, PEER, at, batch_of, make_group, message, run

from promptweave.builtin_plugins.learning_rules import blacklist_phrases, longest_common_phrase
from promptweave.learning.stage import RunStatus
from promptweave.store.learned import item_key

A, B = "2001", "2002"

SOURCES = [
    {"type": "ambient", "id": "amb1", "text_hash": "h1", "preview": "群友：他就是个下头男，笑死"},
    {"type": "expression", "id": "exp1", "text_hash": "h2", "preview": "下头男 → 确实"},
    {"type": "strategy", "id": "st1", "text_hash": "h3", "preview": "接梗"},
    {"type": "memory", "id": "mem1", "text_hash": "h4", "preview": "阿蒙喜欢猫"},
    {"type": "knowledge", "id": "kn1", "text_hash": "h5", "preview": "文档"},
    {"type": "self_alias", "id": "al1", "text_hash": "h6", "preview": "织织"},
    {"type": "section", "id": "sec1", "text_hash": "h7", "preview": "persona"},
]
REPLY = "你就是个下头男"


def scored() -> list[dict[str, object]]:
    deltas = {"ambient": -1.0, "expression": -3.0, "strategy": -2.0, "memory": -1.0}
    return [
        {
            "type": s["type"],
            "id": s["id"],
            "delta": deltas.get(str(s["type"]), 0.0),
            "preview": s["preview"],
        }
        for s in SOURCES
    ]


def test_a_quoted_rejection_scores_and_blacklists_through_the_stage() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, REPLY, t=0, id="b1")
    group.deliver("b1", REPLY, SOURCES)
    group.say(A, "不可以这样说", t=300, id="r1", reply_to="b1")
    [learned] = group.run()
    assert learned.status == RunStatus.LEARNED and learned.notes == ()
    [item] = group.items("feedback")
    assert item.to_json() == {
        "kind": "feedback",
        "bot_id": BOT,
        "group_id": GROUP,
        "user_id": A,
        "key": item_key("b1"),
        "outcome_id": "b1",
        "reply": REPLY,
        "reaction": "不可以这样说",
        "scores": scored(),
        "phrases": ["下头", "就是个下头男"],
        "count": 1,
        "learner": "negative_feedback",
        "source_message_ids": ["b1", "r1"],
        "learned_at": at(10_000).isoformat(),
        "updated_at": at(10_000).isoformat(),
    }
    assert group.stores.feedback is not None
    assert group.stores.feedback.blacklisted_phrases(BOT, GROUP) == ("就是个下头男", "下头")


def test_an_adjacent_addressed_rejection_split_over_two_batches() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, REPLY, t=0, id="b1")
    group.deliver("b1", REPLY, SOURCES)
    group.run(50)
    assert group.items("feedback") == []
    group.say(PEER, "路过", t=10, id="p1")  # a peer bot is no member between
    group.say(A, "小织别这样", t=100, id="r1", addressed=True)
    group.run(200)
    [item] = group.items("feedback")
    assert (item.source_message_ids, item.fields["phrases"], item.learned_at) == (
        ("b1", "r1"),
        ["下头", "就是个下头男"],
        at(200),
    )


def test_what_is_no_rejection() -> None:
    messages = [
        message(BOT, "第一句", t=0, id="b1"),
        message(A, "不可以", t=10, id="r1"),  # not addressed, not quoting
        message(BOT, "第二句", t=20, id="b2"),
        message(A, "哈哈", t=21, id="r2"),
        message(B, "小织不可以", t=22, id="r3", addressed=True),  # another member between
        message(BOT, "第三句", t=30, id="b3"),
        message(A, "小织不可以", t=151, id="r4", addressed=True),  # 121 s later
        message(BOT, "第四句", t=200, id="b4"),
        message(A, "小织闭嘴", t=201, id="r5", addressed=True),  # shut-up alone: routing's
        message(BOT, "第五句", t=300, id="b5"),
        message(A, "小织说得好", t=301, id="r6", addressed=True),  # nothing negative
        message(A, "好烦你", t=400, id="r7", reply_to="h9"),  # quotes no bot message
    ]
    result = run("negative_feedback", batch_of("negative_feedback", messages))
    assert result.items == ()
    wide = batch_of("negative_feedback", messages, settings={"reaction_window_s": 200})
    assert [i.source_message_ids for i in run("negative_feedback", wide).items] == [("b3", "r4")]


def test_a_shut_up_line_counts_when_it_quotes_the_reply() -> None:
    messages = [
        message(BOT, "第一句", t=0, id="b1"),
        message(A, "闭嘴", t=5, id="r1", reply_to="b1"),
    ]
    result = run("negative_feedback", batch_of("negative_feedback", messages))
    assert [i.source_message_ids for i in result.items] == [("b1", "r1")]


def test_a_second_rejection_of_the_same_reply_only_adds_its_id() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, REPLY, t=0, id="b1")
    group.deliver("b1", REPLY, SOURCES)
    group.say(A, "不可以", t=5, id="r1", reply_to="b1")
    group.run(100)
    group.say(B, "下头，不许这样", t=50, id="r2", reply_to="b1")
    group.say(A, "不可以！", t=60, id="r3", reply_to="b1")
    group.run(200)
    [item] = group.items("feedback")
    assert (item.user_id, item.count, item.source_message_ids) == (A, 3, ("b1", "r1", "r2", "r3"))
    assert item.fields["reaction"] == "不可以"
    assert item.fields["scores"] == scored()
    assert group.stores.feedback is not None
    assert group.stores.feedback.blacklisted_phrases(BOT, GROUP) == ("就是个下头男", "下头")
    # The batch learned again changes nothing, in the store or the ledger.
    again = group.stores.learned
    assert again is not None
    replay = run(
        "negative_feedback",
        batch_of(
            "negative_feedback",
            [message(BOT, REPLY, t=0, id="b1"), message(A, "不可以", t=5, id="r1", reply_to="b1")],
            stores=group.stores,
        ),
    )
    assert again.put_items(replay.items).unchanged == 1
    assert group.items("feedback")[0].count == 3


def test_forgetting_an_outcome_takes_its_phrases_out_of_the_ledger() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, REPLY, t=0, id="b1")
    group.deliver("b1", REPLY, SOURCES)
    group.say(A, "不可以", t=5, id="r1", reply_to="b1")
    group.say(BOT, "笑死我了哈哈", t=10, id="b2")
    group.deliver(
        "b2", "笑死我了哈哈", [{"type": "ambient", "id": "amb2", "preview": "群友：笑死我了"}]
    )
    group.say(B, "不许笑", t=12, id="r2", reply_to="b2")
    group.run()
    assert group.stores.feedback is not None
    assert group.stores.feedback.blacklisted_phrases(BOT, GROUP) == (
        "笑死我",
        "就是个下头男",
        "下头",
    )
    gone = group.stage.forget(BOT, GROUP, kind="feedback", key=item_key("b1"))
    assert [i.fields["outcome_id"] for i in gone] == ["b1"]
    assert group.stores.feedback.blacklisted_phrases(BOT, GROUP) == ("笑死我",)
    assert [i.fields["outcome_id"] for i in group.items("feedback")] == ["b2"]


def test_a_reply_whose_injection_was_not_kept_is_recorded_without_scores() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, "随便说说", t=0, id="b1")
    group.say(A, "不可以", t=5, id="r1", reply_to="b1")
    [learned] = group.run()
    assert learned.notes == ("no injection kept for message b1: nothing scored",)
    [item] = group.items("feedback")
    assert (item.fields["scores"], item.fields["phrases"], item.fields["reply"]) == (
        [],
        [],
        "随便说说",
    )
    assert group.stores.feedback is not None
    assert group.stores.feedback.blacklisted_phrases(BOT, GROUP) == ()


def test_outcomes_stay_in_their_group() -> None:
    group = make_group("negative_feedback")
    group.say(BOT, REPLY, t=0, id="b1", group=OTHER_GROUP)
    group.say(A, "不可以", t=5, id="r1", reply_to="b1")  # b1 is of the other group
    group.say(A, "不可以", t=5, id="r2", reply_to="b1", group=OTHER_GROUP)
    group.run()
    assert group.items("feedback") == []
    assert [i.source_message_ids for i in group.items("feedback", OTHER_GROUP)] == [("b1", "r2")]


def test_the_scores_are_a_setting() -> None:
    group = make_group("negative_feedback", {"scores": {"memory": -5, "ambient": 0}})
    group.say(BOT, REPLY, t=0, id="b1")
    group.deliver("b1", REPLY, SOURCES)
    group.say(A, "不可以", t=5, id="r1", reply_to="b1")
    group.run()
    [item] = group.items("feedback")
    assert [(s["type"], s["delta"]) for s in item.fields["scores"]][:4] == [
        ("ambient", 0.0),
        ("expression", -3.0),
        ("strategy", -2.0),
        ("memory", -5.0),
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scores", {"memory": "high"}),
        ("scores", ["memory"]),
        ("negative_words", "不可以"),
        ("reaction_window_s", -1),
    ],
)
def test_a_bad_setting_names_its_key(key, value) -> None:
    with pytest.raises(ValueError, match=f"learning.learners.negative_feedback.{key}"):
        run("negative_feedback", batch_of("negative_feedback", [], settings={key: value}))


# -- the phrase rules ------------------------------------------------------------------------


def test_the_longest_common_phrase_ignores_function_words_and_punctuation() -> None:
    assert longest_common_phrase("你吃了吗？吃饭去吧", "群友：吃饭了没，吃饭去") == "吃饭去"
    assert longest_common_phrase("好的呀", "的了吗呢吧啊呀哦嗯") == ""
    assert longest_common_phrase("abc", "xbz") == ""  # one character is too short
    assert longest_common_phrase("x" * 200 + "共同", "共同") == ""  # beyond reply[:120]


def test_only_ambient_sources_blacklist_and_risk_words_count_only_when_both_have_them() -> None:
    sources = [
        {"type": "expression", "preview": "你就是个下头男"},
        {"type": "ambient", "preview": "今天天气不错"},
        {"type": "ambient", "preview": "傻逼才这样，下头"},
    ]
    assert blacklist_phrases("你是傻逼，真下头", sources, ("下头", "傻逼", "不可以"), limit=32) == [
        "下头",
        "傻逼",
    ]
    assert blacklist_phrases("你好", sources, ("下头",), limit=32) == []


def test_at_most_32_phrases_and_64_scored_sources_of_a_type() -> None:
    reply = "".join(chr(0x4E00 + i) for i in range(200))  # 200 different characters
    # Each source shares two characters of its own with the reply's first 120.
    sources = [
        {"type": "ambient", "id": f"a{i}", "preview": reply[2 * i : 2 * i + 2]} for i in range(100)
    ]
    messages = [
        message(BOT, reply, t=0, id="b1"),
        message(A, "不可以", t=5, id="r1", reply_to="b1"),
    ]
    group = make_group("negative_feedback")
    group.deliver("b1", reply, sources)
    [item] = run(
        "negative_feedback", batch_of("negative_feedback", messages, stores=group.stores)
    ).items
    assert item.fields["phrases"] == [reply[2 * i : 2 * i + 2] for i in range(32)]
    assert len(item.fields["scores"]) == 64
    assert item.fields["scores"][-1]["id"] == "a63"
    assert len(item.fields["reply"]) == 120
