"""The ``rhythm`` learner: one-bubble share of turns and median message length."""

from __future__ import annotations

import pytest
from learning_support import BOT, GROUP, batch_of, make_group, message, run

from promptweave.learning.stage import RunStatus

A, B = "2001", "2002"


def test_turns_bubbles_and_lengths_are_counted_once_min_turns_is_reached() -> None:
    group = make_group("rhythm", {"min_turns": 3})
    group.say(A, "一二", t=0)  # turn 1: two bubbles
    group.say(A, "一二三四", t=5)
    group.say(B, "一二三", t=6)  # turn 2: one bubble
    group.say(A, "一", t=7)  # turn 3: one bubble
    group.say(BOT, "bot line, not counted", t=8)
    group.say(B, "一二三四五", t=9)  # turn 4, still open at the end: not counted yet
    assert [r.status for r in group.run()] == [RunStatus.LEARNED]
    [item] = group.items("rhythm")
    assert (item.key, item.source_message_ids, item.user_id) == ("rhythm", (), "")
    assert dict(item.fields) == {
        "single_bubble_share": round(2 / 3, 4),
        "median_segment_chars": 3,  # lengths 1 2 3 4 5: the median is 3
        "turns": 3,
        "segments": 5,
    }


def test_nothing_is_written_before_min_turns() -> None:
    group = make_group("rhythm")  # the default: 20 turns
    for i in range(20):
        group.say(A if i % 2 else B, "说点什么", t=i)
    [run_] = group.run()
    assert group.items("rhythm") == []
    assert run_.notes == ("19 of 20 turns counted",)
    group.say(B, "又一个", t=30)  # another speaker closes the 20th turn
    group.run(20_000)
    [item] = group.items("rhythm")
    assert item.fields["turns"] == 20 and item.fields["single_bubble_share"] == 1.0
    assert item.learned_at == item.updated_at


def test_an_open_turn_is_carried_over_the_batch_boundary() -> None:
    group = make_group("rhythm", {"min_turns": 1})
    group.say(A, "第一句", t=0)
    group.run(100)
    group.say(A, "第二句", t=10)  # the same turn, in the next batch
    group.say(B, "插一句", t=12)  # closes it: one turn of two bubbles
    group.run(200)
    [item] = group.items("rhythm")
    assert dict(item.fields) == {
        "single_bubble_share": 0.0,
        "median_segment_chars": 3,
        "turns": 1,
        "segments": 3,
    }


def test_a_pause_longer_than_the_turn_window_starts_a_new_turn() -> None:
    messages = [
        message(A, "一", t=0, id="a"),
        message(A, "二", t=21, id="b"),  # 21 s later: a new turn
        message(A, "三", t=30, id="c"),  # 9 s later: the same
        message(B, "四", t=31, id="d"),
    ]
    [item] = run("rhythm", batch_of("rhythm", messages, settings={"min_turns": 1})).items
    assert (item.fields["turns"], item.fields["single_bubble_share"]) == (2, 0.5)
    wide = batch_of("rhythm", messages, settings={"min_turns": 1, "turn_window_s": 30})
    [item] = run("rhythm", wide).items
    assert (item.fields["turns"], item.fields["single_bubble_share"]) == (1, 0.0)


def test_lengths_are_capped_and_faces_not_counted() -> None:
    messages = [
        message(A, "长" * 500, t=0, id="a"),
        message(B, "[CQ:face,id=1]", t=1, id="b"),
        message(A, "短句", t=2, id="c"),
    ]
    result = run("rhythm", batch_of("rhythm", messages, settings={"min_turns": 1}))
    assert result.state is not None
    assert result.state["lengths"] == {"200": 1, "2": 1}
    assert result.items[0].fields["median_segment_chars"] == 2
    assert result.items[0].fields["segments"] == 2


def test_the_state_alone_gives_the_rhythm_and_a_rerun_replaces_it() -> None:
    group = make_group("rhythm", {"min_turns": 1})
    group.say(A, "一二", t=0)
    group.say(B, "一二", t=1)
    group.run(100)
    group.say(A, "一二三四", t=2)
    group.run(200)
    [item] = group.items("rhythm")
    assert item.fields["turns"] == 2 and item.count == 1
    assert group.stores.learned is not None
    cursor = group.stores.learned.cursor("rhythm", BOT, GROUP)
    assert cursor.state["open"]["sender"] == A


@pytest.mark.parametrize(("key", "value"), [("min_turns", 0), ("turn_window_s", "20")])
def test_a_bad_setting_names_its_key(key, value) -> None:
    with pytest.raises(ValueError, match=f"learning.learners.rhythm.{key}"):
        run("rhythm", batch_of("rhythm", [], settings={key: value}))
