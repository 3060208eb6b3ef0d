"""The whole path, black box: a real NoneBot2 process with the FastAPI driver and promptweave's
plugin, driven over OneBot v11 reverse WebSocket as NapCat would, answering through a local
OpenAI-compatible stand-in server (``docs/bot.md``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from base_support import ROOT
from bot_process_support import free_port, running_bot
from websockets.asyncio.client import ClientConnection, connect

from promptweave import Config, Stores
from promptweave.messages.timeline import TIMELINE_HEADER

SELF_ID = 10001
GROUP = 20001
ANSWER = "周六晚上七点桌游局\n在格子桌游吧"

BOT_PY = """\
import nonebot
from nonebot.adapters.onebot.v11 import Adapter

nonebot.init()
nonebot.get_driver().register_adapter(Adapter)
nonebot.load_plugin("promptweave.contrib.nonebot")

if __name__ == "__main__":
    nonebot.run()
"""


class _ChatCompletions(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/chat/completions`` that answers ``ANSWER`` and keeps the
    request bodies."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"path": self.path, **body})
        payload = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}}],
                "usage": {
                    "prompt_tokens": 1200,
                    "completion_tokens": 12,
                    "prompt_tokens_details": {"cached_tokens": 1024},
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def model_url() -> Iterator[str]:
    _ChatCompletions.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def bot_folder(tmp_path: Path, model_url: str) -> tuple[Path, int]:
    port = free_port()
    (tmp_path / "bot.py").write_text(BOT_PY, encoding="utf-8")
    (tmp_path / ".env").write_text(
        f'DRIVER=~fastapi\nHOST=127.0.0.1\nPORT={port}\nNICKNAME=["小织"]\n'
        "PROMPTWEAVE_CONFIG=promptweave.toml\n",
        encoding="utf-8",
    )
    (tmp_path / "promptweave.toml").write_text(
        f"""
[plugins]
contrib = ["openai_compat"]

[provider]
api = "openai_chat"
model = "stand-in"
base_url = "{model_url}"

[store]
path = "bot.sqlite3"

[delivery]
pause_base_s = 0
pause_per_char_s = 0
""",
        encoding="utf-8",
    )
    return tmp_path, port


@pytest.fixture
def bot_process(bot_folder: tuple[Path, int]) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    folder, port = bot_folder
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update({"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PROMPTWEAVE_API_KEY": ""})
    with running_bot(folder, port, env) as process:
        yield port, process


def _group_message(message_id: int, segments: list[dict[str, Any]], user_id: int) -> dict[str, Any]:
    """A group message as NapCat posts it (message_format array)."""
    return {
        "self_id": SELF_ID,
        "user_id": user_id,
        "time": int(time.time()),
        "message_id": message_id,
        "message_seq": message_id,
        "real_id": message_id,
        "message_type": "group",
        "sender": {"user_id": user_id, "nickname": "青柠汽水", "card": "", "role": "member"},
        "raw_message": "",
        "font": 14,
        "sub_type": "normal",
        "message": segments,
        "message_format": "array",
        "post_type": "message",
        "group_id": GROUP,
    }


async def _next_action(ws: ClientConnection) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
    assert "action" in frame, frame
    return frame


async def _answer(ws: ClientConnection, frame: dict[str, Any], data: Any) -> None:
    await ws.send(json.dumps({"status": "ok", "retcode": 0, "data": data, "echo": frame["echo"]}))


async def test_a_real_nonebot_process_answers_an_at_question_in_bubbles_and_records_them(
    bot_process: tuple[int, subprocess.Popen[bytes]], bot_folder: tuple[Path, int]
) -> None:
    port, process = bot_process
    folder, _ = bot_folder
    async with connect(
        f"ws://127.0.0.1:{port}/onebot/v11/ws",
        additional_headers={"X-Self-ID": str(SELF_ID), "X-Client-Role": "Universal"},
        proxy=None,
    ) as ws:
        await ws.send(
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
        await ws.send(
            json.dumps(_group_message(501, [{"type": "text", "data": {"text": "今天好冷"}}], 30031))
        )
        question = [
            {"type": "at", "data": {"qq": str(SELF_ID)}},
            {"type": "text", "data": {"text": " 周末有什么活动吗？"}},
        ]
        await ws.send(json.dumps(_group_message(502, question, 30017)))
        sent = []
        for message_id in (9001, 9002):
            frame = await _next_action(ws)
            assert frame["action"] in ("send_group_msg", "send_msg")
            assert frame["params"]["group_id"] == GROUP
            sent.append(frame["params"]["message"])
            await _answer(ws, frame, {"message_id": message_id})

    assert sent == [
        [{"type": "text", "data": {"text": "周六晚上七点桌游局"}}],
        [{"type": "text", "data": {"text": "在格子桌游吧"}}],
    ]
    # the model request carried the assembled system prompt and the question
    assert len(_ChatCompletions.bodies) == 1
    request = _ChatCompletions.bodies[0]
    assert request["path"] == "/v1/chat/completions"
    system = request["messages"][0]
    assert system["role"] == "system" and "【安全约束】" in system["content"]
    assert TIMELINE_HEADER in system["content"] and "今天好冷" in system["content"]
    assert "周末有什么活动吗" in json.dumps(request["messages"][-1], ensure_ascii=False)

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 0
    # the store holds the delivered reply under the platform's message ids
    config = Config.from_file(folder / "promptweave.toml")
    stores = Stores.from_config(config)
    try:
        rows = stores.group_log.recent_group_messages(  # type: ignore[union-attr]
            str(SELF_ID), str(GROUP), until=dt.datetime.now(dt.UTC), limit=10
        )
    finally:
        stores.close()
    assert [(row.sender_id, row.text, row.id) for row in rows][-2:] == [
        (str(SELF_ID), "周六晚上七点桌游局", "9001"),
        (str(SELF_ID), "在格子桌游吧", "9002"),
    ]


@pytest.fixture
def dashboard_env(bot_folder: tuple[Path, int]) -> str:
    """The bot's ``.env`` asks the plugin to mount the dashboard (``docs/dashboard.md``)."""
    folder, _ = bot_folder
    with (folder / ".env").open("a", encoding="utf-8") as env:
        env.write("PROMPTWEAVE_DASHBOARD_PATH=/pw-dash\nPROMPTWEAVE_DASHBOARD_TOKEN=s3cret\n")
    return "/pw-dash"


async def test_the_plugin_mounts_the_dashboard_on_nonebots_app_and_it_shows_the_turn(
    dashboard_env: str,
    bot_process: tuple[int, subprocess.Popen[bytes]],
    bot_folder: tuple[Path, int],
) -> None:
    import httpx

    port, _process = bot_process
    folder, _ = bot_folder
    base = f"http://127.0.0.1:{port}{dashboard_env}"
    async with connect(
        f"ws://127.0.0.1:{port}/onebot/v11/ws",
        additional_headers={"X-Self-ID": str(SELF_ID), "X-Client-Role": "Universal"},
        proxy=None,
    ) as ws:
        question = [
            {"type": "at", "data": {"qq": str(SELF_ID)}},
            {"type": "text", "data": {"text": " 周末有什么活动吗？"}},
        ]
        await ws.send(json.dumps(_group_message(601, question, 30017)))
        for message_id in (9101, 9102):
            frame = await _next_action(ws)
            await _answer(ws, frame, {"message_id": message_id})
        async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
            # The turn log is written by its own thread every half second.
            deadline = time.monotonic() + 20
            while True:
                page = await client.get(f"{base}/groups/{SELF_ID}/{GROUP}")
                if page.status_code == 200 and "周末有什么活动吗" in page.text:
                    break
                assert time.monotonic() < deadline, (page.status_code, page.text[:500])
                await asyncio.sleep(0.3)
            groups = await client.get(f"{base}/")
            assert groups.status_code == 200 and str(GROUP) in groups.text
            # Forgetting is an admin action: refused without the token the .env gave, let past
            # the check with it (where the request itself is then found wanting).
            forget = f"{base}/groups/{SELF_ID}/{GROUP}/learned/forget"
            refused = await client.post(forget, json={"kind": "note", "key": "x"})
            assert refused.status_code == 401
            allowed = await client.post(forget, json={}, headers={"Authorization": "Bearer s3cret"})
            assert allowed.status_code == 400
    log = (folder / "bot.log").read_text(encoding="utf-8")
    assert f"promptweave dashboard at {dashboard_env}" in log
