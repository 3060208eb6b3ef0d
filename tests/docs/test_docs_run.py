"""Docs that run: every ``console`` and ``python`` block of ``docs/`` and the README is executed
and compared (``tests/docs_run.py``, ``docs/index.md``, "Docs that run")."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from docs_run import (
    PAGES,
    ROOT,
    describe,
    matches,
    parse_page,
    regenerate,
    run_page,
    update_page,
)

RUNNABLE = [
    page
    for page in PAGES
    if any(block.directive != "no-run" for block in parse_page(page.read_text(encoding="utf-8")))
]


@pytest.fixture(scope="session")
def page_results(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, list[str]]:
    """Every runnable page, run once; the pages run side by side (each in its own workspace)."""

    def run(page: Path) -> list[str]:
        scratch = tmp_path_factory.mktemp(page.stem)
        return [describe(mismatch) for mismatch in run_page(page, scratch)]

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return dict(zip(RUNNABLE, pool.map(run, RUNNABLE), strict=True))


def test_the_pages_with_examples_are_found():
    names = {page.name for page in RUNNABLE}
    assert {"cli.md", "writing_plugins.md", "README.md", "configuration.md"} <= names


@pytest.mark.parametrize("page", RUNNABLE, ids=[page.name for page in RUNNABLE])
def test_the_examples_of_the_page_run_as_shown(page: Path, page_results) -> None:
    mismatches = page_results[page]
    regenerate_with = f"python -m tests.docs_run --update {page.relative_to(ROOT)}"
    assert not mismatches, "\n\n".join([*mismatches, f"(regenerate with: {regenerate_with})"])


_FENCE = re.compile(r"^```(\S*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_transcript_is_a_console_block(page: Path) -> None:
    """A block showing ``$ command`` lines is run only when it is marked ``console``."""
    untagged = [
        body.splitlines()[0]
        for language, body in _FENCE.findall(page.read_text(encoding="utf-8"))
        if language != "console" and any(line.startswith("$ ") for line in body.splitlines())
    ]
    assert not untagged, f"{page.name}: mark these transcripts ```console: {untagged}"


# -- the runner itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "matched"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "c"], False),
        (["a", "…", "d"], ["a", "b", "c", "d"], True),
        (["a", "…", "b"], ["a", "b"], True),  # … may stand for no line at all
        (["a", "…"], ["a", "x", "y"], True),
        (["a", "…", "d"], ["a", "b", "c"], False),
        (["total … ms"], ["total     3.125 ms"], True),
        (["total      … ms"], ["total 13.125 ms"], True),  # the … takes the padding before it
        (["total … ms"], ["total     3.125 s"], False),
        (["a  "], ["a", "", ""], True),  # trailing spaces and blank lines do not count
        (["a", "b"], ["a"], False),
    ],
)
def test_expected_output_matches_with_ellipses(expected, actual, matched):
    assert matches(expected, actual) is matched


def test_regenerating_keeps_the_ellipses_that_still_match():
    expected = ["==== head ====", "…", "old line", "tail"]
    actual = ["==== head ====", "x", "y", "new line", "tail"]
    assert regenerate(expected, actual) == ["==== head ====", "…", "new line", "tail"]


def test_regenerating_writes_durations_as_an_ellipsis():
    assert regenerate(["stale"], ["session     0.125 ms", "total  9.000 ms"]) == [
        "session     … ms",
        "total  … ms",
    ]


def test_regenerating_falls_back_to_the_whole_output_when_the_ellipses_cannot_fit():
    expected = ["a", "…", "z"]
    actual = ["b", "c"]
    assert regenerate(expected, actual) == ["b", "c"]


def test_a_page_is_parsed_into_commands_with_continuations_and_directives():
    page = "\n".join(
        [
            "<!-- file: notes/a.txt -->",
            "```text",
            "hello",
            "```",
            "",
            "```console",
            "$ cat > b.txt <<'EOF'",
            "> one",
            ">",
            "> EOF",
            "$ cat b.txt",
            "one",
            "",
            "```",
            "",
            "<!-- no-run: needs a model server -->",
            "```python",
            "ask_the_model()",
            "```",
        ]
    )
    file_block, console, skipped = parse_page(page)
    assert (file_block.directive, file_block.argument, file_block.body) == (
        "file",
        "notes/a.txt",
        "hello\n",
    )
    assert [(c.line, c.text, c.expected) for c in console.commands] == [
        (7, "cat > b.txt <<'EOF'\none\n\nEOF", ()),
        (11, "cat b.txt", ("one", "")),
    ]
    assert (skipped.directive, skipped.argument) == ("no-run", "needs a model server")


def test_a_no_run_marker_needs_its_reason():
    with pytest.raises(ValueError, match="no-run needs an argument"):
        parse_page("<!-- no-run: -->\n```console\n$ promptweave plugins\n```\n")


def _page(tmp_path: Path, text: str, name: str = "page.md") -> Path:
    page = tmp_path / name
    page.write_text(text, encoding="utf-8")
    return page


def test_a_page_runs_in_a_workspace_with_the_examples_and_its_own_files(tmp_path):
    page = _page(
        tmp_path,
        "<!-- file: note.txt -->\n```text\nhello\n```\n\n"
        "```console\n$ cat note.txt\nhello\n$ ls examples/turns | head -1\nambient_remark.json\n```\n",
    )
    assert run_page(page, tmp_path / "scratch") == []


def test_a_failing_command_must_show_its_status(tmp_path):
    shown = _page(tmp_path, "```console\n$ promptweave render nope.json\n…\n$ echo $?\n2\n```\n")
    hidden = _page(tmp_path, "```console\n$ promptweave render nope.json\n…\n```\n", "hidden.md")
    assert run_page(shown, tmp_path / "a") == []
    (mismatch,) = run_page(hidden, tmp_path / "b")
    assert mismatch.what.endswith("exited with status 2; show it with '$ echo $?' after it")


def test_a_changed_output_is_reported_and_the_updater_rewrites_it(tmp_path):
    page = _page(tmp_path, "```console\n$ echo new\nold\n$ echo same\nsame\n```\n")
    (mismatch,) = run_page(page, tmp_path / "a")
    assert (mismatch.line, mismatch.expected, mismatch.actual) == (2, ("old",), ("new",))
    assert "-old\n+new" in describe(mismatch)
    assert update_page(page, tmp_path / "b") is True
    assert (
        page.read_text(encoding="utf-8") == "```console\n$ echo new\nnew\n$ echo same\nsame\n```\n"
    )
    assert update_page(page, tmp_path / "c") is False


def test_a_failing_python_block_is_reported(tmp_path):
    page = _page(tmp_path, "```python\nraise SystemExit('broken example')\n```\n")
    (mismatch,) = run_page(page, tmp_path / "a")
    assert mismatch.what == "python block failed"
    assert mismatch.actual == ("broken example",)


def test_the_callers_promptweave_variables_do_not_leak_into_the_examples(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMPTWEAVE_CONFIG", str(tmp_path / "missing.toml"))
    page = _page(tmp_path, "```console\n$ promptweave plugins --all --hook measure_text\n…\n```\n")
    assert run_page(page, tmp_path / "a") == []
