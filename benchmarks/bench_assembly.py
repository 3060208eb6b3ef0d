"""Assembly cost of one turn: promptweave against the same work done with other tools.

A group conversation runs turn after turn, as a bot sees it: every turn has a new current message,
two new messages from other members, and the bot's reply to the turn before; the user's history
(18 messages) and the group's recent messages slide along. Every turn fills the fifteen built-in
sections (the same retrieved items, tool results, reply shape and policy each turn) and fits the
12000-character budget. The contenders (``contenders.py``) start from the same
:class:`promptweave.Turn` records:

- **promptweave**: ``runtime.render(turn, decision=decision, retrieve=False)`` with the built-in
  plugins on in-memory stores: sessions read, fifteen sections rendered, overrides consulted,
  blocks cleaned, the timeline, the message sequence, the budget (the trace is there to read).
- **langchain-core**: fifteen ``PromptTemplate``s, a ``ChatPromptTemplate`` with a
  ``MessagesPlaceholder``, ``trim_messages`` counting characters.
- **jinja2**: one template per section, with the sanitisers as filters.
- **llama-index-core**: fifteen ``PromptTemplate``s and a ``ChatPromptTemplate``.
- **plain python, same sanitising**: straight-line f-strings with promptweave's sanitisers and
  injection check: the floor for this work.
- **plain python, no sanitising**: the same, trusting its input.

Before timing, each contender renders every turn of the conversation and must produce
promptweave's system prompt and messages byte for byte. Then the contenders take turns on the
same turns in one process (each turn goes to every contender before the next, the order rotating),
and each figure is the median over the repeats of the median time per turn in the repeat (on a
quiet machine the mean is within 1% of it; on a loaded one the scheduler stops the process for
milliseconds in some turns, and those would decide a mean). The turn data is frozen out of the
garbage collector's reach (``gc.freeze``), since it is input, not work. The timed promptweave
runtime starts cold and sees each turn once, so whatever it reuses it reuses from earlier turns, as
a running bot would.

Run: ``python benchmarks/bench_assembly.py [--turns N] [--repeats N] [--warmup N] [--scaling]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contenders import (
    Assembled,
    Jinja2Assembly,
    LangChainAssembly,
    LlamaIndexAssembly,
    PlainAssembly,
)

from promptweave import (
    BehaviorStrategy,
    Bot,
    ChatMessage,
    Config,
    Decision,
    ExpressionPair,
    History,
    HistoryEntry,
    KnowledgeItem,
    MemoryItem,
    PersonFact,
    Promptweave,
    RelationshipNote,
    RenderContext,
    ReplyShape,
    RhythmBaseline,
    Section,
    TopicSummary,
    Turn,
    hookimpl,
)
from promptweave.config import BudgetConfig, HistoryConfig, PluginsConfig, StoreConfig
from promptweave.items import ToolContext, TurnPolicy
from promptweave.turn import GroupExpression, SpeakTrigger, TurnRetrieved

BUDGET_CHARS = 12000
HISTORY_TURNS = 18
RECENT_MESSAGES = 12
START = dt.datetime(2026, 11, 27, 21, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
BOT = Bot(
    id="10001",
    name="小织",
    aliases=("织织", "小织子"),
    timezone="Asia/Shanghai",
    peer_bot_ids=("10002",),
)
USER_ID, USER_NAME = "30017", "青柠汽水"

OTHERS = (
    ("30022", "阿蒙", "莫干山那条线我去年走过，从碧坞村上去大概三个小时"),
    ("30031", "北风", "三个小时还行，就怕下雨路滑"),
    ("30045", "小满", "我能带两个朋友一起吗，她们也想去"),
    ("30022", "阿蒙", "可以啊，人多拼车更划算"),
    ("10002", "小纺", "记得带登山杖，下山那段台阶很陡"),
    ("30031", "北风", "集合时间定了没，早上七点会不会太早"),
    ("30045", "小满", "我查了下缆车，单程四十，要不要坐"),
    ("30031", "", "坐缆车就不叫徒步了吧"),
)

USER_TEXTS = (
    "小织，我们这周六打算去莫干山徒步，群里好几个人报名了。你知道从杭州过去大概要多久吗？我们打算拼车，早上出发，晚上回来。",
    "好的。那山上有没有吃饭的地方？我怕走到一半饿了，又不想背太多东西，一背就累。",
    "能量棒我有，上次买多了。水大概带多少合适？一升够不够？北风说他每次都带两升，我觉得太重了。",
    "那我带一升半。对了，小满说要带两个朋友，她们没怎么爬过山，会不会跟不上？我们要不要调整路线？",
    "好主意，让阿蒙压队尾，他去年走过。还有，需要提前在哪里订票或者预约吗？听说景区现在要实名。",
    "那就早点出发。七点半在地铁站集合，你觉得时间来得及吗？中午想在山上吃饭，下午三点前下山。",
    "太好了。我还在想要不要带相机，就是有点重，手机拍照也够了吧？群里有人说山顶日落特别好看。",
    "那还是算了，不等日落了，大家第二天还要上班。你帮我记一下：集合七点半，地铁站口，阿蒙压队尾。",
    "谢谢小织！最后一个问题，山上信号怎么样？万一走散了能不能打电话，要不要准备对讲机之类的？",
    "@小织 刚看了下周六降温，最低只有 6 度，我们要不要把集合时间往后推一点？还有需要带什么保暖的东西吗",
)

BOT_TEXTS = (
    "开车的话一个半小时左右，早上出发正好，避开了返程高峰。拼车记得提前约好集合点。",
    "半山腰的村子里有农家乐，中午能吃上热饭。不过还是带点能量棒和水，以防万一。",
    "三个小时的路，一个人一升半比较稳，天热就两升。可以中途在村里补给，不用一次背满。",
    "碧坞村这条线坡度还算温和，新手慢慢走没问题。可以让她们走中间，队尾留个熟路的人。",
    "徒步线不走核心景区的话一般不用门票，但停车场周末容易满，最好早点到，或者停在村口。",
    "来得及：九点前到山脚，十二点前到村里吃饭，下午慢慢下山，三点前收队没什么压力。",
    "白天手机够用。要等日落的话就得在山上多待一会儿，那就和三点下山冲突了，得二选一。",
    "记下了：周六七点半地铁站口集合，阿蒙压队尾，中午村里吃饭，三点前下山。",
    "主路上信号还行，有几段山谷会弱一点。建个群共享位置就好，约定走散了在最近的路口等。",
)

RETRIEVED = TurnRetrieved(
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

TOOLS = ToolContext(
    background_events=(
        "天气查询：莫干山 11 月 28 日（周六）多云转晴，气温 6–14℃，早晨山谷有雾，"
        "东北风 3 级，降水概率 10%",
        "日历查询：11 月 28 日（周六）07:30「莫干山徒步集合 @ 地铁站 B 口」，创建人 青柠汽水",
    ),
    action_tools_enabled=True,
)


POLICIES = (
    TurnPolicy(reply_target="answer", social_action="answer", needs_grounding=True),
    TurnPolicy(reply_target="fact", seriousness="serious", social_action="stance"),
    TurnPolicy(reply_target="emotion", social_action="affection", allow_teasing=False),
    TurnPolicy(reply_target="short_tease", social_action="joke"),
)
SHAPES = (
    ReplyShape(max_bubbles=2, preferred_bubbles=2, min_chars=8, max_chars=40, band="complete"),
    ReplyShape(max_bubbles=1, preferred_bubbles=1, min_chars=4, max_chars=24, band="short"),
    ReplyShape(max_bubbles=3, preferred_bubbles=2, min_chars=12, max_chars=60, band="task"),
)


def _rotated(items: tuple[Any, ...], number: int, keep: int) -> tuple[Any, ...]:
    start = number % len(items)
    return (items[start:] + items[:start])[:keep]


def fresh_retrieval(number: int) -> TurnRetrieved:
    """What a running bot recalls for message ``number``: the items of :data:`RETRIEVED`, a
    different selection and order each turn and each text marked with the turn, so no section
    that reads retrieval is the same as on the turn before (as when memories, knowledge,
    expression pairs and strategies are recalled per message)."""
    tag = f"（第 {number} 轮）"
    expression = RETRIEVED.group_expression
    pairs = tuple(
        attrs.evolve(pair, reply=pair.reply + tag, score=round(0.5 + (number % 40) / 100, 2))
        for pair in _rotated(expression.pairs, number, 2)
    )
    relationship = RETRIEVED.relationship
    return TurnRetrieved(
        group_expression=GroupExpression(
            pairs=pairs,
            baseline=RhythmBaseline(
                single_bubble_share=round(0.6 + (number % 30) / 100, 2),
                median_segment_chars=9 + number % 5,
            ),
        ),
        behavior_reference=tuple(
            attrs.evolve(item, outcome=item.outcome + tag)
            for item in _rotated(RETRIEVED.behavior_reference, number, 2 + number % 2)
        ),
        memory=tuple(
            attrs.evolve(item, text=item.text + tag)
            for item in _rotated(RETRIEVED.memory, number, 3 + number % 2)
        ),
        knowledge=tuple(
            attrs.evolve(item, text=item.text + tag, score=round(2.0 + (number % 17) / 10, 1))
            for item in _rotated(RETRIEVED.knowledge, number, 1 + number % 2)
        ),
        relationship=RelationshipNote(
            facts=tuple(fact + tag for fact in _rotated(relationship.facts, number, 2)),
            guidance=_rotated(relationship.guidance, number, 2),
            affinity=round(0.5 + (number % 45) / 100, 2),
        ),
        person_facts=tuple(
            attrs.evolve(fact, text=fact.text + tag)
            for fact in _rotated(RETRIEVED.person_facts, number, 4 + number % 3)
        ),
        mid_term=tuple(
            attrs.evolve(item, text=item.text + tag)
            for item in _rotated(RETRIEVED.mid_term, number, 2 + number % 2)
        ),
    )


def fresh_tools(number: int) -> ToolContext:
    """Tool results that change every turn, as a weather or calendar lookup's do."""
    return ToolContext(
        background_events=tuple(
            f"{event}（查询于第 {number} 轮）"
            for event in _rotated(TOOLS.background_events, number, 1 + number % 2)
        ),
        action_tools_enabled=number % 3 != 2,
    )


def conversation(
    turns: int,
    *,
    history_turns: int = HISTORY_TURNS,
    recent: int = RECENT_MESSAGES,
    grown: bool = False,
    fresh: bool = False,
) -> list[Turn]:
    """``turns`` consecutive turns of one group conversation; each message is new when it first
    appears (its number makes it unique) and then slides through the history and the timeline.
    Each turn's history is a new tuple of the newest entries, or with ``grown`` the last turn's
    :class:`promptweave.History` appended to (the same entries either way).

    Without ``fresh`` every turn carries the same retrieval, tool context, reply shape and policy
    objects (the cache-hit workload: a section that declares what it reads is reused from the turn
    before); with it each turn's are new and differ, as a running bot's do."""
    group: list[ChatMessage] = []
    exchange: list[HistoryEntry] = []
    log = History()
    built = []
    lead = max(history_turns // 2, recent // 4) + 1
    for number in range(turns + lead):
        at = START + dt.timedelta(seconds=40 * number)
        for offset in range(2):
            sender_id, name, text = OTHERS[(2 * number + offset) % len(OTHERS)]
            group.append(
                ChatMessage(
                    id=f"g{number}-{offset}",
                    sender_id=sender_id,
                    sender_name=name,
                    text=f"{text}（{number}）",
                    time=at - dt.timedelta(seconds=20 - 5 * offset),
                    reply_to=group[-3].id if offset and len(group) > 3 else None,
                )
            )
        asked = f"{USER_TEXTS[number % len(USER_TEXTS)]}（{number}）"
        message = ChatMessage(
            id=f"u{number}",
            sender_id=USER_ID,
            sender_name=USER_NAME,
            text=asked,
            raw=asked,
            addressed=True,
            time=at,
        )
        if number >= lead:
            built.append(
                Turn(
                    bot=BOT,
                    group_id="20001",
                    trigger=SpeakTrigger.MENTION,
                    message=message,
                    recent_messages=tuple(group[-recent:]),
                    history=log if grown else tuple(exchange[-history_turns:]),
                    retrieved=fresh_retrieval(number) if fresh else RETRIEVED,
                    reply_shape=SHAPES[number % len(SHAPES)] if fresh else SHAPES[0],
                    turn_policy=POLICIES[number % len(POLICIES)] if fresh else POLICIES[0],
                    tool_context=fresh_tools(number) if fresh else TOOLS,
                )
            )
        answer = f"{BOT_TEXTS[number % len(BOT_TEXTS)]}（{number}）"
        group.append(message)
        group.append(
            ChatMessage(
                id=f"b{number}",
                sender_id=BOT.id,
                sender_name=BOT.name,
                text=answer,
                time=at + dt.timedelta(seconds=8),
            )
        )
        added = (
            HistoryEntry(role="user", content=asked),
            HistoryEntry(role="assistant", content=answer),
        )
        exchange += added
        log = log.appended(*added, keep=history_turns)
    return built


def make_runtime(config: Config | None = None, extra: Sequence[object] = ()) -> Promptweave:
    """Built-in plugins only (an installed plugin must not change the figures), memory stores.

    The wording hints are off: they notice that the workload's replies all end alike (with their
    number) and add a message no contender writes."""
    return Promptweave.from_config(
        config or Config(store=StoreConfig(backend="memory")),
        environ={
            "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PROMPTWEAVE_DISABLE_PLUGINS": "wording_hints",
        },
        extra_plugins=extra,
        strict=True,
    )


def promptweave_contender(runtime: Promptweave, decision: Decision) -> Callable[[Turn], Assembled]:
    def assemble(turn: Turn) -> Assembled:
        rendered = runtime.render(turn, decision=decision, retrieve=False)
        return rendered.system_prompt, [(m.role, m.content) for m in rendered.messages]

    return assemble


def check_workload(runtime: Promptweave, turn: Turn, decision: Decision) -> None:
    """Refuse to run unless the turn fills all fifteen sections and fits the budget whole."""
    rendered = runtime.render(turn, decision=decision, retrieve=False)
    missing = [s.id for s in rendered.sections if s.status != "rendered"]
    if missing:
        raise SystemExit(f"every turn must fill all fifteen sections; missing: {missing}")
    budget = rendered.trace["budget"]
    if budget["dropped_messages"] or budget["total"] > BUDGET_CHARS:
        raise SystemExit(f"every turn must fit the budget: {budget}")


def verify(
    name: str, assemble: Callable[[Turn], Assembled], turns: Sequence[Turn], expected: list[Any]
) -> None:
    for number, (turn, wanted) in enumerate(zip(turns, expected, strict=True)):
        found = assemble(turn)
        if found != wanted:
            system, messages = found
            detail = (
                "system prompt"
                if system != wanted[0]
                else f"messages ({len(messages)} against {len(wanted[1])})"
            )
            diff = _first_difference(found, wanted)
            raise SystemExit(f"{name} differs from promptweave on turn {number}: {detail}\n{diff}")


def _first_difference(found: Assembled, wanted: Assembled) -> str:
    left = repr(found)
    right = repr(wanted)
    at = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), 0)
    return f"  got:      …{left[max(0, at - 80) : at + 80]}…\n  expected: …{right[max(0, at - 80) : at + 80]}…"


def typical(samples: list[int]) -> float:
    """The median of ``samples`` (nanoseconds), in microseconds. On a quiet machine it is within
    1% of the mean; on a loaded one the scheduler stops the process for milliseconds in the middle
    of some turns, and those turns would otherwise decide the figure."""
    return statistics.median(samples) / 1000


def interleaved(
    contenders: dict[str, Callable[[Turn], object]],
    batches: Sequence[Sequence[Turn]],
) -> dict[str, list[float]]:
    """Per contender, the median microseconds per turn of each batch.

    Every turn of a batch goes to every contender before the next turn, the order rotating from
    turn to turn, so a change of load on the machine falls on all of them alike.
    """
    names = list(contenders)
    works = [contenders[name] for name in names]
    clock = time.perf_counter_ns
    found: dict[str, list[float]] = {name: [] for name in names}
    for batch in batches:
        spent: list[list[int]] = [[] for _ in names]
        gc.collect()
        for number, turn in enumerate(batch):
            shift = number % len(names)
            for index in (*range(shift, len(names)), *range(shift)):
                start = clock()
                works[index](turn)
                spent[index].append(clock() - start)
        for name, samples in zip(names, spent, strict=True):
            found[name].append(typical(samples))
    return found


def timed(work: Callable[[Turn], object], turns: Sequence[Turn], repeats: int) -> float:
    """The median over ``repeats`` equal slices of ``turns`` of the median microseconds per
    turn."""
    size = len(turns) // repeats
    clock = time.perf_counter_ns
    means = []
    for number in range(repeats):
        batch = turns[number * size : (number + 1) * size]
        gc.collect()
        samples = []
        for turn in batch:
            start = clock()
            work(turn)
            samples.append(clock() - start)
        means.append(typical(samples))
    return statistics.median(means)


def alternated(
    works: Sequence[tuple[Callable[[Turn], object], Sequence[Turn]]], repeats: int
) -> list[float]:
    """Like :func:`timed` for each ``(work, turns)``, the repeats taken in turn (the first work's
    first slice, the second's, …, the order rotating), so a change of load on the machine falls
    on all of them alike."""
    clock = time.perf_counter_ns
    found: list[list[float]] = [[] for _ in works]
    for number in range(repeats):
        for index in (*range(number % len(works), len(works)), *range(number % len(works))):
            work, turns = works[index]
            size = len(turns) // repeats
            gc.collect()
            samples = []
            for turn in turns[number * size : (number + 1) * size]:
                start = clock()
                work(turn)
                samples.append(clock() - start)
            found[index].append(typical(samples))
    return [statistics.median(medians) for medians in found]


class ExtraSections:
    """``count`` more turn sections, each a short line from the turn (the sections scaling)."""

    def __init__(self, count: int) -> None:
        self.count = count

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        previous = "tool_context"
        for number in range(self.count):
            section_id = f"extra_{number}"
            register(
                Section(
                    id=section_id,
                    title=f"【附加 {number}】",
                    render=_extra_render(number),
                    after=previous,
                    volatility="turn",
                )
            )
            previous = section_id


def _extra_render(number: int) -> Callable[[RenderContext], str]:
    def render(context: RenderContext) -> str:
        return f"【附加 {number}】\n- 第 {number} 条附加说明，本轮消息 {context.turn.message.id}。"

    return render


def scaling(args: argparse.Namespace, decision_of: Callable[[Promptweave, Turn], Decision]) -> None:
    """The tables of benchmarks/README.md: cost per turn against history length, recent messages,
    what the budget drops, and the number of sections."""
    count = args.repeats * args.scaling_turns

    def figure(turns: list[Turn], runtime: Promptweave) -> float:
        decision = decision_of(runtime, turns[0])
        work = promptweave_contender(runtime, decision)
        for turn in turns[: args.scaling_turns]:
            work(turn)
        return timed(work, turns[args.scaling_turns :], args.repeats)

    def warmed(turns: list[Turn]) -> tuple[Callable[[Turn], object], Sequence[Turn]]:
        runtime = make_runtime()
        work = promptweave_contender(runtime, decision_of(runtime, turns[0]))
        for turn in turns[: args.scaling_turns]:
            work(turn)
        return work, turns[args.scaling_turns :]

    # The same entries handed over two ways, their repeats alternated: a new tuple each turn,
    # compared with the last turn's beyond the window, and a History appended to, known to be the
    # last one moved on.
    print("\nhistory carried by the turn (window 18)      us/turn: tuple, History")
    for length in (18, 100, 1000, 10000):
        plain = conversation(count + args.scaling_turns, history_turns=length)
        grown = conversation(count + args.scaling_turns, history_turns=length, grown=True)
        tuples, appended = alternated([warmed(plain), warmed(grown)], args.repeats)
        print(f"  {length:>6} history messages                {tuples:8.1f} {appended:8.1f}")
    print("\nrecent group messages carried (timeline 8)    us/turn")
    for length in (12, 100, 1000):
        turns = conversation(count + args.scaling_turns, recent=length)
        print(f"  {length:>6} recent messages                 {figure(turns, make_runtime()):8.1f}")
    print("\nhistory window the budget drops from          us/turn")
    for window, budget in ((18, BUDGET_CHARS), (18, 3600), (100, 3600), (1000, 3600)):
        config = Config(
            store=StoreConfig(backend="memory"),
            history=HistoryConfig(user_window=window),
            budget=BudgetConfig(chars=budget),
        )
        turns = conversation(count + args.scaling_turns, history_turns=max(window, 18))
        runtime = make_runtime(config)
        kept = len(runtime.render(turns[-1], decision=decision_of(runtime, turns[-1])).messages)
        print(
            f"  window {window:>4}, budget {budget:>5} ({kept:>2} messages kept)"
            f"   {figure(turns, make_runtime(config)):8.1f}"
        )
    # The extra sections come from a plugin not shipped with promptweave: with a turn deadline
    # (the default), the watchdog hands each of its calls to a worker thread; without one, the
    # figure is the assembly's own.
    print("\nsections (extra plugin; deadline on / off)    us/turn")
    turns = conversation(count + args.scaling_turns)
    unbounded = Config(
        store=StoreConfig(backend="memory"), plugins=PluginsConfig(turn_deadline_s=0)
    )
    for extra in (0, 15, 45):
        plugins = (ExtraSections(extra),) if extra else ()
        bounded = figure(turns, make_runtime(extra=plugins))
        free = figure(turns, make_runtime(unbounded, extra=plugins))
        print(f"  {15 + extra:>6} sections                        {bounded:8.1f} {free:8.1f}")


class _CollectorClock:
    """The garbage collector's time, read from ``gc.callbacks`` while installed."""

    def __init__(self) -> None:
        self.spent = 0
        self.collections = [0, 0, 0]
        self._start = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.spent += time.perf_counter_ns() - self._start
            self.collections[info["generation"]] += 1


def placement(args: argparse.Namespace, workload: str) -> None:
    """Where the gap between promptweave's time and its instructions comes from: promptweave and
    the plain contender each timed alone and with every other contender run between two of its
    turns, the placements taken in turn in one process (two promptweave runtimes, each seeing
    every turn once), with the garbage collector's share of each."""
    turns = conversation(args.warmup + args.repeats * args.turns, fresh=workload == "fresh")
    reference = make_runtime()
    decision = reference.decide(turns[0])
    persona, config = reference.persona, reference.config
    others: dict[str, Any] = {
        "langchain-core": LangChainAssembly(persona, config),
        "jinja2": Jinja2Assembly(persona, config),
        "llama-index-core": LlamaIndexAssembly(persona, config),
        "plain python, same sanitising": PlainAssembly(persona, config),
        "plain python, no sanitising": PlainAssembly(persona, config, sanitise=False),
    }
    plain = others["plain python, same sanitising"]
    runtimes = {"alone": make_runtime(), "interleaved": make_runtime()}
    works = {
        place: promptweave_contender(runtime, runtime.decide(turns[0]))
        for place, runtime in runtimes.items()
    }
    neighbours = [
        lambda turn, c=contender: c.assemble(turn, decision) for contender in others.values()
    ]
    gc.freeze()
    for turn in turns[: args.warmup]:
        for work in (*works.values(), *neighbours):
            work(turn)
    clock = time.perf_counter_ns
    collector = _CollectorClock()
    gc.callbacks.append(collector)
    figures: dict[str, list[float]] = {}
    collected: dict[str, list[float]] = {}
    try:
        for number in range(args.repeats):
            batch = turns[
                args.warmup + number * args.turns : args.warmup + (number + 1) * args.turns
            ]
            for name, work, between in (
                ("promptweave alone", works["alone"], ()),
                ("promptweave interleaved", works["interleaved"], neighbours),
                ("plain alone", lambda turn: plain.assemble(turn, decision), ()),
                ("plain interleaved", lambda turn: plain.assemble(turn, decision), neighbours),
            ):
                gc.collect()
                samples = []
                spent = collector.spent
                for turn in batch:
                    for neighbour in between:
                        neighbour(turn)
                    start = clock()
                    work(turn)
                    samples.append(clock() - start)
                figures.setdefault(name, []).append(typical(samples))
                collected.setdefault(name, []).append((collector.spent - spent) / len(batch) / 1000)
    finally:
        gc.callbacks.remove(collector)
        gc.unfreeze()
    print(f"\n== placement, workload {workload}: median us/turn (the collector's mean us/turn) ==")
    for name, found in figures.items():
        print(
            f"{name:<32} {statistics.median(found):8.1f} us/turn"
            f"  (collector {statistics.median(collected[name]):5.1f})"
        )
    for place in ("alone", "interleaved"):
        ratio = statistics.median(figures[f"promptweave {place}"]) / statistics.median(
            figures[f"plain {place}"]
        )
        print(
            f"[{workload}] {place}: promptweave / plain python with the same sanitising {ratio:.2f}"
        )


WORKLOADS = {
    "cache-hit": "the same retrieval, tool context, reply shape and policy objects every turn",
    "fresh": "retrieval, tool context, reply shape and policy new and different every turn",
}


def measure(
    args: argparse.Namespace, workload: str
) -> tuple[dict[str, float], dict[str, list[float]], list[Turn], Promptweave, Decision]:
    """One workload: every contender checked against promptweave on every turn, then timed
    interleaved; the medians per contender and the repeats' figures."""
    turns = conversation(args.warmup + args.repeats * args.turns, fresh=workload == "fresh")
    reference = make_runtime()
    decision = reference.decide(turns[0])
    check_workload(reference, turns[0], decision)
    check_workload(reference, turns[-1], decision)
    expected = [promptweave_contender(reference, decision)(turn) for turn in turns]

    persona, config = reference.persona, reference.config
    others: dict[str, Any] = {
        "langchain-core": LangChainAssembly(persona, config),
        "jinja2": Jinja2Assembly(persona, config),
        "llama-index-core": LlamaIndexAssembly(persona, config),
        "plain python, same sanitising": PlainAssembly(persona, config),
        "plain python, no sanitising": PlainAssembly(persona, config, sanitise=False),
    }
    contenders: dict[str, Callable[[Turn], object]] = {}
    for name, contender in others.items():

        def assemble(turn: Turn, contender: Any = contender) -> Assembled:
            return contender.assemble(turn, decision)  # type: ignore[no-any-return]

        verify(name, assemble, turns, expected)
        contenders[name] = assemble

    gc.freeze()
    timed_runtime = make_runtime()
    timed_decision = timed_runtime.decide(turns[0])
    promptweave = promptweave_contender(timed_runtime, timed_decision)
    contenders = {"promptweave": promptweave, **contenders}
    for turn in turns[: args.warmup]:
        for work in contenders.values():
            work(turn)
    batches = [
        turns[args.warmup + n * args.turns : args.warmup + (n + 1) * args.turns]
        for n in range(args.repeats)
    ]
    results = interleaved(contenders, batches)
    verify("promptweave (timed runtime, warm)", promptweave, turns, expected)
    gc.unfreeze()
    medians = {name: statistics.median(found) for name, found in results.items()}
    return medians, results, turns, reference, decision


def print_workload(
    args: argparse.Namespace,
    workload: str,
    medians: dict[str, float],
    results: dict[str, list[float]],
    turns: list[Turn],
    reference: Promptweave,
    decision: Decision,
) -> None:
    rendered = reference.render(turns[-1], decision=decision, retrieve=False)
    sizes = ", ".join(f"{s.id} {s.chars}" for s in rendered.sections)
    budget = rendered.trace["budget"]
    print(f"\n== workload {workload}: {WORKLOADS[workload]} ==")
    print(f"turn: 15 sections ({sizes})")
    print(
        f"      system prompt {len(rendered.system_prompt)} chars, {len(rendered.messages)} "
        f"messages, {budget['total']} of {BUDGET_CHARS} chars"
    )
    print(
        f"timing: {args.repeats} repeats x {args.turns} turns of one conversation after "
        f"{args.warmup} warm-up turns, contenders interleaved; median of the repeats "
        f"(Python {sys.version.split()[0]})"
    )
    print("every contender produced promptweave's system prompt and messages byte for byte")
    for name, figure in medians.items():
        spread = f"{min(results[name]):.1f}-{max(results[name]):.1f}"
        print(f"{name:<32} {figure:8.1f} us/turn  (repeats {spread})")


def print_ratios(workload: str, medians: dict[str, float]) -> None:
    own = medians["promptweave"]
    label = f"[{workload}] "
    print(
        f"{label}ratio (promptweave assembly / langchain equivalent) "
        f"{own / medians['langchain-core']:.2f}"
    )
    print(f"{label}ratio (promptweave assembly / jinja2) {own / medians['jinja2']:.2f}")
    print(
        f"{label}ratio (promptweave assembly / plain python with the same sanitising) "
        f"{own / medians['plain python, same sanitising']:.2f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per repeat")
    parser.add_argument("--repeats", type=int, default=9, help="repeats; the median is shown")
    parser.add_argument("--warmup", type=int, default=100, help="turns before measuring")
    parser.add_argument(
        "--workload",
        choices=(*WORKLOADS, "both"),
        default="both",
        help="cache-hit (the same retrieved objects every turn), fresh (new each turn), or both",
    )
    parser.add_argument(
        "--scaling", action="store_true", help="also print the scaling tables of the README"
    )
    parser.add_argument("--scaling-turns", type=int, default=100, help="turns per scaling repeat")
    parser.add_argument(
        "--placement",
        action="store_true",
        help="only time promptweave and the plain contender alone and interleaved (README)",
    )
    args = parser.parse_args(argv)

    workloads = list(WORKLOADS) if args.workload == "both" else [args.workload]
    if args.placement:
        for workload in workloads:
            placement(args, workload)
        return 0
    measured = {workload: measure(args, workload) for workload in workloads}
    for workload, (medians, results, turns, reference, decision) in measured.items():
        print_workload(args, workload, medians, results, turns, reference, decision)

    turns = conversation(args.warmup + args.repeats * args.turns)
    whole_runtime = make_runtime()
    durations: list[dict[str, float]] = []

    def whole_turn(turn: Turn) -> None:
        durations.append(dict(whole_runtime.render(turn).stage_durations_ms))

    for turn in turns[: args.warmup]:
        whole_turn(turn)
    whole = timed(whole_turn, turns[args.warmup :], args.repeats)
    stages = {
        name: statistics.median(sample.get(name, 0.0) for sample in durations) * 1000
        for name in durations[0]
        if "." not in name
    }
    print(
        f"\npromptweave whole turn in memory {whole:8.1f} us/turn  (routing and the built-in "
        "retrievers included; stage medians: "
        + ", ".join(f"{name} {value:.0f}" for name, value in stages.items())
        + ")"
    )
    if args.scaling:

        def decision_of(runtime: Promptweave, turn: Turn) -> Decision:
            return runtime.decide(turn)

        scaling(args, decision_of)
    for workload, (medians, *_rest) in measured.items():
        print_ratios(workload, medians)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
