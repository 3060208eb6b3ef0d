"""``promptweave learn``, ``learned list``, ``learned forget`` and the learned block of ``store
stats``, over a SQLite store holding a recorded chat.

Most tests run a learner plugin of their own (``notes``: one ``note`` per human message, one
``sender`` per member), with the built-in learners left out, so what is learned is known
exactly; the last ones run the built-in learners."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from base_support import ROOT, T0
from click.testing import CliRunner, Result
from runtime_fixtures import redis_prefix, redis_url

from promptweave import ChatMessage, Config, Promptweave, hookimpl
from promptweave.cli.main import cli
from promptweave.config import StoreConfig
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.plugins.manager import DEFAULT_PLUGINS
from promptweave.store.learned import LearnedItem, item_key
from promptweave.store.stores import Stores

LOG = ROOT / "examples" / "logs" / "lunch_chat.jsonl"
BOT_ID = "10001"
LUNCH = "20001"  # the group of the example log
OTHER = "20002"  # a second group, recorded by the tests
NOW = "2026-11-30T09:00:00+08:00"

__all__ = ["redis_prefix", "redis_url"]  # the Redis fixtures, collected here

#: The human messages of the example log: id → (sender, text).
LUNCH_MESSAGES = {
    "9301": ("30017", "今天食堂又是土豆烧鸡"),
    "9302": ("30031", "土豆比鸡多系列"),
    "9303": ("30017", "@小织 你中午吃的啥"),
    "9305": ("30031", "小织好会说"),
    "9306": ("30022", "中午吃什么好纠结"),
    "9307": ("30017", "楼下新开了家米线"),
    "9308": ("30022", "@小织 你推荐一个"),
    "9310": ("30017", "对，汤底是骨头熬的"),
    "9311": ("30022", "哪一家？就是地铁站旁边那家吗"),
}


class NotesPlugin:
    """A plugin registering the ``notes`` learner (and ``broken``, which fails when its table
    says ``fail = true``); it keeps what it was told was forgotten."""

    def __init__(self) -> None:
        self.forgotten: list[tuple[str, str]] = []

    def run(self, batch: LearnerBatch) -> LearnerResult:
        items: list[LearnedItem] = []
        by_sender: dict[str, list[str]] = {}
        for logged in batch.messages:
            message = logged.message
            if message.sender_id in batch.bot_ids:
                continue
            items.append(
                LearnedItem(
                    kind="note",
                    bot_id=batch.bot_id,
                    group_id=batch.group_id,
                    key=item_key(message.text),
                    fields={"text": message.text},
                    user_id=message.sender_id,
                    source_message_ids=(message.id or "",),
                    learned_at=batch.now,
                    learner="notes",
                )
            )
            by_sender.setdefault(message.sender_id, []).append(message.id or "")
        items += [
            LearnedItem(
                kind="sender",
                bot_id=batch.bot_id,
                group_id=batch.group_id,
                key=sender,
                fields={"messages": len(ids)},
                user_id=sender,
                source_message_ids=ids,
                count=len(ids),
                learned_at=batch.now,
                learner="notes",
            )
            for sender, ids in by_sender.items()
        ]
        return LearnerResult(items=items)

    def told_forgotten(self, items: list[LearnedItem], _stores: Stores) -> None:
        self.forgotten += [(item.kind, item.key) for item in items]

    @staticmethod
    def broken(batch: LearnerBatch) -> LearnerResult:
        if batch.settings.get("fail"):
            raise RuntimeError("the model is down")
        return LearnerResult()

    @hookimpl
    def register_learners(self, register: Callable[[Learner], None]) -> None:
        register(
            Learner(
                name="notes",
                writes=("note", "sender"),
                run=self.run,
                forgotten=self.told_forgotten,
                max_batch=4,  # the example log takes three runs
            )
        )
        register(Learner(name="broken", writes=("nothing",), run=self.broken))


BUILTIN_LEARNERS = [
    name
    for name in ("learners", "strategy_learner", "member_learner", "event_learner")
    if f"promptweave.builtin_plugins.{name}" in DEFAULT_PLUGINS
]


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> NotesPlugin:
    """Every runtime the commands build loads :class:`NotesPlugin` and not the built-in
    learners."""
    from promptweave.plugins.manager import build_plugin_manager

    plugin = NotesPlugin()

    def build(**kwargs: Any) -> Any:
        return build_plugin_manager(
            **{**kwargs, "extra_plugins": [plugin], "disabled": BUILTIN_LEARNERS}
        )

    monkeypatch.setattr("promptweave.runtime.build_plugin_manager", build)
    return plugin


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _other_group(store: Path) -> None:
    """Record three messages of group 20002 through a runtime's recorder."""
    config = Config(store=StoreConfig(path=str(store)))
    runtime = Promptweave.from_config(config, stores=Stores.from_config(config))
    try:
        for number, text in enumerate(("周末去爬山吗", "好呀", "带上相机")):
            runtime.recorder.record_message(
                BOT_ID,
                OTHER,
                ChatMessage(
                    id=f"o{number}",
                    sender_id="30040",
                    text=text,
                    time=T0 + dt.timedelta(minutes=number),
                ),
            )
    finally:
        runtime.close()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A SQLite store holding the example log (group 20001) and group 20002."""
    path = tmp_path / "chat.sqlite3"
    result = invoke("store", "import", str(LOG), "--store", str(path))
    assert result.exit_code == 0, result.output
    _other_group(path)
    return path


def _json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_learn_says_what_was_learned_per_group(notes: NotesPlugin, store: Path) -> None:
    result = invoke("learn", "--store", str(store), "--now", NOW)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "group 20001 (bot 10001): 9 note, 3 sender from 11 new messages",
        "group 20002 (bot 10001): 3 note, 1 sender from 3 new messages",
    ]
    assert result.stderr == ""  # not a terminal: no progress bar
    again = invoke("learn", "--store", str(store), "--now", NOW)
    assert again.stdout.splitlines() == [
        "group 20001 (bot 10001): nothing new",
        "group 20002 (bot 10001): nothing new",
    ]


def test_learned_list_shows_each_item_with_its_fields_count_and_sources(
    notes: NotesPlugin, store: Path
) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    result = invoke("learned", "list", "--store", str(store), "--group", OTHER)
    assert result.exit_code == 0, result.output
    learned_at = dt.datetime.fromisoformat(NOW).isoformat()
    # Items of one count and time are listed by key.
    notes_shown = []
    for key, text, source in sorted(
        (item_key(text), text, f"o{n}")
        for n, text in enumerate(("周末去爬山吗", "好呀", "带上相机"))
    ):
        notes_shown += [
            f"    {key}  ×1  learned {learned_at}",
            "      user: 30040",
            f"      text: {text}",
            f"      from messages: {source}",
        ]
    assert result.stdout.splitlines() == [
        "group 20002 (bot 10001)",
        "  note (3)",
        *notes_shown,
        "  sender (1)",
        f"    30040  ×3  learned {learned_at}",
        "      user: 30040",
        "      messages: 3",
        "      from messages: o0, o1, o2",
    ]
    text = result.stdout
    assert "20001" not in text


def test_learned_list_json_is_one_item_a_line(notes: NotesPlugin, store: Path) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    rows = _json_lines(invoke("learned", "list", "--store", str(store), "--json"))
    assert len(rows) == 9 + 3 + 3 + 1  # notes and senders of 20001, then of 20002
    required = {
        "kind",
        "bot_id",
        "group_id",
        "user_id",
        "key",
        "count",
        "learner",
        "source_message_ids",
        "learned_at",
        "updated_at",
    }
    assert all(required <= set(row) for row in rows)
    notes_of_lunch = {
        row["source_message_ids"][0]: row["text"]
        for row in rows
        if row["kind"] == "note" and row["group_id"] == LUNCH
    }
    assert notes_of_lunch == {mid: text for mid, (_sender, text) in LUNCH_MESSAGES.items()}
    [amon] = [r for r in rows if r["kind"] == "sender" and r["key"] == "30022"]
    assert (amon["count"], amon["source_message_ids"]) == (3, ["9306", "9308", "9311"])
    assert amon["learned_at"] == dt.datetime.fromisoformat(NOW).isoformat()


def test_learned_list_filters_by_bot_group_and_kind(notes: NotesPlugin, store: Path) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    args = ("learned", "list", "--store", str(store), "--json")
    senders = _json_lines(invoke(*args, "--kind", "sender"))
    assert sorted((r["group_id"], r["key"]) for r in senders) == [
        (LUNCH, "30017"),
        (LUNCH, "30022"),
        (LUNCH, "30031"),
        (OTHER, "30040"),
    ]
    lunch_senders = _json_lines(invoke(*args, "--kind", "sender", "--group", LUNCH))
    assert {r["group_id"] for r in lunch_senders} == {LUNCH}
    assert len(lunch_senders) == 3
    assert _json_lines(invoke(*args, "--bot", "10002")) == []
    empty = invoke("learned", "list", "--store", str(store), "--kind", "teaching")
    assert (empty.exit_code, empty.stdout) == (0, "")
    assert "nothing learned of kind teaching in chat.sqlite3" in empty.stderr


def test_learn_limited_to_one_group_leaves_the_others(notes: NotesPlugin, store: Path) -> None:
    result = invoke("learn", "--store", str(store), "--group", OTHER, "--now", NOW)
    assert result.stdout.splitlines() == [
        "group 20002 (bot 10001): 3 note, 1 sender from 3 new messages"
    ]
    rows = _json_lines(invoke("learned", "list", "--store", str(store), "--json"))
    assert {r["group_id"] for r in rows} == {OTHER}
    none = invoke("learn", "--store", str(store), "--bot", "10002", "--now", NOW)
    assert none.exit_code == 0
    assert none.stdout == "nothing to learn: chat.sqlite3 holds no group messages of bot 10002\n"


def test_forget_one_item_tells_its_learner_and_it_is_not_learned_again(
    notes: NotesPlugin, store: Path, tmp_path: Path
) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    key = item_key("好呀")
    result = invoke(
        "learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", OTHER,
        "--kind", "note", "--key", key,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "forgot 1 item of group 20002 (bot 10001): 1 note",
        f"  note {key}  ×1  text: 好呀",
    ]
    assert notes.forgotten == [("note", key)]
    # Learning the same messages again (the cursors set back) does not bring it back.
    _reset_cursors(store)
    relearned = invoke("learn", "--store", str(store), "--group", OTHER, "--now", NOW)
    assert relearned.exit_code == 0
    rows = _json_lines(invoke("learned", "list", "--store", str(store), "--json", "--group", OTHER))
    assert sorted(r["text"] for r in rows if r["kind"] == "note") == ["周末去爬山吗", "带上相机"]


def _reset_cursors(store: Path) -> None:
    stores = Stores.from_config(Config(store=StoreConfig(path=str(store))))
    assert stores.learned is not None
    for scope in stores.learned.scopes():
        stores.learned.reset(*scope)
    stores.close()


def test_forget_a_kind_then_everything_of_a_group(notes: NotesPlugin, store: Path) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    base = ("learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", LUNCH)
    kind = invoke(*base, "--kind", "sender")
    assert kind.exit_code == 0, kind.output
    assert kind.stdout.splitlines()[0] == "forgot 3 items of group 20001 (bot 10001): 3 sender"
    assert sorted(k for _kind, k in notes.forgotten) == ["30017", "30022", "30031"]
    everything = invoke(*base, "--all")
    assert everything.stdout.splitlines()[0] == (
        "forgot 9 items of group 20001 (bot 10001): 9 note"
    )
    rows = _json_lines(invoke("learned", "list", "--store", str(store), "--json"))
    assert {r["group_id"] for r in rows} == {OTHER}
    nothing = invoke(*base, "--all")
    assert (nothing.exit_code, nothing.stdout) == (
        0,
        "nothing to forget: no items in group 20001 (bot 10001) (chat.sqlite3)\n",
    )
    # New learning of the group finds nothing new, and what was forgotten stays forgotten.
    _reset_cursors(store)
    invoke("learn", "--store", str(store), "--group", LUNCH, "--now", NOW)
    rows = _json_lines(invoke("learned", "list", "--store", str(store), "--json", "--group", LUNCH))
    assert rows == []


def test_forget_refuses_to_guess_what_to_forget(notes: NotesPlugin, store: Path) -> None:
    base = ("learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", LUNCH)
    for args, said in (
        ((), "say what to forget: --kind K --key KEY (one item), --kind K (a kind), --user ID"),
        (("--key", "abc"), "--key needs --kind"),
        (("--all", "--kind", "note"), "--all forgets everything of the group"),
    ):
        result = invoke(*base, *args)
        assert result.exit_code == 2
        assert said in result.stderr
    missing = invoke(*base, "--kind", "note", "--key", "nope")
    assert missing.exit_code == 2
    assert (
        "Error: chat.sqlite3: nothing to forget: no learned note nope in group 20001 (bot 10001)"
        in missing.stderr
    )
    no_bot = invoke("learned", "forget", "--store", str(store), "--group", LUNCH, "--all")
    assert no_bot.exit_code == 2 and "--bot" in no_bot.stderr


def test_a_failing_learner_is_named_and_the_status_is_1(
    notes: NotesPlugin, store: Path, tmp_path: Path
) -> None:
    config = tmp_path / "promptweave.toml"
    config.write_text("[learning.learners.broken]\nfail = true\n", encoding="utf-8")
    result = invoke("learn", "--store", str(store), "--group", OTHER, "--now", NOW)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "group 20002 (bot 10001): 3 note, 1 sender from 3 new messages; "
        "learner broken failed: RuntimeError: the model is down"
    ]
    assert "warning" not in result.stderr  # the failure is said once, in the report


def test_store_stats_counts_learned_items_by_kind(notes: NotesPlugin, store: Path) -> None:
    invoke("learn", "--store", str(store), "--now", NOW)
    stats = invoke("store", "stats", "--store", str(store))
    assert stats.exit_code == 0, stats.output
    lines = stats.stdout.splitlines()
    start = lines.index("  learned")
    assert lines[start + 1 : start + 3] == [
        f"    {'note':<20} {12:>8}",
        f"    {'sender':<20} {4:>8}",
    ]
    as_json = json.loads(invoke("store", "stats", "--store", str(store), "--json").stdout)
    assert as_json["learned"] == {"note": 12, "sender": 4}


def test_store_stats_of_a_store_that_learned_nothing(store: Path) -> None:
    lines = invoke("store", "stats", "--store", str(store)).stdout.splitlines()
    start = lines.index("  learned")
    assert lines[start + 1] == "    (nothing yet)"


def test_learning_needs_an_existing_store_file(notes: NotesPlugin, tmp_path: Path) -> None:
    for args in (
        ("learn", "--store", "missing.sqlite3"),
        ("learned", "list", "--store", "missing.sqlite3"),
        ("learned", "forget", "--store", "missing.sqlite3", "--bot", "1", "--group", "2", "--all"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.stderr == "Error: missing.sqlite3: no such file\n"
    assert not (tmp_path / "missing.sqlite3").exists()
    # Without --store, the configured file.
    (tmp_path / "promptweave.toml").write_text('[store]\npath = "bot.sqlite3"\n', encoding="utf-8")
    result = invoke("learn")
    assert (result.exit_code, result.stderr) == (2, "Error: bot.sqlite3: no such file\n")


def test_learning_turned_off_is_a_clear_error(
    notes: NotesPlugin, store: Path, tmp_path: Path
) -> None:
    (tmp_path / "promptweave.toml").write_text("[learning]\nenabled = false\n", encoding="utf-8")
    for args in (
        ("learn", "--store", str(store)),
        ("learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", LUNCH, "--all"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.stderr == (
            "Error: chat.sqlite3: learning is unavailable: [learning] enabled = false\n"
        )
    in_memory = tmp_path / "memory.toml"
    in_memory.write_text('[store]\nbackend = "memory"\n', encoding="utf-8")
    result = invoke("learn", "--config", str(in_memory))
    assert result.exit_code == 2
    assert "learning is unavailable: the configured store is in memory" in result.stderr


def test_now_must_be_an_iso_time_with_its_offset(notes: NotesPlugin, store: Path) -> None:
    result = invoke("learn", "--store", str(store), "--now", "2026-11-30T09:00:00")
    assert result.exit_code == 2
    assert "has no UTC offset" in result.stderr


def test_the_progress_bar_shows_on_a_terminal_only(
    notes: NotesPlugin, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr("promptweave.cli.learn.sys", SimpleNamespace(stderr=terminal))
    result = invoke("learn", "--store", str(store), "--now", NOW)
    assert result.exit_code == 0, result.output
    assert "learning" in terminal.getvalue()


# -- the built-in learners -----------------------------------------------------------------------


def test_the_built_in_learners_learn_the_example_chat_and_forget_for_good(tmp_path: Path) -> None:
    store = tmp_path / "lunch.sqlite3"
    assert invoke("store", "import", str(LOG), "--store", str(store)).exit_code == 0
    result = invoke("learn", "--store", str(store), "--now", NOW)
    assert result.exit_code == 0, result.output
    # No client plugin is enabled: the model learners say why they did not run.
    assert result.stdout.splitlines() == [
        "group 20001 (bot 10001): 2 expression_pair, 3 pickup from 11 new messages",
        "learners strategies, members, group_events did not run: no learning model: client "
        '"auto" finds no client plugin of openai_chat enabled, nor offline_model (set '
        "[learning.model] client)",
    ]
    pairs = _json_lines(
        invoke("learned", "list", "--store", str(store), "--json", "--kind", "expression_pair")
    )
    by_sources = {tuple(p["source_message_ids"]): p for p in pairs}
    assert sorted(by_sources) == [("9301", "9302"), ("9306", "9307")]
    lunch = by_sources[("9301", "9302")]
    assert (lunch["trigger"], lunch["reply"], lunch["learner"]) == (
        "今天食堂又是土豆烧鸡",
        "土豆比鸡多系列",
        "expression_pairs",
    )
    forget = invoke(
        "learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", LUNCH,
        "--kind", "expression_pair", "--key", lunch["key"],
    )  # fmt: skip
    assert forget.exit_code == 0, forget.output
    assert (
        forget.stdout.splitlines()[0]
        == "forgot 1 item of group 20001 (bot 10001): 1 expression_pair"
    )
    # The same messages learned again (the cursors set back): the forgotten pair stays away.
    _reset_cursors(store)
    again = invoke("learn", "--store", str(store), "--now", NOW)
    assert again.exit_code == 0, again.output
    pairs = _json_lines(
        invoke("learned", "list", "--store", str(store), "--json", "--kind", "expression_pair")
    )
    assert [p["source_message_ids"] for p in pairs] == [["9306", "9307"]]
    stats = json.loads(invoke("store", "stats", "--store", str(store), "--json").stdout)
    assert stats["learned"] == {"expression_pair": 1, "pickup": 3}


def test_learn_list_and_forget_over_the_redis_store(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    config_file = tmp_path / "promptweave.toml"
    config_file.write_text(
        f'[store]\nbackend = "redis"\nurl = "{redis_url}"\nprefix = "{redis_prefix}"\n',
        encoding="utf-8",
    )
    config = Config.from_file(config_file)
    runtime = Promptweave.from_config(config)
    try:
        for line in LOG.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            if data["event"] == "message":
                message = ChatMessage(
                    **{
                        **data["message"],
                        "time": dt.datetime.fromisoformat(data["message"]["time"]),
                    }
                )
                runtime.recorder.record_message(data["bot_id"], data["group_id"], message)
    finally:
        runtime.close()
    learned = invoke("learn", "--config", str(config_file), "--now", NOW)
    assert learned.exit_code == 0, learned.output
    assert learned.stdout.startswith("group 20001 (bot 10001): 2 expression_pair")
    pairs = _json_lines(
        invoke(
            "learned", "list", "--config", str(config_file), "--json", "--kind", "expression_pair"
        )
    )
    assert sorted(tuple(p["source_message_ids"]) for p in pairs) == [
        ("9301", "9302"),
        ("9306", "9307"),
    ]
    key = next(p["key"] for p in pairs if p["source_message_ids"] == ["9301", "9302"])
    forget = invoke(
        "learned", "forget", "--config", str(config_file), "--bot", BOT_ID, "--group", LUNCH,
        "--kind", "expression_pair", "--key", key,
    )  # fmt: skip
    assert forget.exit_code == 0, forget.output
    left = _json_lines(
        invoke(
            "learned", "list", "--config", str(config_file), "--json", "--kind", "expression_pair"
        )
    )
    assert [p["source_message_ids"] for p in left] == [["9306", "9307"]]


def _teachings(store: Path) -> None:
    """Two members of group 20002 each teach the bot their name."""
    config = Config(store=StoreConfig(path=str(store)))
    runtime = Promptweave.from_config(config, stores=Stores.from_config(config))
    try:
        for number, (sender, name, text) in enumerate(
            (("7", "阿蒙", "小织记住，我叫阿蒙不叫阿猛"), ("8", "小林", "小织记住，叫我林林"))
        ):
            runtime.recorder.record_message(
                BOT_ID,
                OTHER,
                ChatMessage(
                    id=f"t{number}",
                    sender_id=sender,
                    sender_name=name,
                    text=text,
                    time=T0 + dt.timedelta(minutes=number),
                    addressed=True,
                ),
            )
    finally:
        runtime.close()


def test_what_is_about_one_member_is_listed_and_forgotten_alone(tmp_path: Path) -> None:
    store = tmp_path / "members.sqlite3"
    _teachings(store)
    assert invoke("learn", "--store", str(store), "--now", NOW).exit_code == 0
    about = _json_lines(invoke("learned", "list", "--store", str(store), "--user", "7", "--json"))
    assert [(i["kind"], i["user_id"], i["text"]) for i in about] == [
        ("teaching", "7", "阿蒙说：我叫阿蒙不叫阿猛")
    ]
    forget = invoke(
        "learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", OTHER,
        "--user", "7",
    )  # fmt: skip
    assert forget.exit_code == 0, forget.output
    assert forget.stdout.splitlines()[0] == "forgot 1 item of group 20002 (bot 10001): 1 teaching"
    _reset_cursors(store)
    assert invoke("learn", "--store", str(store), "--now", NOW).exit_code == 0
    left = _json_lines(invoke("learned", "list", "--store", str(store), "--json"))
    assert [(i["user_id"], i["text"]) for i in left if i["kind"] == "teaching"] == [
        ("8", "小林说：叫我林林")
    ]
    nothing = invoke(
        "learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", OTHER,
        "--user", "7",
    )  # fmt: skip
    assert nothing.exit_code == 2
    assert "nothing to forget: no learned items about member 7" in nothing.output


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--user", "7", "--all"], "--all forgets everything of the group"),
        (["--user", "7", "--kind", "teaching", "--key", "k"], "--key names one item already"),
    ],
)
def test_forget_by_member_refuses_what_contradicts_it(
    store: Path, options: list[str], error: str
) -> None:
    result = invoke(
        "learned", "forget", "--store", str(store), "--bot", BOT_ID, "--group", OTHER, *options
    )
    assert result.exit_code == 2 and error in result.output


def test_learned_stats_shows_what_learning_spent_beside_the_turns(
    notes: NotesPlugin, store: Path
) -> None:
    from promptweave.config import LearningBudgetConfig
    from promptweave.learning.budget import LearningBudget, Spend

    config = Config(store=StoreConfig(path=str(store)))
    stores = Stores.from_config(config)
    try:
        assert stores.learned is not None
        budget = LearningBudget(limits=LearningBudgetConfig(), store=stores.learned)
        now = dt.datetime.fromisoformat(NOW)
        budget.record(
            BOT_ID, LUNCH, "strategies", now, Spend(calls=2, prompt_tokens=900, output_tokens=100)
        )
        budget.record(BOT_ID, LUNCH, "members", now, Spend(calls=1, invalid=1, prompt_tokens=300))
        budget.record(BOT_ID, LUNCH, "strategies", now - dt.timedelta(days=3), Spend(calls=5))
    finally:
        stores.close()
    result = invoke("learned", "stats", "--store", str(store), "--now", NOW)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "group 20001 (bot 10001)"
    assert lines[2] == (
        "  learning: 3 model calls, 1,300 tokens as the learning model reported them (1,200 prompt, 100 output, 0 cached), "
        "1 invalid answer"
    )
    assert (
        "    strategies: 2 model calls, 1,000 tokens as the learning model reported them (900 prompt, 100 output, 0 cached)"
        in lines
    )
    assert "  learning, all the store keeps: 8 model calls, 1,300 tokens" in result.stdout
    assert "group 20002 (bot 10001)" in lines
    assert lines[-1].startswith("budget: 120 calls and 200,000 tokens an hour")
    # Spend is bookkeeping: learned list leaves it out unless asked for.
    listed = invoke("learned", "list", "--store", str(store), "--json")
    assert all(item["kind"] != "spend" for item in _json_lines(listed))
    asked = _json_lines(
        invoke("learned", "list", "--store", str(store), "--kind", "spend", "--json")
    )
    assert len(asked) == 3
    data = _json_lines(invoke("learned", "stats", "--store", str(store), "--now", NOW, "--json"))
    assert data[0]["learning_day"]["strategies"]["calls"] == 2
    assert data[-1]["total"]["learning_day"]["tokens"] == 1300
    assert data[-1]["budget"]["group_calls_per_hour"] == 30
