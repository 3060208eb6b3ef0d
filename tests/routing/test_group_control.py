"""Per-group control in the router: on/off, allow and deny lists, the run-time switch, reply
frequency and quiet hours (``docs/groups.md``)."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest
from routing_support import NO_AUTOLOAD, make_turn

from promptweave import Config, ConfigError, Promptweave, TurnAction
from promptweave.config import BotConfig, GroupConfig, RoutingConfig, StoreConfig
from promptweave.routing.group_control import (
    GROUP_REASONS,
    effective_group_settings,
    group_settings,
)
from promptweave.store.routing_state import GroupSwitch, MemoryRoutingState

BOT, GROUP = "10001", "20001"
#: An ambient remark that the necessity score holds back at the default threshold (50).
AMBIENT = "今天食堂的土豆烧鸡还挺好吃的"
#: 23:30 in Shanghai (the bot's default zone).
LATE = "2026-11-30T23:30:00+08:00"


def _runtime(seed: int = 0, *, routing: RoutingConfig | None = None, **bot: Any) -> Promptweave:
    config = Config(
        store=StoreConfig(backend="memory"),
        routing=routing or RoutingConfig(),
        bots={BOT: BotConfig(name="小织", aliases=("织织",), **bot)},
    )
    return Promptweave.from_config(
        config, environ=NO_AUTOLOAD, strict=True, rng=random.Random(seed)
    )


def _groups(**tables: GroupConfig) -> dict[str, GroupConfig]:
    return {name.replace("every", "*").removeprefix("g"): table for name, table in tables.items()}


def test_a_group_outside_the_allow_list_is_silent_and_the_note_says_why() -> None:
    runtime = _runtime(allow_groups=["20002"])
    decision = runtime.decide(make_turn("@小织 在吗", addressed=True))
    assert (decision.action, decision.source, decision.reason) == (
        TurnAction.PASS,
        "gate",
        "group_not_allowed",
    )
    assert decision.trace()["reason"] == "group_not_allowed"
    assert 'group control: not in [bots."10001"] allow_groups' in decision.notes
    allowed = runtime.decide(make_turn("@小织 在吗", addressed=True, group_id="20002"))
    assert allowed.action is TurnAction.REPLY


def test_a_denied_group_is_silent_and_the_others_are_not() -> None:
    runtime = _runtime(deny_groups=[GROUP])
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason == "group_denied"
    other = runtime.decide(make_turn("@小织 在吗", addressed=True, group_id="20003"))
    assert other.action is TurnAction.REPLY


def test_a_group_table_turns_the_bot_off_and_the_every_group_table_is_its_fallback() -> None:
    runtime = _runtime(
        groups=_groups(every=GroupConfig(enabled=False), g20001=GroupConfig(enabled=True))
    )
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).action is TurnAction.REPLY
    off = runtime.decide(make_turn("@小织 在吗", addressed=True, group_id="20009"))
    assert off.reason == "group_disabled"
    assert 'group control: enabled = false in [bots."10001".groups]' in off.notes


def test_the_run_time_switch_wins_over_the_configuration_until_it_is_reset() -> None:
    runtime = _runtime(deny_groups=[GROUP])
    at = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    runtime.stores.routing.set_switch(BOT, GROUP, GroupSwitch(enabled=True, by="chat:1", at=at))
    on = runtime.decide(make_turn("@小织 在吗", addressed=True))
    assert on.action is TurnAction.REPLY
    assert any("group_denied in the configuration" in note for note in on.notes)
    runtime.stores.routing.set_switch(BOT, "20002", GroupSwitch(enabled=False, by="cli", at=at))
    off = runtime.decide(make_turn("@小织 在吗", addressed=True, group_id="20002"))
    assert off.reason == "group_switched_off"
    assert off.notes[0] == (
        "group control: the bot was switched off by cli at 2026-11-30T12:00:00+00:00"
    )
    runtime.stores.routing.set_switch(BOT, GROUP, None)
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason == "group_denied"


def test_a_switch_holds_with_the_built_in_rules_blocked() -> None:
    config = Config(store=StoreConfig(backend="memory"))
    runtime = Promptweave.from_config(
        config, environ={**NO_AUTOLOAD, "PROMPTWEAVE_DISABLE_PLUGINS": "routing_rules"}
    )
    runtime.stores.routing.set_switch(BOT, GROUP, GroupSwitch(enabled=False))
    assert runtime.decide(make_turn("@小织 在吗", addressed=True)).reason == "group_switched_off"


def test_a_groups_necessity_threshold_and_low_engagement_are_its_own() -> None:
    assert _runtime().decide(make_turn(AMBIENT)).reason == "necessity_below_threshold"
    eager = _runtime(groups=_groups(g20001=GroupConfig(necessity_threshold=-100)))
    decision = eager.decide(make_turn(AMBIENT))
    assert decision.necessity is not None and decision.necessity.threshold == -100
    assert decision.stage == "decide"
    # Another group of the same bot keeps [routing]'s threshold.
    other = eager.decide(make_turn(AMBIENT, group_id="20002"))
    assert other.necessity is not None and other.necessity.threshold == 50
    always = _runtime(
        groups=_groups(every=GroupConfig(low_engagement_probabilities=[1.0, 1.0, 1.0, 1.0]))
    )
    reaction = always.decide(make_turn("哈哈哈哈"))
    assert reaction.low_engagement is not None and reaction.low_engagement.probability == 1.0
    assert reaction.low_engagement.phrase
    never = _runtime(groups=_groups(every=GroupConfig(low_engagement=False)))
    assert never.decide(make_turn("哈哈哈哈")).low_engagement is None


def test_quiet_hours_let_addressed_messages_through_by_default() -> None:
    runtime = _runtime(groups=_groups(every=GroupConfig(quiet_hours=["23:00-07:30"])))
    quiet = runtime.decide(make_turn("哈哈哈哈", time=LATE))
    assert quiet.reason == "quiet_hours"
    assert quiet.low_engagement is None
    assert quiet.notes == (
        "group control: quiet hours 23:00-07:30 (Asia/Shanghai); quiet_allow = addressed: "
        "addressed messages go through",
    )
    called = runtime.decide(make_turn("@小织 还醒着吗？", addressed=True, time=LATE))
    assert called.action is TurnAction.REPLY
    # Past midnight, and at the range's end the bot is back.
    assert runtime.decide(make_turn(AMBIENT, time="2026-12-01T07:29:00+08:00")).reason == (
        "quiet_hours"
    )
    morning = runtime.decide(make_turn(AMBIENT, time="2026-12-01T07:30:00+08:00"))
    assert morning.reason == "necessity_below_threshold"


def test_quiet_hours_are_read_in_the_bots_time_zone_and_can_hold_everything() -> None:
    runtime = _runtime(
        timezone="Europe/Berlin",
        groups=_groups(g20001=GroupConfig(quiet_hours=["22:00-06:00"], quiet_allow="none")),
    )
    # 23:30 in Shanghai is 16:30 in Berlin: not quiet.
    assert runtime.decide(make_turn(AMBIENT, time=LATE)).reason != "quiet_hours"
    berlin_night = "2026-12-01T06:30:00+08:00"  # 23:30 in Berlin
    called = runtime.decide(make_turn("@小织 在吗", addressed=True, time=berlin_night))
    assert called.reason == "quiet_hours"
    assert "quiet_allow = none: nothing" in called.notes[0]


def test_an_unknown_time_zone_drops_the_quiet_hours_and_says_so() -> None:
    runtime = _runtime(
        timezone="Mars/Olympus", groups=_groups(every=GroupConfig(quiet_hours=["00:00-23:59"]))
    )
    decision = runtime.decide(make_turn("@小织 在吗", addressed=True, time=LATE))
    assert decision.action is TurnAction.REPLY
    assert any("unknown time zone 'Mars/Olympus'" in note for note in decision.notes)


def test_the_effective_settings_say_where_each_value_came_from() -> None:
    config = Config(
        routing=RoutingConfig(necessity_threshold=40),
        bots={
            BOT: BotConfig(
                deny_groups=["20009"],
                groups=_groups(
                    every=GroupConfig(quiet_hours=["23:00-07:00"], learn=False),
                    g20001=GroupConfig(necessity_threshold=30, quiet_allow="none"),
                ),
            )
        },
    )
    settings = group_settings(config, BOT, GROUP)
    assert settings.enabled and settings.reason is None
    assert (settings.necessity_threshold, settings.quiet_allow, settings.learn) == (
        30,
        "none",
        False,
    )
    assert settings.sources == {
        "enabled": "default",
        "necessity_threshold": "group",
        "low_engagement": "routing",
        "low_engagement_probabilities": "routing",
        "quiet_hours": "*",
        "quiet_allow": "group",
        "learn": "*",
    }
    denied = group_settings(config, BOT, "20009")
    assert (denied.enabled, denied.reason, denied.sources["enabled"]) == (
        False,
        "group_denied",
        "deny_groups",
    )
    other_bot = group_settings(config, "10002", GROUP)
    assert other_bot.enabled and other_bot.necessity_threshold == 40 and other_bot.learn
    state = MemoryRoutingState()
    state.set_switch(BOT, "20009", GroupSwitch(enabled=True, by="chat:7"))
    switched = effective_group_settings(config, state, BOT, "20009")
    assert (switched.enabled, switched.configured, switched.sources["enabled"]) == (
        True,
        False,
        "switch",
    )
    assert switched.to_json()["switch"] == {"enabled": True, "by": "chat:7", "at": None}
    assert set(GROUP_REASONS) >= {"group_switched_off", "group_denied", "quiet_hours"}


def test_learn_false_is_the_learning_opt_out() -> None:
    config = Config(
        bots={
            BOT: BotConfig(groups=_groups(g20001=GroupConfig(learn=False))),
            "10002": BotConfig(groups=_groups(every=GroupConfig(learn=False))),
        }
    )
    assert config.learning.opt_out_groups == ("10001:20001", "10002:*")
    assert config.learning.opted_out(BOT, GROUP)
    assert not config.learning.opted_out(BOT, "20002")
    assert config.learning.opted_out("10002", "20777")
    assert not group_settings(config, "10002", "20777").learn


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        (
            'allow_groups = ["1"]\ndeny_groups = ["2"]\n',
            "give allow_groups (the only groups) or deny_groups (every group but these), not both",
        ),
        ('[bots."10001".groups."20001"]\nquiet_hours = ["23-7"]\n', "is not a range like"),
        ('[bots."10001".groups."20001"]\nquiet_hours = ["08:00-08:00"]\n', "starts where it ends"),
        ('[bots."10001".groups."20001"]\nquiet_allow = "all"\n', "quiet_allow must be one of"),
        (
            '[bots."10001".groups."*"]\nlow_engagement_probabilities = [0.5]\n',
            "must be four probabilities",
        ),
        ('[bots."10001".groups."20001"]\nnecessity = 3\n', "extra fields found (necessity)"),
    ],
)
def test_a_wrong_group_setting_is_a_config_error_naming_it(
    tmp_path: Path, toml: str, problem: str
) -> None:
    path = tmp_path / "promptweave.toml"
    head = '[bots."10001"]\n' if not toml.startswith("[") else ""
    path.write_text(head + toml, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        Config.from_file(path)
    assert problem in str(raised.value)


def test_a_message_at_the_edge_of_the_calendar_is_routed_with_quiet_hours_set() -> None:
    # New York's local time of the first half hour of the calendar is before it: read as written.
    quiet = GroupConfig(quiet_hours=["00:00-01:00"])
    west = _runtime(timezone="America/New_York", groups=_groups(every=quiet))
    decision = west.decide(make_turn(AMBIENT, time="0001-01-01T00:30:00+00:00"))
    assert decision.reason == "quiet_hours"
    east = _runtime(groups=_groups(every=quiet))
    late = east.decide(make_turn(AMBIENT, time="9999-12-31T23:30:00+00:00"))
    assert late.reason == "necessity_below_threshold"


def test_the_decisions_of_a_day_are_counted_on_the_bots_local_day() -> None:
    runtime = _runtime()
    # Times as NoneBot gives them (UTC): 23:30 and 00:30 in Shanghai, a day apart.
    runtime.decide(make_turn(AMBIENT, time="2026-11-30T15:30:00+00:00"))
    runtime.decide(make_turn("@小织 在吗", addressed=True, time="2026-11-30T16:30:00+00:00"))
    runtime.decide(make_turn(AMBIENT, time="2026-11-30T16:40:00+00:00"))
    runtime.decide(make_turn(AMBIENT, time="2026-11-30T16:45:00+00:00", private=True))
    router = runtime.router
    next_day = dt.datetime(2026, 12, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    today = router.decisions_today(BOT, GROUP, next_day, "Asia/Shanghai")
    assert today == {"rule_reply_obligation": 1, "necessity_below_threshold": 1}
    # In UTC all three were on November 30.
    assert sum(router.decisions_today(BOT, GROUP, next_day, "UTC").values()) == 3
    assert router.decisions_today(BOT, "20002", next_day, "UTC") == {}
