"""Assembly cost of one turn: promptweave against the equivalent work in langchain-core.

The turn fills all fifteen built-in sections (about 200 characters each where the data allows),
carries 18 history messages and a current message, and stays under the 12000-character budget.

- promptweave, assembly (compared with LangChain): ``Promptweave.from_config(...)`` once
  (in-memory stores), the turn routed once with ``runtime.decide(turn)``, then per iteration
  ``runtime.render(turn, decision=decision, retrieve=False)``: reading the session stores,
  rendering the fifteen sections from the turn's data, overrides, sanitizing, the group timeline,
  the complete message sequence (prefix lines, injection check, history window), the budget and
  the trace.
- promptweave, whole turn (printed, not compared): ``runtime.render(turn)`` per iteration, that is
  the assembly plus routing (gates, reply necessity, decide rules) and the seven built-in
  retrievers.
- langchain-core: a ``ChatPromptTemplate`` (a system template with the fifteen section texts as
  variables, a ``MessagesPlaceholder("history")`` and the human message) built once, then per
  iteration ``format_messages(...)`` and ``trim_messages(..., max_tokens=12000, strategy="last",
  include_system=True)`` with a character-counting token counter. The section texts are given
  ready-made, the ones promptweave rendered.

Run: ``python benchmarks/bench_assembly.py [--iterations N] [--repeats N] [--warmup N]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from framework import (
    BehaviorStrategy,
    Bot,
    ChatMessage,
    Config,
    ExpressionPair,
    GroupExpression,
    HistoryEntry,
    KnowledgeItem,
    MemoryItem,
    PersonFact,
    Promptweave,
    RelationshipNote,
    ReplyShape,
    RhythmBaseline,
    SpeakTrigger,
    ToolContext,
    TopicSummary,
    Turn,
    TurnPolicy,
    TurnRetrieved,
)
from framework.config import StoreConfig

BUDGET_CHARS = 12000
TARGET_RATIO = 0.5
NOW = dt.datetime(2026, 11, 27, 21, 18, 40, tzinfo=dt.timezone(dt.timedelta(hours=8)))


def _at(minutes_before: int) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes_before)


RECENT = (
    ("30022", "阿蒙", "莫干山那条线我去年走过，从碧坞村上去大概三个小时"),
    ("30031", "北风", "三个小时还行，就怕下雨路滑"),
    ("30017", "青柠汽水", "周六天气预报是多云转晴，应该没事"),
    ("30045", "小满", "我能带两个朋友一起吗，她们也想去"),
    ("30022", "阿蒙", "可以啊，人多拼车更划算"),
    ("10002", "小纺", "记得带登山杖，下山那段台阶很陡"),
    ("30031", "北风", "集合时间定了没，早上七点会不会太早"),
    ("30017", "青柠汽水", "七点有点早，七点半在地铁站口吧"),
)

HISTORY = (
    (
        "user",
        "小织，我们这周六打算去莫干山徒步，群里好几个人报名了。你知道从杭州过去大概要多久吗？我们打算拼车，早上出发，晚上回来。",
    ),
    ("assistant", "开车的话一个半小时左右，早上出发正好，避开了返程高峰。拼车记得提前约好集合点。"),
    ("user", "好的。那山上有没有吃饭的地方？我怕走到一半饿了，又不想背太多东西，一背就累。"),
    ("assistant", "半山腰的村子里有农家乐，中午能吃上热饭。不过还是带点能量棒和水，以防万一。"),
    (
        "user",
        "能量棒我有，上次买多了。水大概带多少合适？一升够不够？北风说他每次都带两升，我觉得太重了。",
    ),
    (
        "assistant",
        "三个小时的路，一个人一升半比较稳，天热就两升。可以中途在村里补给，不用一次背满。",
    ),
    (
        "user",
        "那我带一升半。对了，小满说要带两个朋友，她们没怎么爬过山，会不会跟不上？我们要不要调整路线？",
    ),
    (
        "assistant",
        "碧坞村这条线坡度还算温和，新手慢慢走没问题。可以让她们走中间，队尾留个熟路的人。",
    ),
    (
        "user",
        "好主意，让阿蒙压队尾，他去年走过。还有，需要提前在哪里订票或者预约吗？听说景区现在要实名。",
    ),
    (
        "assistant",
        "徒步线不走核心景区的话一般不用门票，但停车场周末容易满，最好早点到，或者停在村口。",
    ),
    (
        "user",
        "那就早点出发。七点半在地铁站集合，你觉得时间来得及吗？中午想在山上吃饭，下午三点前下山。",
    ),
    ("assistant", "来得及：九点前到山脚，十二点前到村里吃饭，下午慢慢下山，三点前收队没什么压力。"),
    (
        "user",
        "太好了。我还在想要不要带相机，就是有点重，手机拍照也够了吧？群里有人说山顶日落特别好看。",
    ),
    (
        "assistant",
        "白天手机够用。要等日落的话就得在山上多待一会儿，那就和三点下山冲突了，得二选一。",
    ),
    (
        "user",
        "那还是算了，不等日落了，大家第二天还要上班。你帮我记一下：集合七点半，地铁站口，阿蒙压队尾。",
    ),
    ("assistant", "记下了：周六七点半地铁站口集合，阿蒙压队尾，中午村里吃饭，三点前下山。"),
    (
        "user",
        "谢谢小织！最后一个问题，山上信号怎么样？万一走散了能不能打电话，要不要准备对讲机之类的？",
    ),
    (
        "assistant",
        "主路上信号还行，有几段山谷会弱一点。建个群共享位置就好，约定走散了在最近的路口等。",
    ),
)

CURRENT = "@小织 刚看了下周六降温，最低只有 6 度，我们要不要把集合时间往后推一点？还有需要带什么保暖的东西吗"


def benchmark_turn() -> Turn:
    """One realistic group-chat turn that fills every built-in section."""
    recent = tuple(
        ChatMessage(
            id=str(9200 + number),
            sender_id=sender_id,
            sender_name=name,
            text=text,
            time=_at(12 - number),
        )
        for number, (sender_id, name, text) in enumerate(RECENT)
    )
    retrieved = TurnRetrieved(
        group_expression=GroupExpression(
            pairs=(
                ExpressionPair(
                    trigger="周六几点集合，早上会不会太早",
                    reply="七点半地铁站口，别迟到哈，迟到的请全车喝奶茶",
                    score=0.81,
                ),
                ExpressionPair(
                    trigger="爬山要带点什么",
                    reply="水、能量棒、外套，再加一双好走的鞋，够了",
                    score=0.66,
                ),
            ),
            baseline=RhythmBaseline(single_bubble_share=0.78, median_segment_chars=11),
        ),
        behavior_reference=(
            BehaviorStrategy(
                scene="群友问活动要不要改时间",
                action="先说自己的建议，再把决定交回给组织的人",
                outcome="大家很快达成一致",
                learning_type="self_reflection",
            ),
            BehaviorStrategy(
                scene="有人担心天气",
                action="给出具体温度和一两样要带的东西",
                outcome="对方说安心多了",
                learning_type="self_reflection",
            ),
            BehaviorStrategy(
                scene="群友让我帮忙记下安排",
                action="用一句话复述要点，不加多余的话",
                outcome="后来有人问起时直接转发了那句",
                learning_type="self_reflection",
            ),
        ),
        memory=(
            MemoryItem(kind="teaching", text="群友教过：山里比市区低五六度，早晚要加一件外套"),
            MemoryItem(kind="group_event", text="11 月 22 日群里定下周六去莫干山徒步，阿蒙带路"),
            MemoryItem(kind="ip_knowledge", text="莫干山碧坞村线全程约 9 公里，爬升约 500 米"),
            MemoryItem(kind="group_memory", text="小满上次爬山膝盖不舒服，下山走得慢"),
        ),
        knowledge=(
            KnowledgeItem(
                title="莫干山徒步路线说明",
                text="碧坞村线从村口停车场出发，经竹林古道到达山顶观景台，原路或经南路下山；"
                "竹林路段落叶多，雨后湿滑。",
                score=3.1,
            ),
            KnowledgeItem(
                title="徒步装备清单",
                text="秋冬季低海拔徒步：速干内层、抓绒或薄羽绒中层、防风外层；手套和帽子体积小，"
                "保暖效果明显；保温杯装热水比冷水更实用；出发前检查头灯电量，下山晚了也不慌。",
                score=2.7,
            ),
        ),
        relationship=RelationshipNote(
            facts=(
                "青柠汽水是这次徒步的发起人，负责统计人数和拼车",
                "她和小织聊过很多次出行安排，习惯把要点让小织帮忙记下",
                "上次安吉骑行改期后，她说以后出行都先问问小织天气",
            ),
            guidance=(
                "她喜欢先听结论，再看理由；回答时把建议排好先后",
                "她组织活动压力大，别拿迟到或掉队的事开她玩笑",
            ),
            affinity=0.71,
        ),
        person_facts=(
            PersonFact(text="怕冷，冬天出门习惯戴帽子和手套"),
            PersonFact(text="不喝咖啡，喜欢热柠檬茶"),
            PersonFact(text="周日一般要早起上班，不喜欢太晚回家"),
            PersonFact(text="膝盖不太好，下坡习惯用登山杖"),
            PersonFact(text="拍照喜欢用手机，不爱背相机"),
            PersonFact(text="有晕车的毛病，坐车喜欢靠窗，出发前不吃太油的早饭"),
        ),
        mid_term=(
            TopicSummary(
                text="上个月聊过去安吉骑行，当时因为降温改了期，大家说下次出行要提前看天气，"
                "最好提前三天定下来。"
            ),
            TopicSummary(text="之前讨论过拼车分摊：油费和过路费按人头平摊，司机不出钱。"),
            TopicSummary(text="九月去西湖夜骑时有人掉队，后来约定出行时队尾固定留一个熟路的人。"),
        ),
    )
    return Turn(
        bot=Bot(
            id="10001",
            name="小织",
            aliases=("织织", "小织子"),
            timezone="Asia/Shanghai",
            peer_bot_ids=("10002",),
        ),
        group_id="20001",
        trigger=SpeakTrigger.MENTION,
        message=ChatMessage(
            id="9210",
            sender_id="30017",
            sender_name="青柠汽水",
            text=CURRENT,
            raw=f"[CQ:at,qq=10001] {CURRENT.removeprefix('@小织 ')}",
            addressed=True,
            time=NOW,
        ),
        recent_messages=recent,
        history=tuple(HistoryEntry(role=role, content=content) for role, content in HISTORY),
        retrieved=retrieved,
        reply_shape=ReplyShape(
            max_bubbles=2, preferred_bubbles=2, min_chars=8, max_chars=40, band="complete"
        ),
        turn_policy=TurnPolicy(reply_target="answer", social_action="answer", needs_grounding=True),
        tool_context=ToolContext(
            background_events=(
                "天气查询：莫干山 11 月 28 日（周六）多云转晴，气温 6–14℃，早晨山谷有雾，"
                "东北风 3 级，降水概率 10%",
                "日历查询：11 月 28 日（周六）07:30「莫干山徒步集合 @ 地铁站 B 口」，"
                "创建人 青柠汽水",
            ),
            action_tools_enabled=True,
        ),
    )


def build_langchain_prompt(section_ids: Sequence[str]) -> ChatPromptTemplate:
    system = "\n\n".join(f"{{{section_id}}}" for section_id in section_ids)
    return ChatPromptTemplate.from_messages(
        [("system", system), MessagesPlaceholder("history"), ("human", "{current}")]
    )


def count_chars(messages: list[BaseMessage]) -> int:
    return sum(len(message.text) for message in messages)


def time_per_call_us(
    work: Callable[[], object], *, iterations: int, repeats: int, warmup: int
) -> float:
    """The median over ``repeats`` of the mean time of one call, in microseconds."""
    for _ in range(warmup):
        work()
    means = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            work()
        means.append((time.perf_counter_ns() - start) / iterations / 1000)
    return statistics.median(means)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the median is shown")
    parser.add_argument("--warmup", type=int, default=300, help="calls before measuring")
    args = parser.parse_args(argv)

    # Built-in plugins only: an installed third-party plugin must not change the figures.
    runtime = Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")),
        environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"},
        strict=True,
    )
    turn = benchmark_turn()
    decision = runtime.decide(turn)
    rendered = runtime.render(turn, decision=decision, retrieve=False)
    sections = [s for s in rendered.sections if s.status == "rendered"]
    if len(sections) != 15:
        missing = [s.id for s in rendered.sections if s.status != "rendered"]
        raise SystemExit(f"the benchmark turn must fill all fifteen sections; missing: {missing}")
    budget = rendered.trace["budget"]
    if budget["dropped_messages"] or budget["total"] > BUDGET_CHARS:
        raise SystemExit(f"the benchmark turn must fit the budget: {budget}")

    prompt = build_langchain_prompt([s.id for s in sections])
    variables: dict[str, Any] = {s.id: s.text for s in sections}
    variables["history"] = [
        ("human" if entry.role == "user" else "ai", entry.content) for entry in turn.history
    ]
    variables["current"] = turn.message.text

    def langchain_turn() -> list[BaseMessage]:
        return trim_messages(
            prompt.format_messages(**variables),
            max_tokens=BUDGET_CHARS,
            token_counter=count_chars,
            strategy="last",
            include_system=True,
        )

    kept = langchain_turn()
    if len(kept) != len(turn.history) + 2:
        raise SystemExit(f"langchain trimmed the turn: {len(kept)} messages kept")

    def promptweave_assembly() -> object:
        return runtime.render(turn, decision=decision, retrieve=False)

    def promptweave_turn() -> object:
        return runtime.render(turn)

    timing = {"iterations": args.iterations, "repeats": args.repeats, "warmup": args.warmup}
    assembly_us = time_per_call_us(promptweave_assembly, **timing)
    whole_us = time_per_call_us(promptweave_turn, **timing)
    langchain_us = time_per_call_us(langchain_turn, **timing)
    ratio = assembly_us / langchain_us

    sizes = ", ".join(f"{s.id} {s.chars}" for s in sections)
    print(f"turn: 15 sections ({sizes})")
    print(
        f"      system prompt {len(rendered.system_prompt)} chars, "
        f"{len(rendered.messages)} messages, {budget['total']} of {BUDGET_CHARS} chars"
    )
    print(
        f"timing: median of {args.repeats} repeats x {args.iterations} turns "
        f"after {args.warmup} warm-up turns (Python {sys.version.split()[0]})"
    )
    samples = [runtime.render(turn).stage_durations_ms for _ in range(args.iterations)]
    stages = ", ".join(
        f"{name} {statistics.median(sample[name] for sample in samples) * 1000:.0f}"
        for name in samples[0]
        if "." not in name
    )
    print(f"promptweave whole-turn stages (median us over {args.iterations} turns): {stages}")
    print(f"promptweave assembly   {assembly_us:10.1f} us/turn  (decision given, retrieve=False)")
    print(f"promptweave whole turn {whole_us:10.1f} us/turn  (routing and retrieval included)")
    print(f"langchain-core         {langchain_us:10.1f} us/turn")
    print(f"ratio (promptweave assembly / langchain) {ratio:.2f}")
    print(f"ratio (promptweave whole turn / langchain) {whole_us / langchain_us:.2f}")
    met = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(
        f"target: promptweave's assembly takes at most {TARGET_RATIO:.0%} of LangChain's time: {met}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
