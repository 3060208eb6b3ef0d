"""The ``pickups`` learner: how members take up what the bot said."""

from __future__ import annotations

from learning_support import BOT, GROUP, OTHER_GROUP, PEER, at, batch_of, make_group, message, run

from promptweave.store.learned import item_key

A, B = "2001", "2002"


def test_an_adjacent_reaction_and_a_quote_through_the_stage() -> None:
    group = make_group("pickups")
    group.say(A, "好无聊啊", t=0, id="h1")
    group.say(BOT, "那来玩成语接龙", t=5, id="b1")
    group.say(B, "好耶", t=20, id="h2")  # the next message, within 60 s
    group.say(A, "我先来", t=300, id="h3", reply_to="b1")  # a quote, any time later
    group.run()
    items = group.items("pickup")
    assert [i.to_json() for i in items] == [
        {
            "kind": "pickup",
            "bot_id": BOT,
            "group_id": GROUP,
            "user_id": B,
            "key": item_key("b1", "h2"),
            "situation": "好无聊啊",
            "bot_reply": "那来玩成语接龙",
            "reaction": "好耶",
            "how": "adjacent",
            "count": 1,
            "learner": "pickups",
            "source_message_ids": ["h1", "b1", "h2"],
            "learned_at": at(10_000).isoformat(),
            "updated_at": at(10_000).isoformat(),
        },
        {
            "kind": "pickup",
            "bot_id": BOT,
            "group_id": GROUP,
            "user_id": A,
            "key": item_key("b1", "h3"),
            "situation": "好无聊啊",
            "bot_reply": "那来玩成语接龙",
            "reaction": "我先来",
            "how": "quote",
            "count": 1,
            "learner": "pickups",
            "source_message_ids": ["h1", "b1", "h3"],
            "learned_at": at(10_000).isoformat(),
            "updated_at": at(10_000).isoformat(),
        },
    ]


def test_a_pickup_split_over_two_batches_keeps_its_situation() -> None:
    group = make_group("pickups")
    group.say(A, "有人打游戏吗", t=0, id="h1")
    group.say(BOT, "我来", t=3, id="b1")
    group.run(100)
    assert group.items("pickup") == []
    group.say(A, "来来来", t=30, id="h2")
    group.run(200)
    [item] = group.items("pickup")
    assert (item.fields["situation"], item.source_message_ids, item.learned_at) == (
        "有人打游戏吗",
        ("h1", "b1", "h2"),
        at(200),
    )


def test_no_situation_when_no_member_spoke_before_the_bot() -> None:
    messages = [message(BOT, "大家早", t=0, id="b1"), message(A, "早", t=2, id="h1")]
    [item] = run("pickups", batch_of("pickups", messages)).items
    assert (item.fields["situation"], item.source_message_ids) == ("", ("b1", "h1"))


def test_only_the_very_next_message_within_the_window_is_a_reaction() -> None:
    messages = [
        message(BOT, "今天下雨", t=0, id="b1"),
        message(A, "是啊", t=5, id="h1"),
        message(B, "带伞了吗", t=6, id="h2"),  # not the next message after the bot's
        message(BOT, "记得带伞", t=100, id="b2"),
        message(A, "知道了", t=161, id="h3"),  # 61 s later
        message(BOT, "晚安", t=200, id="b3"),
        message(PEER, "晚安", t=201, id="p1"),  # a peer bot in between
        message(B, "晚安晚安", t=202, id="h4"),
    ]
    result = run("pickups", batch_of("pickups", messages))
    assert [i.source_message_ids for i in result.items] == [("b1", "h1")]
    wide = run("pickups", batch_of("pickups", messages, settings={"reaction_window_s": 90}))
    assert [i.source_message_ids for i in wide.items] == [("b1", "h1"), ("h2", "b2", "h3")]


def test_a_quote_of_a_peer_bot_or_a_member_is_no_pickup() -> None:
    group = make_group("pickups")
    group.say(PEER, "我是另一个机器人", t=0, id="p1")
    group.say(A, "你好呀", t=1, id="h1", reply_to="p1")
    group.say(B, "你好", t=2, id="h2", reply_to="h1")
    group.run()
    assert group.items("pickup") == []


def test_a_quote_of_an_older_bot_message_found_in_the_log() -> None:
    group = make_group("pickups")
    group.say(BOT, "我会画画", t=0, id="b1")
    group.run(50)
    # The learner's state no longer knows b1 (as after many bot messages); the log does.
    assert group.stores.learned is not None
    cursor = group.stores.learned.cursor("pickups", BOT, GROUP)
    assert [b["id"] for b in cursor.state["bots"]] == ["b1"]
    batch = batch_of(
        "pickups",
        [message(A, "画一个看看", t=500, id="h1", reply_to="b1")],
        stores=group.stores,
    )
    [item] = run("pickups", batch).items
    assert dict(item.fields) == {
        "situation": "",
        "bot_reply": "我会画画",
        "reaction": "画一个看看",
        "how": "quote",
    }


def test_pickups_stay_in_their_group() -> None:
    group = make_group("pickups")
    group.say(BOT, "在呢", t=0, id="b1", group=OTHER_GROUP)
    group.say(A, "好的", t=1, id="h1", group=OTHER_GROUP)
    group.say(A, "那我问了", t=2, id="h2", reply_to="b1")  # b1 is of the other group
    group.run()
    assert [i.source_message_ids for i in group.items("pickup", OTHER_GROUP)] == [("b1", "h1")]
    assert group.items("pickup") == []


def test_an_image_only_reaction_is_no_pickup() -> None:
    messages = [
        message(BOT, "发张图看看", t=0, id="b1"),
        message(A, "[图片]", t=3, id="h1", images=("https://i.example.com/1",)),
    ]
    assert run("pickups", batch_of("pickups", messages)).items == ()
