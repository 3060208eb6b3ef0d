"""What was learned reaches the sections: a taught name in 【用户明确教导】 for its teacher, learned
pairs in 【群表达指导】, on a runtime whose store starts empty (``docs/learning.md``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from base_support import BOT, GROUP, T0

from promptweave import ChatMessage, Config, Promptweave, Stores, Turn


@pytest.fixture
def runtime() -> Iterator[Promptweave]:
    runtime = Promptweave.from_config(Config(), stores=Stores.in_memory(), clock=lambda: T0)
    yield runtime
    runtime.close()


def _say(runtime: Promptweave, n: int, sender: str, name: str, text: str, **fields: object) -> None:
    message = ChatMessage(
        sender_id=sender,
        sender_name=name,
        text=text,
        time=T0 + dt.timedelta(seconds=10 * n),
        id=f"m{n}",
        **fields,  # type: ignore[arg-type]
    )
    runtime.recorder.record_message(BOT.id, GROUP, message)


def _prompt(runtime: Promptweave, sender: str, name: str, text: str) -> str:
    turn = Turn(
        bot=BOT,
        group_id=GROUP,
        message=ChatMessage(
            sender_id=sender,
            sender_name=name,
            text=text,
            time=T0 + dt.timedelta(hours=1),
            id="now",
            addressed=True,
        ),
    )
    return runtime.render(turn).system_prompt


def test_a_taught_name_goes_with_every_message_of_its_teacher_and_no_one_elses(
    runtime: Promptweave,
) -> None:
    _say(runtime, 1, "7", "阿蒙", "小织记住，我叫阿蒙不叫阿猛")
    runs = runtime.learning.run_all(T0 + dt.timedelta(minutes=5))
    assert any(run.learned.get("teaching") for run in runs)
    own = _prompt(runtime, "7", "阿蒙", "小织周末有什么安排呀，给点建议")
    assert "【用户明确教导】" in own and "阿蒙说：我叫阿蒙不叫阿猛" in own
    other = _prompt(runtime, "8", "小林", "小织周末有什么安排呀，给点建议")
    assert "【用户明确教导】" not in other and "阿蒙说：" not in other


def test_learned_pairs_reach_the_group_expression_section(runtime: Promptweave) -> None:
    lines = [("1", "北风", "今晚吃火锅吗"), ("2", "栗子", "冲冲冲")] * 3
    for n, (sender, name, text) in enumerate(lines, start=1):
        _say(runtime, n, sender, name, text)
    runtime.learning.run_all(T0 + dt.timedelta(minutes=5))
    learned = runtime.stores.learned
    assert learned is not None
    pairs = learned.items(BOT.id, GROUP, kind="expression_pair")
    assert [(p.fields["trigger"], p.fields["reply"], p.count) for p in pairs] == [
        ("今晚吃火锅吗", "冲冲冲", 3),
        ("冲冲冲", "今晚吃火锅吗", 2),
    ]
    prompt = _prompt(runtime, "3", "阿蒙", "小织，今晚吃火锅吗")
    assert "【群表达指导】" in prompt and "冲冲冲" in prompt
