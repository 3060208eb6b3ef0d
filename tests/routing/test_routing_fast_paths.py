"""The router's fast paths: what it works out once and reuses, and when it works it out again.

The decisions themselves are pinned by the other routing tests; these pin that each shortcut
keeps the behaviour of the long way (a third-party rule still bounded and named, a rule of a new
plugin seen, a cache dropped when what it was made from changes).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from base_support import DATA
from routing_support import BASE_TIME, make_runtime, make_turn

from promptweave import (
    ChatMessage,
    Config,
    Decision,
    DecisionRule,
    GateSkip,
    RouteContext,
    ScoreTerm,
    TurnAction,
    hookimpl,
)
from promptweave.decision import MemoryPolicy, SocialAction
from promptweave.items import ReplyShape, RhythmProfile, TurnPolicy
from promptweave.plugins import watchdog
from promptweave.plugins.contributions import RuleStage
from promptweave.routing import (
    router as router_module,
    shape,
    signals as signals_module,
)
from promptweave.routing.memory_policy import memory_policy_for
from promptweave.routing.signals import MessageSignals, mention_ids
from promptweave.store.routing_state import QuoteCandidate
from promptweave.text import routing_words as ts

DATA = DATA


class Gate:
    """A third-party gate that notes the thread it runs on and skips ``跳过`` messages."""

    def __init__(self, name: str = "third_party_gate") -> None:
        self.name = name
        self.threads: list[str] = []

    def evaluate(self, context: RouteContext) -> GateSkip | None:
        self.threads.append(threading.current_thread().name)
        return GateSkip(reason=self.name) if "跳过" in context.signals.text else None

    @hookimpl
    def register_decision_rules(self, register: Callable[[DecisionRule], None]) -> None:
        register(DecisionRule(name=self.name, stage=RuleStage.GATE, evaluate=self.evaluate))


@pytest.fixture
def bounded_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The ``(plugin, where)`` of every rule call the router makes through ``call_plugin``."""
    calls: list[tuple[str, str]] = []

    def spy(plugin: str, where: str, fn: Callable[..., Any], /, *args: Any) -> Any:
        calls.append((plugin, where))
        return watchdog.call_plugin(plugin, where, fn, *args)

    monkeypatch.setattr(router_module, "call_plugin", spy)
    return calls


def test_built_in_rules_are_called_directly_and_a_third_party_rule_through_the_watchdog(
    bounded_calls: list[tuple[str, str]],
) -> None:
    gate = Gate()
    runtime = make_runtime()
    try:
        runtime.add_plugin(gate, name="third_party")
        decision = runtime.decide(make_turn("今天先跳过吧大家", group_id="g1"))
    finally:
        runtime.close()
    assert decision.reason == "third_party_gate"
    assert bounded_calls == [("third_party", "decision rule 'third_party_gate'")]
    # Bounded: handed to a stage worker, not run on the routing thread.
    assert [name.startswith("promptweave-stage") for name in gate.threads] == [True]


def test_every_built_in_rule_still_runs_when_called_directly(
    bounded_calls: list[tuple[str, str]],
) -> None:
    runtime = make_runtime()
    try:
        decision = runtime.decide(make_turn("@小织 周末去哪里玩比较好？", group_id="g1"))
    finally:
        runtime.close()
    assert bounded_calls == []
    assert decision.necessity is not None
    assert {term.name for term in decision.necessity.terms} >= {"addressed", "obligation"}


def test_a_plugin_added_or_removed_later_changes_the_rules_the_router_runs(
    bounded_calls: list[tuple[str, str]],
) -> None:
    runtime = make_runtime()
    turn = make_turn("今天先跳过吧大家", group_id="g1")
    try:
        before = runtime.decide(turn)
        runtime.add_plugin(Gate(), name="third_party")
        added = runtime.decide(turn)
        runtime.remove_plugin("third_party")
        removed = runtime.decide(turn)
    finally:
        runtime.close()
    assert before.reason != "third_party_gate" and removed.reason == before.reason
    assert added.reason == "third_party_gate"
    assert bounded_calls == [("third_party", "decision rule 'third_party_gate'")]


def test_a_router_given_other_registries_resolves_their_rules_again(
    bounded_calls: list[tuple[str, str]],
) -> None:
    first, second = make_runtime(), make_runtime()
    try:
        second.add_plugin(Gate("other_gate"), name="other")
        router = first.router
        turn = make_turn("今天先跳过吧大家", group_id="g1")
        assert router.route(turn, turn.message.time).reason != "other_gate"
        router.registries = second.registries
        assert router.route(turn, turn.message.time).reason == "other_gate"
    finally:
        first.close()
        second.close()
    assert bounded_calls == [("other", "decision rule 'other_gate'")]


def test_a_router_trusts_no_plugin_unless_told() -> None:
    runtime = make_runtime()
    try:
        router = router_module.Router(
            registries=runtime.registries,
            config=runtime.config,
            state=runtime.stores.routing,
            rng=runtime.rng,
        )
        assert runtime.router.trusted("routing_rules")
    finally:
        runtime.close()
    assert not router.trusted("routing_rules")


# -- the text predicates' shortcuts agree with their plain definitions -------------------------

_CQ = re.compile(r"\[CQ:[^\[\]]*\]")
_CQ_FACE = re.compile(r"\[CQ:(?:face|mface|sface|bface)[^\[\]]*\]")
_BRACKET_FACE = re.compile(r"\[(?!图片\])[^\[\]\s]{1,6}\]")
_TEXT_MENTION = re.compile(r"@([^\s@，,：:。！!？?]+)")


def plain_focus_text(text: str, names: tuple[str, ...], *, keep_cq: bool = False) -> str:
    focused = text if keep_cq else _CQ.sub(" ", text)
    for name in sorted(names, key=len, reverse=True):
        if name:
            focused = focused.replace(f"@{name}", " ")
    return " ".join(focused.split())


def plain_mentioned_names(text: str) -> tuple[str, ...]:
    return tuple(_TEXT_MENTION.findall(_CQ.sub(" ", text)))


def plain_is_face_only(text: str, raw: str = "") -> bool:
    rest = _BRACKET_FACE.sub("", _CQ_FACE.sub("", text))
    has_face = rest != text or bool(_CQ_FACE.search(raw))
    for char in rest:
        if char.isspace():
            continue
        if unicodedata.category(char) not in ("So", "Sk") and char not in "\u200d\ufe0f\ufe0e":
            return False
        has_face = True
    return has_face


def plain_is_noise(text: str) -> bool:
    compact = "".join(text.split()).lower()
    if not compact:
        return False
    if not any(char.isalnum() for char in compact):
        return not any(
            unicodedata.category(c) in ("So", "Sk") or c in "\u200d\ufe0f\ufe0e" for c in compact
        )
    if compact.isascii() and compact.isalpha() and any(m in compact for m in ts._KEY_MASH):
        return True
    return len(compact) >= 6 and len(set(compact)) == 1 and not ts._LAUGH.match(compact)


def plain_is_spam_text(text: str) -> bool:
    lowered = text.lower()
    if any(word in lowered for word in ts.SPAM_WORDS):
        return True
    if ts.has_url(lowered) and any(cue in lowered for cue in ts.SPAM_CUES):
        return True
    return bool(re.search(r"(.)\1{14,}", text))


def plain_is_incomplete(text: str) -> bool:
    if "?" in text or "？" in text:
        return False
    core = ts.strip_trailing_punctuation(text)
    if not core:
        return False
    for tail in ts.INCOMPLETE_TAILS:
        if core.endswith(tail) and core.replace(tail, ""):
            return True
        if core == tail:
            return True
    return len(core) <= 3 and core[-1] in "是的了" and core[:-1] in ts._FRAGMENT_HEADS


def plain_is_bare_request(text: str) -> bool:
    core = ts.strip_trailing_punctuation(text)
    if core in ts._BARE_REQUEST_PHRASES:
        return True
    return bool(core) and ts.has_request_words(core) and bool(ts._BARE_REQUEST.match(core))


def _corpus() -> list[str]:
    texts = [
        "然后",
        "就是就是",
        "我想说的就是",
        "因为，",
        "我是",
        "我的",
        "那你？",
        "还有还有。",
        "",
        " ",
        "@小织",
        "@小织 在吗",
        "@织织@小织 周六",
        "[CQ:at,qq=10001] 在吗",
        "@阿蒙 @北风，来开会",
        "[CQ:face,id=1]",
        "[CQ:face,id=1] 哈哈",
        "[doge]",
        "[图片]",
        "[doge][捂脸]  ",
        "😀",
        "👍🏻",
        "a" * 15,
        "a" * 14,
        "哈" * 15,
        "哈" * 14,
        "啊" * 6,
        "啊啊啊啊啊",
        "hhhhhh",
        "zzzzzz",
        "asdfgh",
        "QWER",
        "？？？",
        "!!!",
        "...",
        "帮我查一下",
        "帮个忙",
        "帮我查一下吧。",
        "你帮我",
        "推荐一下",
        "加V领取资料",
        "会员限时领 https://t.cn/x",
        "这个链接打不开 https://a.cn",
        "[CQ:reply,id=9]@小织 那个怎么弄",
        "[CQ:image,file=a.png]",
        "邮箱是 a@b.com",
        "小织@",
        "@",
        "x[CQ:face,id=2]y",
        "[CQ:at,qq=all] 开会了",
        "aaaaaaaaaaaaaaa\nb",
        "\u200d\ufe0f",
    ]
    for line in (DATA / "routing_eval.jsonl").read_text(encoding="utf-8").splitlines():
        if line.startswith("{") and '"text"' in line:
            texts.append(json.loads(line)["text"])
    texts += [word for words in ts.__dict__.values() if isinstance(words, tuple) for word in words]
    return texts


@pytest.mark.parametrize("names", [("小织", "织织"), ("小织", ""), ()])
def test_the_text_shortcuts_answer_as_the_plain_definitions(names: tuple[str, ...]) -> None:
    for text in _corpus():
        for keep_cq in (False, True):
            assert ts.focus_text(text, names, keep_cq=keep_cq) == plain_focus_text(
                text, names, keep_cq=keep_cq
            ), text
        assert ts.mentioned_names(text) == plain_mentioned_names(text), text
        for raw in ("", text, "[CQ:face,id=1]"):
            assert ts.is_face_only(text, raw) == plain_is_face_only(text, raw), (text, raw)
        assert ts.is_noise(text) == plain_is_noise(text), text
        assert ts.is_spam_text(text) == plain_is_spam_text(text), text
        assert ts.is_bare_request(text) == plain_is_bare_request(text), text
        assert ts.is_incomplete(text) == plain_is_incomplete(text), text


# -- records made once are the records the rules describe -----------------------------------


def _facts(**changes: Any) -> MessageSignals:
    values: dict[str, Any] = {
        field.name: False for field in attrs.fields(MessageSignals) if field.type == "bool"
    }
    values.update(text="", length=0, affinity=None)
    values.update(changes)
    return MessageSignals(**values)


def plain_turn_policy(decision: Decision, signals: MessageSignals, scene: str) -> TurnPolicy:
    known = scene in shape.SCENES
    if decision.action is TurnAction.PASS:
        target = "silent"
    elif scene == "venting" or decision.social_action is SocialAction.AFFECTION:
        target = "emotion"
    else:
        target = shape.resolve_reply_target(decision, signals)
    if not known and target == "short_tease":
        target = "answer"
    needs_tool = decision.action is TurnAction.TOOL
    return TurnPolicy(
        reply_target=target,
        seriousness="casual" if scene in shape.CASUAL_SCENES else "serious",
        social_action=decision.social_action.value,
        needs_tool=needs_tool,
        needs_grounding=needs_tool or not known or scene in ("light_help", "unknown"),
        allow_teasing=scene in ("casual", "banter"),
    )


def plain_reply_shape(
    policy: TurnPolicy, rhythm: RhythmProfile | None, rng: random.Random
) -> ReplyShape:
    if policy.needs_tool:
        return ReplyShape(
            preferred_bubbles=1, max_bubbles=2, min_chars=8, max_chars=160, band="task"
        )
    if policy.seriousness != "casual":
        return ReplyShape(
            preferred_bubbles=1, max_bubbles=2, min_chars=8, max_chars=80, band="complete"
        )
    if rhythm is None:
        preferred = rng.choice((1, 2, 3))
    else:
        preferred = min(3, max(1, round(rhythm.bubble_count_p50 or 2)))
    p90 = rhythm.bubble_count_p90 if rhythm is not None else None
    ceiling = min(5, max(1, round(p90) if p90 else 3))
    multi = rhythm is not None and rhythm.multi_weight > rhythm.single_weight
    return ReplyShape(
        preferred_bubbles=preferred,
        max_bubbles=max(preferred, ceiling),
        min_chars=4,
        max_chars=18,
        rhythm="multi" if multi else "single",
        band="short",
    )


RHYTHMS = (
    None,
    RhythmProfile(bubble_count_p50=1.0, single_weight=0.8, multi_weight=0.2),
    RhythmProfile(bubble_count_p50=2.0, bubble_count_p90=4.0, single_weight=0.2, multi_weight=0.8),
)


@pytest.mark.parametrize("scene", [*shape.SCENES, "elsewhere"])
@pytest.mark.parametrize("action", list(TurnAction))
def test_a_resolved_policy_and_shape_equal_the_records_made_afresh(
    scene: str, action: TurnAction
) -> None:
    for social, facts in itertools.product(
        SocialAction, (_facts(), _facts(short_vent=True, emotion=True), _facts(obligation=True))
    ):
        decision = Decision(action=action, social_action=social)
        policy = shape.resolve_turn_policy(decision, facts, scene)
        assert policy == plain_turn_policy(decision, facts, scene)
        for rhythm in RHYTHMS:
            made = shape.resolve_reply_shape(policy, rhythm, random.Random(7))
            assert made == plain_reply_shape(policy, rhythm, random.Random(7))


@pytest.mark.parametrize("action", list(TurnAction))
def test_each_memory_policy_is_the_one_its_turn_describes(action: TurnAction) -> None:
    turn = make_turn("好的", group_id="g1")
    for social, facts in itertools.product(
        SocialAction,
        (_facts(), _facts(short_social=True), _facts(addressed=True, back_and_forth=True)),
    ):
        decision = Decision(action=action, social_action=social)
        found = memory_policy_for(decision, facts, turn)
        if action is TurnAction.PASS:
            assert found == MemoryPolicy(read_persistent_memory=False, reason="silent")
        elif action is TurnAction.REPLY and (
            facts.short_social
            or social in (SocialAction.ACK, SocialAction.AFFECTION, SocialAction.JOKE)
        ):
            assert found == MemoryPolicy(
                read_persistent_memory=False,
                include_ambient_excerpt=not facts.addressed,
                reason="short_social_turn",
            )
        else:
            assert found == MemoryPolicy()


def test_only_a_casual_turn_reads_the_groups_rhythm() -> None:
    runtime = make_runtime()
    asked: list[tuple[str, str]] = []

    def share(bot_id: str, group_id: str) -> float:
        asked.append((bot_id, group_id))
        return 0.2

    runtime.router.rhythm_share = share
    try:
        serious = runtime.decide(make_turn("@小织 帮我查一下明天杭州的天气", group_id="g1"))
        assert asked == []
        casual = runtime.decide(make_turn("今天的晚霞好漂亮啊大家快看", group_id="g1"))
    finally:
        runtime.close()
    assert serious.turn_policy is not None and serious.turn_policy.seriousness == "serious"
    assert serious.reply_shape is not None and serious.reply_shape.band == "complete"
    assert casual.turn_policy is not None and casual.turn_policy.seriousness == "casual"
    assert asked == [("10001", "g1")]
    # The stored share (mostly several bubbles) shaped the casual turn.
    assert casual.reply_shape is not None and casual.reply_shape.rhythm == "multi"


def plain_mention_ids(message: ChatMessage) -> tuple[str, ...]:
    found = list(message.mentions)
    if isinstance(message.raw, str):
        found += ts.cq_mentions(message.raw)
    if isinstance(message.raw, list):
        for segment in message.raw:
            data = segment.get("data") if isinstance(segment, dict) else None
            if segment.get("type") == "at" and isinstance(data, dict) and "qq" in data:
                found.append(str(data["qq"]))
    return tuple(dict.fromkeys(found))


@pytest.mark.parametrize(
    "raw",
    [None, "", "在吗", "[CQ:at,qq=30017] 在吗 [CQ:at,qq=all]", "[CQ:at,qq=10001][CQ:at,qq=10001]",
     "[CQ:face,id=1][CQ:at,qq=5]", [{"type": "at", "data": {"qq": 7}}, {"type": "text"}], []],
)  # fmt: skip
@pytest.mark.parametrize("mentions", [(), ("30017",), ("all", "5")])
def test_mention_ids_answer_as_the_plain_definition(raw: Any, mentions: tuple[str, ...]) -> None:
    message = ChatMessage(
        sender_id="1", text="在吗", time=BASE_TIME, raw=raw, mentions=mentions, id="m1"
    )
    assert mention_ids(message) == plain_mention_ids(message)


@pytest.mark.parametrize(
    ("earlier", "spam"),
    [(("周六 去吗", "周六  去吗"), True), ((" 周六 去吗 ", "周六\u3000去吗"), True),
     (("周六去吗", "周六 去吗"), False), (("周六 去", "周六 去吗"), False)],
)  # fmt: skip
def test_a_sender_repeating_himself_floods_whatever_his_spacing(
    earlier: tuple[str, str], spam: bool
) -> None:
    turn = make_turn("周六 去吗", group_id="g1", sender_id="20002")
    recent = tuple(
        ChatMessage(sender_id="20002", text=text, time=BASE_TIME, id=f"e{number}")
        for number, text in enumerate(earlier)
    )
    assert signals_module._floods(attrs.evolve(turn, recent_messages=recent), "周六 去吗") is spam


@pytest.mark.parametrize(
    "raw",
    [None, "", "[CQ:face,id=178]", "[CQ:image,file=a.png]", [{"type": "face", "data": {"id": "1"}}],
     [{"type": "mface", "data": {}}, {"type": "text", "data": {"text": "好"}}],
     [{"type": "text", "data": {"text": "好"}}], [{"type": "at", "data": {"qq": "10001"}}]],
)  # fmt: skip
@pytest.mark.parametrize(
    "text", ["", " ", "好", "[doge]", "😂", "@小织", "@小织 😂", "[CQ:face,id=1] 好"]
)
def test_a_message_is_face_only_as_its_text_and_raw_form_say(raw: Any, text: str) -> None:
    message = ChatMessage(sender_id="1", text=text, time=BASE_TIME, raw=raw, id="m1")
    names = ("小织", "织织")
    expected = ts.is_face_only(
        ts.focus_text(text, names, keep_cq=True), signals_module._raw_text(message)
    )
    assert signals_module._face_only(message, names) is expected


@attrs.frozen(kw_only=True)
class NotedTerm(ScoreTerm):
    """A plugin's own kind of term, with words the router does not know it has."""

    reason: str = ""
    notes: tuple[str, ...] = ()


def test_every_kind_of_answer_has_its_words_bounded() -> None:
    long, cut = "长" * 500, "长" * router_module.RULE_TEXT_MAX_CHARS
    many = tuple(f"{n}{long}" for n in range(30))
    short = tuple(note[: router_module.RULE_TEXT_MAX_CHARS] for note in many[:20])
    bounded = router_module._bounded
    assert bounded(GateSkip(reason=long, silence_s=3.0)) == GateSkip(reason=cut, silence_s=3.0)
    assert bounded(ScoreTerm(name=long, points=5, detail=long)) == ScoreTerm(
        name=cut, points=5, detail=cut
    )
    assert bounded(Decision(action=TurnAction.REPLY, reason=long, notes=many)) == Decision(
        action=TurnAction.REPLY, reason=cut, notes=short
    )
    noted = bounded(NotedTerm(name="n", points=1, detail=long, reason=long, notes=many))
    assert noted == NotedTerm(name="n", points=1, detail=cut, reason=cut, notes=short)
    fine = ScoreTerm(name="n", points=1, detail="d")
    assert bounded(fine) is fine


class ListedState:
    """A routing state that answers candidates as given (one id twice, as no built-in store
    keeps them), for the marking of the current one."""

    def __init__(self, candidates: tuple[QuoteCandidate, ...]) -> None:
        self.listed = candidates

    def record_candidates(self, *_args: Any) -> tuple[QuoteCandidate, ...]:
        return self.listed


@pytest.mark.parametrize("current", ["m1", "m2", "m3", "elsewhere"])
def test_every_candidate_of_the_current_message_is_marked_current(current: str) -> None:
    listed = tuple(
        QuoteCandidate(message_id=f"m{n}", sender_id="1", text="好", time=BASE_TIME)
        for n in (1, 2, 1, 3)
    )
    turn = attrs.evolve(
        make_turn("好", group_id="g1"),
        message=ChatMessage(sender_id="2", text="好", time=BASE_TIME, id=current),
    )
    found = router_module._candidates(turn, ListedState(listed), Config())  # type: ignore[arg-type]
    assert found == tuple(
        attrs.evolve(c, is_current=True) if c.message_id == current else c for c in listed
    )
    assert [c.is_current for c in found].count(True) == {"m1": 2, "m2": 1, "m3": 1}.get(current, 0)


@pytest.mark.parametrize("run", [13, 14, 15, 16, 21, 22, 29, 30])
@pytest.mark.parametrize("offset", range(16))
@pytest.mark.parametrize("char", ["哈", "a", "\n"])
def test_a_run_of_one_character_is_spam_wherever_it_starts(
    run: int, offset: int, char: str
) -> None:
    text = "今天天气不错，出去走走吧。"[:offset].ljust(offset, "，") + char * run + "好的呀"
    assert ts.is_spam_text(text) is bool(re.search(r"(.)\1{14,}", text))
    assert ts.is_spam_text(text) is (run >= 15 and char != "\n")


def plain_without_call(text: str, self_names: tuple[str, ...]) -> str:
    core = ts.strip_trailing_punctuation(text)
    for name in sorted(self_names, key=len, reverse=True):
        if core.endswith(name) and core != name:
            return core[: -len(name)].rstrip(" ，,、")
        if core.startswith(name):
            rest = core[len(name) :]
            if rest[:1] in signals_module.VOCATIVE_SEPARATORS:
                return text[len(name) :].lstrip("".join(signals_module.VOCATIVE_SEPARATORS))
            if len(rest) <= signals_module.VOCATIVE_TAIL_CHARS:
                return text[len(name) :]
    return text


@pytest.mark.parametrize("names", [("小织", "织织"), ("织织", "小织"), ("小织",), ()])
def test_a_call_by_name_is_taken_off_as_the_plain_definition_does(names: tuple[str, ...]) -> None:
    texts = [
        *_corpus(),
        "小织，在吗",
        "小织晚安",
        "晚安小织",
        "晚安小织！",
        "小织",
        "织织小织",
        "我觉得小织说得对",
        "小织说得也太对了",
        "小织 周六去吗",
        "周六去吗，织织。",
    ]
    for text in texts:
        assert signals_module._without_call(text, names) == plain_without_call(text, names), text
