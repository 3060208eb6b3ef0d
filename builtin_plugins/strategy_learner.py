"""Built-in plugin ``strategy_learner``: the model learner ``strategies``, how members take up
each other's lines and how they took up the bot's (``docs/learning.md``, behaviour strategies).

From each batch it collects exchanges of two learning types:

- ``observed``: a member's line answered by another member: quoted, or the very next message
  within ``adjacent_window_s`` with nothing between. These are exactly the pairs of the rule
  learner ``expression_pairs`` (:func:`promptweave.builtin_plugins.learners
  .learn_expression_pairs`, run here over the same batch with its own state), so the bot's own
  and peer bots' lines, and a member's line answering the bot, are never an observed pair.
- ``self_reflection``: the bot's own message (``LearnerBatch.bot_id``) and a member's reaction
  to it: a quote of it, or the next message within ``reaction_window_s``; with the member's line
  the bot answered when it is known. These are the rule learner ``pickups``'s pick-ups
  (:func:`promptweave.builtin_plugins.learners.learn_pickups`).

At most :data:`EXCHANGES_PER_TYPE` of each type (the newest; fewer with ``max_exchanges``) go to
the learning model in one
task ``strategies`` (prompt: the persona pack's ``[learning_prompts.strategies]``), with the
scenes and actions already learned (:data:`KNOWN_SENT`). The answer is a list of strategies
(:class:`StrategiesAnswer`): a scene (「对方分享进展时」), the action (how the reply was made) and
its outcome. An answer with a link, an offensive word or injection-like text is dropped; one that
says nearly what a stored strategy of its learning type says, or another answer of the run, is
merged into it (the same key, so its count, the strategy's support, grows).

The offline learning model answers with :func:`offline_strategies`: rules over the exchanges'
text (what kind of line was answered, the reply's shape, what came after), a rule-based stand-in
for a model, documented as such.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave import hookimpl
from promptweave._patterns import lazy_pattern
from promptweave.builtin_plugins.learners import (
    ADJACENT_WINDOW_S,
    PICKUP_REACTION_WINDOW_S,
    _find,
    _integer,
    _item,
    _number,
    _words,
    learn_expression_pairs,
    learn_pickups,
)
from promptweave.builtin_plugins.learning_rules import (
    NEGATIVE_WORDS,
    OFFENSIVE_WORDS,
    clean_text,
    is_question,
)
from promptweave.builtin_plugins.model_tasks import LINE_CHARS, default_pack, line_of, model_task
from promptweave.learning.model import answer_schema
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem, LoggedMessage, item_key
from promptweave.text.routing_words import has_url
from promptweave.text.rules import InjectionDetector
from promptweave.turn import ChatMessage

__all__ = [
    "ACTION_CHARS",
    "ANSWER_TOKENS",
    "EXCHANGES_PER_TYPE",
    "INTERVAL_S",
    "KNOWN_SENT",
    "LEARNING_TYPES",
    "MAX_ANSWERS",
    "MIN_BATCH",
    "OUTCOME_CHARS",
    "SCENE_CHARS",
    "SCHEMA",
    "SIMILAR_OVERLAP",
    "STRATEGY_CAP",
    "StrategiesAnswer",
    "StrategyAnswer",
    "learn_strategies",
    "offline_strategies",
    "similar_strategy",
    "strategy_key",
]

#: The learning types of a strategy: between members, and the bot's own pick-ups.
LEARNING_TYPES: tuple[str, ...] = ("observed", "self_reflection")
#: The most exchanges of each learning type one run sends (the newest).
EXCHANGES_PER_TYPE = 12
#: The most strategies one answer may hold.
MAX_ANSWERS = 2 * EXCHANGES_PER_TYPE
#: The longest scene, action and outcome of an answer (the section's quoting limits).
SCENE_CHARS = 80
ACTION_CHARS = 120
OUTCOME_CHARS = 80
#: The most stored strategies sent as ``known`` (most supported first).
KNOWN_SENT = 20
#: The most strategies kept per group.
STRATEGY_CAP = 200
#: The default ``min_batch`` and ``interval_s``: a model call per 40 new messages, or half an
#: hour after new ones started waiting (a strategy is learned from many exchanges: asking less
#: often costs less and learns the same).
MIN_BATCH = 40
INTERVAL_S = 1800.0
#: Two strategies of one learning type are the same when both their scenes and their actions
#: share at least this share of character bigrams (Jaccard), or their normalized texts are equal.
SIMILAR_OVERLAP = 0.5
#: The answer's token limit by default (24 strategies of about 60 tokens each);
#: ``[learning.learners.strategies] max_tokens`` sets another.
ANSWER_TOKENS = 1600
#: The task's name: its ``[learning_prompts.NAME]`` and the schema's name on the wire.
TASK = "strategies"


# -- the answer --------------------------------------------------------------------------------


def _non_blank(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be blank")


def _at_most(limit: int) -> Callable[[Any, attrs.Attribute[Any], str], None]:
    def check(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if len(value) > limit:
            raise ValueError(f"{attribute.name} has {len(value)} characters, more than {limit}")

    return check


@attrs.frozen(kw_only=True)
class StrategyAnswer:
    """One strategy of the answer: in a scene like ``scene``, someone did ``action``, and
    ``outcome`` followed (``""`` when it cannot be told)."""

    learning_type: str = attrs.field(validator=attrs.validators.in_(LEARNING_TYPES))
    scene: str = attrs.field(validator=[_non_blank, _at_most(SCENE_CHARS)])
    action: str = attrs.field(validator=[_non_blank, _at_most(ACTION_CHARS)])
    outcome: str = attrs.field(validator=_at_most(OUTCOME_CHARS))


@attrs.frozen(kw_only=True)
class StrategiesAnswer:
    """The answer of task ``strategies``: at most :data:`MAX_ANSWERS` strategies."""

    strategies: tuple[StrategyAnswer, ...] = attrs.field(
        validator=attrs.validators.max_len(MAX_ANSWERS)
    )


#: The answer's JSON schema (strict mode: every property required, nothing else). The lengths
#: are told in the prompt and checked by the record's validators.
SCHEMA = answer_schema(
    {
        "strategies": {
            "type": "array",
            "maxItems": MAX_ANSWERS,
            "items": answer_schema(
                {
                    "learning_type": {"type": "string", "enum": list(LEARNING_TYPES)},
                    "scene": {"type": "string"},
                    "action": {"type": "string"},
                    "outcome": {"type": "string"},
                }
            ),
        }
    }
)


# -- the offline rule --------------------------------------------------------------------------

_MARK = lazy_pattern(r"\[[^\[\]\s]{1,6}\]")
_INVITE = ("要不要", "一起", "几点", "约吗", "走起", "去不去", "来不来", "组队", "开黑", "有空吗")
_GREETING = ("早上好", "早安", "晚安", "午安", "在吗", "哈喽", "你好", "大家好", "hello", "hi~")
_GREETING_LINES = frozenset({"早", "早啊", "hi", "hello", "嗨", "晚上好", "中午好"})
_EMOTION = (
    "累", "烦", "难绷", "崩溃", "无语", "气死", "郁闷", "难受", "emo", "救命", "好惨", "哭",
    "头疼", "麻了", "心累", "破防", "焦虑", "困死",
)  # fmt: skip
_LAUGHTER = ("哈哈", "笑死", "hhh", "233", "绷不住", "乐死", "xswl", "好好笑")
_NEWS = (
    "刚", "终于", "搞定", "做完", "写完", "到了", "买了", "我今天", "分享", "发现", "居然",
    "听说", "新闻", "刚刚", "出炉", "上线", "换地方",
)  # fmt: skip
#: Words that make a line a question even without ？ or a final 吗 (``learning_rules.is_question``).
_QUESTION_WORDS = (
    "怎么", "为什么", "为啥", "咋", "啥时候", "多少", "几个", "哪里", "哪儿", "有没有", "是不是",
    "要不", "能不能", "谁",
)  # fmt: skip
_AGREE_START = (
    "确实",
    "对",
    "是的",
    "是啊",
    "没错",
    "同意",
    "+1",
    "有道理",
    "可不",
    "就是",
    "嗯嗯",
)
_AGREE = ("确实", "没错", "有道理", "+1", "同意", "说得对")
_TEASE = (
    "哈哈",
    "笑死",
    "就你",
    "你这",
    "离谱",
    "绝了",
    "狗头",
    "doge",
    "好家伙",
    "又来",
    "原来是你",
)
_REACTION_NEGATIVE = (*NEGATIVE_WORDS, "无聊", "没意思", "不对", "错了", "啊这", "尴尬", "听不懂")
_REACTION_POSITIVE = (
    *_LAUGHTER, "确实", "是的", "没错", "有道理", "+1", "好嘞", "好呀", "好的", "可以", "对对",
    "懂了", "谢谢", "哈",
)  # fmt: skip
#: A reply this short (cleaned) is a short one.
SHORT_CHARS = 15


def _has(text: str, words: Iterable[str]) -> bool:
    folded = text.casefold()
    return any(word.casefold() in folded for word in words)


def _has_sticker(text: str) -> bool:
    """A face or sticker mark (``[表情]``, ``[doge]``), or an emoji character."""
    return bool(_MARK.search(text)) or any(unicodedata.category(char) == "So" for char in text)


def _scene(text: str) -> str:
    """The situation an exchange answered, classified by rules over its text, the first that
    holds: only an image or a face; a plan or invitation; a greeting; a complaint or emotion;
    laughter; a question; news or progress; else small talk."""
    cleaned = clean_text(text)
    if not cleaned:
        return "对方发图或表情时" if text.strip() else "群友闲聊时"
    if _has(cleaned, _INVITE):
        return "有人约活动或定时间时"
    if cleaned.casefold() in _GREETING_LINES or _has(cleaned, _GREETING):
        return "有人打招呼时"
    if _has(cleaned, _EMOTION):
        return "对方吐槽或闹情绪时"
    if _has(cleaned, _LAUGHTER):
        return "大家在说笑时"
    if is_question(cleaned) or _has(cleaned, _QUESTION_WORDS):
        return "对方提问时"
    if _has(cleaned, _NEWS):
        return "对方分享进展或新鲜事时"
    return "群友闲聊时"


def _action(text: str, how: str) -> str:
    """What the reply did, by its shape: length, asking back, agreeing, teasing, a face."""
    cleaned = clean_text(text)
    if not cleaned:
        action = "直接回一张图或一个表情"
        return f"引用原话，{action}" if how == "quote" else action
    short = len(cleaned) <= SHORT_CHARS
    if is_question(cleaned):
        action = "反问一句接着聊" if short else "先说几句再反问一句"
    elif cleaned.startswith(_AGREE_START) or _has(cleaned, _AGREE):
        action = "用一句短话附和" if short else "先附和再补充自己的看法"
    elif _has(cleaned, _TEASE):
        action = "用一句短话打趣调侃" if short else "用几句话打趣调侃"
    else:
        action = "用一句短话直接接上" if short else "用几句话展开回应"
    if how == "quote":
        action = f"引用原话，{action}"
    if _has_sticker(text):
        action = f"{action}，再配个表情"
    return action


def _line_text(line: Any) -> str:
    if isinstance(line, Mapping):
        return str(line.get("text", ""))
    return ""


def _outcome(exchange: Mapping[str, Any]) -> str:
    """What followed: for a pick-up the member's reaction, for a pair whether the one who was
    answered spoke again."""
    if exchange.get("learning_type") == "observed":
        return "对方接着聊了" if _line_text(exchange.get("after")) else ""
    reaction = _line_text(exchange.get("reaction"))
    cleaned = clean_text(reaction)
    if _has(cleaned, _REACTION_NEGATIVE):
        return "对方不买账"
    if _has(cleaned, _REACTION_POSITIVE):
        return "对方接着聊了"
    if is_question(cleaned):
        return "对方追问"
    return "对方回了话" if reaction else ""


def offline_strategies(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The offline learning model's answer to task ``strategies``: for each exchange, a scene
    from the line it answered (a question, a greeting, news, a complaint, laughter, a plan, else
    small talk), an action from the reply's shape (short or long, asking back, agreeing, teasing,
    quoting, a face) and an outcome from what came after; exchanges of the same learning type,
    scene and action give one strategy (the outcome most of them had, the first of a tie), in the
    order first seen. Deterministic; rules, not a model."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for exchange in payload.get("exchanges", ()):
        if not isinstance(exchange, Mapping):
            continue
        learning_type = str(exchange.get("learning_type", ""))
        if learning_type not in LEARNING_TYPES:
            continue
        reply = exchange.get("reply")
        if not isinstance(reply, Mapping):
            continue
        scene = _scene(_line_text(exchange.get("trigger")))
        action = _action(_line_text(reply), str(exchange.get("how", "")))
        groups.setdefault((learning_type, scene, action), []).append(_outcome(exchange))
    strategies = []
    for (learning_type, scene, action), outcomes in list(groups.items())[:MAX_ANSWERS]:
        outcome = Counter(outcomes).most_common(1)[0][0]
        strategies.append(
            {
                "learning_type": learning_type,
                "scene": scene,
                "action": action,
                "outcome": outcome,
            }
        )
    return {"strategies": strategies}


# -- exchanges ---------------------------------------------------------------------------------


def _message(
    batch: LearnerBatch, by_id: Mapping[str, ChatMessage], message_id: str
) -> ChatMessage | None:
    return by_id.get(message_id) or _find(batch, message_id)


def _line(message: ChatMessage | None, batch: LearnerBatch, self_label: str) -> Any:
    if message is None:
        return None
    return line_of(LoggedMessage(position=0, message=message), batch.bot_ids, self_label)


def _fallback_line(text: str) -> dict[str, Any]:
    return {"text": text[:LINE_CHARS]}


def _observed(
    batch: LearnerBatch,
    pairs: Sequence[LearnedItem],
    by_id: Mapping[str, ChatMessage],
    self_label: str,
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The member pairs as exchanges, each with its message ids; ``after`` is the answered
    member's next message after the reply in this batch (``None`` when they did not speak
    again)."""
    order = {m.message.id: i for i, m in enumerate(batch.messages) if m.message.id is not None}
    found = []
    for pair in pairs:
        trigger_id, reply_id = pair.source_message_ids
        trigger = _message(batch, by_id, trigger_id)
        reply = _message(batch, by_id, reply_id)
        after = None
        if trigger is not None and reply_id in order:
            after = next(
                (
                    logged.message
                    for logged in batch.messages[order[reply_id] + 1 :]
                    if logged.message.sender_id == trigger.sender_id
                ),
                None,
            )
        exchange = {
            "learning_type": "observed",
            "how": str(pair.fields.get("how", "")),
            "trigger": _line(trigger, batch, self_label)
            or _fallback_line(str(pair.fields["trigger"])),
            "reply": _line(reply, batch, self_label) or _fallback_line(str(pair.fields["reply"])),
            "after": _line(after, batch, self_label),
        }
        found.append((exchange, pair.source_message_ids))
    return found


def _reflections(
    batch: LearnerBatch,
    pickups: Sequence[LearnedItem],
    by_id: Mapping[str, ChatMessage],
    self_label: str,
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The bot's pick-ups as exchanges: the member line it answered (``None`` when unknown), its
    reply and the member's reaction."""
    found = []
    for pickup in pickups:
        ids = pickup.source_message_ids
        situation_id = ids[0] if len(ids) == 3 else None
        bot_id, reaction_id = ids[-2], ids[-1]
        fields = pickup.fields
        situation = _message(batch, by_id, situation_id) if situation_id else None
        exchange = {
            "learning_type": "self_reflection",
            "how": str(fields.get("how", "")),
            "trigger": _line(situation, batch, self_label)
            or (_fallback_line(str(fields["situation"])) if fields.get("situation") else None),
            "reply": _line(_message(batch, by_id, bot_id), batch, self_label)
            or _fallback_line(str(fields["bot_reply"])),
            "reaction": _line(_message(batch, by_id, reaction_id), batch, self_label)
            or _fallback_line(str(fields["reaction"])),
        }
        found.append((exchange, ids))
    return found


# -- dedup ---------------------------------------------------------------------------------------


def _normalized(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum())


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[i : i + 2] for i in range(len(text) - 1)) or frozenset({text})


def _overlap(a: str, b: str) -> float:
    pairs, other = _bigrams(a), _bigrams(b)
    return len(pairs & other) / len(pairs | other)


def similar_strategy(scene: str, action: str, other_scene: str, other_action: str) -> bool:
    """Whether two strategies (of one learning type) say the same: their normalized scene and
    action texts are equal, or both the scenes and the actions share at least
    :data:`SIMILAR_OVERLAP` of their character bigrams."""
    a_scene, a_action = _normalized(scene), _normalized(action)
    b_scene, b_action = _normalized(other_scene), _normalized(other_action)
    if a_scene + a_action == b_scene + b_action:
        return True
    return (
        _overlap(a_scene, b_scene) >= SIMILAR_OVERLAP
        and _overlap(a_action, b_action) >= SIMILAR_OVERLAP
    )


def strategy_key(learning_type: str, scene: str, action: str) -> str:
    """A strategy's key: its learning type, normalized scene and normalized action."""
    return item_key(learning_type, _normalized(scene), _normalized(action))


@functools.lru_cache(maxsize=16)
def _detector(persona_name: str) -> InjectionDetector:
    return InjectionDetector(persona_name)


def _dropped_because(answer: StrategyAnswer, offensive: Sequence[str], injection: Any) -> str:
    text = " ".join((answer.scene, answer.action, answer.outcome))
    if has_url(text):
        return "link"
    if _has(text, offensive):
        return "offensive"
    if injection(text):
        return "injection"
    return ""


# -- the learner ---------------------------------------------------------------------------------


def learn_strategies(batch: LearnerBatch) -> LearnerResult:
    """One run of ``strategies`` (see the module's docs). Asks nothing when the batch holds no
    exchange; stores nothing when no valid answer came (a note says so). A spent budget
    (``BudgetSpent``) is the stage's: the run waits and its cursor stays."""
    if not batch.group_id:
        return LearnerResult()
    adjacent = _number(batch, "adjacent_window_s", ADJACENT_WINDOW_S)
    reaction = _number(batch, "reaction_window_s", PICKUP_REACTION_WINDOW_S)
    offensive = _words(batch, "offensive_words", OFFENSIVE_WORDS)
    state = batch.state
    pairs = learn_expression_pairs(
        attrs.evolve(
            batch,
            state=state.get("pairs", {}),
            settings={
                "adjacent_window_s": adjacent,
                "max_chars": LINE_CHARS,
                "offensive_words": list(offensive),
            },
        )
    )
    pickups = learn_pickups(
        attrs.evolve(
            batch, state=state.get("pickups", {}), settings={"reaction_window_s": reaction}
        )
    )
    new_state = {"pairs": dict(pairs.state or {}), "pickups": dict(pickups.state or {})}
    pack = batch.persona or default_pack()
    self_label = pack.labels.self_label
    by_id = {m.message.id: m.message for m in batch.messages if m.message.id is not None}
    # ``max_exchanges`` may send fewer (a smaller prompt), never more than the answer may hold.
    per_type = min(
        EXCHANGES_PER_TYPE, _integer(batch, "max_exchanges", EXCHANGES_PER_TYPE, minimum=1)
    )
    chosen = [
        *_observed(batch, pairs.items[-per_type:], by_id, self_label),
        *_reflections(batch, pickups.items[-per_type:], by_id, self_label),
    ]
    if not chosen:
        return LearnerResult(state=new_state)
    if batch.model is None:
        return LearnerResult(state=new_state, notes=("strategies: no learning model",))
    learned = getattr(batch.stores, "learned", None)
    stored: list[LearnedItem] = (
        list(learned.items(batch.bot_id, batch.group_id, kind="strategy"))
        if learned is not None
        else []
    )
    known = [
        {
            "learning_type": str(item.fields.get("learning_type", "")),
            "scene": str(item.fields.get("scene", "")),
            "action": str(item.fields.get("action", "")),
        }
        for item in stored[:KNOWN_SENT]
    ]
    task = model_task(
        batch,
        TASK,
        StrategiesAnswer,
        SCHEMA,
        {"exchanges": [exchange for exchange, _ids in chosen], "known": known},
        offline_strategies,
        values={
            "max_items": per_type,
            "scene_chars": SCENE_CHARS,
            "action_chars": ACTION_CHARS,
            "outcome_chars": OUTCOME_CHARS,
        },
        max_tokens=_integer(batch, "max_tokens", ANSWER_TOKENS, minimum=1),
    )
    answer = batch.model.ask(task)
    if answer is None:
        return LearnerResult(state=new_state, notes=("strategies: no valid answer",))
    ids_of: dict[str, list[str]] = {t: [] for t in LEARNING_TYPES}
    for exchange, ids in chosen:
        ids_of[exchange["learning_type"]].extend(ids)
    return _stored(batch, answer, stored, ids_of, offensive, pack.persona.name, new_state)


def _stored(
    batch: LearnerBatch,
    answer: StrategiesAnswer,
    stored: Sequence[LearnedItem],
    ids_of: Mapping[str, Sequence[str]],
    offensive: Sequence[str],
    persona_name: str,
    state: Mapping[str, Any],
) -> LearnerResult:
    """The answer's strategies as items: dropped ones left out, near-duplicates merged into the
    stored strategy (or the run's earlier answer) they repeat."""
    injection = _detector(persona_name)
    dropped: Counter[str] = Counter()
    merged_known = merged_run = 0
    # key → (learning type, scene, action, outcome, count)
    found: dict[str, list[Any]] = {}
    for strategy in answer.strategies:
        reason = _dropped_because(strategy, offensive, injection)
        if reason:
            dropped[reason] += 1
            continue
        if not ids_of[strategy.learning_type]:
            dropped["no_exchange_of_its_type"] += 1
            continue
        scene, action = strategy.scene.strip(), strategy.action.strip()
        outcome = strategy.outcome.strip()
        same = next(
            (
                key
                for key, (kind, s, a, _o, _n) in found.items()
                if kind == strategy.learning_type and similar_strategy(scene, action, s, a)
            ),
            None,
        )
        if same is not None:
            found[same][4] += 1
            found[same][3] = found[same][3] or outcome
            merged_run += 1
            continue
        old = next(
            (
                item
                for item in stored
                if item.fields.get("learning_type") == strategy.learning_type
                and similar_strategy(
                    scene,
                    action,
                    str(item.fields.get("scene", "")),
                    str(item.fields.get("action", "")),
                )
            ),
            None,
        )
        if old is not None:
            merged_known += 1
            found[old.key] = [
                strategy.learning_type,
                str(old.fields.get("scene", "")),
                str(old.fields.get("action", "")),
                outcome or str(old.fields.get("outcome", "")),
                1,
            ]
            continue
        key = strategy_key(strategy.learning_type, scene, action)
        found[key] = [strategy.learning_type, scene, action, outcome, 1]
    items = [
        attrs.evolve(
            _item(
                batch,
                "strategy",
                key,
                {"learning_type": kind, "scene": scene, "action": action, "outcome": outcome},
                ids=tuple(dict.fromkeys(ids_of[kind])),
            ),
            count=count,
        )
        for key, (kind, scene, action, outcome, count) in found.items()
    ]
    notes = []
    if dropped:
        detail = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items()))
        notes.append(f"{sum(dropped.values())} strategies dropped: {detail}")
    if merged_known:
        notes.append(f"{merged_known} strategies merged into known ones")
    if merged_run:
        notes.append(f"{merged_run} strategies merged into another of the answer")
    kept: Any = tuple(items)
    return LearnerResult(items=kept, state=state, notes=tuple(notes))


# -- registration --------------------------------------------------------------------------------

LEARNER = Learner(
    name="strategies",
    writes=("strategy",),
    run=learn_strategies,
    min_batch=MIN_BATCH,
    interval_s=INTERVAL_S,
    max_batch=500,
    timeout_s=300.0,
    caps={"strategy": STRATEGY_CAP},
    uses_model=True,
    description="behaviour strategies (scene, action, outcome) of member pairs and the bot's "
    "pick-ups, asked of the learning model",
)


@hookimpl
def register_learners(register: Callable[[Learner], None]) -> None:
    register(LEARNER)
