"""NoneBot2 plugin: a bot on NoneBot2 and OneBot v11 that takes part in its groups through
promptweave's live loop (``docs/bot.md``).

Load it in a NoneBot2 bot with ``nonebot.load_plugin("promptweave.contrib.nonebot")`` (install
``promptweave[nonebot]``). It opens one :class:`promptweave.Promptweave` and one
:class:`promptweave.BotLoop` per process at start-up and closes them at shutdown; one non-blocking
message matcher hands every group and private message to the loop, which records it, routes it,
and answers, quotes, @s, sends a short phrase or stays silent as the routing decides, sending
through the bot's own API and recording the message ids it returns.

The promptweave configuration is NoneBot's config key ``promptweave_config`` (``.env``:
``PROMPTWEAVE_CONFIG=...``), else ``$PROMPTWEAVE_CONFIG``, else ``./promptweave.toml``, else the
defaults. The bot's name and aliases come from ``[bots."ID"]`` in that file, else the persona
pack; NoneBot's ``NICKNAME`` is used when neither names the bot.
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import os
from pathlib import Path

import attrs
from nonebot import get_driver, get_plugin_config, logger as nonebot_logger, on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent, PrivateMessageEvent
from nonebot.adapters.onebot.v11.event import Reply
from nonebot.matcher import current_bot, current_event
from nonebot.plugin import PluginMetadata
from pydantic import BaseModel

from promptweave import BotLoop, ChatMessage, Config, IncomingEvent, Promptweave, TurnOutcome
from promptweave.contrib.onebot import parse_message
from promptweave.delivery.onebot import OneBotTransport

__all__ = [
    "NoneBotLogHandler",
    "PluginConfig",
    "incoming_event",
    "promptweave_loop",
    "quoted_message",
]

log = logging.getLogger("promptweave.nonebot")

#: The platform of the incoming events (the ``onebot`` contrib plugin's name).
PLATFORM = "onebot"

#: The loggers whose records also go to NoneBot's log, which an operator reads: what the learners
#: learned, and what they could not do (``docs/learning.md``).
FORWARDED_LOGGERS = ("promptweave.learning",)


class NoneBotLogHandler(logging.Handler):
    """Hands each record to NoneBot's logger (loguru) at the same level, naming its logger."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = f"[{record.name}] {record.getMessage()}"
            nonebot_logger.opt(exception=record.exc_info or None).log(record.levelname, message)
        except Exception:  # a logging failure must never reach the bot
            self.handleError(record)


def _forward_logs() -> None:
    for name in FORWARDED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, NoneBotLogHandler) for h in logger.handlers):
            logger.addHandler(NoneBotLogHandler(level=logging.INFO))
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)


_forward_logs()


class PluginConfig(BaseModel):
    """The keys this plugin reads from NoneBot's configuration."""

    promptweave_config: str | None = None
    #: Freeze the start-up heap out of the cyclic garbage collector (``gc.freeze``) once the loop
    #: is open; ``PROMPTWEAVE_GC_FREEZE=false`` in ``.env`` turns it off.
    promptweave_gc_freeze: bool = True


__plugin_meta__ = PluginMetadata(
    name="promptweave",
    description="Group chat through promptweave: routing, assembly, delivery and recording",
    usage='nonebot.load_plugin("promptweave.contrib.nonebot"); configure promptweave.toml',
    type="application",
    homepage="https://pypi.org/project/promptweave/",
    config=PluginConfig,
    supported_adapters={"~onebot.v11"},
)


@attrs.define(eq=False)
class _State:
    loop: BotLoop | None = None


_state = _State()


def _config_path() -> Path | None:
    configured = get_plugin_config(PluginConfig).promptweave_config
    if configured:
        return Path(configured)
    from_env = os.environ.get("PROMPTWEAVE_CONFIG")
    if from_env:
        return Path(from_env)
    local = Path.cwd() / "promptweave.toml"
    return local if local.is_file() else None


def promptweave_loop() -> BotLoop:
    """The process's loop (opened at start-up)."""
    if _state.loop is None:
        raise RuntimeError("the promptweave plugin has not started (NoneBot's start-up hook)")
    return _state.loop


def incoming_event(bot: Bot, event: GroupMessageEvent | PrivateMessageEvent) -> IncomingEvent:
    """The loop's event for a NoneBot OneBot v11 message event.

    The message is read from ``event.original_message``, which keeps the leading @bot and the
    reply segment the adapter strips from ``event.message``; ``event.to_me`` marks it addressed
    (the adapter also sets it for the bot's nickname and for replies to the bot). The replied-to
    message the adapter read (``event.reply``, its ``get_msg`` answer) is the event's
    ``quoted`` message: the first source of the quoted images (``docs/messages.md``).
    """
    message = parse_message(
        [{"type": segment.type, "data": dict(segment.data)} for segment in event.original_message],
        bot_id=str(bot.self_id),
        sender_id=str(event.user_id),
        sender_name=str(event.sender.card or event.sender.nickname or ""),
        message_id=str(event.message_id),
        time=_event_time(event.time),
    )
    if event.to_me and not message.addressed:
        message = attrs.evolve(message, addressed=True)
    return IncomingEvent(
        platform=PLATFORM,
        bot_id=str(bot.self_id),
        group_id=str(event.group_id) if isinstance(event, GroupMessageEvent) else None,
        message=message,
        sender_role=str(getattr(event.sender, "role", None) or "member"),
        quoted=None if event.reply is None else quoted_message(bot, event.reply),
    )


def quoted_message(bot: Bot, reply: Reply) -> ChatMessage:
    """The replied-to message of an event (the adapter's ``event.reply``) as a
    :class:`promptweave.ChatMessage`: its segments parsed like an incoming message's, so its
    image segments' URLs are its ``images``."""
    return parse_message(
        [{"type": segment.type, "data": dict(segment.data)} for segment in reply.message],
        bot_id=str(bot.self_id),
        sender_id=str(reply.sender.user_id or ""),
        sender_name=str(reply.sender.card or reply.sender.nickname or ""),
        message_id=str(reply.message_id),
        time=_event_time(reply.time),
    )


def _event_time(value: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, dt.UTC)


driver = get_driver()


@driver.on_startup
async def _open() -> None:
    config = Config.discover(_config_path())
    runtime = Promptweave.from_config(config, contrib=["onebot"])
    # NoneBot's NICKNAME names the bot where [bots."ID"] does not (before the persona pack).
    nicknames = tuple(sorted(name for name in driver.config.nickname if name))
    _state.loop = BotLoop(runtime=runtime, fallback_names=nicknames)
    log.info("promptweave loop open (config %s)", config.source)
    if get_plugin_config(PluginConfig).promptweave_gc_freeze:
        # What start-up built (the runtime, its plugins, NoneBot's and the adapter's modules)
        # lives as long as the process: moved out of the cyclic collector's reach, it is not
        # walked again by every full collection, which inside NoneBot cost more CPU than the
        # turns themselves (docs/performance.md, "Inside NoneBot").
        gc.collect()
        gc.freeze()


@driver.on_shutdown
async def _close() -> None:
    loop, _state.loop = _state.loop, None
    if loop is not None:
        await loop.aclose()
        loop.runtime.close()


messages = on_message(priority=50, block=False)


@messages.handle()
async def _handle() -> None:
    # No parameters for NoneBot to inject: each one costs a task in an anyio task group, and an
    # annotation narrower than ``Event`` a pydantic validation of the event, on every message
    # (docs/performance.md, "Inside NoneBot"); the matcher's context has both.
    bot = current_bot.get()
    event = current_event.get()
    loop = _state.loop
    if (
        loop is None
        or not isinstance(bot, Bot)
        or not isinstance(event, GroupMessageEvent | PrivateMessageEvent)
    ):
        return
    try:
        incoming = incoming_event(bot, event)
    except ValueError as exc:
        log.warning("message %s not handled: %s", event.message_id, exc)
        return
    outcome: TurnOutcome = await loop.handle(incoming, OneBotTransport(bot))
    log.debug(
        "message %s: %s (%s), %d bubble(s)",
        event.message_id,
        outcome.status,
        outcome.reason,
        len(outcome.bubbles),
    )
