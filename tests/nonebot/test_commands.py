"""The NoneBot plugin's chat commands (``/pw …``, ``docs/groups.md``) under nonebug, with the
OneBot v11 adapter's real event models: every command, who may give it, and that a command is
never answered as chat."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nonebot
import pytest
from loop_support import ScriptedModel
from nonebot.adapters.onebot.v11 import Bot
from nonebug import App
from onebot_events import SELF_ID, at, group_message_json, parse, preprocess, text

from promptweave import BotLoop, Config, Promptweave, Stores
from promptweave.config import BotConfig, DeliveryConfig, LoopConfig, RoutingConfig, StoreConfig
from promptweave.store.learned import LearnedItem
from promptweave.store.routing_state import GroupSwitch

GROUP, DENIED = 20001, 20009
SUPERUSER_ID, ADMIN_ID, MEMBER_ID = 30001, 30002, 30003
NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


@pytest.fixture
def superusers() -> Iterator[None]:
    config = nonebot.get_driver().config
    before = config.superusers
    config.superusers = {str(SUPERUSER_ID)}
    yield
    config.superusers = before


@pytest.fixture
def runtime(tmp_path: Path, superusers: None) -> Iterator[Promptweave]:
    """The plugin's loop swapped for one on a SQLite file in ``tmp_path``, with a deny list,
    an overrides file and a scripted model."""
    import promptweave.contrib.nonebot as plugin

    (tmp_path / "overrides.toml").write_text(
        f'[bots."{SELF_ID}".groups."{GROUP}".sections.persona]\nmode = "append"\ncontent = "本群"\n',
        encoding="utf-8",
    )
    config = Config(
        store=StoreConfig(path="bot.sqlite3"),
        overrides_file="overrides.toml",
        routing=RoutingConfig(low_engagement=False),
        delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
        loop=LoopConfig(turn_deadline_s=10),
        bots={str(SELF_ID): BotConfig(name="小织", deny_groups=[str(DENIED)])},
        base_dir=tmp_path,
    )
    made = Promptweave.from_config(
        config,
        contrib=["onebot"],
        extra_plugins=[ScriptedModel(answers=["在的"] * 5)],
        stores=Stores.from_config(config),
        rng=random.Random(1),
    )
    opened = plugin._state.loop
    plugin._state.loop = BotLoop(runtime=made, fallback_names=("小织",), learn=False)
    yield made
    plugin._state.loop = opened
    made.close()


def _event(*segments: dict[str, Any], user: int, group: int = GROUP, role: str = "member") -> Any:
    return parse(
        group_message_json(group_id=group, user_id=user, role=role, segments=list(segments))
    )


def _matchers() -> list[Any]:
    from promptweave.contrib.nonebot import messages

    return [messages]


def _logged(runtime: Promptweave, group: int = GROUP) -> list[str]:
    assert runtime.stores.group_log is not None
    rows = runtime.stores.group_log.recent_group_messages(
        str(SELF_ID), str(group), until=dt.datetime(2100, 1, 1, tzinfo=dt.UTC), limit=50
    )
    return [row.text for row in rows]


async def _say(app: App, runtime: Promptweave, event: Any, reply: str | None) -> None:
    """Send ``event`` through the plugin's matcher; the command's reply is
    ``reply`` (``None``: no reply, nothing sent at all)."""
    async with app.test_matcher(_matchers()) as ctx:
        bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
        event = await preprocess(bot, event)
        ctx.receive_event(bot, event)
        if reply is not None:
            ctx.should_call_send(event, reply, result={"message_id": 1})


async def test_a_superuser_switches_the_bot_off_and_on_and_the_switch_outlives_a_restart(
    app: App, runtime: Promptweave, tmp_path: Path
) -> None:
    off = _event(text("/pw off"), user=SUPERUSER_ID)
    await _say(app, runtime, off, f"promptweave is off in group {GROUP} (group_switched_off).")
    assert runtime.stores.routing is not None
    switch = runtime.stores.routing.mute(str(SELF_ID), str(GROUP)).switch
    assert switch is not None and not switch.enabled and switch.by == f"chat:{SUPERUSER_ID}"
    # An @ question now goes unanswered: nonebug fails on any send it does not expect.
    question = _event(at(SELF_ID), text(" 在吗？"), user=MEMBER_ID)
    await _say(app, runtime, question, None)
    sent_at = dt.datetime.fromtimestamp(question.time, dt.UTC)
    assert runtime.router.decisions_today(str(SELF_ID), str(GROUP), sent_at, "Asia/Shanghai") == {
        "group_switched_off": 1
    }
    # The commands were never chat; the question was recorded.
    assert _logged(runtime) == ["在吗？"]
    # A new process on the same file reads the switch.
    again = Stores.from_config(runtime.config)
    assert again.routing is not None
    assert again.routing.mute(str(SELF_ID), str(GROUP)).switch == switch
    again.close()
    await _say(
        app,
        runtime,
        _event(text("/pw on"), user=SUPERUSER_ID),
        f"promptweave is on in group {GROUP}.",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw reset"), user=SUPERUSER_ID),
        f"promptweave is on in group {GROUP}.",
    )
    assert runtime.stores.routing.switches() == ()


async def test_a_group_admin_switches_their_group_but_a_member_cannot(
    app: App, runtime: Promptweave
) -> None:
    await _say(
        app,
        runtime,
        _event(text("/pw off"), user=MEMBER_ID),
        "/pw off is for superusers and this group's owner and admins.",
    )
    assert runtime.stores.routing is not None
    assert runtime.stores.routing.switches() == ()
    await _say(
        app,
        runtime,
        _event(text("/pw off"), user=ADMIN_ID, role="admin"),
        f"promptweave is off in group {GROUP} (group_switched_off).",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw reset"), user=ADMIN_ID, role="owner"),
        "/pw reset is for superusers.",
    )
    # A refused command is not chat either.
    assert _logged(runtime) == []


async def test_an_admin_cannot_switch_on_a_group_the_configuration_keeps_off(
    app: App, runtime: Promptweave
) -> None:
    await _say(
        app,
        runtime,
        _event(text("/pw on"), user=ADMIN_ID, role="admin", group=DENIED),
        "the configuration keeps the bot off here (group_denied); only a superuser can switch "
        "it on.",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw on"), user=SUPERUSER_ID, group=DENIED),
        f"promptweave is on in group {DENIED}.",
    )


async def test_status_says_on_or_off_why_the_decisions_the_spend_and_what_was_learned(
    app: App, runtime: Promptweave
) -> None:
    assert runtime.stores.learned is not None and runtime.stores.routing is not None
    bot, group = str(SELF_ID), str(GROUP)
    runtime.stores.learned.put_items(
        [
            LearnedItem(
                kind="teaching",
                bot_id=bot,
                group_id=group,
                key="t1",
                user_id="30003",
                learned_at=NOW,
            ),
            LearnedItem(kind="teaching", bot_id=bot, group_id=group, key="t2", learned_at=NOW),
            LearnedItem(
                kind="expression_pair", bot_id=bot, group_id=group, key="p1", learned_at=NOW
            ),
        ]
    )
    at_time = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    runtime.stores.routing.set_switch(bot, group, GroupSwitch(enabled=False, by="cli", at=at_time))
    status = (
        f"promptweave in group {GROUP}: off (switched off by cli at 2026-12-01T09:00+00:00)\n"
        "necessity threshold 50; canned phrases off\n"
        "decisions today: none\n"
        "spend today: 0 answers, 0 tokens reported; learning 0 model calls, 0 tokens\n"
        "learned: expression_pair 1, teaching 2"
    )
    await _say(app, runtime, _event(text("/pw status"), user=ADMIN_ID, role="admin"), status)


async def test_status_reads_the_day_s_decisions_from_the_store_so_another_process_sees_them(
    app: App, runtime: Promptweave
) -> None:
    from promptweave.contrib.nonebot.commands import group_status, status_text

    chatter = [_event(text(words), user=MEMBER_ID) for words in ("今天吃什么", "随便吧", "哈哈")]
    for event in chatter:
        await _say(app, runtime, event, None)
    bot, group = str(SELF_ID), str(GROUP)
    sent_at = dt.datetime.fromtimestamp(chatter[-1].time, dt.UTC)
    counted = runtime.router.decisions_today(bot, group, sent_at, "Asia/Shanghai")
    assert sum(counted.values()) == 3
    status = group_status(runtime, bot, group, sent_at)
    assert status.decisions_stored and status.decisions == counted
    assert f"decisions today: {', '.join(f'{r} {n}' for r, n in counted.items())}\n" in (
        status_text(status)
    )
    # A second process on the same file has counted nothing itself, and reads the same day.
    other = Promptweave.from_config(runtime.config, stores=Stores.from_config(runtime.config))
    try:
        assert other.router.decisions_today(bot, group, sent_at, "Asia/Shanghai") == {}
        assert group_status(other, bot, group, sent_at).decisions == counted
        # The next local day starts empty.
        tomorrow = group_status(other, bot, group, sent_at + dt.timedelta(days=1))
        assert tomorrow.decisions == {}
    finally:
        other.close()


def test_status_without_a_turn_log_counts_this_process_s_decisions_and_says_so(app: App) -> None:
    from promptweave.contrib.nonebot.commands import group_status, status_text

    made = Promptweave.from_config(Config(store=StoreConfig(backend="memory")))
    try:
        status = group_status(made, str(SELF_ID), str(GROUP), NOW)
        assert not status.decisions_stored
        assert "decisions today (this process): none\n" in status_text(status)
    finally:
        made.close()


async def test_forget_a_member_then_the_group(app: App, runtime: Promptweave) -> None:
    assert runtime.stores.learned is not None
    bot, group = str(SELF_ID), str(GROUP)
    runtime.stores.learned.put_items(
        [
            LearnedItem(
                kind="teaching",
                bot_id=bot,
                group_id=group,
                key="t1",
                user_id=str(MEMBER_ID),
                learned_at=NOW,
            ),
            LearnedItem(
                kind="expression_pair", bot_id=bot, group_id=group, key="p1", learned_at=NOW
            ),
        ]
    )
    await _say(
        app,
        runtime,
        _event(text("/pw forget member "), at(MEMBER_ID), user=SUPERUSER_ID),
        f"forgot 1 learned item of member {MEMBER_ID} of group {GROUP}: teaching 1.",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw forget member"), user=SUPERUSER_ID),
        "say whose: /pw forget member QQ (or @ them).",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw forget group"), user=ADMIN_ID, role="admin"),
        "/pw forget is for superusers.",
    )
    await _say(
        app,
        runtime,
        _event(text("/pw forget group"), user=SUPERUSER_ID),
        f"forgot 1 learned item of group {GROUP}: expression_pair 1.",
    )
    assert runtime.stores.learned.items(bot, group) == []


async def test_reload_reads_the_overrides_file_again_and_names_its_problems(
    app: App, runtime: Promptweave, tmp_path: Path
) -> None:
    await _say(
        app,
        runtime,
        _event(text("/pw reload"), user=SUPERUSER_ID),
        "overrides file overrides.toml reloaded; this group: persona append.",
    )
    (tmp_path / "overrides.toml").write_text(
        f'[bots."{SELF_ID}".groups."{GROUP}".sections.persona]\nmode = "apend"\n', encoding="utf-8"
    )
    problem = (
        f"overrides not applied: {tmp_path / 'overrides.toml'}: "
        f"bots.{SELF_ID}.groups.{GROUP}.sections.persona.mode: expected one of replace, append, "
        "disable, not 'apend'"
    )
    await _say(app, runtime, _event(text("/pw reload"), user=SUPERUSER_ID), problem)


async def test_pw_with_another_word_is_chat_and_the_command_help_is_not(
    app: App, runtime: Promptweave
) -> None:
    await _say(app, runtime, _event(text("/pw 这个词是啥意思"), user=MEMBER_ID), None)
    assert _logged(runtime) == ["/pw 这个词是啥意思"]
    from promptweave.contrib.nonebot.commands import USAGE

    await _say(app, runtime, _event(text("/pw"), user=ADMIN_ID, role="admin"), USAGE)
    assert _logged(runtime) == ["/pw 这个词是啥意思"]


async def test_pw_and_a_word_that_is_no_subcommand_is_chat_and_other_chat_never_meets_the_command(
    app: App, runtime: Promptweave
) -> None:
    # Not a command: the plugin's matcher hands it to the loop, which records it.
    await _say(app, runtime, _event(text("/pw 这个词是啥意思"), user=MEMBER_ID), None)
    await _say(app, runtime, _event(text("今天好冷"), user=MEMBER_ID), None)
    await _say(
        app,
        runtime,
        _event(text("/pw status"), user=MEMBER_ID),
        "/pw status is for superusers and this group's owner and admins.",
    )
    assert _logged(runtime) == ["/pw 这个词是啥意思", "今天好冷"]


async def test_a_command_is_what_the_command_trie_found_and_then_nothing_or_a_subcommand() -> None:
    from nonebot.adapters.onebot.v11 import Message
    from nonebot.consts import CMD_ARG_KEY, CMD_KEY, PREFIX_KEY

    from promptweave.contrib.nonebot.commands import is_command

    def state(name: tuple[str, ...], rest: str) -> dict[str, Any]:
        return {PREFIX_KEY: {CMD_KEY: name, CMD_ARG_KEY: Message(rest)}}

    assert is_command(state(("pw",), ""))
    assert is_command(state(("pw",), " Status"))
    assert is_command(state(("promptweave",), "forget group"))
    assert not is_command(state(("pw",), "这个词是啥意思"))
    assert not is_command(state(("echo",), "on"))
    assert not is_command({})


async def test_a_command_blocks_the_matchers_after_the_plugin_s_and_chat_does_not(
    app: App, runtime: Promptweave
) -> None:
    from nonebot import on_message
    from nonebot.adapters import Event

    from promptweave.contrib.nonebot import messages

    seen: list[str] = []
    later = on_message(priority=messages.priority + 10, block=False)

    @later.handle()
    async def _seen(event: Event) -> None:
        seen.append(event.get_plaintext())

    try:
        for said, reply in (
            ("/pw status", "/pw status is for superusers and this group's owner and admins."),
            ("/pw 这个词是啥意思", None),
            ("今天好冷", None),
        ):
            async with app.test_matcher([messages, later]) as ctx:
                bot = ctx.create_bot(base=Bot, self_id=str(SELF_ID))
                event = await preprocess(bot, _event(text(said), user=MEMBER_ID))
                ctx.receive_event(bot, event)
                if reply is not None:
                    ctx.should_call_send(event, reply, result={"message_id": 1})
    finally:
        later.destroy()
    assert seen == ["/pw 这个词是啥意思", "今天好冷"]
    assert _logged(runtime) == ["/pw 这个词是啥意思", "今天好冷"]
