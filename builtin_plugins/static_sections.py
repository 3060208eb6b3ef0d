"""Built-in plugin ``static_sections``: sections 1–3, the same on every turn of a bot.

Their texts come from the persona pack (``docs/design.md#persona-and-style``): the persona defines a
stable identity across groups; nothing here is specific to one bot.
"""

from __future__ import annotations

from collections.abc import Callable

from promptweave import RenderContext, Section, hookimpl, quote_user_text

GUARD_HEADER = "【安全约束】"
IDENTITY_HEADER = "【自称与群称呼】"


def render_injection_guard(context: RenderContext) -> str:
    rules = [context.persona.format(rule) for rule in context.persona.guard.rules if rule.strip()]
    return "\n".join([GUARD_HEADER, *(f"- {rule}" for rule in rules)]) if rules else ""


def render_persona(context: RenderContext) -> str:
    return context.persona.format(context.persona.persona.text)


def _aliases(context: RenderContext) -> list[str]:
    seen: list[str] = []
    names = [*context.turn.bot.aliases, *context.persona.identity.generic_aliases]
    for name in names:
        cleaned = quote_user_text(name, 40)
        if cleaned and cleaned not in seen and cleaned != context.turn.bot.name:
            seen.append(cleaned)
    return seen


def render_identity(context: RenderContext) -> str:
    values = {
        "{name}": quote_user_text(context.turn.bot.name, 40),
        "{aliases}": "、".join(_aliases(context)),
        "{self}": context.persona.labels.self_label,
    }
    lines = [IDENTITY_HEADER]
    for template in context.persona.identity.lines:
        used = [key for key in values if key in template]
        if any(not values[key] for key in used):
            continue  # a line about aliases says nothing when there are none
        line = template
        for key in used:
            line = line.replace(key, values[key])
        lines.append(f"- {context.persona.format(line)}")
    return "\n".join(lines) if len(lines) > 1 else ""


@hookimpl
def register_sections(register: Callable[[Section], None]) -> None:
    register(
        Section(
            id="injection_guard",
            title=GUARD_HEADER,
            render=render_injection_guard,
            volatility="static",
        )
    )
    register(Section(id="persona", title="人格包文本", render=render_persona, volatility="static"))
    register(
        Section(id="identity", title=IDENTITY_HEADER, render=render_identity, volatility="static")
    )
