"""The group timeline of a turn's own recent messages, built by the timeline stage alone (the
``timeline`` fixture): speaker labels, reply markers, the window by trigger, the block cap. What
the timeline shows of the stores' group log is in ``test_timeline_from_store.py``; that the section
``group_timeline`` shows this block unchanged, in ``tests/prompt/test_sections.py``."""

from __future__ import annotations

import datetime as dt

import attrs
from base_support import CST

from promptweave import ChatMessage
from promptweave.turn import SpeakTrigger


def _message(message_id: str, sender: str, text: str, minute: int, **kwargs) -> ChatMessage:
    return ChatMessage(
        id=message_id,
        sender_id=sender,
        text=text,
        time=dt.datetime(2026, 11, 28, 20, minute, tzinfo=CST),
        **kwargs,
    )


def test_timeline_labels_speakers(timeline, rich_turn):
    text = timeline(rich_turn).text
    assert "- 小织：火腿肠是它今晚的最佳收获吧" in text  # the bot itself
    assert "- 别的bot：好心人出现了" in text  # a peer bot
    assert "- 阿蒙：今天下班路上" in text  # display name
    assert "- 群友#0031：橘猫都胖" in text  # no name: last four digits
    assert "- 阿蒙（回群友#0031的话）：这只不胖" in text  # reply inside the window
    assert "- 青柠汽水：[图片] 拍到了吗" in text


def test_timeline_reply_outside_window_has_no_marker(timeline, rich_turn):
    recent = (_message("2", "30022", "接上一句", 1, sender_name="阿蒙", reply_to="1"),)
    text = timeline(attrs.evolve(rich_turn, recent_messages=recent)).text
    assert "- 阿蒙：接上一句" in text


def test_timeline_excludes_the_current_message(timeline, rich_turn):
    recent = (*rich_turn.recent_messages, rich_turn.message)
    text = timeline(attrs.evolve(rich_turn, recent_messages=recent)).text
    assert "周六晚上桌游局" not in text


def test_timeline_width_depends_on_the_trigger(timeline, rich_turn):
    recent = tuple(_message(str(i), "30022", f"第{i}条", i, sender_name="阿蒙") for i in range(12))
    message = attrs.evolve(rich_turn.message, addressed=False)
    turn = attrs.evolve(rich_turn, recent_messages=recent, message=message)
    for trigger, count in (
        (SpeakTrigger.MENTION, 8),
        (SpeakTrigger.ALIAS, 8),
        (SpeakTrigger.FOLLOWUP, 8),
        (SpeakTrigger.AMBIENT, 4),
    ):
        text = timeline(attrs.evolve(turn, trigger=trigger)).text
        assert text.count("\n- ") == count, trigger
        assert "第11条" in text
    assert timeline(attrs.evolve(turn, trigger=None)).text == ""


def test_timeline_keeps_newest_lines_when_block_is_full(timeline, rich_turn):
    # With the default 8 lines of at most 240 characters the block stays under 2400; a wider
    # window makes the block cap bite.
    recent = tuple(
        _message(str(i), "30022", f"第{i:02d}条" + "长" * 400, i, sender_name="阿蒙")
        for i in range(16)
    )
    text = timeline(attrs.evolve(rich_turn, recent_messages=recent), addressed_limit=16).text
    assert len(text) <= 2400
    assert text.startswith("【刚才的群聊】\n")
    assert "第15条" in text and "第00条" not in text
    assert text.count("\n- ") == 2400 // len("- 阿蒙：" + "长" * 240 + "\n")
    assert all(len(line) <= len("- 阿蒙：") + 240 for line in text.splitlines())
