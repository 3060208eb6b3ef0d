"""Built-in plugin ``profile_sections``: sections 4–5, what the bot learned of a group.

``docs/design.md#persona-and-style``: direct pairs recalled by similarity to the trigger come first;
abstract strategies observed between members are a fallback used only when no direct pair was
recalled; the bot's own past pick-ups (self_reflection) are always shown under their own header.
"""

from __future__ import annotations

from collections.abc import Callable

from promptweave import (
    BehaviorStrategy,
    ExpressionPair,
    RenderContext,
    RhythmBaseline,
    Section,
    hookimpl,
    quote_user_text,
)
from promptweave.items import LearningType

EXPRESSION_HEADER = "【群表达指导】"
OBSERVED_HEADER = "【真人接话参考】"
SELF_REFLECTION_HEADER = "【接话复盘】"
MAX_PAIRS = 2
MAX_STRATEGIES = 3


def _baseline_line(baseline: RhythmBaseline) -> str:
    share = round(baseline.single_bubble_share * 100)
    shape = "单条短气泡为主" if baseline.single_bubble_share >= 0.5 else "常连发多条气泡"
    return (
        f"- 本群真人{shape}（单条占比约 {share}%），单段中位约 {baseline.median_segment_chars} 字。"
    )


def render_group_expression(context: RenderContext) -> str:
    lines = [EXPRESSION_HEADER, "- 仅作措辞参考，不能覆盖核心人格、账号气质或本轮策略。"]
    pairs = [
        pair for pair in context.items("group_expression", ExpressionPair) if pair.reply.strip()
    ][:MAX_PAIRS]
    for pair in pairs:
        trigger = quote_user_text(pair.trigger, 80)
        reply = quote_user_text(pair.reply, 120)
        lines.append(f"- 触发「{trigger}」时：{reply}" if trigger else f"- 可借鉴：{reply}")
    baselines = context.items("group_expression", RhythmBaseline)
    if baselines:
        lines.append(_baseline_line(baselines[0]))
    return "\n".join(lines) if len(lines) > 2 else ""


def _strategy_line(strategy: BehaviorStrategy, observed: bool) -> str:
    scene = quote_user_text(strategy.scene, 80)
    action = quote_user_text(strategy.action, 120)
    outcome = quote_user_text(strategy.outcome, 80)
    if observed:
        line = f"- 类似「{scene}」时，真人会{action}"
    else:
        line = f"- 类似「{scene}」时，我之前是这样接的：{action}"
    return f"{line}，结果{outcome}。" if outcome else f"{line}。"


def render_behavior_reference(context: RenderContext) -> str:
    strategies = [
        s
        for s in context.items("behavior_reference", BehaviorStrategy)
        if s.scene.strip() and s.action.strip()
    ]
    has_direct_pair = any(
        pair.reply.strip() for pair in context.items("group_expression", ExpressionPair)
    )
    blocks = []
    observed = [s for s in strategies if s.learning_type is LearningType.OBSERVED]
    if observed and not has_direct_pair:
        blocks.append(
            "\n".join(
                [
                    OBSERVED_HEADER,
                    "- 以下来自本群真人互动的节奏与接话结构，只借鉴什么时候说短、什么时候说长、怎么接，"
                    "不要复刻原话或语气。",
                    *(_strategy_line(s, observed=True) for s in observed[:MAX_STRATEGIES]),
                ]
            )
        )
    reflections = [s for s in strategies if s.learning_type is LearningType.SELF_REFLECTION]
    if reflections:
        blocks.append(
            "\n".join(
                [
                    SELF_REFLECTION_HEADER,
                    "- 以下是你之前自己接话的例子，只参考每次接得怎么样，别照搬原话，也别复刻当时用词。",
                    *(_strategy_line(s, observed=False) for s in reflections[:MAX_STRATEGIES]),
                ]
            )
        )
    return "\n\n".join(blocks)


@hookimpl
def register_sections(register: Callable[[Section], None]) -> None:
    register(
        Section(
            id="group_expression",
            title=EXPRESSION_HEADER,
            render=render_group_expression,
            volatility="profile",
            reads=("group_expression",),
        )
    )
    register(
        Section(
            id="behavior_reference",
            title=f"{OBSERVED_HEADER} / {SELF_REFLECTION_HEADER}",
            render=render_behavior_reference,
            volatility="profile",
            reads=("behavior_reference", "group_expression"),
        )
    )
