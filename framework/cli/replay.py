"""``promptweave replay``: a recorded chat through the live loop (``docs/replay.md``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import click

from promptweave.cli.common import config_option, load_config
from promptweave.cli.problems import Problem, config_error, input_error, require_file
from promptweave.cli.spend_lines import spend_lines
from promptweave.config import Config
from promptweave.errors import PromptweaveError, TurnFileError
from promptweave.loop.live import BotLoop
from promptweave.providers.exchange import ProviderSpec
from promptweave.replay.learning import InjectionWatch, learning_state
from promptweave.replay.replayer import (
    ReplayClock,
    ReplayLog,
    read_chat_log,
    replay_events,
    summarize,
)
from promptweave.replay.server_reuse import ServerLog, server_reuse
from promptweave.runtime import Promptweave
from promptweave.store.retrieval_import import AUTO_KIND, RetrievalImportError, read_files

__all__ = ["MODELS", "replay"]

#: ``--model`` choices: the contrib plugin that answers, the request format, and the label.
MODELS: Mapping[str, tuple[str, str | None, str]] = {
    "offline": ("offline_model", None, "offline stand-in (deterministic, not an LLM)"),
    "openai": ("openai_compat", "openai_chat", "OpenAI-compatible endpoint ([provider])"),
    "anthropic": ("anthropic_messages", "anthropic", "Anthropic Messages endpoint ([provider])"),
}


@contextmanager
def _store_config(config: Config, store: Path | None) -> Iterator[Config]:
    """The replay's store: ``--store`` kept, else a scratch SQLite file removed afterwards."""
    if store is not None:
        yield attrs.evolve(
            config, store=attrs.evolve(config.store, backend="sqlite", path=str(store.resolve()))
        )
        return
    scratch = Path(tempfile.mkdtemp(prefix="promptweave-replay-"))
    try:
        yield attrs.evolve(
            config,
            store=attrs.evolve(
                config.store, backend="sqlite", path=str(scratch / "replay.sqlite3"), enabled=True
            ),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _runtime(
    config: Config,
    model: str,
    seed: int,
    clock: ReplayClock,
    extra_plugins: Sequence[object] = (),
) -> Promptweave:
    plugin, api, _label = MODELS[model]
    if api is not None and not config.provider.api.startswith(api.split("_")[0]):
        config = attrs.evolve(config, provider=attrs.evolve(config.provider, api=api))
    return Promptweave.from_config(
        config,
        contrib=["onebot", plugin],
        extra_plugins=extra_plugins,
        rng=random.Random(seed),
        clock=clock,
    )


def _import_data(runtime: Promptweave, data: Path, log: ReplayLog) -> str:
    """Load the retrieval data beside the chat into the replay's store; records that name no bot
    or group get the log's first bot and group."""
    first = next((event for event in log.events if event.group_id is not None), None)
    batch = read_files(
        AUTO_KIND,
        [data],
        bot_id=first.bot_id if first else None,
        group_id=first.group_id if first else None,
    )
    written = runtime.stores.retrieval.write(batch)
    return ", ".join(f"{count} {name}" for name, count in written.items() if count) or "nothing"


def _decision_line(record: Mapping[str, Any]) -> str:
    parts = [record["action"] or record["status"], record["reason"] or "-"]
    necessity = record["necessity"]
    if necessity is not None:
        parts.append(f"necessity {necessity['score']}/{necessity['threshold']}")
    if record["delivery_style"] not in (None, "plain") and record["bubbles"]:
        parts.append(record["delivery_style"])
    if record["prefix_reuse"] is not None:
        parts.append(f"prefix reuse {record['prefix_reuse']:.0%}")
    return " · ".join(parts)


def text_lines(record: Mapping[str, Any], bot_name: str, zone: dt.tzinfo) -> list[str]:
    """How one message of the replay reads in the text output (times in the bot's zone)."""
    where = record["group_id"] or "private"
    who = record["sender_name"] or record["sender_id"]
    at = dt.datetime.fromisoformat(record["time"]).astimezone(zone)
    lines = [f"{at:%H:%M:%S} [{where}] {who}: {record['text']}"]
    if record["status"] == "recorded":
        lines.append("  (the bot's own message in the log: recorded, not answered)")
        return lines
    arrow = "→" if record["bubbles"] else "·"
    lines.append(f"  {arrow} {_decision_line(record)}")
    lines += [f"  ← {bot_name}: {bubble}" for bubble in record["bubbles"]]
    return lines


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary block of the text output."""

    def spread(value: Mapping[str, float] | None) -> str:
        return "none" if value is None else f"p50 {value['p50']:g}, p95 {value['p95']:g}"

    silences = ", ".join(f"{reason} {n}" for reason, n in sorted(summary["silences"].items()))
    failed = ", ".join(f"{reason} {n}" for reason, n in sorted(summary["failed"].items()))
    reuse = summary["prefix_reuse"]
    tokens = summary["tokens_basis"]
    cached = summary["cached_tokens"]
    lines = [
        f"== replay summary · model: {summary['model_label']} ==",
        f"messages {summary['messages']} · replies {summary['replies']} · follow-ups "
        f"{summary['follow_ups']} · quotes {summary['quotes']} · tools {summary['tools']} · "
        f"canned phrases {summary['phrases']} · bot messages in the log {summary['recorded']}",
        f"silences: {silences or 'none'}",
    ]
    if failed:
        lines.append(f"failed: {failed}")
    for cause, seen in summary.get("model_failures", {}).items():
        lines.append(
            f"the model gave no answer ({cause}) {seen['count']} times, first at "
            f"#{seen['first']}: {seen['reason']}. Fix: {seen['fix']}"
        )
    rejected = summary.get("rejected_lines", [])
    if rejected:
        lines.append(f"rejected, not replayed (as the live loop would): {len(rejected)}")
        lines += [f"  {r['line']}: {r['reason']}" for r in rejected]
    lines += [
        f"characters sent per reply: {spread(summary['chars_per_reply'])}",
        f"tokens sent per reply ({tokens}): {spread(summary['tokens_per_reply'])}",
        "provider-reported cached tokens: " + ("none reported" if cached is None else f"{cached}"),
        *_server_lines(summary.get("server_reuse", False)),
        "byte-identical prefix reuse with the conversation's previous request: "
        + (
            "no consecutive requests"
            if reuse is None
            else f"median {reuse['median']:.1%}, min {reuse['min']:.1%} over {reuse['requests']} requests"
        ),
        "bytes not a prefix of the previous request, per new byte: "
        + (
            "no consecutive requests"
            if not summary.get("uncached_per_new_byte")
            else "median {median:.2f}, summed {summed:.2f} ({uncached_bytes:,} of "
            "{new_bytes:,} new)".format(**summary["uncached_per_new_byte"])
        ),
        "time per stage (ms): "
        + ", ".join(
            f"{stage} {spread(value)}" for stage, value in summary["stage_ms"].items() if value
        ),
        *spend_lines(summary.get("spend")),
    ]
    return lines + learning_lines(summary.get("learning"))


def _server_lines(reuse: Mapping[str, Any] | bool | None) -> list[str]:
    """The ``--server-log`` line of the summary (none without the option)."""
    if reuse is False:
        return []
    if not reuse:
        return ["server log: no prefix-match line (nothing reused, or not a llama.cpp log)"]
    assert isinstance(reuse, Mapping)
    return [
        f"server log: {reuse['reused_tokens']:,} prompt tokens not evaluated again, "
        f"{reuse['evaluated_tokens']:,} evaluated ({reuse['share']:.1%} reused) over "
        f"{reuse['calls']} calls that reused a prefix"
    ]


def _at(record: Mapping[str, Any]) -> str:
    return f"#{record['index']} ({dt.datetime.fromisoformat(record['time']):%H:%M:%S})"


def learning_lines(learning: Mapping[str, Any] | None) -> list[str]:
    """What the replay learned, in the text summary: per group the items per kind at the end,
    when a prompt first carried each kind, and the learners that failed."""
    if not learning:
        return []
    if not learning["enabled"]:
        return [f"learning: off ({learning['off']})"]
    runs = sum(learning["runs"].values())
    failed = learning["runs"].get("failed", 0)
    lines = [
        f"learning: learners {', '.join(learning['learners'])} · {runs} runs"
        + (f", {failed} failed" if failed else "")
    ]
    model = learning.get("model")
    if model:
        calls = ", ".join(f"{n} {status}" for status, n in learning.get("model_calls", {}).items())
        lines.append(f"learning model: {model} · calls: {calls or 'none'}")
    elif learning.get("model_off"):
        lines.append(f"learning model: none ({learning['model_off']})")
    by_reason: dict[str, list[str]] = {}
    for name, why in learning.get("skipped", {}).items():
        by_reason.setdefault(why, []).append(name)
    for why, names in by_reason.items():
        lines.append(
            f"learner{'s' if len(names) > 1 else ''} {', '.join(names)} did not run: {why}"
        )
    for group in learning["groups"]:
        counts = ", ".join(f"{n} {kind}" for kind, n in group["counts"].items())
        lines.append(f"group {group['group_id']} learned: {counts or 'nothing'}")
        spent = _spent_line(group)
        if spent:
            lines.append(f"  spent: {spent}")
        entries = group["first_in_prompt"]
        found = [
            f"{f['kind']} in {f['section']} at {_at(f)}" for f in entries if f["index"] is not None
        ]
        missing = [f["kind"] for f in entries if f["index"] is None]
        if found:
            lines.append("  first in a prompt: " + "; ".join(found))
        if missing:
            lines.append("  in no answered turn's prompt: " + ", ".join(missing))
    for failure in learning["failures"]:
        lines.append(
            f"learner {failure['learner']} failed in group {failure['group_id']} "
            f"({failure['runs']} runs, first at {_at({'index': failure['first_index'], 'time': failure['first_time']})}): "
            f"{failure['error']}"
        )
    return lines


def _spent_line(group: Mapping[str, Any]) -> str:
    """``learning 12 calls, 8,431 tokens (strategies 3, …); turns 40 requests, 120,113 tokens``."""
    spend = group.get("learning_spend") or {}
    turns = group.get("turns_spend") or {}
    parts = []
    if spend.get("calls"):
        per = ", ".join(
            f"{learner} {s['calls']}" for learner, s in sorted(group.get("spend", {}).items())
        )
        invalid = f", {spend['invalid']} invalid" if spend.get("invalid") else ""
        parts.append(
            f"learning {spend['calls']} model calls{invalid}, {spend['tokens']:,} tokens as the "
            f"learning model reported them ({per})"
        )
    if turns.get("requests"):
        tokens = turns["prompt_tokens"] + turns["output_tokens"]
        estimated = " (prompts estimated)" if turns.get("estimated") else ""
        parts.append(f"turns {turns['requests']} requests, {tokens:,} tokens{estimated}")
    return "; ".join(parts)


def _progress(total: int, enabled: bool) -> tuple[Callable[[], None], Callable[[], None]]:
    """A progress bar on standard error when it is a terminal: (advance, close)."""
    if not enabled or not sys.stderr.isatty():
        return (lambda: None), (lambda: None)
    from rich.progress import Progress

    progress = Progress(transient=True, console=None)
    task = progress.add_task("replaying", total=total)
    progress.start()
    return (lambda: progress.advance(task)), progress.stop


@click.command()
@click.argument("log_file", type=click.Path(path_type=Path))
@click.option(
    "--model",
    type=click.Choice(list(MODELS)),
    default="offline",
    show_default=True,
    help="Who answers: the offline stand-in, or the configured endpoint.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed the random source.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a self-contained HTML report here.",
)
@click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Replay into this SQLite file (default: a scratch store, removed afterwards).",
)
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Retrieval data to import first (default: the data/ folder beside the log, if any).",
)
@click.option("--bot", "bot_id", default=None, help="The bot OneBot events are addressed to.")
@click.option(
    "--turn-sections",
    type=click.Choice(["system", "user"]),
    default=None,
    help="Override [turn_context] turn_sections (where the per-turn sections go).",
)
@click.option(
    "--no-learn",
    is_flag=True,
    help="Run no learner (as [learning] enabled = false): the replay learns nothing.",
)
@click.option(
    "--server-log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A llama.cpp server's log: the summary gives the prompt tokens it did not evaluate again.",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Replay the log in both turn_sections modes (system, user) and print their figures "
    "side by side.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@config_option
def replay(
    log_file: Path,
    model: str,
    seed: int,
    output_format: str,
    report: Path | None,
    store: Path | None,
    data: Path | None,
    bot_id: str | None,
    turn_sections: str | None,
    no_learn: bool,
    server_log: Path | None,
    compare: bool,
    no_progress: bool,
    config_path: Path | None,
) -> None:
    """Replay the chat in LOG_FILE through the live loop, as the bot would have taken part.

    LOG_FILE holds raw OneBot v11 events (one JSON event a line, as NapCat writes them) or the
    store's event log. The log's timestamps are the clock and --seed the random source, so a
    replay repeats exactly. The learners run on the log's clock, after each message, unless
    --no-learn; --store keeps what they learned. --compare replays it in both turn_sections
    modes and prints their figures side by side.
    """
    require_file(log_file)
    if compare:
        clashing = [
            name
            for name, given in (
                ("--turn-sections", turn_sections is not None),
                ("--store", store is not None),
                ("--report", report is not None),
                ("--server-log", server_log is not None),
            )
            if given
        ]
        if clashing:
            raise click.UsageError(f"--compare replays in both modes: drop {', '.join(clashing)}")
    if report is not None:
        _check_report_folder(report)
    config = load_config(config_path)
    if turn_sections is not None:
        config = attrs.evolve(
            config, turn_context=attrs.evolve(config.turn_context, turn_sections=turn_sections)
        )
    if no_learn:
        config = attrs.evolve(config, learning=attrs.evolve(config.learning, enabled=False))
    if compare:
        _compare(
            config,
            log_file,
            model=model,
            seed=seed,
            data=data,
            bot_id=bot_id,
            output_format=output_format,
        )
        return
    with _store_config(config, store) as config:
        clock = ReplayClock()
        watch = InjectionWatch()
        try:
            runtime = _runtime(config, model, seed, clock, [watch])
        except PromptweaveError as exc:
            raise config_error(exc) from exc
        try:
            _run(
                runtime,
                clock,
                log_file,
                watch=watch,
                model=model,
                output_format=output_format,
                report=report,
                data=data,
                bot_id=bot_id,
                progress=not no_progress,
                server_log=ServerLog(server_log) if server_log is not None else None,
            )
        finally:
            runtime.close()


def _run(
    runtime: Promptweave,
    clock: ReplayClock,
    log_file: Path,
    *,
    watch: InjectionWatch,
    model: str,
    output_format: str,
    report: Path | None,
    data: Path | None,
    bot_id: str | None,
    progress: bool,
    server_log: ServerLog | None = None,
) -> None:
    log, data, imported = _read_log(runtime, log_file, data, bot_id)
    label = MODELS[model][2]
    bot = runtime.bot_for(log.events[0].bot_id if log.events else "")
    zone = ZoneInfo(bot.timezone)
    if output_format == "text":
        click.echo(f"replaying {log_file} · {len(log.events)} messages · model: {label}")
        if imported is not None:
            click.echo(f"retrieval data from {data}: {imported}")
        click.echo("")

    def emit(record: dict[str, Any]) -> None:
        if output_format == "jsonl":
            click.echo(json.dumps(record, ensure_ascii=False))
        else:
            click.echo("\n".join(text_lines(record, bot.name, zone)))
        advance()

    advance, close = _progress(len(log.events), progress)
    loop = BotLoop(
        runtime=runtime,
        spec=ProviderSpec.from_config(runtime.config.provider),
        sleep=_no_pause,
        learn=False,  # replay_events runs the learners itself, on the log's clock
    )
    try:
        records = asyncio.run(replay_events(loop, clock, log.events, on_record=emit, watch=watch))
    finally:
        close()
    summary = summarize(
        records,
        model=model,
        model_label=label,
        learned=learning_state(runtime),
        rejected=log.rejected,
        prices=runtime.config.prices,
    )
    if server_log is not None:
        summary["server_reuse"] = server_reuse(server_log.hits())
    summary["timezone"] = bot.timezone  # the report says in which zone its times are
    if output_format == "jsonl":
        click.echo(json.dumps(summary, ensure_ascii=False))
    else:
        click.echo("")
        click.echo("\n".join(summary_lines(summary)))
    if report is not None:
        _write_report(report, [*records, summary], log_file)
        if output_format == "text":
            click.echo(f"report: {report}")


def _no_messages(log: ReplayLog, log_file: Path) -> str:
    """Why a log with no message events cannot be replayed, in one line."""
    if log.rejected:
        first = log.rejected[0]
        return (
            f"no message events to replay ({len(log.rejected)} rejected as the live loop would, "
            f"the first at {first.line}: {first.reason})"
        )
    if log.skipped or log_file.read_text(encoding="utf-8").strip():
        return (
            f"no message events to replay ({log.skipped} meta, notice or request events, "
            "nothing else); a replay needs OneBot v11 message events (post_type message) or the store's event log"
        )
    return (
        "no message events to replay (the file is empty); a replay needs OneBot v11 message "
        "events, one JSON object a line, or the store's event log"
    )


def _check_report_folder(report: Path) -> None:
    """Refuse a ``--report`` that cannot be written before the replay runs, not after."""
    folder = report.parent
    problem = None
    if not folder.exists():
        problem = f"cannot write the report: the folder {folder} does not exist"
    elif not folder.is_dir():
        problem = f"cannot write the report: {folder} is not a folder"
    elif report.is_dir():
        problem = "cannot write the report: it is a folder"
    elif not os.access(folder, os.W_OK):
        problem = f"cannot write the report: the folder {folder} is not writable"
    if problem is not None:
        raise config_error([Problem(file=str(report), text=problem)])


def _read_log(
    runtime: Promptweave, log_file: Path, data: Path | None, bot_id: str | None
) -> tuple[ReplayLog, Path, str | None]:
    """The log's events, and the retrieval data beside it imported into the replay's store:
    ``(log, data folder, what was imported or None)``; a log with no message event is refused
    in one line."""
    try:
        log = read_chat_log(log_file, runtime, bot_id=bot_id)
        data = data if data is not None else log_file.parent / "data"
        imported = _import_data(runtime, data, log) if data.is_dir() else None
    except (TurnFileError, RetrievalImportError) as exc:
        raise input_error(exc) from exc
    except PromptweaveError as exc:
        raise config_error(exc) from exc
    if not log.events:
        raise input_error([Problem(file=str(log_file), text=_no_messages(log, log_file))])
    return log, data, imported


def _compare(
    config: Config,
    log_file: Path,
    *,
    model: str,
    seed: int,
    data: Path | None,
    bot_id: str | None,
    output_format: str,
) -> None:
    """``--compare``: the log in each ``turn_sections`` mode, on a scratch store of its own."""
    from promptweave.cli.replay_compare import MODES, compare_lines, replay_mode

    def runtime_for(
        mode_config: Config, clock: ReplayClock, extra: Sequence[object]
    ) -> Promptweave:
        try:
            return _runtime(mode_config, model, seed, clock, extra)
        except PromptweaveError as exc:
            raise config_error(exc) from exc

    summaries = []
    for mode in MODES:
        with _store_config(config, None) as scratch:
            summaries.append(
                replay_mode(
                    scratch,
                    mode,
                    runtime_for=runtime_for,
                    read_log=lambda runtime: _read_log(runtime, log_file, data, bot_id)[0],
                    model=model,
                    model_label=MODELS[model][2],
                    no_pause=_no_pause,
                )
            )
    if output_format == "jsonl":
        for summary in summaries:
            click.echo(json.dumps(summary, ensure_ascii=False))
        return
    click.echo("\n".join(compare_lines(summaries, log_file)))


async def _no_pause(_seconds: float) -> None:
    return None


def _write_report(path: Path, records: Sequence[Mapping[str, Any]], log_file: Path) -> None:
    from promptweave.replay.report import render_report

    try:
        path.write_text(
            render_report(records, title=f"replay of {log_file.name}"), encoding="utf-8"
        )
    except OSError as exc:
        raise config_error(
            [Problem(file=str(path), text=f"cannot write the report: {exc.strerror or exc}")]
        ) from exc
