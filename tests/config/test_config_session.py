"""``[store]``, ``[session]`` and ``[ambient]`` settings: the documented defaults, validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptweave import Config
from promptweave.errors import ConfigError


def test_defaults_are_the_documented_ones() -> None:
    config = Config()
    assert config.store.enabled is True and config.store.backend == "sqlite"
    session = config.session
    assert (session.summary_threshold, session.summary_keep, session.summary_cooldown_s) == (
        24,
        16,
        600,
    )
    assert session.summary_max_chars == 120 and session.summary_enabled
    assert session.describe_images is True
    assert (session.bot_reply_ttl_s, session.bot_reply_max_entries) == (600, 512)
    assert (config.ambient.window, config.ambient.enabled) == (8, True)
    assert config.history.user_window == 18
    assert config.timeline.max_images == 3


def test_settings_load_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text(
        "[store]\nenabled = false\n[session]\nsummary_threshold = 30\nsummary_keep = 10\n"
        "describe_images = false\n"
        "[ambient]\nwindow = 4\n",
        encoding="utf-8",
    )
    config = Config.from_file(path)
    assert config.store.enabled is False
    assert (config.session.summary_threshold, config.session.summary_keep) == (30, 10)
    assert config.session.describe_images is False
    assert config.ambient.window == 4


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("[session]\nsummary_threshold = 4\n", "summary_threshold"),
        ("[session]\nsummary_keep = 24\n", "must be below session.summary_threshold"),
        ("[session]\nsummary_keep = 2\n", "summary_keep"),
        ("[ambient]\nwindow = 0\n", "window"),
        ("[session]\nbot_reply_ttl_s = 0\n", "bot_reply_ttl_s"),
        ('[store]\nenabled = "maybe"\n', "enabled"),
        (
            '[session]\ndescribe_images = "no"\n',
            r"expected true or false, got \w+ @ \$\.session\.describe_images",
        ),
        (
            "[session]\ndescribe_images = 0\n",
            r"expected true or false, got \w+ @ \$\.session\.describe_images",
        ),
        ("[session]\nwindow = 3\n", "window"),
    ],
)
def test_bad_settings_are_reported_with_their_key(tmp_path: Path, toml: str, problem: str) -> None:
    path = tmp_path / "promptweave.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=problem):
        Config.from_file(path)
