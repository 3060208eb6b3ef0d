"""Start-up cost: the interpreter alone, ``import framework``, and ``promptweave render`` of an
example turn, each run as a fresh process.

Every command runs once to write the bytecode caches and promptweave's own caches (the plugin
discovery and the generated code, ``docs/performance.md``), then ``--runs`` times; the figures
are the medians of the wall time and of the CPU time the process used. ``render`` runs a second
time with ``PROMPTWEAVE_CACHE_DIR`` set empty: what a first run, with nothing cached, costs. The
last part lists the modules whose own import time (``python -X importtime``) is largest while the
render command runs.

``--floor`` adds, to the same interleaved runs, what the command cannot go below while it uses
its libraries: importing attrs, cattrs, click and pluggy, each alone and the four together, and
importing the command's modules without running it (``docs/performance.md#start-up``).

Run: ``python benchmarks/bench_startup.py [--runs 9] [--top 15] [--floor]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RENDER = ["-m", "promptweave", "render", "examples/turns/at_question.json"]
NO_CACHES = {"PROMPTWEAVE_CACHE_DIR": ""}
#: Label, arguments, extra environment.
COMMANDS: list[tuple[str, list[str], dict[str, str]]] = [
    ("python -c pass", ["-c", "pass"], {}),
    ("import promptweave", ["-c", "import promptweave"], {}),
    ("promptweave render examples/turns/at_question.json", RENDER, {}),
    ("  the same, nothing cached (PROMPTWEAVE_CACHE_DIR='')", RENDER, NO_CACHES),
]
#: What ``--floor`` adds: the libraries the command is built on, and its modules without a run.
FLOOR: list[tuple[str, list[str], dict[str, str]]] = [
    ("import attrs", ["-c", "import attrs"], {}),
    ("import cattrs", ["-c", "import cattrs"], {}),
    ("import click", ["-c", "import click"], {}),
    ("import pluggy", ["-c", "import pluggy"], {}),
    ("import attrs, cattrs, click, pluggy", ["-c", "import attrs, cattrs, click, pluggy"], {}),
    (
        "import promptweave.cli.main (the command's modules)",
        ["-c", "import promptweave.cli.main"],
        {},
    ),
]
#: Prints how many modules are loaded when the render command exits (``-X importtime`` does not
#: list the modules a plugin manager loads with ``importlib.import_module``).
COUNT_MODULES = [
    "-c",
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print(len(sys.modules), file=sys.__stderr__))\n"
    f"sys.argv = ['promptweave', *{RENDER[2:]!r}]\n"
    "runpy.run_module('promptweave', run_name='__main__', alter_sys=True)\n",
]


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as installed: with bytecode caches
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def measure(
    commands: Sequence[tuple[str, list[str], dict[str, str]]], runs: int
) -> list[tuple[float, float]]:
    """Median wall and CPU milliseconds of ``runs`` fresh processes of each command, the commands
    interleaved (one run of each in turn, the order rotating), so a change of load on the machine
    falls on all of them alike."""
    prepared = [
        ([sys.executable, *arguments], _environment(extra)) for _, arguments, extra in commands
    ]
    for command, env in prepared:  # once each first: bytecode and the render caches written
        subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    walls: list[list[float]] = [[] for _ in prepared]
    cpus: list[list[float]] = [[] for _ in prepared]
    for number in range(runs):
        shift = number % len(prepared)
        for index in (*range(shift, len(prepared)), *range(shift)):
            command, env = prepared[index]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
            walls[index].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[index].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return [
        (statistics.median(wall) * 1000, statistics.median(cpu) * 1000)
        for wall, cpu in zip(walls, cpus, strict=True)
    ]


def import_times(arguments: list[str]) -> list[tuple[int, int, str]]:
    """``(own µs, cumulative µs, module)`` of every module imported by ``arguments``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *arguments],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    found = []
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), match.group(3)))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs; the median is shown")
    parser.add_argument("--top", type=int, default=15, help="modules listed by own import time")
    parser.add_argument(
        "--floor", action="store_true", help="also time importing the libraries alone"
    )
    args = parser.parse_args(argv)
    commands = [*COMMANDS, *(FLOOR if args.floor else [])]
    print(
        f"median of {args.runs} fresh processes each, interleaved (Python {sys.version.split()[0]})"
    )
    figures = measure(commands, args.runs)
    (floor_wall, floor_cpu), (render_wall, render_cpu) = figures[0], figures[2]
    for (name, _arguments, _extra), (wall, cpu) in zip(commands, figures, strict=True):
        print(
            f"{name:<55} {wall:7.0f} ms wall  {cpu:7.0f} ms CPU"
            f"  {wall / floor_wall:5.2f} / {cpu / floor_cpu:5.2f} x pass"
        )
    print(
        f"ratio (promptweave render / python -c pass) {render_wall / floor_wall:.2f} wall, "
        f"{render_cpu / floor_cpu:.2f} CPU"
    )
    modules = import_times(RENDER)
    own = sum(entry[0] for entry in modules) / 1000
    ours = sum(e[0] for e in modules if e[2].startswith("promptweave")) / 1000
    counted = subprocess.run(
        [sys.executable, *COUNT_MODULES],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = int(counted.stderr.split()[-1])
    print(
        f"render loads {loaded} modules; -X importtime lists {len(modules)} of them: {own:.0f} ms "
        f"of own import time, {ours:.0f} ms of it in promptweave"
    )
    for own_us, _cumulative, name in sorted(modules, reverse=True)[: args.top]:
        print(f"  {own_us / 1000:6.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
