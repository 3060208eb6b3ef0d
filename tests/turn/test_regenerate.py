"""``python tests/regenerate.py``: one command rewrites every recorded expectation, and on a clean
tree it changes nothing."""

from __future__ import annotations

import pytest
import regenerate


def test_every_data_file_is_recorded_by_the_command_or_an_input_written_by_hand():
    recorded = {path.name for path, _text in regenerate.RECORDED.values()}
    assert not recorded & set(regenerate.INPUTS)
    assert {path.name for path in regenerate.DATA.iterdir()} == recorded | set(regenerate.INPUTS)


@pytest.mark.parametrize("target", sorted(regenerate.RECORDED))
def test_regenerating_a_data_file_on_a_clean_tree_changes_nothing(target, capsys):
    path, _text = regenerate.RECORDED[target]
    before = path.read_bytes()
    assert regenerate.main(["--check", target]) == 0
    assert capsys.readouterr().out == f"tests/data/{path.name}: unchanged\n"
    assert path.read_bytes() == before


def test_check_reports_a_change_and_writes_nothing_then_the_command_writes_it(
    tmp_path, monkeypatch, capsys
):
    recorded = tmp_path / "recorded.json"
    recorded.write_text("{}\n", encoding="utf-8")
    monkeypatch.setitem(regenerate.RECORDED, "assembly", (recorded, lambda: '{"new": 1}\n'))
    monkeypatch.setattr(regenerate.docs_run, "ROOT", tmp_path)
    assert regenerate.main(["--check", "assembly"]) == 1
    assert recorded.read_text(encoding="utf-8") == "{}\n"
    assert regenerate.main(["assembly"]) == 0
    assert recorded.read_text(encoding="utf-8") == '{"new": 1}\n'
    assert capsys.readouterr().out == "recorded.json: would change\nrecorded.json: rewritten\n"


def test_an_unknown_target_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        regenerate.main(["golden"])
    assert exited.value.code == 2
    assert (
        "unknown target 'golden' (choose from assembly, retrieval, docs)" in capsys.readouterr().err
    )
