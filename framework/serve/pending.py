"""Two things the groups page shows that belong to other parts of promptweave, each in one
function here so that the page has one place to take them from (``docs/dashboard.md``):

- :func:`money_for` prices a group's tokens under the configured prices; the cost module
  (``docs/cost.md``) owns prices, and until it is in the tree the page shows tokens alone and says
  that no prices are configured;
- :func:`settings_in_force` lists the per-group settings that apply to a group; today that is
  what the configuration says of it (the learning opt-out, the bot's time zone and name), and the
  per-group control adds its own settings here.
"""

from __future__ import annotations

from promptweave.config import Config

__all__ = ["NO_PRICES", "money_for", "settings_in_force"]

#: What the page says where a money figure would be while no prices are configured.
NO_PRICES = "no prices configured"


def money_for(
    config: Config,
    bot_id: str,
    group_id: str,
    *,
    prompt_tokens: int,
    cached_tokens: int,
    output_tokens: int,
) -> str | None:
    """The money those tokens cost under the configured prices, formatted, or ``None`` when no
    prices are configured (the cost module of ``docs/cost.md`` provides them)."""
    return None


def settings_in_force(config: Config, bot_id: str, group_id: str) -> list[tuple[str, str]]:
    """``(setting, value)`` pairs in force for the group."""
    bot = config.bots.get(bot_id)
    learning = "opted out" if config.learning.opted_out(bot_id, group_id) else "on"
    if not config.learning.enabled:
        learning = "off ([learning] enabled = false)"
    settings = [("learning", learning)]
    if bot is not None:
        settings.append(("time zone", bot.timezone))
    return settings
