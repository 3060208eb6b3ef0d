"""The ``nonebot-plugin-promptweave`` distribution in a real NoneBot2 process, loaded the way
``nb run`` loads a project's plugins (``[tool.nonebot.plugins]`` of its ``pyproject.toml``),
driven over OneBot v11 reverse WebSocket as NapCat would, with the model endpoint down: NoneBot's
log names what was loaded, and says once why the bot did not answer (``docs/bot.md``, "What the
log says")."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bot_process_support import free_port, install_distribution, running_bot
from websockets.asyncio.client import connect

SELF_ID = 10001
GROUP = 20001

BOT_PY = """\
import nonebot
from nonebot.adapters.onebot.v11 import Adapter

nonebot.init()
nonebot.get_driver().register_adapter(Adapter)
nonebot.load_from_toml("pyproject.toml")

if __name__ == "__main__":
    nonebot.run()
"""

PYPROJECT = """\
[project]
name = "my-bot"
version = "0.1.0"

[tool.nonebot]
plugin_dirs = []
builtin_plugins = []

[tool.nonebot.adapters]
"nonebot-adapter-onebot" = [{ name = "OneBot V11", module_name = "nonebot.adapters.onebot.v11" }]

[tool.nonebot.plugins]
"nonebot-plugin-promptweave" = ["nonebot_plugin_promptweave"]
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution installed with pip into a fresh directory (built from a copy)."""
    return install_distribution(tmp_path_factory.mktemp("plugin-process"))


@pytest.fixture
def bot(plugin_site: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A bot folder as docs/bot.md lays it out, its model endpoint a port nobody listens on;
    the bot process runs while the test does."""
    port, model_port = free_port(), free_port()
    (tmp_path / "bot.py").write_text(BOT_PY, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tmp_path / ".env").write_text(
        f'DRIVER=~fastapi\nHOST=127.0.0.1\nPORT={port}\nNICKNAME=["小织", "织织"]\n'
        f"PROMPTWEAVE_BASE_URL=http://127.0.0.1:{model_port}/v1\n"
        f"LOCALSTORE_DATA_DIR={tmp_path / 'data'}\n",
        encoding="utf-8",
    )
    (tmp_path / "promptweave.toml").write_text(
        '[plugins]\ncontrib = ["openai_compat"]\n\n[provider]\napi = "openai_chat"\n'
        'model = "qwen2.5-7b-instruct"\nmax_attempts = 1\n\n[learning]\nenabled = false\n',
        encoding="utf-8",
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.lower().endswith("_proxy") and not key.startswith(("PROMPTWEAVE_", "OPENAI_"))
    }
    env.update({"PYTHONPATH": str(plugin_site), "PYTHONUNBUFFERED": "1"})
    env["PROMPTWEAVE_CACHE_DIR"] = str(tmp_path / "cache")
    with running_bot(tmp_path, port, env):
        yield port, tmp_path


def _at_question(message_id: int, question: str) -> dict[str, Any]:
    return {
        "self_id": SELF_ID,
        "user_id": 30017,
        "time": int(time.time()),
        "message_id": message_id,
        "message_seq": message_id,
        "real_id": message_id,
        "message_type": "group",
        "sender": {"user_id": 30017, "nickname": "青柠汽水", "card": "", "role": "member"},
        "raw_message": "",
        "font": 14,
        "sub_type": "normal",
        "message": [
            {"type": "at", "data": {"qq": str(SELF_ID)}},
            {"type": "text", "data": {"text": question}},
        ],
        "message_format": "array",
        "post_type": "message",
        "group_id": GROUP,
    }


def _wait_for(log_file: Path, needle: str, count: int = 1) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log_file.read_text(encoding="utf-8")
        if text.count(needle) >= count:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} not {count} times in the log:\n{text}")


async def test_nonebots_log_names_what_was_loaded_and_why_the_bot_did_not_answer(
    bot: tuple[int, Path],
) -> None:
    port, folder = bot
    log_file = folder / "bot.log"
    async with connect(
        f"ws://127.0.0.1:{port}/onebot/v11/ws",
        additional_headers={"X-Self-ID": str(SELF_ID), "X-Client-Role": "Universal"},
    ) as ws:
        for message_id, question in ((501, " 周末有什么活动吗？"), (502, " 在吗？")):
            await ws.send(json.dumps(_at_question(message_id, question), ensure_ascii=False))
            await asyncio.to_thread(_wait_for, log_file, f"Message {message_id} ")
            await asyncio.to_thread(_wait_for, log_file, "running complete", message_id - 500)
    text = log_file.read_text(encoding="utf-8")
    assert 'Succeeded to load plugin "nonebot_plugin_promptweave"' in text
    [ready] = [line for line in text.splitlines() if "promptweave ready" in line]
    store = folder / "data" / "nonebot_plugin_promptweave" / "promptweave.sqlite3"
    assert "[INFO]" in ready
    assert f"config {(folder / 'promptweave.toml').resolve()}" in ready
    assert "bots every account: 小织 (NICKNAME)" in ready
    assert "openai_chat qwen2.5-7b-instruct at http://127.0.0.1:" in ready
    assert "no API key; PROMPTWEAVE_BASE_URL from NoneBot's config" in ready
    assert f"store sqlite {store} (the plugin's data folder)" in ready
    assert store.is_file()
    warnings = [line for line in text.splitlines() if "got no answer" in line]
    # Two unanswered questions, one cause: one warning, with the reason and the fix.
    assert len(warnings) == 1, text
    [warning] = warnings
    assert "[WARNING]" in warning
    assert f"message 501 in group {GROUP} got no answer: the model failed (unreachable)" in warning
    assert "ConnectError" in warning
    assert "Fix: start the model server, or correct [provider] base_url" in warning
