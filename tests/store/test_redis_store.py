"""The Redis store: key layout, prefixes, configuration and degradation.

The behaviour every backend shares is pinned by the store contract (``tests/store_contract.py``,
sharing between processes included) and the ``runtime`` fixture, which run on Redis too.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import sys
from pathlib import Path

import attrs
import pytest
from base_support import BOT, GROUP, ROOT, T0, MessageFactory, redis_config
from click.testing import CliRunner
from redis.crc import key_slot
from redis_support import Outage, closed_port

from promptweave import (
    ChatMessage,
    Config,
    ConfigError,
    Promptweave,
    SessionTurn,
    Stores,
    Turn,
    load_turn_file,
)
from promptweave.cli.common import render_stores
from promptweave.cli.main import cli
from promptweave.config import StoreConfig
from promptweave.contrib.redis_store import (
    RedisBotReplyContext,
    RedisDeliveryLedger,
    RedisFeedbackLedger,
    RedisGroupLog,
    RedisNamespace,
    RedisRoutingState,
    RedisSessionStore,
    RedisSummaryStore,
    connect,
    redis_stores,
)
from promptweave.plugins.manager import available_contrib_plugins
from promptweave.replay.chat_log import import_events
from promptweave.store.routing_state import MemoryRoutingState
from promptweave.store.sqlite import StoreUnavailableError
from promptweave.turn import SpeakTrigger

EXAMPLES = ROOT / "examples"
LOG = EXAMPLES / "logs" / "lunch_chat.jsonl"
TURN = EXAMPLES / "turns" / "from_store.json"
CST = dt.timezone(dt.timedelta(hours=8))


def said(number: int, text: str = "在吗", sender: str = "30022") -> ChatMessage:
    return ChatMessage(
        id=str(number), sender_id=sender, text=text, time=T0 + dt.timedelta(seconds=number)
    )


def keys_of(namespace: RedisNamespace) -> list[str]:
    return sorted(namespace.client.scan_iter(match=f"{namespace.prefix}*"))


# -- key layout ---------------------------------------------------------------------------------


def test_every_key_is_prefixed_and_tagged_with_its_bot_and_group(
    redis_namespace: RedisNamespace,
) -> None:
    stores = redis_stores(Config(), redis_namespace)
    assert stores.group_log is not None and stores.sessions is not None
    for bot, group in (("10001", "20001"), ("10001", "20002"), ("10002", "")):
        stores.group_log.append_group_message(bot, group, said(1))
        stores.sessions.append_turns(
            [
                SessionTurn(
                    bot_id=bot, group_id=group, user_id="30022", role="user", content="嗯", time=T0
                )
            ],
            storage_window=10,
        )
        stores.routing.note_phrase(bot, group, "确实")
    keys = keys_of(redis_namespace)
    assert keys and all(key.startswith(redis_namespace.prefix) for key in keys)
    tags = {key[len(redis_namespace.prefix) :].split("}")[0] + "}" for key in keys}
    assert tags == {"{10001:20001}", "{10001:20002}", "{10002:}"}
    for tag in tags:
        # One slot per bot and group: a cluster shards by it, and each script stays in one slot.
        assert len({key_slot(key.encode()) for key in keys if tag in key}) == 1
    assert f"{redis_namespace.prefix}{{10001:20001}}:turns:user:30022" in keys


def test_ids_cannot_break_the_hash_tag_or_collide(redis_namespace: RedisNamespace) -> None:
    log = RedisGroupLog(redis_namespace)
    log.append_group_message("a:b", "c", said(1, "第一个群"))
    log.append_group_message("a", "b:c", said(1, "第二个群"))
    log.append_group_message("x}", "{y", said(1, "括号"))
    until = T0 + dt.timedelta(minutes=1)
    assert [m.text for m in log.recent_group_messages("a:b", "c", until=until, limit=5)] == [
        "第一个群"
    ]
    assert [m.text for m in log.recent_group_messages("a", "b:c", until=until, limit=5)] == [
        "第二个群"
    ]
    braces = [key for key in keys_of(redis_namespace) if "x%7D" in key]
    assert braces and all("{x%7D:%7By}" in key for key in braces)
    assert len({key_slot(key.encode()) for key in braces}) == 1


def test_a_prefix_with_braces_is_refused(redis_namespace: RedisNamespace) -> None:
    with pytest.raises(ValueError, match="braces"):
        RedisNamespace(redis_namespace.client, "{bots}:")


def test_a_client_without_decoded_replies_is_refused(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    with pytest.raises(ValueError, match="decode_responses=True"):
        RedisNamespace(client)
    client.close()


def test_times_read_back_with_the_offset_they_were_written_with(
    redis_namespace: RedisNamespace,
) -> None:
    state = RedisRoutingState(redis_namespace)
    until = dt.datetime(2026, 11, 29, 20, 0, 0, 123456, tzinfo=CST)
    state.start_cooldown("b", "g", until)
    cooldown = state.mute("b", "g").cooldown_until
    assert (
        cooldown == until and cooldown is not None and cooldown.utcoffset() == CST.utcoffset(None)
    )


def test_the_bot_reply_maximum_counts_per_bot_and_group(redis_namespace: RedisNamespace) -> None:
    context = redis_stores(Config(), redis_namespace).bot_replies
    assert context is not None
    context.max_entries = 2  # type: ignore[attr-defined]
    context.remember("10001", "20001", "a", "甲", now=T0)
    for number in range(3):
        context.remember("10001", "20002", str(number), "别的群", now=T0)
    assert context.lookup("10001", "20001", "a", now=T0) == "甲"
    assert context.lookup("10001", "20002", "0", now=T0) is None


# -- sharing ------------------------------------------------------------------------------------


def test_stores_under_another_prefix_share_nothing(redis_url: str, redis_prefix: str) -> None:
    first = Stores.from_config(redis_config(redis_url, redis_prefix))
    other = Stores.from_config(redis_config(redis_url, redis_prefix + "other:"))
    first.routing.note_quote_delivered("10001", "20001", "9", T0)
    assert other.routing.last_quote_at("10001", "20001") is None
    for stores in (first, other):
        stores.close()


def test_a_replayed_log_renders_the_same_on_redis_and_sqlite(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    turn_data = json.loads(TURN.read_text(encoding="utf-8"))
    rendered = {}
    for name, config in (
        ("sqlite", Config(store=StoreConfig(path=str(tmp_path / "s.sqlite3")))),
        ("redis", redis_config(redis_url, redis_prefix)),
    ):
        runtime = Promptweave.from_config(config, rng=random.Random(7))
        with LOG.open(encoding="utf-8") as lines:
            report = import_events(runtime, lines, source=str(LOG))
        assert (report.messages, report.replies, report.skipped) == (9, 2, 0)
        result = runtime.render(load_turn_file(TURN))
        rendered[name] = (result.system_prompt, [m.content for m in result.messages])
        runtime.close()
    assert "【小织刚才说】" in rendered["redis"][0]
    assert turn_data["message"]["text"] in rendered["redis"][1][-1]
    assert rendered["redis"] == rendered["sqlite"]


# -- configuration ------------------------------------------------------------------------------


def test_the_redis_store_is_not_offered_as_a_contrib_plugin() -> None:
    assert "redis_store" not in available_contrib_plugins()


def test_stores_from_config_build_the_redis_stores(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config = attrs.evolve(redis_config(redis_url, redis_prefix), base_dir=tmp_path)
    stores = Stores.from_config(config)
    assert stores.unavailable is None
    assert isinstance(stores.routing, RedisRoutingState)
    assert isinstance(stores.group_log, RedisGroupLog)
    assert isinstance(stores.deliveries, RedisDeliveryLedger)
    # Retrieval data stays in the SQLite file at [store] path, read without creating it.
    assert stores.database is not None and stores.database.path == tmp_path / "promptweave.sqlite3"
    assert stores.retrieval.expression_pairs("10001", "20001", limit=5) == []
    assert not (tmp_path / "promptweave.sqlite3").exists()
    stores.close()


def test_a_missing_redis_client_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "redis" or name.startswith(("redis.", "promptweave.contrib.redis_store")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(
        ConfigError, match=r"pip install 'promptweave\[redis\]' @ \$\.store\.backend"
    ):
        Stores.from_config(Config(store=StoreConfig(backend="redis")))


def write_redis_config(directory: Path, url: str, prefix: str) -> Path:
    """A ``promptweave.toml`` selecting the Redis backend."""
    config_file = directory / "promptweave.toml"
    config_file.write_text(
        f'[store]\nbackend = "redis"\nurl = "{url}"\nprefix = "{prefix}"\n', encoding="utf-8"
    )
    return config_file


def test_render_reads_redis_and_leaves_its_routing_state_alone(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config_file = write_redis_config(tmp_path, redis_url, redis_prefix)
    runtime = Promptweave.from_config(Config.from_file(config_file))
    with LOG.open(encoding="utf-8") as lines:
        import_events(runtime, lines, source=str(LOG))
    runtime.close()
    stores = render_stores(Config.from_file(config_file), explicit=False)
    assert isinstance(stores.group_log, RedisGroupLog)
    assert isinstance(stores.routing, MemoryRoutingState)
    assert isinstance(stores.bot_replies, RedisBotReplyContext)
    assert stores.bot_replies.refresh_on_lookup is False
    stores.close()
    namespace = RedisNamespace(connect(redis_url), redis_prefix)
    recency_key = namespace.key("10001", "20001", "replies")
    before = namespace.client.zrange(recency_key, 0, -1, withscores=True)
    result = CliRunner().invoke(
        cli, ["render", str(TURN), "--config", str(config_file), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert "【小织刚才说】\n青柠说的那家米线可以试试" in json.loads(result.stdout)["system_prompt"]
    # Reading the quoted bot text left the bot-reply context's order of use as it was.
    assert namespace.client.zrange(recency_key, 0, -1, withscores=True) == before
    namespace.client.close()
    candidates = RedisRoutingState(RedisNamespace(connect(redis_url), redis_prefix)).candidates(
        "10001", "20001"
    )
    assert candidates == ()
    assert not (tmp_path / "promptweave.sqlite3").exists()


def test_retrieval_data_is_imported_into_the_sqlite_file_beside_redis(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config_file = write_redis_config(tmp_path, redis_url, redis_prefix)
    memories = tmp_path / "m.jsonl"
    memories.write_text('{"kind": "teaching", "text": "七点开始"}\n', encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        [
            "import",
            "memories",
            str(memories),
            "--bot",
            "1",
            "--group",
            "2",
            "--config",
            str(config_file),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "promptweave.sqlite3").is_file()


# -- degradation --------------------------------------------------------------------------------


def only_current(runtime: Promptweave, message: MessageFactory) -> dict[str, object]:
    rendered = runtime.render(
        Turn(bot=BOT, group_id=GROUP, message=message("30022", "小织在吗", minute=1))
    )
    # No history from a store that is gone; 小织在吗 still gets its greeting tone.
    assert [m.source for m in rendered.messages] == ["wording_hint:scene_tone", "current"]
    return dict(rendered.trace)


def test_an_unreachable_redis_degrades_turns_and_recording(message: MessageFactory) -> None:
    port = closed_port()
    config = attrs.evolve(
        Config(), store=StoreConfig(backend="redis", url=f"redis://127.0.0.1:{port}/0")
    )
    runtime = Promptweave.from_config(config)
    assert runtime.stores.sessions is None
    degraded = str(only_current(runtime, message)["degraded"])
    assert degraded.startswith(f"store_unavailable: Redis store 127.0.0.1:{port}/0: ")
    assert runtime.recorder.record_message(BOT.id, GROUP, message("30022", "在吗")) is False
    runtime.close()


def test_redis_failing_mid_turn_degrades_and_routes_on_a_scratch_state(
    message: MessageFactory,
) -> None:
    # Built without the start-up PING, as if the server went away after the runtime started.
    port = closed_port()
    namespace = RedisNamespace(connect(f"redis://127.0.0.1:{port}/0"), "gone:")
    stores = Stores(
        group_log=RedisGroupLog(namespace),
        sessions=RedisSessionStore(namespace),
        summaries=RedisSummaryStore(namespace),
        bot_replies=RedisBotReplyContext(namespace),
        feedback=RedisFeedbackLedger(namespace),
        routing=RedisRoutingState(namespace),
    )
    runtime = Promptweave.from_config(Config(), stores=stores)
    turn = Turn(bot=BOT, group_id=GROUP, message=message("30022", "小织在吗", minute=1))
    rendered = runtime.render(turn)
    assert str(rendered.trace["degraded"]).startswith(
        f"store_unavailable: Redis store 127.0.0.1:{port}/0"
    )
    assert [m.source for m in rendered.messages] == ["wording_hint:scene_tone", "current"]
    notes = runtime.decide(turn).notes
    assert any(note.startswith("routing_state_unavailable: Redis store") for note in notes)
    current = message("30022", "在吗", minute=2)
    assert runtime.recorder.record_message(BOT.id, GROUP, current) is False
    assert (
        runtime.recorder.record_bot_reply(BOT.id, GROUP, "在的", message_id="1", answering=current)
        is False
    )
    with pytest.raises(StoreUnavailableError):
        stores.routing.note_phrase(BOT.id, GROUP, "嗯")
    runtime.close()
    namespace.client.close()


def test_turns_degrade_while_redis_is_cut_off_and_recover_after(
    redis_url: str, redis_prefix: str, message: MessageFactory
) -> None:
    outage = Outage(redis_url)
    runtime = Promptweave.from_config(redis_config(outage.url, redis_prefix))
    assert runtime.recorder.record_message(BOT.id, GROUP, message("30017", "楼下新开了家米线"))
    turn = Turn(
        bot=BOT,
        group_id=GROUP,
        message=message("30022", "小织哪家", minute=1),
        trigger=SpeakTrigger.MENTION,
    )
    outage.cut()
    degraded = runtime.render(turn)
    assert str(degraded.trace["degraded"]).startswith("store_unavailable: Redis store 127.0.0.1:")
    assert "楼下新开了家米线" not in degraded.system_prompt
    assert runtime.recorder.record_message(BOT.id, GROUP, message("30017", "断线时说的")) is False
    outage.restore()
    recovered = runtime.render(turn)
    assert recovered.trace["degraded"] is None
    assert "楼下新开了家米线" in recovered.system_prompt
    runtime.close()
    outage.close()


def test_a_lookup_without_refresh_changes_nothing(redis_namespace: RedisNamespace) -> None:
    writer = RedisBotReplyContext(redis_namespace, ttl_s=60, max_entries=2)
    reader = attrs.evolve(writer, refresh_on_lookup=False)
    writer.remember("10001", "20001", "a", "甲", now=T0)
    writer.remember("10001", "20001", "b", "乙", now=T0)
    assert reader.lookup("10001", "20001", "a", now=T0) == "甲"
    writer.remember("10001", "20001", "c", "丙", now=T0)  # "a" was not refreshed: it goes
    assert writer.lookup("10001", "20001", "a", now=T0) is None
    late = T0 + dt.timedelta(minutes=5)
    assert reader.lookup("10001", "20001", "b", now=late) is None  # expired, but left in place
    assert writer.lookup("10001", "20001", "b", now=T0) == "乙"


def test_during_an_outage_each_retriever_logs_once_not_a_traceback_per_turn(
    redis_url: str, redis_prefix: str, message: MessageFactory, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage(redis_url)
    runtime = Promptweave.from_config(redis_config(outage.url, redis_prefix))
    turns = [
        Turn(
            bot=BOT,
            group_id=GROUP,
            message=message("30022", "小织 桌游局在哪", minute=minute),
            trigger=SpeakTrigger.MENTION,
        )
        for minute in range(1, 5)
    ]
    runtime.render(turns[0])
    caplog.set_level(logging.INFO, logger="promptweave.retrieval")
    outage.cut()
    failed: set[str] = set()
    for turn in turns[1:]:
        sections = runtime.render(turn).trace["retrieval"]["sections"]
        errors = [t for ts in sections.values() for t in ts if t.get("reason") == "error"]
        assert errors and all("StoreUnavailableError" in str(t["error"]) for t in errors)
        failed |= {t["retriever"] for t in errors}
    records = [r for r in caplog.records if r.name == "promptweave.retrieval"]
    began = [r for r in records if "store is unavailable" in r.getMessage()]
    names = [r.getMessage().split("'")[1] for r in began]
    # once each over the 3 turns of the outage, not once a turn
    assert len(names) == len(set(names)) and set(names) == failed
    assert all(r.exc_info is None for r in records)  # no traceback
    assert all(r.levelno == logging.WARNING for r in began)
    caplog.clear()
    outage.restore()
    sections = runtime.render(turns[-1]).trace["retrieval"]["sections"]
    answered = {t["retriever"] for ts in sections.values() for t in ts if t["status"] != "skipped"}
    back = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
    assert back and sorted(m.split("'")[1] for m in back) == sorted(answered & set(names))
    runtime.close()
    outage.close()
