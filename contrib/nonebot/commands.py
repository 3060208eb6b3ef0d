"""Chat commands of the NoneBot plugin: steer the bot in a group from the group itself
(``docs/groups.md``).

One command, ``pw`` (alias ``promptweave``), after NoneBot's ``COMMAND_START`` (``/`` by
default), with a word saying what to do::

    /pw on                    switch the bot on in this group
    /pw off                   switch it off (turns end as group_switched_off)
    /pw reset                 remove the switch: the configuration decides again
    /pw status                on or off and why, reply frequency, quiet hours, decisions and
                              spend today, what was learned (counts by kind)
    /pw forget group          forget everything learned of this group
    /pw forget member QQ|@    forget what was learned of one member
    /pw reload                read the section-overrides file again

``on``, ``off`` and ``status`` are for NoneBot's superusers and for the group's owner and admins;
an admin cannot switch on a group the configuration keeps off. Everything else is for superusers.
A message that is such a command is never chat, whoever sent it: the plugin's matcher answers it
here (:func:`is_command`, :func:`answer`) instead of handing it to the loop, and blocks the
priorities after its own, so the bot never answers a command as a remark. A ``pw`` followed by
any other word is not a command and goes on as chat.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import zoneinfo
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from nonebot.adapters import Message as BaseMessage
from nonebot.adapters.onebot.v11 import (
    GROUP_ADMIN,
    GROUP_OWNER,
    Bot,
    GroupMessageEvent,
    Message,
    MessageEvent,
)
from nonebot.consts import CMD_ARG_KEY, CMD_KEY, PREFIX_KEY
from nonebot.matcher import Matcher
from nonebot.permission import SUPERUSER
from nonebot.rule import command as command_rule
from nonebot.typing import T_State

from promptweave import BotLoop, Promptweave
from promptweave.cli.problems import problems_of, report_lines
from promptweave.errors import PromptweaveError
from promptweave.learning.budget import SPEND_KIND, Spend, spend_totals
from promptweave.prompt.overrides import reload_overrides_file
from promptweave.routing.group_control import GroupSettings, effective_group_settings
from promptweave.store.dashboard_reads import DashboardReads
from promptweave.store.routing_state import GroupSwitch
from promptweave.store.sqlite import STORE_ERRORS

__all__ = [
    "COMMAND",
    "COMMAND_ALIASES",
    "SUBCOMMANDS",
    "GroupStatus",
    "answer",
    "attach",
    "group_status",
    "is_command",
    "status_text",
]

log = logging.getLogger("promptweave.nonebot")

#: The command's name and its aliases, after NoneBot's ``COMMAND_START``.
COMMAND = "pw"
COMMAND_ALIASES: set[str | tuple[str, ...]] = {"promptweave"}
#: The words that make ``pw …`` a command; with any other, the message is chat.
SUBCOMMANDS = ("on", "off", "reset", "status", "forget", "reload", "help")
#: Whom ``on``, ``off`` and ``status`` also answer in their own group.
GROUP_STAFF = GROUP_OWNER | GROUP_ADMIN
#: The most session rows read for the turns' spend of a day.
TURN_ROWS = 100_000

USAGE = "/pw on | off | reset | status | forget group | forget member QQ | reload (docs/groups.md)"


def _words(args: Message) -> list[str]:
    return args.extract_plain_text().split()


#: The command and its aliases as NoneBot's command trie gives them (``state[PREFIX_KEY]``).
_COMMANDS = frozenset(
    alias if isinstance(alias, tuple) else (alias,) for alias in {COMMAND, *COMMAND_ALIASES}
)
# Registers /pw and its aliases in NoneBot's command trie (its command rule would be the rule of
# an ``on_command`` matcher, but that rule solves three injected dependencies, each a call on a
# worker thread, for every message of every group: docs/performance.md, "Inside NoneBot").
command_rule(COMMAND, *COMMAND_ALIASES)


def is_command(state: T_State) -> bool:
    """Whether the message is a ``/pw`` command (``pw`` or an alias and then nothing or a
    subcommand), from what NoneBot's preprocessing of every message found in the command trie
    (``state``): a lookup. The plugin's one matcher answers such a message with :func:`answer`
    instead of handing it to the loop.

    A matcher of the commands' own would cost NoneBot, on every message, a task (a priority
    level of its own: an anyio task group too) and a log record for its rule; an ``on_command``
    matcher's rule three injected dependencies, each a call on a worker thread
    (docs/performance.md, "Inside NoneBot")."""
    prefix = state.get(PREFIX_KEY) or {}
    if prefix.get(CMD_KEY) not in _COMMANDS:
        return False
    args = prefix.get(CMD_ARG_KEY)
    words = args.extract_plain_text().split() if isinstance(args, BaseMessage) else []
    return not words or words[0].lower() in SUBCOMMANDS


@attrs.frozen(kw_only=True)
class GroupStatus:
    """What ``/pw status`` says of one group.

    :param settings: the per-group settings in force.
    :param quiet_now: the quiet range in force now, if any.
    :param decisions: the decisions in the group today, by reason, most frequent first.
    :param decisions_stored: whether they were read from the store's turn log (every process,
        across restarts) rather than counted by this process since it started.
    :param answers: the bot's answers recorded today.
    :param turn_tokens: the tokens the provider reported for them (prompt plus output).
    :param learning: what learning spent in the group today.
    :param learned: items learned of the group, by kind.
    """

    settings: GroupSettings
    quiet_now: str | None
    decisions: dict[str, int]
    decisions_stored: bool
    answers: int
    turn_tokens: int
    learning: Spend
    learned: dict[str, int]


def _day_start(now: dt.datetime, timezone: str) -> dt.datetime:
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    local = now.astimezone(zone)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def group_status(runtime: Promptweave, bot_id: str, group_id: str, now: dt.datetime) -> GroupStatus:
    """The status of ``bot_id`` in ``group_id`` at ``now``: "today" is the bot's local day.

    :raises promptweave.StoreUnavailableError: a store cannot be read.
    """
    settings = effective_group_settings(runtime.config, runtime.stores.routing, bot_id, group_id)
    quiet = settings.quiet_range(now)
    since = _day_start(now, settings.timezone)
    answers = tokens = 0
    sessions = runtime.stores.sessions
    if sessions is not None:
        for row in sessions.group_turns(bot_id, group_id, until=now, since=since, limit=TURN_ROWS):
            if row.role != "assistant":
                continue
            answers += 1
            usage = row.usage or {}
            tokens += sum(
                value
                for value in (usage.get("prompt_tokens"), usage.get("output_tokens"))
                if isinstance(value, int) and not isinstance(value, bool)
            )
    decisions, stored = _decisions_today(runtime, bot_id, group_id, now, settings.timezone)
    spent, learned = Spend(), Counter[str]()
    store = runtime.stores.learned
    if store is not None:
        items = store.items(bot_id, group_id, limit=10**9)
        today = [item for item in items if item.kind == SPEND_KIND and _spend_hour(item) >= since]
        for total in spend_totals(today).values():
            spent.add(total)
        learned.update(item.kind for item in items if item.kind != SPEND_KIND)
    return GroupStatus(
        settings=settings,
        quiet_now=None if quiet is None else quiet.text,
        decisions=decisions,
        decisions_stored=stored,
        answers=answers,
        turn_tokens=tokens,
        learning=spent,
        learned=dict(sorted(learned.items())),
    )


def _decisions_today(
    runtime: Promptweave, bot_id: str, group_id: str, now: dt.datetime, timezone: str
) -> tuple[dict[str, int], bool]:
    """Today's decisions in the group by reason, and whether they come from the store.

    A SQLite store keeps the turn log, whose daily counts hold every routed message of every
    process sharing the file since it was created; the turns still queued for it are written
    first. The other backends keep no turn log: the router's own counts since it started.

    :raises promptweave.StoreUnavailableError: the turn log cannot be read or written.
    """
    stores = runtime.stores
    if stores.turns is None or stores.database is None:
        return runtime.router.decisions_today(bot_id, group_id, now, timezone), False
    stores.turns.flush()
    day = _day_start(now, timezone).date().isoformat()
    counts: Counter[str] = Counter()
    for row in DashboardReads(stores.database).day(bot_id, group_id, day):
        counts[row.reason or row.status] += row.turns
    return dict(counts.most_common()), True


def _spend_hour(item: Any) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(str(item.fields.get("hour")))
    except ValueError:
        moment: dt.datetime = item.learned_at
        return moment


def _switch_words(switch: GroupSwitch) -> str:
    by = f" by {switch.by}" if switch.by else ""
    at = f" at {switch.at.isoformat(timespec='minutes')}" if switch.at is not None else ""
    return f"switched {'on' if switch.enabled else 'off'}{by}{at}"


def status_text(status: GroupStatus) -> str:
    """The status as the command replies it."""
    settings = status.settings
    if settings.switch is not None:
        state = ("on" if settings.enabled else "off") + f" ({_switch_words(settings.switch)})"
        if settings.enabled and not settings.configured:
            state += f", the configuration says {settings.configured_reason}"
    elif settings.enabled:
        state = "on (configuration)"
    else:
        state = f"off (configuration: {settings.reason})"
    frequency = f"necessity threshold {settings.necessity_threshold}; canned phrases " + (
        "/".join(f"{p:g}" for p in settings.low_engagement_probabilities)
        if settings.low_engagement
        else "off"
    )
    lines = [f"promptweave in group {settings.group_id}: {state}", frequency]
    if settings.quiet_hours:
        spans = ", ".join(span.text for span in settings.quiet_hours)
        now = f", quiet now ({status.quiet_now})" if status.quiet_now else ""
        lines.append(f"quiet hours {spans} {settings.timezone}, allow {settings.quiet_allow}{now}")
    decisions = ", ".join(f"{reason} {n}" for reason, n in status.decisions.items())
    counted = "" if status.decisions_stored else " (this process)"
    lines.append(f"decisions today{counted}: {decisions or 'none'}")
    lines.append(
        f"spend today: {status.answers} answers, {status.turn_tokens:,} tokens reported; "
        f"learning {status.learning.calls} model calls, {status.learning.tokens:,} tokens"
    )
    learned = ", ".join(f"{kind} {n}" for kind, n in status.learned.items())
    lines.append(
        f"learned: {learned or 'nothing'}"
        + ("" if settings.learn else " (learning is off for this group)")
    )
    lines.extend(settings.problems)
    return "\n".join(lines)


# -- the handler ------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Source:
    """Where the commands find the plugin's loop: the package hands over its accessor
    (:func:`attach`), so this module never imports its package."""

    loop: Callable[[], BotLoop] | None = None


_source = _Source()


def attach(loop: Callable[[], BotLoop]) -> None:
    """Give the commands the plugin's loop accessor (``promptweave_loop``, which raises
    ``RuntimeError`` before start-up)."""
    _source.loop = loop


def _runtime() -> Promptweave | None:
    if _source.loop is None:
        return None
    try:
        return _source.loop().runtime
    except RuntimeError:
        return None


async def _allowed(bot: Bot, event: MessageEvent, staff: bool) -> bool:
    if await SUPERUSER(bot, event):
        return True
    return staff and isinstance(event, GroupMessageEvent) and await GROUP_STAFF(bot, event)


def _member(args: Message, words: Sequence[str]) -> str | None:
    """The member of ``forget member``: an @ in the message, else a QQ number after it."""
    for segment in args:
        if segment.type == "at" and str(segment.data.get("qq", "")).isdigit():
            return str(segment.data["qq"])
    return words[2] if len(words) > 2 and words[2].isdigit() else None


async def answer(bot: Bot, event: MessageEvent, matcher: Matcher) -> None:
    """Answer the command :func:`is_command` found in ``matcher``'s state, and keep the
    priorities after the matcher's from seeing it (``matcher.block``)."""
    matcher.block = True
    args = matcher.state[PREFIX_KEY][CMD_ARG_KEY]
    words = [word.lower() for word in _words(args)] or ["help"]
    action = words[0]
    staff = action in ("on", "off", "status", "help")
    if not await _allowed(bot, event, staff):
        who = "superusers and this group's owner and admins" if staff else "superusers"
        await matcher.finish(f"/pw {action} is for {who}.")
    if action == "help":
        await matcher.finish(USAGE)
    runtime = _runtime()
    if runtime is None:
        await matcher.finish("promptweave has not started.")
    if action == "reload":
        await matcher.finish(_reload(runtime, str(bot.self_id), event))
    if not isinstance(event, GroupMessageEvent):
        await matcher.finish(f"/pw {action} works in a group: send it there.")
    bot_id, group_id, user = str(bot.self_id), str(event.group_id), str(event.user_id)
    try:
        reply = await _group_action(runtime, bot, event, action, words, args)
    except (PromptweaveError, *STORE_ERRORS) as exc:
        log.warning("/pw %s in group %s failed: %s", action, group_id, exc)
        reply = f"/pw {action} failed: {exc}"
    log.info("/pw %s by %s in group %s of bot %s: %s", action, user, group_id, bot_id, reply)
    await matcher.finish(reply)


async def _group_action(
    runtime: Promptweave,
    bot: Bot,
    event: GroupMessageEvent,
    action: str,
    words: Sequence[str],
    args: Message,
) -> str:
    bot_id, group_id = str(bot.self_id), str(event.group_id)
    now = dt.datetime.now(dt.UTC)
    routing = runtime.stores.routing
    if action == "status":
        # Off the event loop: it reads the store, and writes the turn log's queue first.
        status = await asyncio.to_thread(group_status, runtime, bot_id, group_id, now)
        return status_text(status)
    if action in ("on", "off", "reset"):
        if routing is None:
            return f"/pw {action}: the store is off, no switch can be kept ({runtime.stores.unavailable})."
        if action == "reset" and not await SUPERUSER(bot, event):
            return "/pw reset is for superusers."
        settings = effective_group_settings(runtime.config, routing, bot_id, group_id)
        if action == "on" and not settings.configured and not await SUPERUSER(bot, event):
            return (
                f"the configuration keeps the bot off here ({settings.configured_reason}); "
                "only a superuser can switch it on."
            )
        switch = (
            None
            if action == "reset"
            else GroupSwitch(enabled=action == "on", by=f"chat:{event.user_id}", at=now)
        )
        routing.set_switch(bot_id, group_id, switch)
        after = effective_group_settings(runtime.config, routing, bot_id, group_id)
        if after.enabled:
            return f"promptweave is on in group {group_id}."
        return f"promptweave is off in group {group_id} ({after.reason})."
    if action == "forget":
        target = words[1] if len(words) > 1 else ""
        if target == "group":
            gone = runtime.learning.forget(bot_id, group_id)
            return _forgot(gone, f"group {group_id}")
        if target == "member":
            member = _member(args, words)
            if member is None:
                return "say whose: /pw forget member QQ (or @ them)."
            gone = runtime.learning.forget_member(bot_id, group_id, member)
            return _forgot(gone, f"member {member} of group {group_id}")
        return "say what: /pw forget group, or /pw forget member QQ."
    return USAGE


def _forgot(gone: Sequence[Any], scope: str) -> str:
    if not gone:
        return f"nothing learned of {scope} to forget."
    kinds = Counter(item.kind for item in gone)
    listed = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    return f"forgot {len(gone)} learned item{'s' if len(gone) != 1 else ''} of {scope}: {listed}."


def _reload(runtime: Promptweave, bot_id: str, event: MessageEvent) -> str:
    name = runtime.config.overrides_file
    if not name:
        return "no overrides file is configured (overrides_file in promptweave.toml)."
    path = runtime.config.resolve_path(name)
    try:
        overrides = reload_overrides_file(path)
    except PromptweaveError as exc:
        problems = "; ".join(report_lines(problems_of(exc)))
        log.warning("overrides file not reloaded: %s", problems)
        return f"overrides not applied: {problems}"
    if not isinstance(event, GroupMessageEvent):
        return f"overrides file {path.name} reloaded."
    modes = overrides.modes(bot_id, str(event.group_id))
    listed = ", ".join(f"{section} {mode}" for section, mode in sorted(modes.items()))
    return f"overrides file {path.name} reloaded; this group: {listed or 'no override'}."
