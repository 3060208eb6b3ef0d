"""What the NoneBot plugin reads from NoneBot's configuration, and the one start-up line that says
what it loaded (``docs/bot.md``, "Settings in NoneBot's .env" and "What the log says").

NoneBot's ``.env`` (or ``.env.prod``, or the environment) may set the settings an operator
changes most, which then win over ``promptweave.toml``: ``PROMPTWEAVE_CONFIG`` (the file),
``PROMPTWEAVE_BASE_URL``, ``PROMPTWEAVE_API_KEY``, ``PROMPTWEAVE_MODEL`` (``[provider]``) and
``PROMPTWEAVE_STORE`` (``[store] path``). The SQLite store goes into the data folder the
``nonebot-plugin-promptweave`` distribution names (nonebot-plugin-localstore's) unless
``PROMPTWEAVE_STORE`` or ``[store] path`` says where.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from dotenv import dotenv_values
from pydantic import BaseModel

from promptweave import Config, ProviderApi
from promptweave.config import CONFIG_ENV, CONFIG_FILE_NAME

__all__ = [
    "STORE_FILE_NAME",
    "PluginConfig",
    "Settings",
    "model_endpoint",
    "nicknames_in_order",
]

#: The SQLite file's name in the plugin's data folder.
STORE_FILE_NAME = "promptweave.sqlite3"


class PluginConfig(BaseModel):
    """The keys the plugin reads from NoneBot's configuration (``.env``, the environment or
    ``nonebot.init``); each is optional.

    :param promptweave_config: the promptweave configuration file (else ``$PROMPTWEAVE_CONFIG``,
        else ``./promptweave.toml``, else the defaults).
    :param promptweave_base_url: the model endpoint (``[provider] base_url``).
    :param promptweave_api_key: the model endpoint's key (``[provider] api_key``).
    :param promptweave_model: the model's name (``[provider] model``).
    :param promptweave_store: the SQLite store (``[store] path``; relative to the working
        directory).
    """

    promptweave_config: str | None = None
    promptweave_base_url: str | None = None
    promptweave_api_key: str | None = None
    promptweave_model: str | None = None
    promptweave_store: str | None = None
    #: Serve the dashboard under this path of NoneBot's FastAPI app (docs/dashboard.md).
    promptweave_dashboard_path: str | None = None
    promptweave_dashboard_token: str | None = None
    #: Freeze the start-up heap out of the cyclic garbage collector (``gc.freeze``) once the loop
    #: is open; ``PROMPTWEAVE_GC_FREEZE=false`` turns it off (``docs/bot.md``).
    promptweave_gc_freeze: bool = True


@attrs.frozen(kw_only=True)
class Settings:
    """The configuration in force and where each part of it came from."""

    config: Config
    #: The file read, or ``None`` for the defaults.
    path: Path | None
    #: The ``[provider]`` keys NoneBot's configuration set, by name.
    from_nonebot: tuple[str, ...]
    #: Where the store's place came from: ``PROMPTWEAVE_STORE``, ``[store] path``, the plugin's
    #: data folder, or the default.
    store_source: str

    @classmethod
    def load(
        cls,
        plugin_config: PluginConfig,
        *,
        data_dir: Path | None,
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Settings:
        """Read the configuration file and apply NoneBot's settings over it.

        :param data_dir: the plugin's data folder (nonebot-plugin-localstore), where the SQLite
            store goes unless configured; ``None`` keeps ``[store] path`` and its default.
        :raises promptweave.errors.ConfigError: the file is malformed.
        """
        env = os.environ if environ is None else environ
        here = Path.cwd() if cwd is None else cwd
        path = _config_path(plugin_config, env, here)
        config = Config.from_file(path) if path is not None else Config()
        provider_changes: dict[str, Any] = {}
        for key in ("base_url", "api_key", "model"):
            value = getattr(plugin_config, f"promptweave_{key}")
            if value:
                provider_changes[key] = value
        if provider_changes:
            config = attrs.evolve(
                config, provider=attrs.evolve(config.provider, **provider_changes)
            )
        store_path, store_source = _store_place(config, path, plugin_config, data_dir, here)
        if store_path is not None:
            config = attrs.evolve(config, store=attrs.evolve(config.store, path=store_path))
        return cls(
            config=config,
            path=path,
            from_nonebot=tuple(f"PROMPTWEAVE_{key.upper()}" for key in provider_changes),
            store_source=store_source,
        )

    def startup_line(self, bot_names: str, environ: Mapping[str, str] | None = None) -> str:
        """``promptweave ready · config … · bots … · model … · store …``: what an operator checks
        first (the key itself is never shown)."""
        config = self.config
        shown = str(self.path.resolve()) if self.path is not None else "none (the defaults)"
        store = config.store
        if not store.enabled:
            where = "off ([store] enabled = false)"
        elif store.backend == "memory":
            where = "memory (nothing kept across restarts)"
        else:
            sqlite = f"sqlite {config.resolve_path(store.path)} ({self.store_source})"
            where = sqlite if store.backend == "sqlite" else f"redis {store.url}, {sqlite}"
        model = model_endpoint(config, environ)
        if self.from_nonebot:
            given = f"{', '.join(self.from_nonebot)} from NoneBot's config"
            model = f"{model[:-1]}; {given})" if model.endswith(")") else f"{model} ({given})"
        return (
            f"promptweave ready · config {shown} · bots {bot_names} · model {model} · store {where}"
        )


def _config_path(plugin_config: PluginConfig, env: Mapping[str, str], cwd: Path) -> Path | None:
    if plugin_config.promptweave_config:
        return Path(plugin_config.promptweave_config)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    local = cwd / CONFIG_FILE_NAME
    return local if local.is_file() else None


def _store_place(
    config: Config,
    path: Path | None,
    plugin_config: PluginConfig,
    data_dir: Path | None,
    cwd: Path,
) -> tuple[str | None, str]:
    """The store's path to set (``None``: keep the configured one) and where it came from."""
    if plugin_config.promptweave_store:
        return str((cwd / plugin_config.promptweave_store).resolve()), "PROMPTWEAVE_STORE"
    if path is not None and _file_sets_store_path(path):
        return None, "[store] path"
    if data_dir is not None:
        return str(data_dir / STORE_FILE_NAME), "the plugin's data folder"
    return None, "the default [store] path"


def _file_sets_store_path(path: Path) -> bool:
    # The file was read already (Config.from_file); this only asks whether it names the path.
    with path.open("rb") as handle:
        data: dict[str, Any] = tomllib.load(handle)
    store = data.get("store")
    return isinstance(store, dict) and "path" in store


def model_endpoint(config: Config, environ: Mapping[str, str] | None = None) -> str:
    """``openai_chat gpt-4o-mini at https://api.openai.com/v1 (API key set)``: the model the bot
    calls and how, as the enabled client resolves it; never the key itself."""
    provider = config.provider
    contrib = config.plugins.contrib
    api = ProviderApi(provider.api)
    client: Any = None
    if api is ProviderApi.ANTHROPIC and "anthropic_messages" in contrib:
        from promptweave.contrib.anthropic_messages import AnthropicMessagesClient

        client = AnthropicMessagesClient.from_config(config, environ)
    elif api is not ProviderApi.ANTHROPIC and "openai_compat" in contrib:
        from promptweave.contrib.openai_compat import OpenAICompatClient

        client = OpenAICompatClient.from_config(config, environ)
    if client is None:
        if "offline_model" in contrib:
            return "the offline stand-in (offline_model: deterministic, not an LLM)"
        return (
            "none: no model client in [plugins] contrib (openai_compat or anthropic_messages), "
            "so the bot stays silent where it would answer"
        )
    key = "API key set" if client.api_key else "no API key"
    return f"{api.value} {provider.model or '(no model set)'} at {client.base_url} ({key})"


def nicknames_in_order(
    nicknames: Iterable[str], environment: str, environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """NoneBot's ``NICKNAME`` in the order the operator wrote it (the first is the bot's name,
    ``docs/bot.md``). NoneBot keeps the names as a set; the order is read back from where NoneBot
    read them (the environment, else ``.env.ENVIRONMENT``, else ``.env``, in NoneBot's
    precedence); names found in none of them (``nonebot.init(nickname=...)``) follow, sorted."""
    names = {name for name in nicknames if name}
    env = os.environ if environ is None else environ
    written: list[str] = []
    for source in (
        _named(env),
        _named(dotenv_values(f".env.{environment}")),
        _named(dotenv_values(".env")),
    ):
        if source is not None:
            written = source
            break
    ordered = [name for name in dict.fromkeys(written) if name in names]
    return (*ordered, *sorted(names - set(ordered)))


def _named(values: Mapping[str, str | None]) -> list[str] | None:
    raw = next((value for key, value in values.items() if key.lower() == "nickname"), None)
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return [raw]
    if isinstance(parsed, list):
        return [str(name) for name in parsed]
    return [str(parsed)]
