"""Benchmark of the plugin boundary in the live loop (``docs/plugin_hooks.md``, "When a plugin
misbehaves"): the other groups' turn latency while one plugin hangs or is slow in a hook.

One plugin (not shipped with promptweave) takes part in every hook measured; for the turns of
one group it misbehaves in one hook, for the others it behaves. Per hook and per repeat, three
runs are interleaved in one process:

- **none**: the faulty group's turn runs normally;
- **hung**: its call blocks past ``[plugins] turn_deadline_s`` (1 s here, so the run stays
  short) and is let go only after the measurement;
- **slow**: its call takes 2 s (under a deadline of 5 s, the default: slow, not hung).

In each, once the faulty group's call is running, the other groups send addressed questions
one after another for ``--window`` seconds (2.5 by default: longer than the fault lasts, the
hung call left behind at its deadline or the slow one returned) (answered by a model that answers at once, delivered as two
bubbles), and each turn's wall time is taken. The figure is the median turn latency over the
repeats' medians and the best repeat's (the one least disturbed by other work on the machine),
beside the slowest turn, each with its ratio to the fault-free run. Target: within 10% (a ratio
of at most 1.10), with no turn held for the length of the fault.

The log lines that name each fault are silenced while it runs.

Run: ``python benchmarks/bench_plugin_faults.py [--window 2.5] [--repeats 5] [--hooks a,b]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_loop import BOT_ID, _payload, _Transport

from promptweave import (
    BotLoop,
    Config,
    DecisionRule,
    Promptweave,
    Section,
    SubmitResult,
    hookimpl,
)
from promptweave.config import DeliveryConfig, PluginsConfig, RoutingConfig, StoreConfig
from promptweave.loop.events import OutcomeStatus
from promptweave.plugins.contributions import RuleStage

FAULTY_GROUP = 20001
OTHER_GROUPS = (20002, 20003, 20004, 20005)
SLOW_S = 2.0
HUNG_DEADLINE_S = 1.0
SLOW_DEADLINE_S = 5.0
HOOKS = (
    "parse_event",
    "decision_rule",
    "section",
    "read_model_answer",
    "send_message",
    "submit_request_async",
)


class _InstantModel:
    """Answers every request at once with two bubbles."""

    @hookimpl
    async def submit_request_async(self, request: Any, config: Config) -> SubmitResult:
        # The faulty group's answer says so, for the answer reader to tell it.
        mark = "faulty-group " if f":{FAULTY_GROUP}:" in request.conversation_key else ""
        return SubmitResult(sent=True, status="ok", text=f"{mark}周六晚上七点桌游局\n在格子桌游吧")


class _Fault:
    """A third-party plugin in the hooks measured: in ``hook``, for the faulty group, it hangs
    (until let go), sleeps (slow) or answers at once (none)."""

    def __init__(self, hook: str, mode: str) -> None:
        self.hook, self.mode = hook, mode
        self.entered = threading.Event()
        self.release = threading.Event()

    def _act(self, hook: str, faulty: bool) -> None:
        if hook != self.hook or not faulty:
            return
        self.entered.set()
        if self.mode == "hung":
            self.release.wait(60)
        elif self.mode == "slow":
            time.sleep(SLOW_S)

    @hookimpl
    def parse_event(self, platform: str, payload: Any, bot_id: str) -> None:
        self._act("parse_event", payload.get("group_id") == FAULTY_GROUP)

    @hookimpl
    def register_decision_rules(self, register: Callable[[DecisionRule], None]) -> None:
        def evaluate(context: Any) -> None:
            self._act("decision_rule", context.turn.group_id == str(FAULTY_GROUP))

        register(DecisionRule(name="bench_gate", stage=RuleStage.GATE, evaluate=evaluate))

    @hookimpl
    def register_sections(self, register: Callable[[Section], None]) -> None:
        def render(context: Any) -> str:
            self._act("section", context.turn.group_id == str(FAULTY_GROUP))
            return "【插件】一切如常"

        register(Section(id="bench_plugin", title="插件", render=render))

    @hookimpl
    def read_model_answer(self, text: str, shape: Any, system_prompt: str, config: Any) -> None:
        self._act("read_model_answer", text.startswith("faulty-group"))

    @hookimpl
    def send_message(self, message: Any, transport: Any) -> None:
        self._act("send_message", message.group_id == str(FAULTY_GROUP))

    @hookimpl
    def submit_request_async(self, request: Any, config: Any) -> None:
        self._act("submit_request_async", f":{FAULTY_GROUP}:" in request.conversation_key)


def _loop(folder: Path, plugin: _Fault, name: str) -> BotLoop:
    deadline = HUNG_DEADLINE_S if plugin.mode == "hung" else SLOW_DEADLINE_S
    config = Config(
        store=StoreConfig(backend="sqlite", path=str(folder / f"{name}.sqlite3")),
        routing=RoutingConfig(low_engagement=False),
        delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
        plugins=PluginsConfig(turn_deadline_s=deadline),
    )
    runtime = Promptweave.from_config(
        config, contrib=["onebot"], extra_plugins=[_InstantModel()], rng=random.Random(1)
    )
    runtime.add_plugin(plugin, name="bench_fault")
    # Called again as soon as its hung call returned, so every repeat hangs afresh.
    runtime.watchdog.quarantine_s = 0

    async def no_pause(_seconds: float) -> None:
        return None

    return BotLoop(runtime=runtime, sleep=no_pause, learn=False)


async def _measure(loop: BotLoop, plugin: _Fault, window_s: float, numbers: Any) -> list[float]:
    """The other groups' turn latencies (ms) while the faulty group's turn is in its fault."""
    transport = _Transport()
    faulty = asyncio.ensure_future(
        loop.handle_payload(
            "onebot",
            _payload(next(numbers), FAULTY_GROUP, "faulty-group 周末有什么活动吗？", at_bot=True),
            str(BOT_ID),
            transport,
        )
    )
    while not plugin.entered.is_set() and not faulty.done():
        await asyncio.sleep(0.001)
    latencies: list[float] = []
    # For the same time in every mode, longer than the fault lasts (a hung call past its
    # deadline, then quarantined; a slow one until it returned).
    began = time.perf_counter()
    for index in itertools.count():
        if time.perf_counter() - began >= window_s and faulty.done():
            break
        group = OTHER_GROUPS[index % len(OTHER_GROUPS)]
        payload = _payload(next(numbers), group, "周末有什么活动吗？", at_bot=True)
        start = time.perf_counter()
        outcome = await loop.handle_payload("onebot", payload, str(BOT_ID), transport)
        latencies.append((time.perf_counter() - start) * 1000)
        if outcome.status != OutcomeStatus.REPLIED:
            raise SystemExit(f"another group's turn was not answered: {outcome.reason}")
    plugin.release.set()
    await faulty
    plugin.entered.clear()
    plugin.release.clear()
    return latencies


async def _repeats(
    loops: dict[str, BotLoop],
    plugins: dict[str, _Fault],
    window_s: float,
    repeats: int,
    medians: dict[str, list[float]],
    slowest: dict[str, float],
) -> None:
    numbers = itertools.count(1)
    for mode, loop in loops.items():  # warm up: the first turns fill caches
        await _measure(loop, plugins[mode], 0.2, numbers)
    for _ in range(repeats):
        for mode, loop in loops.items():
            found = await _measure(loop, plugins[mode], window_s, numbers)
            medians[mode].append(statistics.median(found))
            slowest[mode] = max(slowest[mode], max(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=2.5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hooks", default=",".join(HOOKS))
    args = parser.parse_args()
    hooks = [hook for hook in args.hooks.split(",") if hook]
    print(f"repeats: {args.repeats}; other groups' turns for {args.window:g} s per run")
    # Every turn in fault names it in a log line; the figures are the point here.
    logging.getLogger("promptweave").setLevel(logging.ERROR)
    print(
        f"hung: blocks past [plugins] turn_deadline_s = {HUNG_DEADLINE_S:g} s; "
        f"slow: {SLOW_S:g} s under {SLOW_DEADLINE_S:g} s"
    )
    with tempfile.TemporaryDirectory() as folder:
        for hook in hooks:
            plugins = {mode: _Fault(hook, mode) for mode in ("none", "hung", "slow")}
            loops = {
                mode: _loop(Path(folder), plugin, f"{hook}-{mode}")
                for mode, plugin in plugins.items()
            }
            medians: dict[str, list[float]] = {mode: [] for mode in loops}
            slowest: dict[str, float] = dict.fromkeys(loops, 0.0)

            asyncio.run(_repeats(loops, plugins, args.window, args.repeats, medians, slowest))
            for loop in loops.values():
                loop.runtime.close()
            base = statistics.median(medians["none"])
            print(f"{hook}:")
            best_base = min(medians["none"])
            for mode in loops:
                figure, best = statistics.median(medians[mode]), min(medians[mode])
                print(
                    f"  {mode:>4}: median {figure:7.2f} ms a turn (x{figure / base:.2f} of none), "
                    f"best repeat {best:6.2f} ms (x{best / best_base:.2f}), "
                    f"slowest turn {slowest[mode]:7.1f} ms; per repeat: "
                    + ", ".join(f"{m:.2f}" for m in medians[mode])
                )
    print("target: hung and slow within 1.10 of none; no turn held for the fault's length")


if __name__ == "__main__":
    main()
