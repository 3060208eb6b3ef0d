"""``promptweave learn`` and ``promptweave learned``: running the learners over a store now, and
showing or forgetting what they learned (``docs/cli.md``, ``docs/learning.md``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from promptweave.cli.common import config_option, load_config, not_blank, now_option, open_store
from promptweave.cli.problems import (
    EXIT_CONFIG,
    Problem,
    config_error,
    input_error,
    shown_path,
)
from promptweave.config import Config
from promptweave.errors import PromptweaveError
from promptweave.learning.budget import SPEND_KIND, Spend, hour_of, spend_totals
from promptweave.learning.stage import LearnerRun, RunStatus
from promptweave.runtime import Promptweave
from promptweave.store.learned import LearnedItem, LearnedStore
from promptweave.store.stores import Stores

__all__ = ["learn", "learned"]

#: The most items ``learned list`` reads of one (bot, group).
LIST_LIMIT = 1_000_000

_Scope = tuple[str, str]


store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite store file (default: [store] of the config).",
)
bot_option = click.option(
    "--bot", "bot_id", default=None, callback=not_blank, help="Only this bot account."
)
group_option = click.option(
    "--group", "group_id", default=None, callback=not_blank, help="Only this group."
)


def _open(config_path: Path | None, store_path: Path | None) -> tuple[Config, Stores, str]:
    """The config, the stores of ``--store`` (else of ``[store]``) and the store as named for the
    user. A missing SQLite file is exit status 2, a configuration that keeps nothing learnable
    too (the in-memory backend would start empty)."""
    config = load_config(config_path, store_path)
    if not config.store.enabled:
        raise input_error(
            [
                Problem(
                    text="learning is unavailable: the store is disabled ([store] enabled = false)"
                )
            ]
        )
    if config.store.backend == "memory":
        raise input_error(
            [
                Problem(
                    text='learning is unavailable: the configured store is in memory ([store] backend = "memory"); '
                    "give --store FILE"
                )
            ]
        )
    if config.store.backend == "redis":
        try:
            return config, Stores.from_config(config), "redis"
        except PromptweaveError as exc:
            raise config_error(exc) from exc
    path = config.resolve_path(config.store.path)
    stores = open_store(path, config_path, create=False)
    return config, stores, shown_path(path)


def _runtime(config: Config, stores: Stores) -> Promptweave:
    try:
        return Promptweave.from_config(config, stores=stores)
    except PromptweaveError as exc:
        raise config_error(exc) from exc


def _learning_runtime(config_path: Path | None, store_path: Path | None) -> tuple[Promptweave, str]:
    """A runtime over the store whose learning is available, or exit status 2 saying why not."""
    config, stores, shown = _open(config_path, store_path)
    runtime = _runtime(config, stores)
    unavailable = runtime.learning.unavailable
    if unavailable is not None:
        runtime.close()
        raise input_error([Problem(file=shown, text=f"learning is unavailable: {unavailable}")])
    return runtime, shown


def _learned_store(stores: Stores, shown: str) -> LearnedStore:
    if stores.learned is None:
        why = stores.unavailable or "the store keeps no learned data"
        raise input_error([Problem(file=shown, text=f"no learned data: {why}")])
    return stores.learned


def _matching(scopes: Sequence[_Scope], bot_id: str | None, group_id: str | None) -> list[_Scope]:
    return sorted(
        (bot, group)
        for bot, group in dict.fromkeys(scopes)
        if (bot_id is None or bot == bot_id) and (group_id is None or group == group_id)
    )


def _scope_name(bot_id: str, group_id: str) -> str:
    return f"group {group_id} (bot {bot_id})"


def _filter_name(bot_id: str | None, group_id: str | None) -> str:
    parts = [f"group {group_id}" if group_id else "", f"bot {bot_id}" if bot_id else ""]
    return " of ".join(part for part in parts if part)


# -- promptweave learn ---------------------------------------------------------------------------


@click.command()
@store_option
@bot_option
@group_option
@now_option("The time of the run (default: now), ISO 8601 with its UTC offset.")
@config_option
def learn(
    store_path: Path | None,
    bot_id: str | None,
    group_id: str | None,
    now: dt.datetime | None,
    config_path: Path | None,
) -> None:
    """Run every learner over the recorded groups until each has caught up, and say what they
    learned; exit status 1 when a learner failed."""
    runtime, shown = _learning_runtime(config_path, store_path)
    try:
        stage = runtime.learning
        source: Any = runtime.stores.group_log
        scopes = _matching(source.group_scopes(), bot_id, group_id)
        if not scopes:
            only = _filter_name(bot_id, group_id)
            click.echo(
                f"nothing to learn: {shown} holds no group messages{' of ' + only if only else ''}"
            )
            return
        moment = now or dt.datetime.now(dt.UTC)
        runs: dict[_Scope, list[LearnerRun]] = {}
        with _quiet_failures(), _progress(len(scopes)) as (advance, show):
            for scope in scopes:
                runs[scope] = stage.run_all(moment, scopes=[scope], progress=show)
                advance()
        failed = False
        for scope in scopes:
            line, scope_failed = _learn_line(scope, runs[scope])
            failed = failed or scope_failed
            click.echo(line)
        for why, names in _by_reason(stage.skipped).items():
            click.echo(f"{_learners(names)} did not run: {why}")
    finally:
        runtime.close()
    if failed:
        click.get_current_context().exit(EXIT_CONFIG)


def _by_reason(skipped: Mapping[str, str]) -> dict[str, list[str]]:
    """The learners that did not run, by why (in registration order)."""
    found: dict[str, list[str]] = {}
    for name, why in skipped.items():
        found.setdefault(why, []).append(name)
    return found


def _learners(names: Sequence[str]) -> str:
    return f"learner {names[0]}" if len(names) == 1 else "learners " + ", ".join(names)


@contextlib.contextmanager
def _quiet_failures() -> Iterator[None]:
    """The stage logs each failed run as a warning; the command names every failure in its own
    lines, so the warnings are held back while it runs (errors still show)."""
    logger = logging.getLogger("promptweave.learning")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _progress(
    count: int,
) -> Iterator[tuple[Callable[[], None], Callable[[LearnerRun], None]]]:
    """A progress bar of the groups on a terminal (standard error), nothing otherwise; yields
    the step after a group and the callback of each run (it shows the run's learner)."""
    stream = sys.stderr
    if not stream.isatty():
        yield (lambda: None), (lambda _run: None)
        return
    current: list[str] = [""]

    def shown(_item: object) -> str:
        return current[0]

    with click.progressbar(
        length=count, label="learning", file=stream, item_show_func=shown
    ) as bar:

        def run_done(run: LearnerRun) -> None:
            current[0] = f"{run.learner} in group {run.group_id}"
            bar.render_progress()

        yield (lambda: bar.update(1)), run_done


def _learn_line(scope: _Scope, runs: Sequence[LearnerRun]) -> tuple[str, bool]:
    """``group G (bot B): 3 expression_pair, 1 rhythm from 9 new messages`` (the items stored,
    new or learned again), with each failure
    (``; learner NAME failed: ERROR``) and each run another process holds."""
    # An item learned again by a later run of the same learner (a batch after a full one) is
    # one item: the kinds count distinct keys.
    keys: set[tuple[str, str]] = set()
    messages: dict[str, int] = {}
    problems: list[str] = []
    failed = False
    for run in runs:
        keys.update((item.kind, item.key) for item in run.items)
        messages[run.learner] = messages.get(run.learner, 0) + run.messages
        if run.status == RunStatus.FAILED:
            failed = True
            problems.append(f"learner {run.learner} failed: {run.error}")
        elif run.status == RunStatus.LEASED_ELSEWHERE:
            problems.append(f"learner {run.learner} skipped: another process is learning")
        elif run.status == RunStatus.LEASE_LOST:
            problems.append(f"learner {run.learner} lost its lease: {run.error}")
        elif run.status == RunStatus.OPTED_OUT:
            problems.append(f"learner {run.learner} skipped: the group opted out")
        elif run.status == RunStatus.WAITING_BUDGET:
            problems.append(f"learner {run.learner} waits: {run.error}")
    learned: dict[str, int] = {}
    for kind, _key in keys:
        learned[kind] = learned.get(kind, 0) + 1
    read = max(messages.values(), default=0)
    what = ", ".join(f"{count} {kind}" for kind, count in sorted(learned.items()))
    if read == 0 and not problems:
        text = "nothing new"
    else:
        text = f"{what or 'nothing'} from {read} new messages"
    return "; ".join([f"{_scope_name(*scope)}: {text}", *problems]), failed


# -- promptweave learned -------------------------------------------------------------------------


@click.group()
def learned() -> None:
    """Show or forget what the learners learned (docs/learning.md)."""


@learned.command("list")
@store_option
@bot_option
@group_option
@click.option("--kind", default=None, callback=not_blank, help="Only items of this kind.")
@click.option(
    "--user", "user_id", default=None, callback=not_blank, help="Only what is about this member."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@config_option
def learned_list(
    store_path: Path | None,
    bot_id: str | None,
    group_id: str | None,
    kind: str | None,
    user_id: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """List the learned items by group and kind, with their fields, count, source messages and
    when they were learned."""
    _config, stores, shown = _open(config_path, store_path)
    try:
        store = _learned_store(stores, shown)
        found: list[tuple[_Scope, list[LearnedItem]]] = []
        for scope in _matching(store.scopes(), bot_id, group_id):
            items = store.items(*scope, kind=kind, user_id=user_id, limit=LIST_LIMIT)
            if kind is None:  # what learning spent is bookkeeping: ``learned stats`` shows it
                items = [item for item in items if item.kind != SPEND_KIND]
            if items:
                found.append((scope, items))
    finally:
        stores.close()
    if as_json:
        for _scope, items in found:
            for item in items:
                click.echo(json.dumps(item.to_json(), ensure_ascii=False))
        return
    if not found:
        only = " ".join(
            part
            for part in (
                f"of kind {kind}" if kind else "",
                f"about member {user_id}" if user_id else "",
                _filter_name(bot_id, group_id),
            )
            if part
        )
        click.echo(f"nothing learned{' ' + only if only else ''} in {shown}", err=True)
        return
    for number, (scope, items) in enumerate(found):
        if number:
            click.echo()
        click.echo(_scope_name(*scope))
        for item_kind, of_kind in _by_kind(items).items():
            click.echo(f"  {item_kind} ({len(of_kind)})")
            for item in of_kind:
                for line in _item_lines(item):
                    click.echo(f"    {line}")


def _by_kind(items: Sequence[LearnedItem]) -> dict[str, list[LearnedItem]]:
    """The items by kind, kinds sorted by name, each kind's items in the store's order."""
    grouped: dict[str, list[LearnedItem]] = {}
    for item in items:
        grouped.setdefault(item.kind, []).append(item)
    return dict(sorted(grouped.items()))


def _item_lines(item: LearnedItem) -> list[str]:
    """``KEY  ×COUNT  learned AT`` then each field (``name: value``) and where it came from."""
    head = f"{item.key}  ×{item.count}  learned {item.learned_at.isoformat()}"
    if item.updated_at is not None and item.updated_at != item.learned_at:
        head += f", again {item.updated_at.isoformat()}"
    lines = [head]
    if item.user_id:
        lines.append(f"  user: {item.user_id}")
    lines += [f"  {name}: {_value(value)}" for name, value in item.fields.items()]
    sources = ", ".join(item.source_message_ids) or "(none)"
    lines.append(f"  from messages: {sources}")
    return lines


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@learned.command("forget")
@store_option
@click.option("--bot", "bot_id", required=True, callback=not_blank, help="The bot account.")
@click.option("--group", "group_id", required=True, callback=not_blank, help="The group.")
@click.option("--kind", default=None, callback=not_blank, help="Forget the items of this kind…")
@click.option("--key", default=None, callback=not_blank, help="…or only this one (with --kind).")
@click.option("--all", "everything", is_flag=True, help="Forget everything learned of the group.")
@click.option(
    "--user",
    "user_id",
    default=None,
    callback=not_blank,
    help="Forget what is about this member (of --kind only, when given).",
)
@config_option
def learned_forget(
    store_path: Path | None,
    bot_id: str,
    group_id: str,
    kind: str | None,
    key: str | None,
    everything: bool,
    user_id: str | None,
    config_path: Path | None,
) -> None:
    """Forget one item (--kind and --key), a kind (--kind), what is about a member (--user) or
    everything of a group (--all).

    The learners that wrote them are told (negative feedback takes back its phrases), and what
    was forgotten is not learned again from the same messages."""
    if everything and (kind or key or user_id):
        raise click.UsageError(
            "--all forgets everything of the group: give it without --kind, --key or --user"
        )
    if key and not kind:
        raise click.UsageError("--key needs --kind (keys are unique within a kind)")
    if key and user_id:
        raise click.UsageError("--key names one item already: give it without --user")
    if not (everything or kind or user_id):
        raise click.UsageError(
            "say what to forget: --kind K --key KEY (one item), --kind K (a kind), --user ID "
            "(what is about a member) or --all"
        )
    runtime, shown = _learning_runtime(config_path, store_path)
    try:
        if user_id:
            gone = runtime.learning.forget_member(bot_id, group_id, user_id, kind=kind)
        else:
            gone = runtime.learning.forget(bot_id, group_id, kind=kind, key=key)
    except PromptweaveError as exc:
        raise config_error(exc) from exc
    finally:
        runtime.close()
    scope = _scope_name(bot_id, group_id)
    if not gone:
        what = f"{kind} {key}" if key else f"items of kind {kind}" if kind else "items"
        if user_id:
            what += f" about member {user_id}"
        if everything:
            click.echo(f"nothing to forget: no {what} in {scope} ({shown})")
            return
        raise input_error(
            [Problem(file=shown, text=f"nothing to forget: no learned {what} in {scope}")]
        )
    counted = _counts(gone)
    click.echo(
        f"forgot {len(gone)} item{'s' if len(gone) != 1 else ''} of {scope}: "
        + ", ".join(f"{count} {name}" for name, count in counted.items())
    )
    for item in gone:
        click.echo(f"  {item.kind} {item.key}  ×{item.count}  {_summary(item.fields)}".rstrip())


def _counts(items: Sequence[LearnedItem]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in sorted(items, key=lambda i: i.kind):
        counts[item.kind] = counts.get(item.kind, 0) + 1
    return counts


def _summary(fields: Mapping[str, Any]) -> str:
    """The item's fields on one line, for the forget report."""
    return "  ".join(f"{name}: {_value(value)}" for name, value in fields.items())


# -- promptweave learned stats -------------------------------------------------------------------

#: The window ``learned stats`` sums "today" over.
STATS_WINDOW = dt.timedelta(hours=24)
#: The most session rows of a group read for the turns' spend.
TURN_ROWS = 1_000_000


@learned.command("stats")
@store_option
@bot_option
@group_option
@now_option("The end of the 24 hours summed (default: now), ISO 8601 with its UTC offset.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a group, then the total.")
@config_option
def learned_stats(
    store_path: Path | None,
    bot_id: str | None,
    group_id: str | None,
    now: dt.datetime | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """What learning spent, per group and learner, beside what the turns spent: model calls and
    tokens over the last 24 hours and over all the store keeps, and the budget in force."""
    config, stores, shown = _open(config_path, store_path)
    moment = now or dt.datetime.now(dt.UTC)
    since = hour_of(moment) - STATS_WINDOW + dt.timedelta(hours=1)
    try:
        store = _learned_store(stores, shown)
        scopes = set(store.scopes())
        source: Any = stores.group_log
        if source is not None and hasattr(source, "group_scopes"):
            scopes.update(source.group_scopes())
        rows: list[_GroupSpend] = []
        for scope in _matching(sorted(scopes), bot_id, group_id):
            spend = store.items(*scope, kind=SPEND_KIND, limit=LIST_LIMIT)
            recent = [item for item in spend if _spend_hour(item) >= since]
            rows.append(
                _GroupSpend(
                    scope=scope,
                    learning_day=_per_learner(recent),
                    learning_kept=_per_learner(spend),
                    turns_day=_turn_spend(stores, scope, moment - STATS_WINDOW, moment),
                )
            )
    finally:
        stores.close()
    learning_total = _sum(spent for row in rows for spent in row.learning_day.values())
    turns_total = _sum_turns(row.turns_day for row in rows)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row.to_json(), ensure_ascii=False))
        click.echo(
            json.dumps(
                {
                    "total": {"learning_day": learning_total.to_json(), "turns_day": turns_total},
                    "budget": attrs.asdict(config.learning.budget),
                },
                ensure_ascii=False,
            )
        )
        return
    if not rows:
        only = _filter_name(bot_id, group_id)
        click.echo(f"nothing recorded{' of ' + only if only else ''} in {shown}", err=True)
        return
    click.echo(f"the 24 hours to {moment.isoformat()} ({shown})")
    for row in rows:
        click.echo(_scope_name(*row.scope))
        day = _sum(row.learning_day.values())
        click.echo(f"  learning: {_spend_text(day)}")
        for learner, spent in sorted(row.learning_day.items()):
            click.echo(f"    {learner}: {_spend_text(spent)}")
        kept = _sum(row.learning_kept.values())
        if kept.calls != day.calls:
            click.echo(f"  learning, all the store keeps: {_spend_text(kept)}")
        click.echo(f"  turns: {_turns_text(row.turns_day)}")
    click.echo(f"total: learning {_spend_text(learning_total)}; turns {_turns_text(turns_total)}")
    click.echo("budget: " + _budget_text(config))


@attrs.frozen(kw_only=True)
class _GroupSpend:
    """One group's line of ``learned stats``."""

    scope: _Scope
    learning_day: dict[str, Spend]
    learning_kept: dict[str, Spend]
    turns_day: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "bot_id": self.scope[0],
            "group_id": self.scope[1],
            "learning_day": {k: v.to_json() for k, v in self.learning_day.items()},
            "learning_kept": {k: v.to_json() for k, v in self.learning_kept.items()},
            "turns_day": self.turns_day,
        }


def _spend_hour(item: LearnedItem) -> dt.datetime:
    value = item.fields.get("hour")
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        return item.learned_at


def _per_learner(items: Sequence[LearnedItem]) -> dict[str, Spend]:
    return {learner: spent for (_b, _g, learner), spent in spend_totals(items).items()}


def _sum(spends: Iterable[Spend]) -> Spend:
    total = Spend()
    for spent in spends:
        total.add(spent)
    return total


def _spend_text(spent: Spend) -> str:
    if not spent.calls:
        return "no model calls"
    text = (
        f"{spent.calls} model call{'s' if spent.calls != 1 else ''}, {spent.tokens:,} tokens "
        f"as the learning model reported them ({spent.prompt_tokens:,} prompt, "
        f"{spent.output_tokens:,} output, {spent.cached_tokens:,} cached)"
    )
    if spent.invalid:
        text += f", {spent.invalid} invalid answer{'s' if spent.invalid != 1 else ''}"
    return text


def _turn_spend(
    stores: Stores, scope: _Scope, since: dt.datetime, until: dt.datetime
) -> dict[str, int]:
    """What the turns of a group spent between ``since`` and ``until``: the answers the kept
    sessions record, and the tokens the provider reported for them."""
    totals = {
        "answers": 0,
        "reported": 0,
        "prompt_tokens": 0,
        "output_tokens": 0,
        "cached_tokens": 0,
    }
    sessions = stores.sessions
    if sessions is None:
        return totals
    for row in sessions.group_turns(*scope, until=until, since=since, limit=TURN_ROWS):
        if row.role != "assistant":
            continue
        totals["answers"] += 1
        totals["reported"] += 1 if row.usage else 0
        for key in ("prompt_tokens", "output_tokens", "cached_tokens"):
            value = (row.usage or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] += value
    return totals


def _sum_turns(rows: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = {
        "answers": 0,
        "reported": 0,
        "prompt_tokens": 0,
        "output_tokens": 0,
        "cached_tokens": 0,
    }
    for row in rows:
        for key in total:
            total[key] += row[key]
    return total


def _turns_text(turns: Mapping[str, int]) -> str:
    answers = f"{turns['answers']} answer{'s' if turns['answers'] != 1 else ''}"
    if not turns["reported"]:
        return answers + (", none with the tokens it used recorded" if turns["answers"] else "")
    tokens = turns["prompt_tokens"] + turns["output_tokens"]
    text = (
        f"{answers}, {tokens:,} tokens the provider reported ({turns['prompt_tokens']:,} prompt, "
        f"{turns['output_tokens']:,} output, {turns['cached_tokens']:,} cached)"
    )
    if turns["reported"] < turns["answers"]:
        text += f" reported for {turns['reported']}"
    return text


def _budget_text(config: Config) -> str:
    limits = config.learning.budget

    def limit(value: int) -> str:
        return f"{value:,}" if value else "no limit"

    return (
        f"{limit(limits.calls_per_hour)} calls and {limit(limits.tokens_per_hour)} tokens an hour, "
        f"{limit(limits.calls_per_day)} calls and {limit(limits.tokens_per_day)} tokens a day; "
        f"per group {limit(limits.group_calls_per_hour)} calls and "
        f"{limit(limits.group_tokens_per_hour)} tokens an hour, "
        f"{limit(limits.group_calls_per_day)} calls and {limit(limits.group_tokens_per_day)} "
        "tokens a day ([learning.budget])"
    )
