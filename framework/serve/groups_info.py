"""What the groups page shows of a group besides the turn log's counts (``docs/dashboard.md``):

- :func:`money_for` prices the group's tokens with the cost module (``docs/cost.md``) at the price
  table's row of ``[provider] model``: the turn log does not record which model answered, so, as
  ``promptweave store stats`` does, every turn is priced at the configured model;
- :func:`settings_in_force` lists the per-group settings in force, the run-time switch of the
  routing state included, each with where it came from (per-group control, ``docs/groups.md``).
"""

from __future__ import annotations

import attrs

from promptweave.config import BotConfig, Config
from promptweave.providers.cost import format_money, price_for, price_tokens
from promptweave.providers.exchange import DEFAULT_MODELS, ProviderApi
from promptweave.routing.group_control import EVERY_GROUP, GroupSettings, effective_group_settings
from promptweave.store.routing_state import GroupSwitch, RoutingState

__all__ = [
    "NO_PRICES",
    "Setting",
    "money_for",
    "no_price_words",
    "priced_model",
    "settings_in_force",
]

#: What the page says where a money figure would be when the price table is empty.
NO_PRICES = "no prices configured"

#: What a bot's time zone is when its table does not set one.
_DEFAULT_TIMEZONE = attrs.fields(BotConfig).timezone.default


@attrs.frozen(kw_only=True)
class Setting:
    """One setting in force for a group, as the page shows it.

    :param name: what the setting is (``reply-necessity threshold``).
    :param value: its value in words.
    :param source: where the value came from (``[bots."10001".groups."20001"]``, ``[routing]``,
        ``the run-time switch``, ``default``).
    """

    name: str
    value: str
    source: str


def priced_model(config: Config) -> str:
    """The model the turns are priced at: ``[provider] model``, else the API's default model (the
    model the requests are built for)."""
    return config.provider.model or DEFAULT_MODELS[ProviderApi(config.provider.api)]


def no_price_words(config: Config) -> str:
    """What the page says instead of money: no price table at all, or no row for the model."""
    if not config.prices:
        return NO_PRICES
    model = priced_model(config)
    return f'no price for {model} (no [prices."{model}"])'


def money_for(
    config: Config, *, prompt_tokens: int, cached_tokens: int, output_tokens: int
) -> str | None:
    """What those tokens cost at the price table's row of :func:`priced_model`, formatted
    (``0.0123 USD``), or ``None`` when the table has no row for it (:func:`no_price_words` says
    so). The turn log keeps no cache writes, so none is priced."""
    price = price_for(config, priced_model(config))
    if price is None:
        return None
    amount = price_tokens(
        price,
        prompt=prompt_tokens,
        cached=min(cached_tokens, prompt_tokens),
        output=output_tokens,
    )
    return format_money(amount, price.currency)


def _source_words(source: str, bot_id: str, group_id: str) -> str:
    """Where a setting came from (:attr:`GroupSettings.sources`), as the configuration spells it."""
    return {
        "group": f'[bots."{bot_id}".groups."{group_id}"]',
        EVERY_GROUP: f'[bots."{bot_id}".groups."{EVERY_GROUP}"]',
        "allow_groups": f'[bots."{bot_id}"] allow_groups',
        "deny_groups": f'[bots."{bot_id}"] deny_groups',
        "switch": "the run-time switch",
        "routing": "[routing]",
        "learning": "[learning] opt_out_groups",
    }.get(source, source)


def _switch_words(switch: GroupSwitch) -> str:
    by = f" by {switch.by}" if switch.by else ""
    at = f" at {switch.at.isoformat(timespec='seconds')}" if switch.at is not None else ""
    return f"switched {'on' if switch.enabled else 'off'}{by}{at}"


def _taking_part(settings: GroupSettings) -> str:
    """On or off, and why: the switch (and the configuration's word it overrides) or the
    configuration's reason."""
    if settings.switch is not None:
        words = _switch_words(settings.switch)
        if settings.enabled:
            over = (
                f", over the configuration's {settings.configured_reason}"
                if not settings.configured
                else ""
            )
            return f"on ({words}{over})"
        return f"off: {settings.reason} ({words})"
    if settings.enabled:
        return "on"
    return f"off: {settings.reason}"


def settings_in_force(
    config: Config, state: RoutingState | None, bot_id: str, group_id: str
) -> list[Setting]:
    """The per-group settings in force for ``bot_id`` in ``group_id``
    (:func:`promptweave.routing.group_control.effective_group_settings`: the configuration's, and
    the run-time switch read from ``state``; ``None``: the configuration alone), each with its
    source.

    :raises promptweave.StoreUnavailableError: the routing state cannot be read.
    """
    settings = effective_group_settings(config, state, bot_id, group_id)
    sources = settings.sources

    def source(key: str) -> str:
        return _source_words(sources[key], bot_id, group_id)

    shown = [
        Setting(name="taking part", value=_taking_part(settings), source=source("enabled")),
        Setting(
            name="reply-necessity threshold",
            value=str(settings.necessity_threshold),
            source=source("necessity_threshold"),
        ),
    ]
    if settings.low_engagement:
        probabilities = "/".join(f"{p:g}" for p in settings.low_engagement_probabilities)
        shown.append(
            Setting(
                name="low-engagement phrases",
                value=f"on, probability {probabilities} by recent bot replies",
                source=source("low_engagement_probabilities"),
            )
        )
    else:
        shown.append(
            Setting(name="low-engagement phrases", value="off", source=source("low_engagement"))
        )
    if settings.quiet_hours:
        allowed = (
            "addressed messages go through"
            if settings.quiet_allow == "addressed"
            else "nothing goes through"
        )
        spans = ", ".join(span.text for span in settings.quiet_hours)
        shown.append(
            Setting(
                name="quiet hours",
                value=f"{spans} ({settings.timezone}); {allowed}",
                source=f"{source('quiet_hours')}; quiet_allow: {source('quiet_allow')}",
            )
        )
    else:
        shown.append(Setting(name="quiet hours", value="none", source=source("quiet_hours")))
    if not config.learning.enabled:
        shown.append(Setting(name="learning", value="off", source="[learning] enabled = false"))
    else:
        learning = "on" if settings.learn else "opted out"
        shown.append(Setting(name="learning", value=learning, source=source("learn")))
    bot = config.bots.get(bot_id)
    zone_source = (
        f'[bots."{bot_id}"] timezone'
        if bot is not None and bot.timezone != _DEFAULT_TIMEZONE
        else "default"
    )
    shown.append(Setting(name="time zone", value=settings.timezone, source=zone_source))
    shown.extend(
        Setting(name="problem", value=problem, source="per-group control")
        for problem in settings.problems
    )
    return shown
