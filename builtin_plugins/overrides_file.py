"""Built-in plugin ``overrides_file``: section overrides from the file named in ``promptweave.toml``.

``trylast``, so an override supplied by any other plugin wins over the file. ``has_overrides``
tells the assembler when the file has nothing for the turn's bot and group, so the hook is not
called fifteen times for nothing.
"""

from __future__ import annotations

from promptweave import RenderContext, SectionOverride, hookimpl
from promptweave.prompt.overrides import OverridesFile, load_overrides_file

EXTRAS_KEY = "overrides_file"


def _overrides(context: RenderContext) -> OverridesFile | None:
    name = context.config.overrides_file
    if not name:
        return None
    # Read (or stat) the file once per turn, not once per section.
    overrides = context.extras.get(EXTRAS_KEY)
    if overrides is None:
        overrides = context.extras[EXTRAS_KEY] = load_overrides_file(
            context.config.resolve_path(name)
        )
    return overrides


def has_overrides(context: RenderContext) -> bool:
    """Whether the overrides file has an entry for the turn's bot and group."""
    overrides = _overrides(context)
    group_id = context.turn.group_id
    return (
        overrides is not None
        and group_id is not None
        and overrides.covers(context.turn.bot.id, group_id)
    )


@hookimpl(trylast=True)
def override_section(
    section_id: str,
    text: str,
    bot_id: str,
    group_id: str,
    context: RenderContext,
) -> SectionOverride | None:
    overrides = _overrides(context)
    return None if overrides is None else overrides.lookup(bot_id, group_id, section_id)
