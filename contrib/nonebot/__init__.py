"""NoneBot2 plugin: a bot on NoneBot2 and OneBot v11 that takes part in its groups through
promptweave's live loop (``docs/bot.md``).

Load it in a NoneBot2 bot through the ``nonebot-plugin-promptweave`` distribution
(``nonebot.load_plugin("nonebot_plugin_promptweave")``, which also keeps the store in
nonebot-plugin-localstore's data folder), or directly with
``nonebot.load_plugin("promptweave.contrib.nonebot")``. It opens one
:class:`promptweave.Promptweave` and one :class:`promptweave.BotLoop` per process at start-up and
closes them at shutdown; one non-blocking message matcher answers a ``/pw`` command itself
(:mod:`promptweave.contrib.nonebot.commands`) and hands every other group and private message to
the loop, which records it, routes it, and answers, quotes, @s, sends a short phrase or stays
silent as the routing decides, sending through the bot's own API and recording the message ids it
returns.

The promptweave configuration is NoneBot's config key ``promptweave_config`` (``.env``:
``PROMPTWEAVE_CONFIG=...``), else ``$PROMPTWEAVE_CONFIG``, else ``./promptweave.toml``, else the
defaults; NoneBot's ``PROMPTWEAVE_BASE_URL``, ``PROMPTWEAVE_API_KEY``, ``PROMPTWEAVE_MODEL`` and
``PROMPTWEAVE_STORE`` win over the file (:mod:`promptweave.contrib.nonebot.settings`). The bot's
name and aliases come from ``[bots."ID"]`` in that file, else NoneBot's ``NICKNAME`` (the first
is the name), else the persona pack.

Everything goes to NoneBot's log: at start-up one line with the configuration file, the bots,
the model endpoint and the store; a turn the model left unanswered gives a warning with the reason
and the fix, once per cause every ten minutes (:mod:`promptweave.contrib.nonebot.failure_log`).
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
from pathlib import Path

import attrs
from nonebot import get_driver, get_plugin_config, logger as nonebot_logger, on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent, PrivateMessageEvent
from nonebot.adapters.onebot.v11.event import Reply
from nonebot.matcher import current_bot, current_event, current_matcher
from nonebot.plugin import PluginMetadata

from promptweave import BotLoop, ChatMessage, IncomingEvent, Promptweave, TurnOutcome
from promptweave.contrib.nonebot.failure_log import FailureLog
from promptweave.contrib.nonebot.settings import PluginConfig, Settings, nicknames_in_order
from promptweave.contrib.onebot import event_time, parse_message
from promptweave.delivery.onebot import OneBotTransport
from promptweave.errors import PromptweaveError

__all__ = [
    "HOMEPAGE",
    "USAGE",
    "NoneBotLogHandler",
    "PluginConfig",
    "freeze_start_up_heap",
    "incoming_event",
    "promptweave_loop",
    "quoted_message",
    "use_data_dir",
]

log = logging.getLogger("promptweave.nonebot")

#: The platform of the incoming events (the ``onebot`` contrib plugin's name).
PLATFORM = "onebot"

#: The loggers whose records also go to NoneBot's log, which an operator reads: everything
#: promptweave says at INFO and above (what the learners learned and could not do,
#: ``docs/learning.md``; a turn's deadline, a full queue, a failed send or plugin, ``docs/bot.md``).
FORWARDED_LOGGERS = ("promptweave",)


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


#: The plugin's page: the repository's guide to running the bot. The repository's address is
#: the one ``pyproject.toml`` gives under ``[project.urls]``; both distributions name this page.
HOMEPAGE = "https://github.com/promptweave/promptweave/blob/main/docs/bot.md"

#: What ``__plugin_meta__.usage`` says.
USAGE = """\
Answers in the OneBot v11 groups and private chats of the bot when the routing decides to: when
@-ed or named, on a question to it, now and then on its own; silent otherwise.
Configure promptweave.toml ([provider], [bots."ID"], [plugins] contrib = ["openai_compat"]);
NoneBot's .env may set PROMPTWEAVE_CONFIG, PROMPTWEAVE_BASE_URL, PROMPTWEAVE_API_KEY,
PROMPTWEAVE_MODEL and PROMPTWEAVE_STORE. The start-up line in the log names what was loaded;
a message the model left unanswered is logged as a warning with the fix."""

__plugin_meta__ = PluginMetadata(
    name="promptweave",
    description="Group chat through promptweave: routing, assembly, delivery and recording",
    usage=USAGE,
    type="application",
    homepage=HOMEPAGE,
    config=PluginConfig,
    supported_adapters={"~onebot.v11"},
)


@attrs.define(eq=False)
class _State:
    loop: BotLoop | None = None
    #: Where the SQLite store goes unless configured (the distribution's localstore folder).
    data_dir: Path | None = None
    failures: FailureLog = attrs.field(factory=lambda: FailureLog(warn=nonebot_logger.warning))


_state = _State()


def use_data_dir(path: Path) -> None:
    """Keep the SQLite store in ``path`` unless ``PROMPTWEAVE_STORE`` or ``[store] path`` says
    otherwise; the ``nonebot-plugin-promptweave`` distribution passes nonebot-plugin-localstore's
    data folder. Call it before NoneBot starts."""
    _state.data_dir = path


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
    # A time too large for the platform's clock is a ValueError like any bad time: the handler
    # logs the message as not handled instead of raising out of the matcher.
    return event_time(value)


driver = get_driver()


@driver.on_startup
async def _open() -> None:
    try:
        settings = Settings.load(get_plugin_config(PluginConfig), data_dir=_state.data_dir)
        runtime = Promptweave.from_config(settings.config, contrib=["onebot"])
    except PromptweaveError as exc:
        # A wrong file or a missing extra stops the start, said in one line before NoneBot's
        # own report of the failed start-up.
        nonebot_logger.error(f"promptweave cannot start: {exc}")
        raise
    # NoneBot's NICKNAME names the bot where [bots."ID"] does not (before the persona pack), in
    # the order the operator wrote it.
    # Again at start-up: a logging configuration the bot applied since the import (dictConfig,
    # basicConfig(force=True)) may have replaced the handlers.
    _forward_logs()
    nicknames = nicknames_in_order(driver.config.nickname, driver.env)
    _state.loop = BotLoop(runtime=runtime, fallback_names=nicknames)
    nonebot_logger.info(settings.startup_line(_bot_names(runtime, nicknames)))
    keys = get_plugin_config(PluginConfig)
    if keys.promptweave_dashboard_path:
        from nonebot import get_app

        from promptweave.serve.app import mount  # the serve extra, only when asked for

        config = settings.config
        path = config.resolve_path(config.store.path)
        mount(
            get_app(),
            keys.promptweave_dashboard_path,
            store=path,
            config=config,
            admin_token=keys.promptweave_dashboard_token,
        )
        nonebot_logger.info(
            f"promptweave dashboard at {keys.promptweave_dashboard_path} (store {path})"
        )
    freeze_start_up_heap(keys.promptweave_gc_freeze)


def freeze_start_up_heap(enabled: bool) -> bool:
    """Move what start-up built to the cycle collector's permanent generation (``gc.freeze``,
    after one collection), unless ``PROMPTWEAVE_GC_FREEZE=false``; whether it did.

    What start-up built (the runtime, its plugins, NoneBot's and the adapter's modules) lives as
    long as the process: out of the collector's reach, it is not walked again by every full
    collection, which inside NoneBot cost more CPU than the turns themselves
    (``docs/performance.md``, "Inside NoneBot")."""
    if not enabled:
        return False
    gc.collect()
    gc.freeze()
    return True


def _bot_names(runtime: Promptweave, nicknames: tuple[str, ...]) -> str:
    """``10001 小织 (织织); any other: 小织 (NICKNAME)``: the configured bots and the name any
    other account answers to."""
    named = []
    for bot_id in runtime.config.bots:
        bot = runtime.bot_for(bot_id, nicknames)
        aliases = f" ({', '.join(bot.aliases)})" if bot.aliases else ""
        named.append(f"{bot_id} {bot.name}{aliases}")
    other = runtime.bot_for("0", nicknames)
    source = "NICKNAME" if nicknames else "the persona pack"
    named.append(f"{'any other' if named else 'every account'}: {other.name} ({source})")
    return "; ".join(named)


@driver.on_shutdown
async def _close() -> None:
    loop, _state.loop = _state.loop, None
    if loop is not None:
        await loop.aclose()
        loop.runtime.close()


#: The plugin's one matcher: every message of the bot's groups and private chats, a ``/pw``
#: command answered by :mod:`promptweave.contrib.nonebot.commands` (and blocked from the
#: priorities after it), anything else handed to the loop.
messages = on_message(priority=50, block=False)


@messages.handle()
async def _handle() -> None:
    # No parameters for NoneBot to inject: each one costs a task in an anyio task group, and an
    # annotation narrower than ``Event`` a pydantic validation of the event, on every message
    # (docs/performance.md, "Inside NoneBot"); the matcher's context has both.
    bot = current_bot.get()
    event = current_event.get()
    if not isinstance(bot, Bot) or not isinstance(event, GroupMessageEvent | PrivateMessageEvent):
        return
    matcher = current_matcher.get()
    if commands.is_command(matcher.state):
        await commands.answer(bot, event, matcher)
        return
    loop = _state.loop
    if loop is None:
        return
    try:
        incoming = incoming_event(bot, event)
    except ValueError as exc:
        log.warning("message %s not handled: %s", event.message_id, exc)
        return
    outcome: TurnOutcome = await loop.handle(incoming, OneBotTransport(bot))
    _state.failures.note(outcome)
    log.debug(
        "message %s: %s (%s), %d bubble(s)",
        event.message_id,
        outcome.status,
        outcome.reason,
        len(outcome.bubbles),
    )


# The chat commands (/pw on, off, status, forget, reload: docs/groups.md), after the names above
# that they use.
from promptweave.contrib.nonebot import commands as commands  # noqa: E402

commands.attach(promptweave_loop)
