"""Learning in a replay (``docs/replay.md``, learning in a replay): the learners run on the log's
clock after each message, ``--no-learn`` runs none, ``--store`` keeps what they learned, and the
summary and the report say what was learned, which learner failed, and when a learned item first
reached a prompt."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner
from report_support import parse_html

from promptweave import Config, Promptweave, hookimpl
from promptweave.cli import replay as replay_cli
from promptweave.cli.main import cli
from promptweave.cli.replay import learning_lines
from promptweave.delivery.outgoing import InjectedSource, ReplyInjection
from promptweave.plugins.contributions import Learner
from promptweave.replay.learning import learned_hits, learning_summary
from promptweave.replay.report import render_report

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
CHAT_CONFIG = ROOT / "examples" / "replay" / "promptweave.toml"
HOSTILE = "<b onmouseover=alert(1)>学不会</b>&"


def _invoke(tmp_path: Path, *args: str) -> str:
    # No data folder: what is learned comes from the chat alone.
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            str(CHAT),
            "--config",
            str(CHAT_CONFIG),
            "--seed",
            "1",
            "--no-progress",
            "--data",
            str(tmp_path / "no-data"),
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def _jsonl(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    output = _invoke(tmp_path, "--format", "jsonl", *args)
    return [json.loads(line) for line in output.splitlines()]


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _jsonl(tmp_path_factory.mktemp("learned"))


def _groups(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group["group_id"]: group for group in summary["learning"]["groups"]}


def _items(group: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in group["items"] if item["kind"] == kind]


def test_both_groups_learn_expression_pairs_a_rhythm_a_teaching_and_a_rejection(
    learned: list[dict[str, Any]],
) -> None:
    *_messages, summary = learned
    assert summary["learning"]["enabled"] is True
    assert summary["learning"]["failures"] == []
    groups = _groups(summary)
    assert set(groups) == {"20001", "20002"}
    taught = {"20001": ("30022", "1384027719"), "20002": ("30112", "1436670942")}
    rejected = {"20001": "1046372291", "20002": "1621503348"}
    for group_id, group in groups.items():
        assert group["counts"]["expression_pair"] >= 10
        assert group["counts"]["expression_pair"] == len(_items(group, "expression_pair"))
        assert group["counts"]["rhythm"] == 1
        assert _items(group, "rhythm")[0]["turns"] >= 20
        teacher, message_id = taught[group_id]
        teaching = next(i for i in _items(group, "teaching") if i["user_id"] == teacher)
        assert teaching["subject"] == f"name:{teacher}"
        assert teaching["source_message_ids"] == [message_id]
        feedback = next(
            i for i in _items(group, "feedback") if i["outcome_id"] == rejected[group_id]
        )
        assert feedback["reaction"] == "不可以，别这样说话"


def test_each_record_lists_the_runs_made_at_its_time_and_no_duration(
    learned: list[dict[str, Any]],
) -> None:
    *messages, summary = learned
    runs = [(record, run) for record in messages for run in record["learned"]]
    assert len(runs) == sum(summary["learning"]["runs"].values()) > 0
    for record, run in runs:
        assert dt.datetime.fromisoformat(run["at"]) == dt.datetime.fromisoformat(record["time"])
        assert "duration_ms" not in run
    learners = {run["learner"] for _record, run in runs}
    assert learners == set(summary["learning"]["learners"]) >= {"expression_pairs", "rhythm"}
    assert all("duration_ms" not in json.dumps(record) for record in learned)


def test_later_answered_turns_carry_a_learned_group_expression(
    learned: list[dict[str, Any]],
) -> None:
    *messages, summary = learned
    (group,) = [g for g in summary["learning"]["groups"] if g["group_id"] == "20001"]
    first = next(f for f in group["first_in_prompt"] if f["kind"] == "expression_pair")
    assert first["section"] == "group_expression"
    assert first["id"].startswith("learned:expression_pair:")
    # The pair was learned before the turn that carried it, from the same group's messages.
    learned_at = min(
        record["index"]
        for record in messages
        for run in record["learned"]
        if run["group_id"] == "20001" and run["learned"].get("expression_pair")
    )
    assert first["index"] > learned_at


def test_no_learn_runs_no_learner_and_keeps_nothing(tmp_path: Path) -> None:
    store = tmp_path / "kept.sqlite3"
    *messages, summary = _jsonl(tmp_path, "--no-learn", "--store", str(store))
    assert summary["learning"]["enabled"] is False
    assert summary["learning"]["off"] == "[learning] enabled = false"
    assert summary["learning"]["runs"] == {}
    assert all(record["learned"] == [] for record in messages)
    assert all(group["items"] == [] for group in summary["learning"]["groups"])
    assert _stored_counts(store) == {}
    text = _invoke(tmp_path, "--no-learn")
    assert "learning: off ([learning] enabled = false)" in text.splitlines()


def _stored_counts(store: Path) -> dict[str, int]:
    """The learned items the store holds per kind, the spend bookkeeping left out."""
    config = Config.from_file(CHAT_CONFIG)
    config = Config(
        bots=config.bots,
        store=type(config.store)(backend="sqlite", path=str(store)),
        base_dir=config.base_dir,
    )
    runtime = Promptweave.from_config(config)
    try:
        assert runtime.stores.learned is not None
        counts = runtime.stores.learned.counts()
        counts.pop("spend", None)
        return counts
    finally:
        runtime.close()


def test_store_keeps_what_was_learned(tmp_path: Path, learned: list[dict[str, Any]]) -> None:
    store = tmp_path / "kept.sqlite3"
    *_messages, summary = _jsonl(tmp_path, "--store", str(store))
    counts: dict[str, int] = {}
    for group in summary["learning"]["groups"]:
        for kind, n in group["counts"].items():
            counts[kind] = counts.get(kind, 0) + n
    assert _stored_counts(store) == counts
    assert counts["expression_pair"] > 0 and counts["teaching"] >= 2
    # a fresh scratch store learned the same
    assert summary["learning"] == learned[-1]["learning"]


def test_the_text_summary_says_what_each_group_learned(tmp_path: Path) -> None:
    lines = _invoke(tmp_path).splitlines()
    start = lines.index(
        "== replay summary · model: offline stand-in (deterministic, not an LLM) =="
    )
    summary = lines[start:]
    assert any(line.startswith("learning: learners expression_pairs, rhythm") for line in summary)
    for group_id in ("20001", "20002"):
        line = next(line for line in summary if line.startswith(f"group {group_id} learned: "))
        for kind in ("expression_pair", "rhythm", "teaching", "feedback"):
            assert kind in line
        start = summary.index(line) + 1
        spent = summary[start]
        assert spent.startswith("  spent: learning ") and " model calls, " in spent
        assert "; turns " in spent  # beside what the turns spent
        after = " ".join(summary[start + 1 : start + 3])
        assert after.startswith(("  first in a prompt: ", "  in no answered turn's prompt: "))
        for kind in ("expression_pair", "rhythm", "teaching", "strategy", "relationship"):
            assert kind in after


class _Broken:
    """A plugin whose learner always raises."""

    name = "broken_learner"

    @hookimpl
    def register_learners(self, register):  # type: ignore[no-untyped-def]
        def run(batch):  # type: ignore[no-untyped-def]
            raise RuntimeError(HOSTILE)

        register(Learner(name="broken", writes=("broken_kind",), run=run, min_batch=5))


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = replay_cli._runtime

    def with_broken(*args: Any, **kwargs: Any) -> Promptweave:
        plugins = [*kwargs.pop("extra_plugins", args[4] if len(args) > 4 else ()), _Broken()]
        return real(*args[:4], extra_plugins=plugins)

    monkeypatch.setattr(replay_cli, "_runtime", with_broken)
    yield


def test_a_failing_learner_is_named_and_the_replay_completes(
    broken: None, tmp_path: Path, learned: list[dict[str, Any]]
) -> None:
    report = tmp_path / "report.html"
    *messages, summary = _jsonl(tmp_path, "--report", str(report))
    assert len(messages) == learned[-1]["messages"]
    failures = summary["learning"]["failures"]
    assert {(f["learner"], f["group_id"]) for f in failures} == {
        ("broken", "20001"),
        ("broken", "20002"),
    }
    assert all(f["error"] == f"RuntimeError: {HOSTILE}" and f["runs"] >= 1 for f in failures)
    assert summary["learning"]["runs"]["failed"] == sum(f["runs"] for f in failures)
    # the other learners learned as without it
    groups = _groups(summary)
    for group_id, group in _groups(learned[-1]).items():
        assert groups[group_id]["counts"] == group["counts"]
    page = report.read_text(encoding="utf-8")
    assert HOSTILE not in page
    tree = parse_html(page)
    failed = tree.find_all("table", "failures")
    assert len(failed) == 2
    assert all("broken" in table.all_text() and HOSTILE in table.all_text() for table in failed)
    text = _invoke(tmp_path)
    assert any(
        line.startswith("learner broken failed in group 20001 (") and line.endswith(HOSTILE)
        for line in text.splitlines()
    )


def test_the_report_lists_what_each_group_learned(
    tmp_path: Path, learned: list[dict[str, Any]]
) -> None:
    report = tmp_path / "report.html"
    _invoke(tmp_path, "--report", str(report))
    tree = parse_html(report.read_text(encoding="utf-8"))
    section = next(s for s in tree.find_all("section") if "What was learned" in s.all_text())
    for group in learned[-1]["learning"]["groups"]:
        block = next(
            b
            for b in section.find_all("div", "learned-group")
            if b.attributes["data-group"] == group["group_id"]
        )
        rows = block.find_all("tr", "learned-item")
        assert len(rows) == len(group["items"])
        assert [row.attributes["data-kind"] for row in rows] == [i["kind"] for i in group["items"]]
        text = block.all_text()
        for first in group["first_in_prompt"]:
            said = (
                "first in the prompt of"
                if first["index"] is not None
                else ("no answered turn's prompt carried one")
            )
            assert f"{first['kind']} in" in text and said in text
    assert "我叫阿蒙不叫阿猛" in section.all_text() and "不可以，别这样说话" in section.all_text()
    assert "Learning model: offline learning model (deterministic rules, not an LLM)" in (
        section.all_text()
    )
    # What learning spent, per learner, beside the turns.
    for group in learned[-1]["learning"]["groups"]:
        block = next(
            b
            for b in section.find_all("div", "learned-group")
            if b.attributes["data-group"] == group["group_id"]
        )
        (table,) = block.find_all("table", "spend")
        cells = [row.all_text() for row in table.find_all("tr")]
        for learner, spent in group["spend"].items():
            assert any(
                cell.startswith(learner) and f"{spent['prompt_tokens']:,}" in cell for cell in cells
            )
        assert any(f"the turns ({group['turns_spend']['requests']} requests)" in c for c in cells)


# -- the first prompt a learned item reached ----------------------------------------------------


def _record(index: int, status: str, hits: list[dict[str, str]], **fields: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "index": index,
        "time": f"2026-12-04T20:{index:02d}:00+08:00",
        "message_id": str(700 + index),
        "group_id": "20001",
        "status": status,
        "learned": [],
        "learned_in_prompt": hits,
        **fields,
    }


def test_learned_hits_keep_the_sources_whose_id_starts_with_learned() -> None:
    def source(section: str, id_: str) -> InjectedSource:
        return InjectedSource(section=section, retriever=section, id=id_, text_hash="h")

    injection = ReplyInjection(
        retrieved=(
            source("memory", "mem-1"),
            source("group_expression", "learned:expression_pair:ab12"),
            source("memory", "learned:teaching:cd34"),
        )
    )
    hits = learned_hits([injection, injection])
    assert hits == [
        {
            "section": "group_expression",
            "kind": "expression_pair",
            "id": "learned:expression_pair:ab12",
        },
        {"section": "memory", "kind": "teaching", "id": "learned:teaching:cd34"},
    ]


def test_the_first_answered_turn_carrying_each_kind_is_found_and_linked() -> None:
    pair = {
        "section": "group_expression",
        "kind": "expression_pair",
        "id": "learned:expression_pair:k",
    }
    records = [
        _record(0, "silent", [pair]),  # not answered: not counted
        _record(1, "replied", []),
        _record(2, "replied", [pair]),
        _record(3, "replied", [pair]),
    ]
    state = {"enabled": True, "off": None, "learners": ["expression_pairs"], "groups": []}
    summary = learning_summary(records, state)
    (group,) = summary["groups"]
    first = {entry["kind"]: entry for entry in group["first_in_prompt"]}
    assert first["expression_pair"]["index"] == 2
    assert first["expression_pair"]["message_id"] == "702"
    assert first["teaching"]["index"] is None and first["teaching"]["section"] == "memory"
    assert learning_lines(summary) == [
        "learning: learners expression_pairs · 0 runs",
        "group 20001 learned: nothing",
        "  first in a prompt: expression_pair in group_expression at #2 (20:02:00)",
        "  in no answered turn's prompt: rhythm, teaching, strategy, person_fact, relationship, "
        "group_event",
    ]
    page = render_report([*records, {"type": "summary", "learning": summary}], title="t")
    tree = parse_html(page)
    (listed,) = tree.find_all("ul", "first-in-prompt")
    links = [a.attributes["href"] for a in listed.find_all("a")]
    assert links == ["#m-2"]


def test_the_model_learners_learn_the_bundled_chat_and_it_reaches_later_prompts(
    learned: list[dict[str, Any]],
) -> None:
    """With the offline learning model: strategies of both learning types, a person fact,
    relationship notes, confirmed group events and a model summary, each in a later prompt."""
    *messages, summary = learned
    learning = summary["learning"]
    assert learning["model"] == "offline learning model (deterministic rules, not an LLM)"
    assert learning["skipped"] == {}
    assert set(learning["model_calls"]) == {"ok"}
    groups = _groups(summary)
    types = {i["learning_type"] for g in groups.values() for i in _items(g, "strategy")}
    assert types == {"observed", "self_reflection"}
    reached: dict[str, list[int]] = {}
    for group in groups.values():
        for first in group["first_in_prompt"]:
            if first["index"] is not None:
                reached.setdefault(first["kind"], []).append(first["index"])
    for kind in ("strategy", "person_fact", "relationship", "group_event"):
        assert reached.get(kind), f"no prompt carried a learned {kind}"
    (fact,) = _items(groups["20001"], "person_fact")
    assert (fact["user_id"], fact["text"]) == ("30063", "ta 喜欢推理类的桌游")
    event = next(i for i in _items(groups["20002"], "group_event") if "最后一把" in i["text"])
    assert event["date"] == "2026-12-04" and len(set(event["confirmed_by"])) >= 2
    # The model's session summary, then the turns after it carry it in their history.
    assert groups["20001"]["spend"]["summary"]["calls"] == 1
    carried = [m for m in messages if m.get("chars") and m["chars"]["summary"]]
    assert carried and {m["sender_id"] for m in carried} == {"30063"}
    for group in groups.values():
        spent = group["learning_spend"]
        assert spent["calls"] == sum(s["calls"] for s in group["spend"].values())
        assert spent["prompt_tokens"] > 0 and group["turns_spend"]["requests"] > 0


def test_a_small_budget_makes_the_model_learners_wait_and_holds(tmp_path: Path) -> None:
    config = tmp_path / "promptweave.toml"
    config.write_text(
        CHAT_CONFIG.read_text(encoding="utf-8")
        + "\n[learning.budget]\ngroup_calls_per_hour = 3\ncalls_per_day = 20\n",
        encoding="utf-8",
    )
    store = tmp_path / "budget.sqlite3"
    result = CliRunner().invoke(
        cli,
        [
            "replay", str(CHAT), "--config", str(config), "--seed", "1", "--no-progress",
            "--data", str(tmp_path / "no-data"), "--store", str(store), "--format", "jsonl",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    *messages, summary = (json.loads(line) for line in result.stdout.splitlines())
    waits = [run for m in messages for run in m["learned"] if run["status"] == "waiting_budget"]
    assert waits and all("learning budget spent" in run["error"] for run in waits)
    assert summary["learning"]["model_calls"].get("budget", 0) >= 1  # a summary over budget
    stats = CliRunner().invoke(
        cli,
        ["learned", "stats", "--store", str(store), "--config", str(config), "--json",
         "--now", "2026-12-05T06:00:00+08:00"],
    )  # fmt: skip
    assert stats.exit_code == 0, stats.output
    *_groups, total = (json.loads(line) for line in stats.stdout.splitlines())
    assert total["total"]["learning_day"]["calls"] <= 20
    listed = CliRunner().invoke(
        cli, ["learned", "list", "--store", str(store), "--kind", "spend", "--json"]
    )
    hours: dict[tuple[str, str], int] = {}
    for line in listed.stdout.splitlines():
        item = json.loads(line)
        key = (item["group_id"], item["hour"])
        hours[key] = hours.get(key, 0) + item["calls"]
    assert hours and max(hours.values()) <= 3


def test_what_the_model_learned_about_a_member_is_listed_and_forgotten(tmp_path: Path) -> None:
    store = tmp_path / "member.sqlite3"
    _jsonl(tmp_path, "--store", str(store))
    about = CliRunner().invoke(
        cli, ["learned", "list", "--store", str(store), "--user", "30063", "--json"]
    )
    kinds = {json.loads(line)["kind"] for line in about.stdout.splitlines()}
    assert {"person_fact", "relationship"} <= kinds
    forget = CliRunner().invoke(
        cli,
        ["learned", "forget", "--store", str(store), "--bot", "10001", "--group", "20001",
         "--user", "30063"],
    )  # fmt: skip
    assert forget.exit_code == 0, forget.output
    assert "person_fact" in forget.stdout and "relationship" in forget.stdout
    left = CliRunner().invoke(
        cli, ["learned", "list", "--store", str(store), "--user", "30063", "--json"]
    )
    assert left.stdout == ""
    others = CliRunner().invoke(
        cli, ["learned", "list", "--store", str(store), "--kind", "relationship", "--json"]
    )
    assert len(others.stdout.splitlines()) == 12  # the other members' notes stay
