"""``promptweave groups``: the per-group settings in force and the run-time switch
(``docs/groups.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from promptweave import Config
from promptweave.cli.main import cli
from promptweave.config import StoreConfig
from promptweave.store.stores import Stores

CONFIG = """\
[store]
path = "bot.sqlite3"

[bots."10001"]
deny_groups = ["20009"]

[bots."10001".groups."*"]
quiet_hours = ["23:00-07:30"]

[bots."10001".groups."20001"]
necessity_threshold = 30
learn = false
"""


def _invoke(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    config = tmp_path / "promptweave.toml"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
    result = CliRunner().invoke(cli, ["groups", *args, "--config", str(config)])
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_the_configured_groups_before_any_store_exists(tmp_path: Path) -> None:
    code, out, err = _invoke(tmp_path, "list")
    assert code == 0
    assert out.splitlines() == [
        "10001:20001  on   configuration",
        "    threshold 30; quiet 23:00-07:30 Asia/Shanghai (allow addressed); not learned from",
        "10001:20009  off  configuration: group_denied",
        "    threshold 50; quiet 23:00-07:30 Asia/Shanghai (allow addressed)",
    ]
    assert "bot.sqlite3 does not exist yet" in err


def test_off_on_and_reset_persist_in_the_store_the_bot_reads(tmp_path: Path) -> None:
    code, out, _ = _invoke(tmp_path, "off", "--bot", "10001", "--group", "20001")
    assert code == 0 and out.startswith("10001:20001  off  switched by cli at ")
    code, out, _ = _invoke(tmp_path, "on", "--bot", "10001", "--group", "20009")
    assert "over the configuration's group_denied" in out
    # What a bot opening the same file reads.
    config = Config(store=StoreConfig(path=str(tmp_path / "bot.sqlite3")))
    stores = Stores.from_config(config)
    assert stores.routing is not None
    switches = {(b, g): s.enabled for b, g, s in stores.routing.switches()}
    stores.close()
    assert switches == {("10001", "20001"): False, ("10001", "20009"): True}
    code, out, _ = _invoke(tmp_path, "list", "--json")
    rows = {row["group_id"]: row for row in json.loads(out)}
    assert rows["20001"]["reason"] == "group_switched_off"
    assert rows["20001"]["sources"]["enabled"] == "switch"
    assert rows["20009"]["enabled"] and not rows["20009"]["configured"]
    code, out, _ = _invoke(tmp_path, "reset", "--bot", "10001", "--group", "20001")
    assert out.startswith("10001:20001  on   configuration")
    code, out, _ = _invoke(tmp_path, "list", "--json")
    assert json.loads(out)[0]["switch"] is None


def test_a_store_in_memory_keeps_no_switch(tmp_path: Path) -> None:
    (tmp_path / "promptweave.toml").write_text('[store]\nbackend = "memory"\n', encoding="utf-8")
    code, _, err = _invoke(tmp_path, "off", "--bot", "1", "--group", "2")
    assert code == 2
    assert "no run-time switch to keep" in err and "give --store FILE" in err


def test_on_and_off_need_the_bot_and_the_group(tmp_path: Path) -> None:
    code, _, err = _invoke(tmp_path, "off", "--bot", "10001")
    assert code == 2 and "Missing option '--group'" in err
