from __future__ import annotations

import json
from pathlib import Path

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.store.retrieval import KnowledgeDocument
from promptweave.store.retrieval_chunks import chunk_document
from promptweave.store.retrieval_import import RetrievalImportError, import_files, read_files
from promptweave.store.retrieval_memory import InMemoryRetrievalStore
from promptweave.store.retrieval_sqlite import SQLiteRetrievalStore
from promptweave.store.sqlite import SQLiteDatabase

EXAMPLES = ROOT / "examples"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_memories_are_imported_with_the_default_scope(tmp_path):
    path = write(
        tmp_path / "m.jsonl",
        '{"kind": "teaching", "text": "桌游局七点开始"}\n\n{"kind": "group_event", "text": "换到格子桌游吧", "group_id": "g2"}\n',
    )
    batch = read_files("memories", [path], bot_id="b1", group_id="g1")
    assert [(m.bot_id, m.group_id, m.kind.value) for m in batch.memories] == [
        ("b1", "g1", "teaching"),
        ("b1", "g2", "group_event"),  # a record's own group wins over --group
    ]


def test_errors_name_the_file_the_line_and_the_field(tmp_path):
    path = write(
        tmp_path / "m.jsonl",
        '{"kind": "teaching", "text": "ok"}\n{"kind": "rumour", "text": "x"}\n{"kind": "teaching", "text": ["a"], "colour": "red"}\n',
    )
    with pytest.raises(RetrievalImportError) as caught:
        read_files("memories", [path], bot_id="b1", group_id="g1")
    message = str(caught.value)
    assert (
        f"{path}: line 2: expected one of teaching, group_event, ip_knowledge, group_memory, not 'rumour' @ $.kind"
        in message
    )
    assert "not 'rumour'" in message
    assert f"{path}: line 3: " in message and "$.text" in message
    assert "extra fields found (colour)" in message  # unknown keys are refused


def test_a_missing_scope_says_how_to_give_it(tmp_path):
    path = write(tmp_path / "m.jsonl", '{"kind": "teaching", "text": "ok"}\n')
    with pytest.raises(
        RetrievalImportError, match=r"line 1: .*\$\.bot_id \(give --bot or a bot_id field\)"
    ):
        read_files("memories", [path], group_id="g1")


def test_json_arrays_report_the_line_of_the_bad_element(tmp_path):
    path = write(
        tmp_path / "pairs.json",
        '[\n  {"trigger": "快了", "reply": "确实可以"},\n  {"trigger": "好冷", "reply": ""}\n]\n',
    )
    with pytest.raises(RetrievalImportError, match=r"pairs.json: line 3: reply must not be empty"):
        read_files("expression_pairs", [path], bot_id="b", group_id="g")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"kind": "teaching", "text": "a"}\n{"kind": ', "line 2: invalid JSON"),
        ('["not an object"]', "expected a JSON object"),
    ],
)
def test_malformed_json_is_reported(tmp_path, text, problem):
    suffix = ".jsonl" if text.startswith("{") else ".json"
    path = write(tmp_path / f"m{suffix}", text)
    with pytest.raises(RetrievalImportError, match=problem):
        read_files("memories", [path], bot_id="b", group_id="g")


def test_nothing_is_imported_when_any_file_is_invalid(tmp_path):
    good = write(tmp_path / "memories.jsonl", '{"kind": "teaching", "text": "桌游局七点开始"}\n')
    bad = write(tmp_path / "person_facts.jsonl", '{"user_id": "u1"}\n')
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    with pytest.raises(RetrievalImportError, match=r"person_facts.jsonl: line 1: .*\$\.text"):
        import_files(store, "auto", [good, bad], bot_id="b", group_id="g")
    assert set(store.counts().values()) == {0}


def test_auto_tells_kinds_from_names_and_reads_directories(tmp_path):
    write(tmp_path / "data" / "memories.jsonl", '{"kind": "teaching", "text": "七点开始"}\n')
    write(tmp_path / "data" / "knowledge" / "guide.md", "# 指南\n\n怎么报名：群里接龙。\n")
    write(tmp_path / "data" / "notes.txt", "纯文本资料。")
    store = InMemoryRetrievalStore()
    written = import_files(store, "auto", [tmp_path / "data"], bot_id="b", group_id="g")
    assert written == {"memories": 1, "knowledge": 2}
    (hit,) = store.search_knowledge("b", "g", ["报名"], limit=3)
    assert hit.record.title == "指南"


def test_auto_refuses_a_file_whose_kind_it_cannot_tell(tmp_path):
    path = write(tmp_path / "stuff.jsonl", "{}\n")
    with pytest.raises(RetrievalImportError, match="cannot tell the kind"):
        read_files("auto", [path])


def test_documents_can_only_be_knowledge_and_unknown_kinds_are_refused(tmp_path):
    path = write(tmp_path / "a.md", "# x\n\ny")
    with pytest.raises(RetrievalImportError, match="only be imported as knowledge"):
        read_files("memories", [path], bot_id="b", group_id="g")
    with pytest.raises(RetrievalImportError, match="unknown kind 'gossip'"):
        read_files("gossip", [path])


def test_markdown_is_chunked_by_heading_with_title_and_heading_labels():
    text = "# 活动须知\n\n导言一段。\n\n## 时间\n\n每周六\n晚上七点。\n\n- 迟到不等\n- 请假说一声\n\n## 费用\n\n```\n## 不是标题\n```\nAA 制。\n"
    chunks = chunk_document(KnowledgeDocument(bot_id="b", group_id="g", source="a.md", text=text))
    assert [(c.title, c.text) for c in chunks] == [
        ("活动须知", "导言一段。"),
        ("活动须知 › 时间", "每周六晚上七点。\n迟到不等\n请假说一声"),
        ("活动须知 › 费用", "## 不是标题\nAA 制。"),
    ]
    assert [c.chunk_id for c in chunks] == ["a.md#0", "a.md#1", "a.md#2"]


def test_long_paragraphs_are_split_at_sentence_ends_within_the_limit():
    text = "。".join(f"第{i}句话写得比较长一些" for i in range(40)) + "。"
    chunks = chunk_document(
        KnowledgeDocument(bot_id="b", group_id="g", source="s", text=text), max_chars=60
    )
    assert len(chunks) > 5
    assert all(len(c.text) <= 60 for c in chunks)
    assert all(c.text.endswith("。") for c in chunks)
    assert "".join(c.text for c in chunks) == text


def test_cli_import_writes_the_store_and_reports_counts(tmp_path):
    path = write(tmp_path / "m.jsonl", json.dumps({"kind": "teaching", "text": "七点开始"}) + "\n")
    store = tmp_path / "s.sqlite3"
    result = CliRunner().invoke(
        cli, ["import", "memories", str(path), "--store", "s.sqlite3", "--bot", "b", "--group", "g"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == "read 1 memories\nnew in s.sqlite3: 1 memories\n"
    assert SQLiteRetrievalStore(SQLiteDatabase(store)).counts()["memories"] == 1


def test_cli_import_fails_with_the_problems_and_writes_nothing(tmp_path):
    path = write(tmp_path / "m.jsonl", '{"kind": "teaching"}\n')
    store = tmp_path / "s.sqlite3"
    result = CliRunner().invoke(
        cli, ["import", "memories", str(path), "--store", str(store), "--bot", "b", "--group", "g"]
    )
    assert result.exit_code == 2
    assert result.output == f"Error: {path}:1: text: required field missing\n"
    assert not store.exists()


def test_cli_import_refuses_an_in_memory_store(tmp_path):
    config = write(tmp_path / "promptweave.toml", '[store]\nbackend = "memory"\n')
    path = write(tmp_path / "m.jsonl", '{"kind": "teaching", "text": "x"}\n')
    result = CliRunner().invoke(cli, ["import", "memories", str(path), "--config", str(config)])
    assert result.exit_code == 1 and "--store" in result.output


def test_the_example_data_imports_cleanly(tmp_path):
    store = SQLiteRetrievalStore(SQLiteDatabase(tmp_path / "s.sqlite3"))
    written = import_files(store, "auto", [EXAMPLES / "data"], bot_id="10001", group_id="20001")
    assert set(written) == {
        "memories", "knowledge", "relationships", "person_facts", "expression_pairs",
        "rhythms", "strategies", "summaries",
    }  # fmt: skip


def test_cli_import_run_twice_says_nothing_new_was_added(tmp_path):
    args = ["import", "auto", str(EXAMPLES / "data"), "--store", "s.sqlite3"]
    args += ["--bot", "10001", "--group", "20001"]
    first = CliRunner().invoke(cli, args)
    again = CliRunner().invoke(cli, args)
    read = (
        "read 15 memories, 2 knowledge documents, 4 relationships, 6 person facts, "
        "10 expression pairs, 1 rhythms, 6 strategies, 4 summaries"
    )
    assert first.output.splitlines()[0] == read
    assert first.output.splitlines()[1].startswith("new in s.sqlite3: 15 memories, ")
    assert again.output.splitlines() == [
        read,
        "new in s.sqlite3: nothing (all of it was stored already)",
    ]


def test_cli_import_counts_only_the_new_records_of_a_file_that_grew(tmp_path):
    path = write(tmp_path / "m.jsonl", '{"kind": "teaching", "text": "七点开始"}\n')
    args = ["import", "memories", str(path), "--store", "s.sqlite3", "--bot", "b", "--group", "g"]
    CliRunner().invoke(cli, args)
    write(
        path, '{"kind": "teaching", "text": "七点开始"}\n{"kind": "teaching", "text": "八点散"}\n'
    )
    result = CliRunner().invoke(cli, args)
    assert result.output == "read 2 memories\nnew in s.sqlite3: 1 memories\n"
