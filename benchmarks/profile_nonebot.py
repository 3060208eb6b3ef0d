"""Where a chatter message's CPU goes inside NoneBot2, in one process: the bundled chat's chatter
handed to the OneBot v11 adapter's ``Bot.handle_event`` one event at a time, as the adapter does for
each frame of its reverse WebSocket, with the plugin of ``bench_nonebot.py`` named on the command
line (``promptweave``, ``do-nothing``, or ``none`` for NoneBot with no plugin loaded).

``bench_nonebot.py`` gives the figures of the targets (separate bot processes, a real socket);
this script is for finding where the time goes, faster and with less noise:

- the CPU of each thread of the process per message (``/proc/self/task``), the main thread's
  apart, so work moved to a thread is seen as moved, not saved;
- ``--sql``: the main thread's CPU inside each kind of SQLite statement (the store's connection
  class, timed around ``execute``);
- ``--profile FILE``: a cProfile of the timed messages by CPU time (``python -m pstats FILE``),
  which slows Python code about fourfold and C code little: use it for shares, not figures.

The bot's API calls are answered in-process (a new message id for a send); the model is the local
stand-in of ``bench_nonebot.py``, on a thread (its CPU shows as a thread of its own).

Run: ``python benchmarks/profile_nonebot.py [--plugin promptweave] [--messages 2400] [--sql]
[--profile FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import itertools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_nonebot

TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """Each thread's user and system CPU seconds so far, by ``name:tid``."""
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        found[f"{name}:{tid}"] = (int(fields[11]) + int(fields[12])) / TICKS
    return found


class StatementClock:
    """The main thread's CPU inside each kind of statement of the store's connections."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])

    def install(self) -> None:
        from promptweave.store import sqlite

        execute = sqlite.Connection.execute
        spent, main = self.spent, threading.main_thread()

        def timed(connection: Any, sql: str, *args: Any) -> Any:
            if threading.current_thread() is not main:
                return execute(connection, sql, *args)
            start = time.thread_time()
            try:
                return execute(connection, sql, *args)
            finally:
                entry = spent[" ".join(sql.split())[:60]]
                entry[0] += 1
                entry[1] += time.thread_time() - start

        sqlite.Connection.execute = timed  # type: ignore[method-assign]

    def report(self, messages: int) -> None:
        total = sum(seconds for _, seconds in self.spent.values())
        print(f"SQLite statements on the main thread: {total / messages * 1e6:.1f} us a message")
        ranked = sorted(self.spent.items(), key=lambda item: -item[1][1])
        for sql, (count, seconds) in ranked[:12]:
            print(f"  {seconds / messages * 1e6:7.1f} us  x{count / messages:.2f}  {sql}")


def start_bot(plugin: str, folder: Path, model_url: str) -> None:
    """NoneBot initialised in this process with ``plugin`` loaded, as ``bench_nonebot.py``'s bot
    of that name is."""
    os.chdir(folder)
    (folder / "promptweave.toml").write_text(
        bench_nonebot.PROMPTWEAVE_TOML.format(model_url=model_url), encoding="utf-8"
    )
    os.environ["PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter

    nonebot.init(
        driver="~none",
        log_level="WARNING",
        nickname=["小织"],
        promptweave_config="promptweave.toml",
    )
    nonebot.get_driver().register_adapter(Adapter)
    if plugin == "do-nothing":
        (folder / "bench_plugin.py").write_text(bench_nonebot.DO_NOTHING, encoding="utf-8")
        sys.path.insert(0, str(folder))
        nonebot.load_plugin("bench_plugin")
    elif plugin == "promptweave":
        nonebot.load_plugin("promptweave.contrib.nonebot")


async def drive(args: argparse.Namespace, clock: StatementClock | None) -> None:
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter, Bot

    chatter, _ = bench_nonebot.load_chat()
    events = list(itertools.islice(itertools.cycle(chatter), args.messages))
    driver = nonebot.get_driver()
    await driver._lifespan.startup()  # what the driver's run does before serving
    adapter = next(iter(driver._adapters.values()))
    bot = Bot(adapter, str(bench_nonebot.SELF_ID))
    ids = itertools.count(7_000_000)

    async def call_api(api: str, **data: Any) -> Any:
        return {"message_id": next(ids)} if api.startswith("send") else None

    bot.call_api = call_api  # type: ignore[method-assign]
    adapter.bot_connect(bot)
    message_ids = itertools.count(1_000_000)

    async def feed(chosen: Sequence[dict[str, Any]]) -> None:
        for payload in chosen:
            event = Adapter.json_to_event(
                {**payload, "time": int(time.time()), "message_id": next(message_ids)}
            )
            await bot.handle_event(event)
        for _ in range(int(args.settle_ms / 10)):  # the turns' work after the handler returns
            await asyncio.sleep(0.01)

    await feed(chatter)  # warm up: the store and the caches see the chat once
    if clock is not None:
        clock.install()
    profile = cProfile.Profile(time.process_time) if args.profile else None
    before, main_before = thread_cpu(), time.thread_time()
    if profile is not None:
        profile.enable()
    await feed(events)
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    after, main_after = thread_cpu(), time.thread_time()
    per = 1e6 / args.messages
    print(
        f"{args.plugin}: {args.messages} chatter messages; main thread "
        f"{(main_after - main_before) * per:.0f} us CPU a message, the whole process "
        f"{(sum(after.values()) - sum(before.values())) * per:.0f}"
    )
    main_tid = f":{threading.get_native_id()}"
    for name, seconds in after.items():
        spent = seconds - before.get(name, 0.0)
        if spent > 0 and not name.endswith(main_tid):
            print(f"  thread {name}: {spent * per:.0f} us a message")
    if clock is not None:
        clock.report(args.messages)
    await driver._lifespan.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--plugin", choices=("promptweave", "do-nothing", "none"), default="promptweave"
    )
    parser.add_argument("--messages", type=int, default=2400, help="timed chatter messages")
    parser.add_argument("--sql", action="store_true", help="time the SQLite statements")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the timed part")
    parser.add_argument(
        "--settle-ms", type=float, default=500.0, help="time for the turns' work after the last"
    )
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), bench_nonebot._StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="profile-nonebot-") as folder:
        start_bot(args.plugin, Path(folder), f"http://127.0.0.1:{server.server_address[1]}/v1")
        clock = StatementClock() if args.sql else None
        asyncio.run(drive(args, clock))
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
