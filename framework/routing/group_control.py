"""Per-group control: whether, how often and when a bot takes part in a group
(``docs/groups.md``).

The settings come from ``[bots."ID"]`` of ``promptweave.toml``: its ``allow_groups`` or
``deny_groups``, then its group tables (``[bots."ID".groups."GROUP"]``, and ``"*"`` for every
group), then ``[routing]``. A run-time switch in the routing state
(:class:`promptweave.store.routing_state.GroupSwitch`, set from chat or ``promptweave groups``)
wins over the configuration's on/off until it is reset. :func:`group_settings` gives what is in
force for one (bot, group); the router asks :func:`group_gate` before any gate rule, so an
operator's switch holds whatever plugins are loaded, and its reason is in the decision, the trace,
the replay summary and the report.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Mapping
from typing import Any

import attrs

from promptweave.config import BotConfig, Config, GroupConfig
from promptweave.decision import Decision, SocialAction, TurnAction
from promptweave.store.routing_state import GroupSwitch, RoutingState

__all__ = [
    "GROUP_REASONS",
    "GroupSettings",
    "QuietRange",
    "effective_group_settings",
    "group_gate",
    "group_settings",
]

#: The reasons a turn ends with in group control, as the trace, the replay summary and the report
#: name them.
GROUP_REASONS = (
    "group_switched_off",
    "group_disabled",
    "group_not_allowed",
    "group_denied",
    "quiet_hours",
)

#: The group table of every group of a bot.
EVERY_GROUP = "*"

#: The keys a group table may set, with the ``[routing]`` key each falls back to (``None``: a key
#: of group control alone, with the default given).
_KEYS: dict[str, tuple[str | None, Any]] = {
    "enabled": (None, True),
    "necessity_threshold": ("necessity_threshold", None),
    "low_engagement": ("low_engagement", None),
    "low_engagement_probabilities": ("low_engagement_probabilities", None),
    "quiet_hours": (None, ()),
    "quiet_allow": (None, "addressed"),
    "learn": (None, True),
}


@attrs.frozen(kw_only=True)
class QuietRange:
    """One quiet-hours range, in minutes after local midnight; ``end`` below ``start`` runs past
    midnight.

    :param text: the range as configured (``"23:00-07:30"``).
    """

    text: str
    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> QuietRange:
        """The range of ``"HH:MM-HH:MM"`` (checked when the configuration is loaded)."""
        first, last = text.split("-")
        return cls(text=text, start=_minutes(first), end=_minutes(last))

    def contains(self, local: dt.datetime) -> bool:
        """Whether the local time ``local`` is inside the range (its start included, its end
        not)."""
        minute = local.hour * 60 + local.minute
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def _minutes(text: str) -> int:
    hours, minutes = text.strip().split(":")
    return int(hours) * 60 + int(minutes)


@attrs.frozen(kw_only=True)
class GroupSettings:
    """The per-group settings in force for one bot in one group (``docs/groups.md``).

    :param bot_id: the bot.
    :param group_id: the group.
    :param configured: whether the configuration alone lets the bot take part.
    :param configured_reason: why it does not (``group_disabled``, ``group_not_allowed``,
        ``group_denied``); ``None`` when it does.
    :param switch: the run-time switch, when one is set; it wins over ``configured``.
    :param enabled: whether the bot takes part, all said.
    :param reason: why it does not, all said (``group_switched_off`` or ``configured_reason``).
    :param necessity_threshold: the reply-necessity score needed to proceed.
    :param low_engagement: whether a PASS may become a canned phrase.
    :param low_engagement_probabilities: the exit's probability by recent bot replies.
    :param quiet_hours: the quiet ranges, in the bot's time zone.
    :param quiet_allow: what goes through during quiet hours: ``addressed`` or ``none``.
    :param learn: whether the group is learned from (``[learning] opt_out_groups`` included).
    :param timezone: the bot's time zone, of the quiet hours.
    :param problems: what could not be applied (an unknown time zone: no quiet hours).
    :param sources: where each setting came from: ``group`` (its own table), ``*`` (the bot's
        table for every group), ``allow_groups``, ``deny_groups``, ``switch``, ``routing``
        (``[routing]``), ``learning`` (``[learning] opt_out_groups``) or ``default``.
    """

    bot_id: str
    group_id: str
    configured: bool
    configured_reason: str | None
    switch: GroupSwitch | None
    enabled: bool
    reason: str | None
    necessity_threshold: int
    low_engagement: bool
    low_engagement_probabilities: tuple[float, ...]
    quiet_hours: tuple[QuietRange, ...]
    quiet_allow: str
    learn: bool
    timezone: str
    sources: Mapping[str, str]
    problems: tuple[str, ...] = ()

    @property
    def tuned(self) -> bool:
        """Whether the group's reply frequency differs from ``[routing]``'s (the router then
        gives the group's rules a ``[routing]`` of its own)."""
        return any(
            self.sources[key] in ("group", EVERY_GROUP)
            for key in ("necessity_threshold", "low_engagement", "low_engagement_probabilities")
        )

    def quiet_range(self, now: dt.datetime) -> QuietRange | None:
        """The quiet range ``now`` falls in, in the bot's time zone; ``None`` outside them."""
        if not self.quiet_hours:
            return None
        zone = _zone(self.timezone)
        if zone is None:
            return None
        try:
            local = now.astimezone(zone)
        except OverflowError:  # a time at the edge of the calendar: read as it is written
            local = now
        return next((span for span in self.quiet_hours if span.contains(local)), None)

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON (what ``promptweave groups list --json`` prints)."""
        return {
            "bot_id": self.bot_id,
            "group_id": self.group_id,
            "enabled": self.enabled,
            "reason": self.reason,
            "configured": self.configured,
            "configured_reason": self.configured_reason,
            "switch": None if self.switch is None else self.switch.to_json(),
            "necessity_threshold": self.necessity_threshold,
            "low_engagement": self.low_engagement,
            "low_engagement_probabilities": list(self.low_engagement_probabilities),
            "quiet_hours": [span.text for span in self.quiet_hours],
            "quiet_allow": self.quiet_allow,
            "learn": self.learn,
            "timezone": self.timezone,
            "sources": dict(self.sources),
            "problems": list(self.problems),
        }


def _zone(name: str) -> dt.tzinfo | None:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def _resolve(bot: BotConfig | None, group_id: str, key: str, config: Config) -> tuple[Any, str]:
    """A group setting and where it came from: the group's table, the ``"*"`` table, else
    ``[routing]`` or the default."""
    tables: list[tuple[GroupConfig, str]] = []
    if bot is not None:
        own, every = bot.groups.get(group_id), bot.groups.get(EVERY_GROUP)
        tables = [(table, name) for table, name in ((own, "group"), (every, EVERY_GROUP)) if table]
    for table, name in tables:
        value = getattr(table, key)
        if value is not None:
            return value, name
    routing_key, default = _KEYS[key]
    if routing_key is not None:
        return getattr(config.routing, routing_key), "routing"
    return default, "default"


def group_settings(
    config: Config, bot_id: str, group_id: str, *, switch: GroupSwitch | None = None
) -> GroupSettings:
    """The per-group settings in force for ``bot_id`` in ``group_id``: the configuration's, and
    ``switch`` (the run-time switch, when one is set) over its on/off.

    This is the one place they are worked out: the router, ``promptweave groups``, the NoneBot
    commands and a dashboard all ask it. :func:`effective_group_settings` reads the switch from a
    routing state. It never raises: what cannot be applied is in ``problems``.
    """
    bot = config.bots.get(bot_id)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in _KEYS:
        values[key], sources[key] = _resolve(bot, group_id, key, config)
    configured, configured_reason = True, None
    if bot is not None and bot.allow_groups and group_id not in bot.allow_groups:
        configured, configured_reason, sources["enabled"] = (
            False,
            "group_not_allowed",
            "allow_groups",
        )
    elif bot is not None and group_id in bot.deny_groups:
        configured, configured_reason, sources["enabled"] = False, "group_denied", "deny_groups"
    elif values["enabled"] is False:
        configured, configured_reason = False, "group_disabled"
    enabled, reason = configured, configured_reason
    if switch is not None:
        enabled, reason, sources["enabled"] = switch.enabled, None, "switch"
        if not switch.enabled:
            reason = "group_switched_off"
    learn = values["learn"] is not False and not config.learning.opted_out(bot_id, group_id)
    if values["learn"] is not False and not learn:
        sources["learn"] = "learning"
    timezone = bot.timezone if bot is not None else "Asia/Shanghai"
    quiet = tuple(QuietRange.parse(text) for text in values["quiet_hours"])
    problems: tuple[str, ...] = ()
    if quiet and _zone(timezone) is None:
        problems = (f'unknown time zone {timezone!r} of [bots."{bot_id}"]: no quiet hours',)
        quiet = ()
    return GroupSettings(
        bot_id=bot_id,
        group_id=group_id,
        configured=configured,
        configured_reason=configured_reason,
        switch=switch,
        enabled=enabled,
        reason=reason,
        necessity_threshold=values["necessity_threshold"],
        low_engagement=values["low_engagement"],
        low_engagement_probabilities=tuple(values["low_engagement_probabilities"]),
        quiet_hours=quiet,
        quiet_allow=values["quiet_allow"],
        learn=learn,
        timezone=timezone,
        sources=sources,
        problems=problems,
    )


def effective_group_settings(
    config: Config, state: RoutingState | None, bot_id: str, group_id: str
) -> GroupSettings:
    """:func:`group_settings` with the run-time switch read from ``state`` (the runtime's
    ``stores.routing``; ``None``: no store, the configuration alone).

    :raises promptweave.StoreUnavailableError: the routing state cannot be read.
    """
    switch = None if state is None else state.mute(bot_id, group_id).switch
    return group_settings(config, bot_id, group_id, switch=switch)


def _silent(reason: str, note: str) -> Decision:
    return Decision(
        action=TurnAction.PASS,
        social_action=SocialAction.ACK,
        source="gate",
        reason=reason,
        stage="gate",
        notes=(note,),
    )


def _switch_words(switch: GroupSwitch) -> str:
    by = f" by {switch.by}" if switch.by else ""
    at = f" at {switch.at.isoformat(timespec='seconds')}" if switch.at is not None else ""
    return f"switched {'on' if switch.enabled else 'off'}{by}{at}"


#: Where each reason of the configuration is set, for the decision's note.
_CONFIGURED_WHERE = {
    "group_disabled": 'enabled = false in [bots."{bot}".groups]',
    "group_not_allowed": 'not in [bots."{bot}"] allow_groups',
    "group_denied": 'in [bots."{bot}"] deny_groups',
}


def group_gate(settings: GroupSettings, now: dt.datetime, *, addressed: bool) -> Decision | None:
    """The decision of group control for a message at ``now``: silence, with the reason and a
    note saying which setting decided, or ``None`` to let the gate rules look."""
    switch = settings.switch
    if not settings.enabled:
        if settings.reason == "group_switched_off" and switch is not None:
            note = f"group control: the bot was {_switch_words(switch)}"
        else:
            where = _CONFIGURED_WHERE[settings.configured_reason or "group_disabled"]
            note = "group control: " + where.format(bot=settings.bot_id)
        return _silent(settings.reason or "group_disabled", note)
    quiet = settings.quiet_range(now)
    if quiet is None:
        return None
    if addressed and settings.quiet_allow == "addressed":
        return None
    allowed = "addressed messages go through" if settings.quiet_allow == "addressed" else "nothing"
    return _silent(
        "quiet_hours",
        f"group control: quiet hours {quiet.text} ({settings.timezone}); quiet_allow = "
        f"{settings.quiet_allow}: {allowed}",
    )
