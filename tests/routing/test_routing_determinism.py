"""Replaying one event stream with one seed gives identical decisions
(``docs/design.md#where-promptweave-differs-from-the-reference``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from routing_support import BASE_TIME, make_runtime, make_turn

from promptweave import Turn

#: A group conversation with quotes, reactions, vents and questions, repeated five times.
LINES = [
    ("阿蒙", "有人知道周末哪里有音乐节吗", {}),
    ("北风", "@小织 你知道吗？", {"addressed": True, "reply_to": "previous"}),
    ("青柠汽水", "哈哈哈哈", {}),
    ("阿蒙", "小织说得也太对了", {"trigger": "followup"}),
    ("北风", "@小织 又要加班，烦", {"addressed": True}),
    ("青柠汽水", "@小织 那你觉得哪个好？", {"addressed": True, "reply_to": "previous"}),
    ("阿蒙", "笑死", {}),
    ("北风", "小织今天话好多啊哈哈", {"trigger": "followup"}),
]


def _stream() -> Iterator[Turn]:
    earlier: list[tuple[str, str, str, dt.datetime]] = []
    for index in range(40):
        sender, text, fields = LINES[index % len(LINES)]
        if fields.get("reply_to") == "previous":
            fields = {**fields, "reply_to": f"e{index - 1}"}
        at = BASE_TIME + dt.timedelta(seconds=37 * index)
        context = [
            {"id": mid, "text": said, "sender": who, "ago_s": (at - when).total_seconds()}
            for mid, said, who, when in earlier[-8:]
        ]
        yield make_turn(
            text,
            sender=sender,
            message_id=f"e{index}",
            time=at.isoformat(),
            context=context,
            **fields,
        )
        earlier.append((f"e{index}", text, sender, at))


def _replay(seed: int) -> list[tuple[object, ...]]:
    runtime = make_runtime(seed)
    decided = []
    for turn in _stream():
        decision = runtime.decide(turn)
        if decision.speaks:
            delivery = runtime.recorder.resolve_delivery(turn, decision)
            runtime.recorder.note_delivered(turn, delivery, at=turn.message.time)
        decided.append(
            (
                tuple(decision.trace().items()),
                decision.low_engagement_phrase,
                decision.reply_shape,
                decision.reply_message_id,
            )
        )
    return decided


def test_one_seed_replays_the_same_decisions():
    assert _replay(11) == _replay(11)


def test_the_stream_exercises_the_random_choices():
    decided = _replay(11)
    reasons = {dict(trace)["reason"] for trace, *_ in decided}
    assert "rule_reply_quote" in reasons
    assert any(phrase for _, phrase, *_ in decided)


def test_another_seed_gives_other_random_choices():
    runs = {tuple(_replay(seed)) for seed in range(5)}
    assert len(runs) > 1
