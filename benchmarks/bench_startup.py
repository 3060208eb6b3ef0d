"""Start-up cost: the interpreter alone, ``import framework``, and ``promptweave render`` of an
example turn, each run as a fresh process.

Every command runs once to write the bytecode caches and promptweave's own caches (the plugin
discovery and the generated code, ``docs/performance.md``), then ``--runs`` times; the figures
are the medians of the wall time and of the CPU time the process used. ``render`` runs a second
time with ``PROMPTWEAVE_CACHE_DIR`` set empty: what a first run, with nothing cached, costs. The
last part lists the modules whose own import time (``python -X importtime``) is largest while the
render command runs.

Run: ``python benchmarks/bench_startup.py [--runs 9] [--top 15]``.
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


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as installed: with bytecode caches
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def measure(
    arguments: list[str], runs: int, extra: dict[str, str] | None = None
) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``runs`` fresh processes."""
    command = [sys.executable, *arguments]
    env = _environment(extra)
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


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
    args = parser.parse_args(argv)
    print(f"median of {args.runs} fresh processes (Python {sys.version.split()[0]})")
    for name, arguments, extra in COMMANDS:
        wall, cpu = measure(arguments, args.runs, extra)
        print(f"{name:<55} {wall:7.0f} ms wall  {cpu:7.0f} ms CPU")
    modules = import_times(RENDER)
    own = sum(entry[0] for entry in modules) / 1000
    ours = sum(e[0] for e in modules if e[2].startswith("promptweave")) / 1000
    print(
        f"render imports {len(modules)} modules: {own:.0f} ms of own import time, "
        f"{ours:.0f} ms of it in promptweave"
    )
    for own_us, _cumulative, name in sorted(modules, reverse=True)[: args.top]:
        print(f"  {own_us / 1000:6.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
