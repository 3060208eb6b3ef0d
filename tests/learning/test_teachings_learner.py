"""The ``teachings`` learner: what members tell the bot to remember."""

from __future__ import annotations

import re

import pytest
from learning_support import BOT, GROUP, OTHER_GROUP, at, batch_of, make_group, message, run

from promptweave.builtin_plugins.learning_rules import (
    TEACHING_PATTERNS,
    compile_patterns,
    teaching_fact,
    teaching_subject,
)
from promptweave.store.learned import item_key

A, B = "2001", "2002"
NAMES = ("小织", "织织")
PATTERNS = compile_patterns(TEACHING_PATTERNS)


def test_a_name_teaching_through_the_stage() -> None:
    group = make_group("teachings")
    group.say(A, "小织记住，我叫阿蒙，不叫阿猛", t=0, id="t1", addressed=True, name="阿蒙")
    group.run()
    [item] = group.items("teaching")
    assert item.to_json() == {
        "kind": "teaching",
        "bot_id": BOT,
        "group_id": GROUP,
        "user_id": A,
        "key": item_key(f"name:{A}"),
        "text": "阿蒙说：我叫阿蒙，不叫阿猛",
        "subject": f"name:{A}",
        "teacher_name": "阿蒙",
        "count": 1,
        "learner": "teachings",
        "source_message_ids": ["t1"],
        "learned_at": at(10_000).isoformat(),
        "updated_at": at(10_000).isoformat(),
    }


def test_a_later_teaching_of_the_same_subject_replaces_it() -> None:
    group = make_group("teachings")
    group.say(A, "织织，记住群主是小王", t=0, id="t1", addressed=True, name="阿蒙")
    group.run(100)
    group.say(B, "@小织 记住：群主是小李", t=10, id="t2", addressed=True, name="阿花")
    group.run(200)
    [item] = group.items("teaching")
    assert dict(item.fields) == {
        "text": "阿花说：群主是小李",
        "subject": "群主",
        "teacher_name": "阿花",
    }
    assert (item.user_id, item.source_message_ids, item.count) == (B, ("t1", "t2"), 2)
    assert (item.learned_at, item.updated_at) == (at(100), at(200))


def test_one_members_name_does_not_replace_anothers() -> None:
    group = make_group("teachings")
    group.say(A, "叫我阿蒙", t=0, id="t1", addressed=True, name="阿蒙")
    group.say(B, "小织以后叫我花花", t=1, id="t2", addressed=True, name="阿花")
    group.run()
    assert sorted(i.fields["subject"] for i in group.items("teaching")) == [
        f"name:{A}",
        f"name:{B}",
    ]


@pytest.mark.parametrize(
    ("text", "fact", "subject"),
    [
        ("小织记住我生日是五月一号", "我生日是五月一号", "我生日"),
        ("织织 记得明天提醒我交作业", "明天提醒我交作业", "明天提醒我交作业"),
        ("你要记住：阿花最喜欢猫", "阿花最喜欢猫", "阿花最喜欢猫"),
        ("小织，以后别叫我老板", "以后别叫我老板", "以后别"),
        ("我叫阿蒙", "我叫阿蒙", f"name:{A}"),
        ("小织 叫我蒙哥！", "叫我蒙哥", f"name:{A}"),
        ("@小织 我叫阿蒙不叫阿猛", "我叫阿蒙不叫阿猛", f"name:{A}"),
        ("小织记住，Python 就是 一种编程语言。", "Python 就是 一种编程语言", "python"),
        ("记一下 RAM=内存", "RAM=内存", "ram"),
    ],
)
def test_the_fact_and_subject_of_a_teaching(text, fact, subject) -> None:
    assert teaching_fact(text, NAMES, PATTERNS) == fact
    assert teaching_subject(fact, A) == subject


@pytest.mark.parametrize(
    "text",
    [
        "小织你记得我是谁吗",  # a question
        "小织我是谁？",
        "小织我是谁",
        "小织，群主是谁呢。",
        "小织闭嘴",  # a shut-up request
        "小织别说话了，记住",
        "小织早上好",  # teaches nothing
        "小织，第二章是实验部分，数据我跑了两个多月",  # talk: no teaching cue
        "也不是怕重写，就是觉得自己做得不够好",
        "小织记住，明天我要是再玩阿瓦隆，能不能赢一把？上次连输四把",  # a question inside
        "小织",
    ],
)
def test_questions_shut_up_and_small_talk_teach_nothing(text) -> None:
    assert teaching_fact(text, NAMES, PATTERNS) == ""


def test_bystander_bot_unaddressed_and_private_lines_teach_nothing() -> None:
    messages = [
        message(A, "记住我叫阿蒙", t=0, id="x1"),  # not addressed
        message(A, "小织记住他叫阿花", t=1, id="x2", addressed=True, mentions=(B,)),
        message(A, "小织记住 @阿花 是班长", t=2, id="x3", addressed=True),
        message(BOT, "记住了，你叫阿蒙", t=3, id="x4", addressed=True),
        message(A, "小织闭嘴", t=4, id="x5", addressed=True),
        message(A, "小织记得我是谁吗", t=5, id="x6", addressed=True),
    ]
    result = run("teachings", batch_of("teachings", messages))
    assert (result.items, result.notes) == ((), ("2 teachings skipped: bystander 2",))
    private = batch_of(
        "teachings", [message(A, "小织记住我叫阿蒙", t=0, id="p", addressed=True)], group_id=""
    )
    assert run("teachings", private).items == ()


def test_an_at_mention_of_the_bot_itself_is_no_bystander() -> None:
    messages = [message(A, "@小织 记住我叫阿蒙", t=0, id="x1", addressed=True, mentions=(BOT,))]
    [item] = run("teachings", batch_of("teachings", messages)).items
    assert item.fields["text"] == "2001说：我叫阿蒙"  # no name: the member's id


def test_teachings_stay_in_their_group() -> None:
    group = make_group("teachings")
    group.say(A, "小织记住我叫阿蒙", t=0, id="t1", addressed=True, group=OTHER_GROUP)
    group.run()
    assert len(group.items("teaching", OTHER_GROUP)) == 1
    assert group.items("teaching") == []


def test_the_patterns_are_a_setting() -> None:
    messages = [message(A, "小织 口令是芝麻开门", t=0, id="x1", addressed=True, sender_name="阿蒙")]
    # No built-in cue: talk, not a teaching, until a pattern of the setting says otherwise.
    assert run("teachings", batch_of("teachings", messages)).items == ()
    cued = batch_of("teachings", messages, settings={"patterns": ["^口令是"]})
    assert len(run("teachings", cued).items) == 1
    only_names = batch_of("teachings", messages, settings={"patterns": ["^我叫"]})
    assert run("teachings", only_names).items == ()
    with pytest.raises(ValueError, match=re.escape("learning.learners.teachings.patterns")):
        run("teachings", batch_of("teachings", messages, settings={"patterns": ["("]}))
    with pytest.raises(ValueError, match=re.escape("learning.learners.teachings.patterns")):
        run("teachings", batch_of("teachings", messages, settings={"patterns": "^我叫"}))


def test_a_long_teaching_is_cut() -> None:
    messages = [
        message(A, "小织记住" + "长" * 300, t=0, id="x1", addressed=True, sender_name="阿蒙")
    ]
    [item] = run("teachings", batch_of("teachings", messages)).items
    assert len(item.fields["text"]) == 120 and item.fields["text"].startswith("阿蒙说：长")


def test_a_message_starting_with_the_bots_name_is_addressed_to_it() -> None:
    group = make_group("teachings")
    group.say(A, "小织记住，我叫阿蒙不叫阿猛", t=0, id="t1", addressed=False, name="阿蒙")
    group.say(B, "记住我叫阿花", t=1, id="t2", addressed=False, name="阿花")  # said to nobody
    group.run()
    [item] = group.items("teaching")
    assert (item.fields["text"], item.user_id) == ("阿蒙说：我叫阿蒙不叫阿猛", A)
