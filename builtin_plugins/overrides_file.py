"""Built-in plugin ``overrides_file``: section overrides from the file named in ``promptweave.toml``.

``trylast``, so an override supplied by any other plugin wins over the file.
"""

from __future__ import annotations

from framework import RenderContext, SectionOverride, hookimpl, load_overrides_file

EXTRAS_KEY = "overrides_file"


@hookimpl(trylast=True)
def override_section(
    section_id: str,
    text: str,
    bot_id: str,
    group_id: str,
    context: RenderContext,
) -> SectionOverride | None:
    name = context.config.overrides_file
    if not name:
        return None
    # Read (or stat) the file once per turn, not once per section.
    overrides = context.extras.get(EXTRAS_KEY)
    if overrides is None:
        overrides = context.extras[EXTRAS_KEY] = load_overrides_file(
            context.config.resolve_path(name)
        )
    return overrides.lookup(bot_id, group_id, section_id)
