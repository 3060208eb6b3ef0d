"""How much of each request a prompt cache could serve, in both ``turn_sections`` modes.

Replays the bundled chat (``examples/replay/weekend_chat.onebot.jsonl`` with its
``promptweave.toml``) through the live loop with the offline stand-in model, once with
``turn_sections = "system"`` and once with ``"user"``, and keeps every request body as it is
submitted (a ``submit_request_async`` implementation that runs first, records the body and lets
the stand-in answer). For each request that has a previous one in its conversation it measures,
on those bytes alone:

- the *uncached* bytes: the bytes of the request that are not a prefix of the conversation's
  previous request (what a prefix cache processes again);
- the *new* bytes: the current message with its per-turn part, and the messages the previous
  request did not carry, such as the previous answer (``trace["new_bytes"]`` of the request,
  ``docs/cost.md``, "The layout of a request");

and prints, per mode, their ratio (median over the requests and summed over the replay), the
request sizes, and each ``user`` request's size against the same request in ``system`` mode.
The target (``docs/cost.md``): the ratio at most 1.2 at the median and summed, and no request of
the cache mode more than 15% larger than in ``system`` mode.

    python benchmarks/bench_cache_prefix.py [--log FILE] [--config FILE] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from promptweave import Config, ProviderRequest, hookimpl
from promptweave.loop.live import BotLoop
from promptweave.providers.exchange import ProviderSpec
from promptweave.providers.prefix import common_prefix_length
from promptweave.replay.learning import InjectionWatch
from promptweave.replay.replayer import ReplayClock, read_chat_log, replay_events
from promptweave.runtime import Promptweave
from promptweave.store.retrieval_import import AUTO_KIND, read_files

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"
MODES = ("system", "user")


@attrs.define(eq=False)
class SentBodies:
    """A plugin that keeps every body submitted, in order, and lets the next client answer."""

    sent: list[tuple[str, str, bytes, int]] = attrs.field(factory=list)

    @hookimpl(tryfirst=True)
    def submit_request_async(self, request: ProviderRequest, config: Config) -> None:
        self.sent.append(
            (
                request.conversation_key,
                request.api.value,
                request.body_bytes(),
                int(request.trace.get("new_bytes", 0)),
            )
        )


def replay_bodies(log_file: Path, config: Config, mode: str) -> list[tuple[str, str, bytes, int]]:
    """Every request body of one replay of ``log_file``, as submitted, in order."""
    config = attrs.evolve(
        config, turn_context=attrs.evolve(config.turn_context, turn_sections=mode)
    )
    with tempfile.TemporaryDirectory(prefix="promptweave-bench-") as scratch:
        config = attrs.evolve(
            config,
            store=attrs.evolve(
                config.store,
                backend="sqlite",
                path=str(Path(scratch) / "replay.sqlite3"),
                enabled=True,
            ),
        )
        clock = ReplayClock()
        capture, watch = SentBodies(), InjectionWatch()
        runtime = Promptweave.from_config(
            config,
            contrib=["onebot", "offline_model"],
            extra_plugins=[watch, capture],
            rng=random.Random(0),
            clock=clock,
        )
        try:
            log = read_chat_log(log_file, runtime)
            data = log_file.parent / "data"
            if data.is_dir():
                first = next((e for e in log.events if e.group_id is not None), None)
                runtime.stores.retrieval.write(
                    read_files(
                        AUTO_KIND,
                        [data],
                        bot_id=first.bot_id if first else None,
                        group_id=first.group_id if first else None,
                    )
                )
            loop = BotLoop(
                runtime=runtime,
                spec=ProviderSpec.from_config(runtime.config.provider),
                sleep=_no_pause,
                learn=False,
            )
            records = asyncio.run(replay_events(loop, clock, log.events, watch=watch))
        finally:
            runtime.close()
    failed = [r["reason"] for r in records if r["status"] == "failed"]
    if failed:
        raise SystemExit(f"{mode} mode: {len(failed)} turns failed ({', '.join(set(failed))})")
    return capture.sent


async def _no_pause(_seconds: float) -> None:
    return None


def measure(sent: Sequence[tuple[str, str, bytes, int]]) -> dict[str, Any]:
    """The figures of one mode's bodies."""
    latest: dict[tuple[str, str], bytes] = {}
    counts: dict[str, int] = {}
    rows = []
    for key, api, body, fresh in sent:
        number = counts.get(key, 0)
        counts[key] = number + 1
        previous = latest.get((key, api))
        latest[(key, api)] = body
        row: dict[str, Any] = {"request": (key, number), "bytes": len(body)}
        if previous is not None:
            row["uncached"] = len(body) - common_prefix_length(previous, body)
            row["new"] = fresh
        rows.append(row)
    compared = [r for r in rows if "uncached" in r and r["new"] > 0]
    uncached = sum(r["uncached"] for r in compared)
    new = sum(r["new"] for r in compared)
    return {
        "requests": len(rows),
        "compared": len(compared),
        "bytes_sent": sum(r["bytes"] for r in rows),
        "request_bytes_p50": statistics.median(r["bytes"] for r in rows) if rows else 0,
        "uncached_bytes": uncached,
        "new_bytes": new,
        "ratio_median": round(statistics.median(r["uncached"] / r["new"] for r in compared), 3)
        if compared
        else None,
        "ratio_summed": round(uncached / new, 3) if new else None,
        "reused_share_median": round(
            statistics.median(1 - r["uncached"] / r["bytes"] for r in compared), 3
        )
        if compared
        else None,
        "rows": rows,
    }


def compare_sizes(system: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """Each ``user`` request's size against the same request (the same conversation, the same
    number in it) in ``system`` mode."""
    sizes = {tuple(r["request"]): r["bytes"] for r in system["rows"]}
    ratios = [
        r["bytes"] / sizes[tuple(r["request"])]
        for r in user["rows"]
        if tuple(r["request"]) in sizes
    ]
    return {
        "paired": len(ratios),
        "size_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "size_ratio_max": round(max(ratios), 3) if ratios else None,
        "size_ratio_total": round(user["bytes_sent"] / system["bytes_sent"], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, default=LOG)
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    config = Config.from_file(args.config)
    figures = {mode: measure(replay_bodies(args.log, config, mode)) for mode in MODES}
    sizes = compare_sizes(figures["system"], figures["user"])
    if args.json:
        shown = {mode: {k: v for k, v in f.items() if k != "rows"} for mode, f in figures.items()}
        print(json.dumps({**shown, "user_against_system": sizes}, indent=2))
        return 0
    print(f"replay of {args.log.name}: request bodies as submitted, per mode")
    print(f"{'':34}{'system':>12}{'user':>12}")

    def line(label: str, key: str, spec: str = ",") -> None:
        values = [figures[mode][key] for mode in MODES]
        shown = ["-" if v is None else format(v, spec) for v in values]
        print(f"{label:34}{shown[0]:>12}{shown[1]:>12}")

    line("requests", "requests")
    line("requests with a previous one", "compared")
    line("bytes sent", "bytes_sent")
    line("request bytes, median", "request_bytes_p50", ",.0f")
    line("uncached bytes", "uncached_bytes")
    line("new bytes", "new_bytes")
    line("uncached / new, median", "ratio_median", ".2f")
    line("uncached / new, summed", "ratio_summed", ".2f")
    line("prefix reused, median", "reused_share_median", ".1%")
    print(
        f"user request size / system: median {sizes['size_ratio_median']:.3f}, "
        f"max {sizes['size_ratio_max']:.3f}, all bytes {sizes['size_ratio_total']:.3f} "
        f"({sizes['paired']} requests paired)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
