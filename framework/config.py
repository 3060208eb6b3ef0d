"""``promptweave.toml``: the deployment's settings (``docs/configuration.md``).

Loaded with the project's one cattrs converter into frozen attrs classes. Unknown keys are errors,
reported one line per problem with the key path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from framework._convert import load_toml, structure

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE_NAME",
    "AmbientConfig",
    "BudgetConfig",
    "Config",
    "HistoryConfig",
    "PluginsConfig",
    "SessionConfig",
    "StoreConfig",
    "TimelineConfig",
]

CONFIG_FILE_NAME = "promptweave.toml"
CONFIG_ENV = "PROMPTWEAVE_CONFIG"

_positive = attrs.validators.ge(1)
_non_negative = attrs.validators.ge(0)


@attrs.frozen(kw_only=True)
class BudgetConfig:
    """The character budget of one request: system prompt plus messages (seed 004, 字符预算).

    :param chars: the budget; 0 disables trimming.
    """

    chars: int = attrs.field(default=12000, validator=_non_negative)


@attrs.frozen(kw_only=True)
class TimelineConfig:
    """Section ``group_timeline`` (seed 004, 群聊相邻语境)."""

    addressed_limit: int = attrs.field(default=8, validator=_positive)
    ambient_limit: int = attrs.field(default=4, validator=_positive)
    line_chars: int = attrs.field(default=240, validator=_positive)
    block_chars: int = attrs.field(default=2400, validator=_positive)
    max_images: int = attrs.field(default=3, validator=_non_negative)


@attrs.frozen(kw_only=True)
class HistoryConfig:
    """The current user's history in the message sequence."""

    user_window: int = attrs.field(default=18, validator=_positive)


@attrs.frozen(kw_only=True)
class StoreConfig:
    """Where conversational and retrieval state lives.

    :param backend: ``sqlite`` (the default: one file, nothing to install) or ``memory``.
    :param path: the SQLite file, relative to the config file's directory.
    :param enabled: ``false`` runs without conversational state: every turn sends only the
        current message (seed 004, 运行态不可用时的退化).
    """

    backend: str = attrs.field(
        default="sqlite", validator=attrs.validators.in_(("sqlite", "memory"))
    )
    path: str = "promptweave.sqlite3"
    enabled: bool = True


@attrs.frozen(kw_only=True)
class SessionConfig:
    """Session storage, summary compression and the bot-reply context (seed 004, 长会话压缩).

    :param storage_window: session rows kept per user; older ones are deleted on append.
    :param max_content_chars: cap of one stored turn and of one user message sent.
    :param group_ttl_s: age after which a group session turn is no longer read; 0 keeps all.
    :param private_ttl_s: the same for private chats (three days by default).
    :param summary_enabled: compress long sessions into a summary row after delivery.
    :param summary_threshold: user turns in a session that trigger compression (at least 8).
    :param summary_keep: the newest rows kept verbatim after compression (at least 4).
    :param summary_cooldown_s: seconds between two compressions of one (bot, group, user).
    :param summary_max_chars: the longest summary text.
    :param bot_reply_ttl_s: how long a delivered bot message can be looked up when quoted.
    :param bot_reply_max_entries: how many delivered bot messages are remembered.
    """

    storage_window: int = attrs.field(default=200, validator=_positive)
    max_content_chars: int = attrs.field(default=4000, validator=attrs.validators.ge(64))
    group_ttl_s: int = attrs.field(default=0, validator=_non_negative)
    private_ttl_s: int = attrs.field(default=259200, validator=_non_negative)
    summary_enabled: bool = True
    summary_threshold: int = attrs.field(default=24, validator=attrs.validators.ge(8))
    summary_keep: int = attrs.field(default=16, validator=attrs.validators.ge(4))
    summary_cooldown_s: int = attrs.field(default=600, validator=_non_negative)
    summary_max_chars: int = attrs.field(default=120, validator=attrs.validators.ge(20))
    bot_reply_ttl_s: int = attrs.field(default=600, validator=_positive)
    bot_reply_max_entries: int = attrs.field(default=512, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.summary_keep >= self.summary_threshold:
            raise ValueError(
                f"session.summary_keep ({self.summary_keep}) must be below "
                f"session.summary_threshold ({self.summary_threshold})"
            )
        if self.summary_keep >= self.storage_window:
            raise ValueError(
                f"session.summary_keep ({self.summary_keep}) must be below "
                f"session.storage_window ({self.storage_window})"
            )


@attrs.frozen(kw_only=True)
class AmbientConfig:
    """The ambient excerpt ``【群环境摘录】`` of the message sequence (seed 004, messages 序列).

    :param enabled: ``false`` never sends the excerpt.
    :param window: the group's latest session turns read for it.
    :param line_chars: cap of one excerpt line.
    :param block_chars: cap of the whole excerpt.
    """

    enabled: bool = True
    window: int = attrs.field(default=8, validator=_positive)
    line_chars: int = attrs.field(default=512, validator=_positive)
    block_chars: int = attrs.field(default=4000, validator=_positive)


@attrs.frozen(kw_only=True)
class PluginsConfig:
    """Which optional plugins to load.

    :param contrib: names of ``contrib`` plugins to enable.
    :param strict: raise when a section's ``render`` raises, instead of leaving it out (for tests).
    """

    contrib: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    strict: bool = False


@attrs.frozen(kw_only=True)
class Config:
    """All settings; every field has the seed's default.

    :param persona_pack: a pack name registered through ``register_persona_packs``, or a path.
    :param overrides_file: TOML file of per-bot, per-group section overrides (relative paths are
        resolved against the config file's directory).
    """

    persona_pack: str = "default"
    overrides_file: str | None = None
    budget: BudgetConfig = BudgetConfig()
    timeline: TimelineConfig = TimelineConfig()
    history: HistoryConfig = HistoryConfig()
    store: StoreConfig = StoreConfig()
    plugins: PluginsConfig = PluginsConfig()
    session: SessionConfig = SessionConfig()
    ambient: AmbientConfig = AmbientConfig()
    base_dir: Path = attrs.field(factory=Path.cwd, eq=False)

    @classmethod
    def from_file(cls, path: Path) -> Config:
        """Load a config file; problems raise :class:`framework.errors.ConfigError`."""
        data: dict[str, Any] = load_toml(path)
        loaded = structure(data, _FileConfig, str(path))
        return cls(**attrs.asdict(loaded, recurse=False), base_dir=path.parent.resolve())

    @classmethod
    def discover(cls, explicit: Path | None = None) -> Config:
        """The config in force: ``explicit``, else ``$PROMPTWEAVE_CONFIG``, else
        ``./promptweave.toml`` if it exists, else the defaults."""
        if explicit is not None:
            return cls.from_file(explicit)
        from_env = os.environ.get(CONFIG_ENV)
        if from_env:
            return cls.from_file(Path(from_env))
        local = Path.cwd() / CONFIG_FILE_NAME
        if local.is_file():
            return cls.from_file(local)
        return cls()

    def resolve_path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base_dir / path


@attrs.frozen(kw_only=True)
class _FileConfig:
    """What the file may contain (``base_dir`` is not a key)."""

    persona_pack: str = "default"
    overrides_file: str | None = None
    budget: BudgetConfig = BudgetConfig()
    timeline: TimelineConfig = TimelineConfig()
    history: HistoryConfig = HistoryConfig()
    store: StoreConfig = StoreConfig()
    plugins: PluginsConfig = PluginsConfig()
    session: SessionConfig = SessionConfig()
    ambient: AmbientConfig = AmbientConfig()
