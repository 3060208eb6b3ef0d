"""What the dashboard tests share: the bundled chat and config they replay, the bot and group
they read, the hostile member's markup, and the dashboard's "now"."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"
BOT, GROUP = "10001", "20001"

#: The hostile member's nickname and messages: markup that must render as text.
HOSTILE_NAME = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_TEXT = "<script>document.title='pwned'</script><b>bold?</b>"
HOSTILE_ADDRESSED = "<img src=x onerror=\"document.title='pwned'\">你好"

#: The dashboard's "now" in the tests: the evening of the chat's first day, in the bot's zone.
NOW = dt.datetime(2026, 12, 4, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=8)))
