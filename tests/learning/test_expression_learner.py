"""The ``expression_pairs`` learner: quoted and adjacent pairs of clean human lines."""

from __future__ import annotations

import pytest
from learning_support import (
    BOT,
    GROUP,
    OTHER_GROUP,
    PEER,
    at,
    batch_of,
    make_group,
    message,
    run,
)

from promptweave.learning.stage import RunStatus
from promptweave.store.learned import item_key

A, B, C = "2001", "2002", "2003"


def pairs(result) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [
        (i.fields["trigger"], i.fields["reply"], i.fields["how"], i.source_message_ids)
        for i in result.items
    ]


def test_quote_and_adjacent_pairs_through_the_stage() -> None:
    group = make_group("expression_pairs")
    group.say(A, "今天吃什么", t=0, id="q1")
    group.say(B, "火锅走起", t=10, id="r1")
    group.say(C, "吃面吧", t=500, id="r2", reply_to="q1")
    runs = group.run()
    assert [r.status for r in runs] == [RunStatus.LEARNED]
    items = group.items("expression_pair")
    assert [i.to_json() for i in items] == [
        {
            "kind": "expression_pair",
            "bot_id": BOT,
            "group_id": GROUP,
            "user_id": "",
            "key": item_key("今天吃什么", "火锅走起"),
            "trigger": "今天吃什么",
            "reply": "火锅走起",
            "how": "adjacent",
            "count": 1,
            "learner": "expression_pairs",
            "source_message_ids": ["q1", "r1"],
            "learned_at": at(10_000).isoformat(),
            "updated_at": at(10_000).isoformat(),
        },
        {
            "kind": "expression_pair",
            "bot_id": BOT,
            "group_id": GROUP,
            "user_id": "",
            "key": item_key("今天吃什么", "吃面吧"),
            "trigger": "今天吃什么",
            "reply": "吃面吧",
            "how": "quote",
            "count": 1,
            "learner": "expression_pairs",
            "source_message_ids": ["q1", "r2"],
            "learned_at": at(10_000).isoformat(),
            "updated_at": at(10_000).isoformat(),
        },
    ]


def test_a_pair_split_over_two_batches_is_learned() -> None:
    group = make_group("expression_pairs")
    group.say(A, "下班了没", t=0, id="a1")
    assert group.run(100)[0].status == RunStatus.LEARNED
    assert group.items("expression_pair") == []
    group.say(B, "还在加班", t=30, id="b1")
    group.run(200)
    [item] = group.items("expression_pair")
    assert (item.fields["trigger"], item.fields["reply"], item.source_message_ids) == (
        "下班了没",
        "还在加班",
        ("a1", "b1"),
    )
    assert item.learned_at == at(200)


def test_the_same_pair_again_counts_twice_and_a_batch_learned_twice_counts_once() -> None:
    group = make_group("expression_pairs")
    group.say(A, "早上好", t=0, id="a1")
    group.say(B, "早啊", t=5, id="b1")
    group.say(C, "聊点别的", t=1000, id="c1")
    group.say(A, "早上好", t=2000, id="a2")
    group.say(B, "早啊", t=2003, id="b2")
    group.run()
    [item] = [i for i in group.items("expression_pair") if i.fields["trigger"] == "早上好"]
    assert item.count == 2
    assert item.source_message_ids == ("a1", "b1", "a2", "b2")
    # The same messages learned again (a cursor that did not move) change nothing.
    again = run("expression_pairs", batch_of("expression_pairs", [], stores=group.stores))
    assert again.items == ()
    assert group.stores.learned is not None
    result = group.stores.learned.put_items(
        run(
            "expression_pairs",
            batch_of(
                "expression_pairs",
                [message(A, "早上好", t=0, id="a1"), message(B, "早啊", t=5, id="b1")],
            ),
        ).items
    )
    assert result.unchanged == 1
    assert group.items("expression_pair")[0].count == 2


def test_nothing_of_one_group_is_learned_in_another() -> None:
    group = make_group("expression_pairs")
    group.say(A, "周末去哪", t=0, id="g1", group=OTHER_GROUP)
    group.say(B, "去爬山", t=5, id="g2", group=OTHER_GROUP)
    group.say(A, "好困啊", t=0, id="h1")
    # It quotes an id of the other group: no quote pair here, and no adjacent one either.
    group.say(C, "去睡觉", t=5, id="h2", reply_to="g1")
    group.say(A, "睡不着", t=8, id="h3")
    group.run()
    assert [i.fields["trigger"] for i in group.items("expression_pair", OTHER_GROUP)] == [
        "周末去哪"
    ]
    assert [
        (i.fields["trigger"], i.fields["reply"], i.fields["how"])
        for i in group.items("expression_pair")
    ] == [("去睡觉", "睡不着", "adjacent")]


def test_private_chats_are_never_learned() -> None:
    result = run(
        "expression_pairs",
        batch_of(
            "expression_pairs",
            [message(A, "在吗", t=0, id="p1"), message(B, "在的", t=1, id="p2")],
            group_id="",
        ),
    )
    assert result.items == ()


@pytest.mark.parametrize(
    ("text", "extra", "reason"),
    [
        ("[CQ:face,id=178]", {}, "face"),
        ("😄😄", {}, "face"),
        ("[图片]", {}, "image"),
        ("", {"images": ("https://img.example.com/a.png",)}, "image"),
        ("看这个 https://example.com/x", {}, "link"),
        ("/签到", {}, "command"),
        ("!roll", {}, "command"),
        ("！抽卡", {}, "command"),
        (".r 1d100", {}, "command"),
        ("#帮助", {}, "command"),
        ("这" * 41, {}, "too_long"),
        ("嗯", {}, "too_short"),
        ("你是傻逼吧", {}, "offensive"),
    ],
)
def test_a_line_that_is_not_clean_makes_no_pair(text, extra, reason) -> None:
    for first, second in ((text, "那就好"), ("今天好热", text)):
        result = run(
            "expression_pairs",
            batch_of(
                "expression_pairs",
                [
                    message(A, first, t=0, id="x1", **(extra if first == text else {})),
                    message(B, second, t=5, id="x2", **(extra if second == text else {})),
                ],
            ),
        )
        assert result.items == ()
        assert result.notes == (f"1 lines skipped: {reason} 1",)


def test_faces_and_image_marks_are_cleaned_out_of_a_kept_line() -> None:
    result = run(
        "expression_pairs",
        batch_of(
            "expression_pairs",
            [
                message(A, "[CQ:face,id=1]今天好热[doge]", t=0, id="x1"),
                message(B, "开空调😄 [图片]", t=5, id="x2", images=("https://i.example.com/1",)),
            ],
        ),
    )
    assert pairs(result) == [("今天好热", "开空调", "adjacent", ("x1", "x2"))]


def test_exactly_max_chars_is_kept_and_the_limit_is_a_setting() -> None:
    long_line = "这" * 40
    messages = [message(A, "说点什么", t=0, id="x1"), message(B, long_line, t=5, id="x2")]
    assert len(run("expression_pairs", batch_of("expression_pairs", messages)).items) == 1
    short = batch_of("expression_pairs", messages, settings={"max_chars": 10})
    assert run("expression_pairs", short).items == ()


def test_the_offensive_words_are_a_setting() -> None:
    messages = [message(A, "你这个菜鸡", t=0, id="x1"), message(B, "你才是", t=5, id="x2")]
    assert len(run("expression_pairs", batch_of("expression_pairs", messages)).items) == 1
    strict = batch_of("expression_pairs", messages, settings={"offensive_words": ["菜鸡"]})
    result = run("expression_pairs", strict)
    assert (result.items, result.notes) == ((), ("1 lines skipped: offensive 1",))


def test_a_reply_equal_to_its_trigger_is_no_pair() -> None:
    result = run(
        "expression_pairs",
        batch_of(
            "expression_pairs",
            [message(A, "哈哈哈", t=0, id="x1"), message(B, "哈哈哈", t=5, id="x2")],
        ),
    )
    assert (result.items, result.notes) == ((), ("1 lines skipped: same 1",))


def test_bots_and_lines_to_the_bot_make_no_pair() -> None:
    messages = [
        message(A, "今天好热", t=0, id="x1"),
        message(PEER, "是啊好热", t=5, id="x2"),  # a peer bot
        message(B, "热死了", t=6, id="x3"),  # just after a bot's line: it answers the bot
        message(BOT, "多喝水", t=100, id="x4"),
        message(A, "小织你也热吗", t=200, id="x5", addressed=True),
        message(B, "她不热", t=205, id="x6"),  # answers a line addressed to the bot
        message(C, "收到了", t=300, id="x7", reply_to="x4"),  # quotes the bot
        message(A, "我也收到", t=305, id="x8", reply_to="x7"),  # quotes a line quoting the bot
        message(B, "@小织 在吗", t=400, id="x9", mentions=(BOT,)),
        message(C, "她在忙", t=405, id="x10"),
    ]
    stores = batch_of("expression_pairs", []).stores
    assert stores.group_log is not None
    for m in messages:
        stores.group_log.append_group_message(BOT, GROUP, m)
    result = run("expression_pairs", batch_of("expression_pairs", messages, stores=stores))
    assert result.items == ()
    assert result.notes == ("4 lines skipped: to_bot 4",)  # x3, x5, x7, x9


def test_an_answer_after_the_window_or_to_oneself_is_no_pair() -> None:
    late = [message(A, "有人吗", t=0, id="x1"), message(B, "有的有的", t=61, id="x2")]
    assert run("expression_pairs", batch_of("expression_pairs", late)).items == ()
    wider = batch_of("expression_pairs", late, settings={"adjacent_window_s": 90})
    assert len(run("expression_pairs", wider).items) == 1
    alone = [message(A, "有人吗", t=0, id="x1"), message(A, "没人啊", t=5, id="x2")]
    assert run("expression_pairs", batch_of("expression_pairs", alone)).items == ()


def test_a_quote_of_ones_own_message_or_of_an_unknown_one_is_no_pair() -> None:
    own = [
        message(A, "有人吗", t=0, id="x1"),
        message(A, "没人理我", t=100, id="x2", reply_to="x1"),
    ]
    stores = batch_of("expression_pairs", []).stores
    assert stores.group_log is not None
    for m in own:
        stores.group_log.append_group_message(BOT, GROUP, m)
    assert run("expression_pairs", batch_of("expression_pairs", own, stores=stores)).items == ()
    unknown = [message(B, "同意", t=100, id="y2", reply_to="gone")]
    assert run("expression_pairs", batch_of("expression_pairs", unknown)).items == ()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("max_chars", "40", "learning.learners.expression_pairs.max_chars must be an integer"),
        ("max_chars", 1, "learning.learners.expression_pairs.max_chars must be an integer"),
        ("adjacent_window_s", True, "learning.learners.expression_pairs.adjacent_window_s"),
        ("offensive_words", "傻逼", "learning.learners.expression_pairs.offensive_words"),
        ("offensive_words", [1], "learning.learners.expression_pairs.offensive_words"),
    ],
)
def test_a_bad_setting_names_its_key(key, value, expected) -> None:
    with pytest.raises(ValueError, match=expected):
        run("expression_pairs", batch_of("expression_pairs", [], settings={key: value}))


def test_a_bad_setting_fails_the_run_and_keeps_the_cursor() -> None:
    group = make_group("expression_pairs", {"max_chars": "many"})
    group.say(A, "今天吃什么", t=0, id="q1")
    [failed] = group.run()
    assert failed.status == RunStatus.FAILED
    assert "learning.learners.expression_pairs.max_chars" in failed.error
    assert group.stores.learned is not None
    assert group.stores.learned.cursor("expression_pairs", BOT, GROUP).position == 0
