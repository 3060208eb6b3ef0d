"""What the NoneBot plugin reads from NoneBot's configuration, the start-up line it logs, the
order of NoneBot's NICKNAME, and the warning per model-failure cause (``docs/bot.md``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from promptweave import ChatMessage, IncomingEvent, TurnOutcome

NO_ENV: dict[str, str] = {}


def _config_file(folder: Path, text: str) -> Path:
    path = folder / "promptweave.toml"
    path.write_text(text, encoding="utf-8")
    return path


OPENAI = '[plugins]\ncontrib = ["openai_compat"]\n\n[provider]\napi = "openai_chat"\nmodel = "m1"\n'


def test_nonebots_settings_win_over_the_file_and_the_key_is_never_shown(tmp_path: Path) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings

    path = _config_file(tmp_path, OPENAI + 'base_url = "http://file.example/v1"\n')
    settings = Settings.load(
        PluginConfig(
            promptweave_config=str(path),
            promptweave_base_url="http://127.0.0.1:8000/v1",
            promptweave_api_key="sk-secret",
            promptweave_model="m2",
        ),
        data_dir=None,
        environ=NO_ENV,
        cwd=tmp_path,
    )
    provider = settings.config.provider
    assert (provider.base_url, provider.api_key, provider.model) == (
        "http://127.0.0.1:8000/v1",
        "sk-secret",
        "m2",
    )
    line = settings.startup_line("10001 小织", environ=NO_ENV)
    assert "sk-secret" not in line
    assert f"config {path.resolve()}" in line
    assert "bots 10001 小织" in line
    assert (
        "model openai_chat m2 at http://127.0.0.1:8000/v1 (API key set; PROMPTWEAVE_BASE_URL, "
        "PROMPTWEAVE_API_KEY, PROMPTWEAVE_MODEL from NoneBot's config)" in line
    )


def test_without_nonebot_settings_the_file_decides(tmp_path: Path) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings

    path = _config_file(tmp_path, OPENAI)
    settings = Settings.load(
        PluginConfig(promptweave_config=str(path)), data_dir=None, environ=NO_ENV, cwd=tmp_path
    )
    assert settings.from_nonebot == ()
    line = settings.startup_line("x", environ=NO_ENV)
    assert "model openai_chat m1 at https://api.openai.com/v1 (no API key)" in line


def test_the_store_goes_into_the_data_folder_unless_configured(tmp_path: Path) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings

    data = tmp_path / "data"
    plain = _config_file(tmp_path, OPENAI)
    settings = Settings.load(
        PluginConfig(promptweave_config=str(plain)), data_dir=data, environ=NO_ENV, cwd=tmp_path
    )
    assert settings.config.store.path == str(data / "promptweave.sqlite3")
    assert f"store sqlite {data / 'promptweave.sqlite3'} (the plugin's data folder)" in (
        settings.startup_line("x", environ=NO_ENV)
    )

    named = _config_file(tmp_path, OPENAI + '\n[store]\npath = "mine.sqlite3"\n')
    settings = Settings.load(
        PluginConfig(promptweave_config=str(named)), data_dir=data, environ=NO_ENV, cwd=tmp_path
    )
    assert settings.config.resolve_path(settings.config.store.path) == tmp_path / "mine.sqlite3"
    assert settings.store_source == "[store] path"

    settings = Settings.load(
        PluginConfig(promptweave_config=str(named), promptweave_store="elsewhere/bot.sqlite3"),
        data_dir=data,
        environ=NO_ENV,
        cwd=tmp_path,
    )
    assert settings.config.store.path == str(tmp_path / "elsewhere" / "bot.sqlite3")
    assert settings.store_source == "PROMPTWEAVE_STORE"


def test_the_config_file_comes_from_nonebot_then_the_environment_then_the_folder(
    tmp_path: Path,
) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings

    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(OPENAI, encoding="utf-8")
    assert (
        Settings.load(
            PluginConfig(),
            data_dir=None,
            environ={"PROMPTWEAVE_CONFIG": str(elsewhere)},
            cwd=tmp_path,
        ).path
        == elsewhere
    )
    none = Settings.load(PluginConfig(), data_dir=None, environ=NO_ENV, cwd=tmp_path)
    assert none.path is None
    assert "config none (the defaults)" in none.startup_line("x", environ=NO_ENV)
    assert "model none: no model client in [plugins] contrib" in none.startup_line(
        "x", environ=NO_ENV
    )
    local = _config_file(tmp_path, OPENAI)
    assert Settings.load(PluginConfig(), data_dir=None, environ=NO_ENV, cwd=tmp_path).path == local


def test_anthropic_endpoint_is_described_by_its_own_client(tmp_path: Path) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings

    path = _config_file(
        tmp_path,
        '[plugins]\ncontrib = ["anthropic_messages"]\n\n[provider]\napi = "anthropic"\n'
        'model = "claude-x"\n',
    )
    settings = Settings.load(
        PluginConfig(promptweave_config=str(path)), data_dir=None, environ=NO_ENV, cwd=tmp_path
    )
    assert "anthropic claude-x at https://api.anthropic.com (no API key)" in (
        settings.startup_line("x", environ={"ANTHROPIC_API_KEY": ""})
    )


def test_a_malformed_config_file_raises_naming_it(tmp_path: Path) -> None:
    from promptweave.contrib.nonebot.settings import PluginConfig, Settings
    from promptweave.errors import ConfigError

    path = _config_file(tmp_path, "[provider]\nmodle = 'x'\n")
    with pytest.raises(ConfigError, match="did you mean model"):
        Settings.load(PluginConfig(promptweave_config=str(path)), data_dir=None, environ=NO_ENV)


@pytest.mark.parametrize(
    "written", [["小织", "织织", "Zhi"], ["Zhi", "织织", "小织"], ["织织", "Zhi", "小织"]]
)
def test_nickname_keeps_the_order_the_operator_wrote(
    written: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from promptweave.contrib.nonebot.settings import nicknames_in_order

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"NICKNAME={json.dumps(written)}\n", encoding="utf-8")
    as_nonebot_keeps_them = set(written)
    assert nicknames_in_order(as_nonebot_keeps_them, "prod", environ=NO_ENV) == tuple(written)
    # The environment wins over .env, and .env.prod over .env, as in NoneBot.
    (tmp_path / ".env.prod").write_text(f"NICKNAME={json.dumps(written[::-1])}\n", encoding="utf-8")
    assert nicknames_in_order(as_nonebot_keeps_them, "prod", environ=NO_ENV) == tuple(written[::-1])
    environ = {"NICKNAME": json.dumps(written)}
    assert nicknames_in_order(as_nonebot_keeps_them, "prod", environ=environ) == tuple(written)


def test_nicknames_given_to_nonebot_init_follow_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptweave.contrib.nonebot.settings import nicknames_in_order

    monkeypatch.chdir(tmp_path)
    assert nicknames_in_order({"b", "a", ""}, "prod", environ=NO_ENV) == ("a", "b")


def _failed(message_id: str, cause: str, reason: str = "why") -> TurnOutcome:
    message = ChatMessage(
        id=message_id, sender_id="7", text="在吗", time=dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    )
    return TurnOutcome(
        event=IncomingEvent(platform="onebot", bot_id="10001", group_id="20001", message=message),
        status="failed",
        reason="provider_error",
        trace={"model_failure": {"cause": cause, "reason": reason, "fix": "do this"}},
    )


def test_one_warning_per_cause_within_the_interval_then_the_count_since() -> None:
    from promptweave.contrib.nonebot.failure_log import FailureLog

    lines: list[str] = []
    now = [0.0]
    failures = FailureLog(warn=lines.append, interval_s=600, clock=lambda: now[0])
    assert failures.note(_failed("1", "no_key", "no API key for the endpoint"))
    assert not failures.note(_failed("2", "no_key"))
    assert not failures.note(_failed("3", "no_key"))
    assert failures.note(_failed("4", "unreachable", "ConnectError"))
    now[0] = 601.0
    assert failures.note(_failed("5", "no_key"))
    assert lines == [
        "promptweave: message 1 in group 20001 got no answer: the model failed (no_key): "
        "no API key for the endpoint. Fix: do this",
        "promptweave: message 4 in group 20001 got no answer: the model failed (unreachable): "
        "ConnectError. Fix: do this",
        "promptweave: message 5 in group 20001 got no answer: the model failed (no_key): why. "
        "Fix: do this; 2 more since the last warning of this cause",
    ]


def test_an_outcome_without_a_model_failure_is_not_warned_of() -> None:
    from promptweave.contrib.nonebot.failure_log import FailureLog

    lines: list[str] = []
    failures = FailureLog(warn=lines.append)
    outcome = _failed("1", "no_key")
    assert not failures.note(TurnOutcome(event=outcome.event, status="silent", reason="pass"))
    assert lines == []


def test_the_start_up_heap_is_frozen_unless_the_env_says_false(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from promptweave.contrib.nonebot import freeze_start_up_heap
    from promptweave.contrib.nonebot.settings import PluginConfig

    frozen: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append("freeze"))
    assert PluginConfig().promptweave_gc_freeze is True
    assert freeze_start_up_heap(PluginConfig().promptweave_gc_freeze) and frozen == ["freeze"]
    off = PluginConfig.model_validate({"promptweave_gc_freeze": "false"})
    assert not freeze_start_up_heap(off.promptweave_gc_freeze) and frozen == ["freeze"]
