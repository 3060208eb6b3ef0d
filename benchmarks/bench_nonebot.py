"""promptweave where the bot runs: inside a real NoneBot2 process, against NoneBot plugins that do
less, over a real OneBot v11 reverse WebSocket.

Three bot processes start side by side, each a NoneBot2 bot with the FastAPI driver and the OneBot
v11 adapter, as ``docs/bot.md`` sets one up:

- **do-nothing**: one ``on_message`` matcher whose handler returns at once: the floor, NoneBot's own
  cost of an event;
- **one model call**: the same matcher; for a message to the bot (``event.to_me``) it makes one
  request to the model (httpx, a client kept open) and sends the answer: the least a chat bot does;
- **promptweave**: ``promptweave.contrib.nonebot`` with the SQLite store, learning on, and the
  ``openai_compat`` client.

This script is the OneBot implementation for all three (as NapCat would be): it connects to each
bot's ``/onebot/v11/ws``, posts the bundled chat's group messages as events, and answers the bots'
API calls (``send_group_msg`` with a new message id, ``get_msg`` as not found). The model is a
local OpenAI-compatible stand-in that answers at once with one line.

Figures, every contender in the same run, rounds interleaved (the order rotating each round):

- **chatter**: the chat's messages not addressed to the bot, posted as fast as the socket takes
  them (flooded) or at a fixed rate (paced). CPU per message is the bot process's user and system
  time (``/proc/PID/stat``) from the first message until the process is idle again (no CPU for
  ``--idle-ms``), over the messages; throughput is the flooded messages over the wall time until
  idle. promptweave answers what its routing answers (a question to the group, a low-engagement
  phrase), as it would in a group.
- **@ → first send**: an @-question posted when the bot is idle, to the first ``send_group_msg``
  frame that arrives; the median over the samples.

Run: ``python benchmarks/bench_nonebot.py [--rounds N] [--flood N] [--paced N] [--rate R]
[--asks N] [--asks-only] [--compare PYTHON]`` (install the ``test`` extra: NoneBot2, the OneBot
adapter, websockets, httpx). ``--asks-only`` runs, after the warm-up, rounds of @-questions alone
for the contenders that answer (for working on that path; the chatter figures are left out).
``--compare PYTHON`` adds a fourth bot, promptweave as another interpreter has it installed
(another tree's virtual environment), to the same interleaved rounds: two versions compared in one
run, where runs one after the other drift by more than most changes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
SELF_ID = 10001
BOT_NAMES = ("小织", "织织", "小织子")
ANSWER = "周六晚上七点，在格子桌游吧"
TICKS = os.sysconf("SC_CLK_TCK")
#: The contenders that answer an @-question (the do-nothing plugin does not).
#: The fourth bot of ``--compare``: promptweave as another interpreter has it installed.
COMPARED = "promptweave (compared)"
ANSWERING = ("one model call", "promptweave", COMPARED)

BOT_PY = """\
import nonebot
from nonebot.adapters.onebot.v11 import Adapter

nonebot.init()
nonebot.get_driver().register_adapter(Adapter)
nonebot.load_plugin({plugin!r})

if __name__ == "__main__":
    nonebot.run()
"""

DO_NOTHING = """\
from nonebot import on_message
from nonebot.adapters.onebot.v11 import GroupMessageEvent

matcher = on_message(priority=50, block=False)


@matcher.handle()
async def _handle(event: GroupMessageEvent) -> None:
    return None
"""

ONE_MODEL_CALL = """\
import httpx
from nonebot import get_driver, on_message
from nonebot.adapters.onebot.v11 import Bot, GroupMessageEvent

MODEL_URL = {model_url!r}
client = httpx.AsyncClient(timeout=30)
matcher = on_message(priority=50, block=False)


@get_driver().on_shutdown
async def _close() -> None:
    await client.aclose()


@matcher.handle()
async def _handle(bot: Bot, event: GroupMessageEvent) -> None:
    if not event.to_me:
        return
    response = await client.post(
        MODEL_URL + "/chat/completions",
        json={{
            "model": "stand-in",
            "messages": [
                {{"role": "system", "content": "你是群里的小织。"}},
                {{"role": "user", "content": event.get_plaintext()}},
            ],
        }},
    )
    answer = response.json()["choices"][0]["message"]["content"]
    await bot.send(event, answer)
"""

PROMPTWEAVE_TOML = """\
[plugins]
contrib = ["openai_compat"]

[provider]
api = "openai_chat"
model = "stand-in"
base_url = "{model_url}"
api_key = "stand-in"

[bots."10001"]
name = "小织"
aliases = ["织织", "小织子"]

[store]
path = "bot.sqlite3"

[delivery]
pause_base_s = 0
pause_per_char_s = 0
"""


class _StandIn(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/chat/completions`` that answers one line at once (for the
    learners' structured calls too: they get an answer that does not parse, and say so)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of process ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _addressed(event: dict[str, Any]) -> bool:
    for segment in event["message"]:
        if segment["type"] == "at" and str(segment["data"].get("qq")) == str(SELF_ID):
            return True
        if segment["type"] == "text" and any(n in segment["data"]["text"] for n in BOT_NAMES):
            return True
    return False


def load_chat() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The bundled chat's group messages from people: those not addressed to the bot (chatter),
    and the @-questions."""
    chatter, asks = [], []
    for line in CHAT.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("post_type") != "message" or event.get("message_type") != "group":
            continue
        if str(event.get("user_id")) == str(SELF_ID):
            continue
        # the reply segments would make the adapter ask get_msg for ids this client never sent
        event["message"] = [s for s in event["message"] if s["type"] != "reply"]
        if not event["message"]:
            continue
        if _addressed(event):
            if any(s["type"] == "at" for s in event["message"]):
                asks.append(event)
        else:
            chatter.append(event)
    return chatter, asks


@attrs.define(eq=False)
class Contender:
    """One bot process and this script's OneBot connection to it."""

    name: str
    folder: Path
    port: int
    #: The interpreter of the bot process (another tree's, for ``--compare``).
    python: str = sys.executable
    process: subprocess.Popen[bytes] | None = None
    ws: ClientConnection | None = None
    reader: asyncio.Task[None] | None = None
    sends: asyncio.Queue[float] = attrs.field(factory=asyncio.Queue)
    sent: int = 0
    next_id: Iterator[int] = attrs.field(factory=lambda: itertools.count(7_000_000))

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update({"PYTHONUNBUFFERED": "1", "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"})
        log = (self.folder / "bot.log").open("wb")
        self.process = subprocess.Popen(
            [self.python, "bot.py"], cwd=self.folder, env=env, stdout=log, stderr=log
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name} exited:\n{(self.folder / 'bot.log').read_text()}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise SystemExit(f"{self.name} did not listen on {self.port}")

    async def connect(self) -> None:
        self.ws = await connect(
            f"ws://127.0.0.1:{self.port}/onebot/v11/ws",
            additional_headers={"X-Self-ID": str(SELF_ID), "X-Client-Role": "Universal"},
            proxy=None,
            max_queue=None,
        )
        await self.ws.send(
            json.dumps(
                {
                    "time": int(time.time()),
                    "self_id": SELF_ID,
                    "post_type": "meta_event",
                    "meta_event_type": "lifecycle",
                    "sub_type": "connect",
                }
            )
        )
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.ws is not None
        async for raw in self.ws:
            frame = json.loads(raw)
            if "action" not in frame:
                continue
            if frame["action"] in ("send_group_msg", "send_msg"):
                self.sent += 1
                self.sends.put_nowait(time.perf_counter())
                reply = {"status": "ok", "retcode": 0, "data": {"message_id": next(self.next_id)}}
            else:
                reply = {"status": "failed", "retcode": 100, "data": None}
            await self.ws.send(json.dumps({**reply, "echo": frame.get("echo")}))

    async def post(self, event: dict[str, Any], message_id: int) -> None:
        assert self.ws is not None
        now = int(time.time())
        await self.ws.send(
            json.dumps({**event, "time": now, "message_id": message_id}, ensure_ascii=False)
        )

    async def idle(self, idle_ms: float) -> float:
        """Wait until the process has used no CPU for ``idle_ms``; the time it went idle."""
        assert self.process is not None
        step = idle_ms / 1000 / 4
        last, since, quiet_at = _cpu_seconds(self.process.pid), 0, time.perf_counter()
        while since < 4:
            await asyncio.sleep(step)
            now = _cpu_seconds(self.process.pid)
            if now > last:
                last, since, quiet_at = now, 0, time.perf_counter()
            else:
                since += 1
        return quiet_at

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def make_contenders(base: Path, model_url: str, compare: str | None = None) -> list[Contender]:
    """The three bots, and with ``compare`` (a Python interpreter with another promptweave
    installed, such as an older tree's virtual environment) a fourth, ``promptweave (compared)``."""
    plugins = {
        "do-nothing": ("bench_plugin", DO_NOTHING),
        "one model call": ("bench_plugin", ONE_MODEL_CALL.format(model_url=model_url)),
        "promptweave": ("promptweave.contrib.nonebot", None),
    }
    if compare is not None:
        plugins[COMPARED] = ("promptweave.contrib.nonebot", None)
    contenders = []
    for name, (module, source) in plugins.items():
        folder = base / name.replace(" ", "_").strip("()").replace("(", "")
        folder.mkdir()
        port = _free_port()
        (folder / "bot.py").write_text(BOT_PY.format(plugin=module), encoding="utf-8")
        if source is not None:
            (folder / "bench_plugin.py").write_text(source, encoding="utf-8")
        (folder / ".env").write_text(
            f"DRIVER=~fastapi\nHOST=127.0.0.1\nPORT={port}\nLOG_LEVEL=WARNING\n"
            f'NICKNAME=["小织"]\nPROMPTWEAVE_CONFIG=promptweave.toml\n',
            encoding="utf-8",
        )
        (folder / "promptweave.toml").write_text(
            PROMPTWEAVE_TOML.format(model_url=model_url), encoding="utf-8"
        )
        python = compare if name == COMPARED and compare is not None else sys.executable
        contenders.append(Contender(name=name, folder=folder, port=port, python=python))
    return contenders


@attrs.frozen
class Chatter:
    cpu_us: float  # CPU per message, microseconds
    rate: float  # messages a second, posted to idle
    sent: int  # bubbles the bot sent meanwhile


async def chatter(
    contender: Contender,
    events: list[dict[str, Any]],
    ids: Iterator[int],
    *,
    rate: float | None,
    idle_ms: float,
) -> Chatter:
    assert contender.process is not None
    await contender.idle(idle_ms)
    sent_before = contender.sent
    cpu_before = _cpu_seconds(contender.process.pid)
    start = time.perf_counter()
    for number, event in enumerate(events):
        if rate is not None:
            delay = start + number / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await contender.post(event, next(ids))
    quiet_at = await contender.idle(idle_ms)
    cpu = _cpu_seconds(contender.process.pid) - cpu_before
    return Chatter(
        cpu_us=cpu / len(events) * 1e6,
        rate=len(events) / max(quiet_at - start, 1e-9),
        sent=contender.sent - sent_before,
    )


async def first_send(
    contender: Contender, asks: list[dict[str, Any]], ids: Iterator[int], idle_ms: float
) -> list[float]:
    """Milliseconds from each @-question to the first bubble the bot sent for it."""
    found = []
    for event in asks:
        await contender.idle(idle_ms)
        while not contender.sends.empty():
            contender.sends.get_nowait()
        start = time.perf_counter()
        await contender.post(event, next(ids))
        try:
            arrived = await asyncio.wait_for(contender.sends.get(), timeout=30)
        except TimeoutError:
            raise SystemExit(f"{contender.name} sent nothing for an @-question") from None
        found.append((arrived - start) * 1000)
    return found


async def run(args: argparse.Namespace) -> None:
    chatter_events, asks = load_chat()
    flood = list(itertools.islice(itertools.cycle(chatter_events), args.flood))
    paced = list(itertools.islice(itertools.cycle(chatter_events), args.paced))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    ids = itertools.count(1_000_000)
    results: dict[str, dict[str, list[Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-nonebot-") as base:
        contenders = make_contenders(Path(base), model_url, args.compare)
        try:
            for contender in contenders:
                contender.start()
                await contender.connect()
                results[contender.name] = {"flooded": [], "paced": [], "first": []}
            # warm up: the store and caches of each bot see the chat once
            for contender in contenders:
                await chatter(contender, chatter_events, ids, rate=None, idle_ms=args.idle_ms)
                if contender.name in ANSWERING:
                    await first_send(contender, asks[:2], ids, args.idle_ms)
            for round_number in range(args.rounds):
                shift = round_number % len(contenders)
                for contender in contenders[shift:] + contenders[:shift]:
                    found = results[contender.name]
                    if args.asks_only and contender.name not in ANSWERING:
                        continue
                    if not args.asks_only:
                        found["flooded"].append(
                            await chatter(contender, flood, ids, rate=None, idle_ms=args.idle_ms)
                        )
                        found["paced"].append(
                            await chatter(
                                contender, paced, ids, rate=args.rate, idle_ms=args.idle_ms
                            )
                        )
                    if contender.name in ANSWERING:
                        chosen = [
                            asks[(round_number * args.asks + k) % len(asks)]
                            for k in range(args.asks)
                        ]
                        found["first"].extend(
                            await first_send(contender, chosen, ids, args.idle_ms)
                        )
        finally:
            for contender in contenders:
                await contender.close()
            server.shutdown()
    report(args, results)


def report(args: argparse.Namespace, results: dict[str, dict[str, list[Any]]]) -> None:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    print(
        f"NoneBot2 + OneBot v11 reverse WebSocket, {args.rounds} rounds interleaved; chatter "
        f"{args.flood} messages flooded and {args.paced} paced at {args.rate:g}/s a round; "
        f"{args.asks} @-questions a round (Python {sys.version.split()[0]})"
    )
    if args.asks_only:
        first = {name: found["first"] for name, found in results.items() if found["first"]}
        for name, found_first in first.items():
            print(
                f"{name:<22} @ -> first send p50 {statistics.median(found_first):6.1f} ms"
                f" (p90 {statistics.quantiles(found_first, n=10)[-1]:.1f}, n {len(found_first)})"
            )
        for name in (n for n in ("promptweave", COMPARED) if n in first):
            own, call = first[name], first["one model call"]
            print(
                f"ratio ({name} / one model call, @ -> first send) "
                f"{statistics.median(own) / statistics.median(call):.2f}"
            )
        return
    figures: dict[str, dict[str, float]] = {}
    for name, found in results.items():
        flooded, paced, first = found["flooded"], found["paced"], found["first"]
        figures[name] = {
            "flood_cpu": median([c.cpu_us for c in flooded]),
            "flood_rate": median([c.rate for c in flooded]),
            "paced_cpu": median([c.cpu_us for c in paced]),
            "first_p50": median(first) if first else 0.0,
        }
        bubbles = sum(c.sent for c in (*flooded, *paced))
        f = figures[name]
        asked = (
            f" | @ -> first send p50 {f['first_p50']:6.1f} ms"
            f" (p90 {statistics.quantiles(first, n=10)[-1]:.1f})"
            if first
            else ""
        )
        print(
            f"{name:<22} flooded {f['flood_rate']:7.0f} msg/s, {f['flood_cpu']:7.0f} us CPU/msg"
            f" (rounds {min(c.cpu_us for c in flooded):.0f}-{max(c.cpu_us for c in flooded):.0f})"
            f" | paced {f['paced_cpu']:7.0f} us CPU/msg"
            f"{asked} | bubbles sent in chatter {bubbles}"
        )
    floor, call = figures["do-nothing"], figures["one model call"]
    for name in (n for n in ("promptweave", COMPARED) if n in figures):
        own = figures[name]
        print(
            f"ratio ({name} / do-nothing, CPU per flooded message) "
            f"{own['flood_cpu'] / floor['flood_cpu']:.2f}"
        )
        print(
            f"ratio ({name} / do-nothing, CPU per paced message) "
            f"{own['paced_cpu'] / floor['paced_cpu']:.2f}"
        )
        print(
            f"ratio ({name} / do-nothing, flooded throughput) "
            f"{own['flood_rate'] / floor['flood_rate']:.2f}"
        )
        print(
            f"ratio ({name} / one model call, @ -> first send) "
            f"{own['first_p50'] / call['first_p50']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds; medians are shown")
    parser.add_argument("--flood", type=int, default=600, help="flooded chatter messages a round")
    parser.add_argument("--paced", type=int, default=300, help="paced chatter messages a round")
    parser.add_argument("--rate", type=float, default=150.0, help="paced messages a second")
    parser.add_argument("--asks", type=int, default=8, help="@-questions a round")
    parser.add_argument(
        "--asks-only",
        action="store_true",
        help="rounds of @-questions only (after the warm-up), for the two contenders that answer",
    )
    parser.add_argument(
        "--compare",
        metavar="PYTHON",
        help=(
            "a fourth bot, promptweave as this interpreter has it installed (another tree's "
            "virtual environment), in the same interleaved rounds"
        ),
    )
    parser.add_argument(
        "--idle-ms", type=float, default=400.0, help="no CPU for this long counts as idle"
    )
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
