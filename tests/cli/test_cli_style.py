"""Readable output: aligned and coloured on a terminal (or with ``--color``), plain when piped."""

from __future__ import annotations

import re
import time

import pytest
from base_support import DATA, ROOT
from click.testing import CliRunner

from promptweave.cli.main import cli
from promptweave.cli.style import display_width, pad, resolve_colour

EXAMPLES = ROOT / "examples"
EVAL = DATA / "routing_eval.jsonl"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def invoke(*args: str, **kwargs):
    return CliRunner().invoke(cli, list(args), **kwargs)


def test_piped_output_has_no_colour():
    render = invoke("render", str(EXAMPLES / "turns" / "at_question.json"))
    route = invoke("route", str(EVAL))
    assert "\x1b[" not in render.output + route.output


def test_piped_route_output_is_tab_separated():
    first = invoke("route", str(EVAL)).output.splitlines()[0]
    assert first == "q01\treply/answer/plain\trule\trule_reply_obligation\t\tok"


def test_route_on_a_terminal_is_aligned_and_coloured():
    result = invoke("--color", "route", str(EVAL), color=True)
    lines = result.output.splitlines()
    assert "\x1b[32m" in lines[0]  # a reply, and its "ok", in green
    plain = [ANSI.sub("", line) for line in lines]
    assert "\t" not in "".join(plain)
    # Every reason starts in the same column.
    starts = {line.index(line.split()[3]) for line in plain}
    assert len(starts) == 1


def test_route_aligns_wide_characters_by_their_terminal_width(tmp_path):
    route = tmp_path / "r.jsonl"
    route.write_text(
        '{"id": "宽宽", "text": "@小织 在吗", "addressed": true}\n{"id": "n", "text": "嗯"}\n',
        encoding="utf-8",
    )
    plain = [
        ANSI.sub("", line) for line in invoke("--color", "route", str(route)).output.split("\n")
    ]
    assert display_width(plain[0].split("  reply")[0]) == display_width("宽宽")
    assert plain[1].startswith("n     pass")


def test_render_colours_headings_and_statuses_only_when_asked(monkeypatch):
    # Two runs never measure the same durations, and a duration's padding in its column depends
    # on its digits (``     9.800 ms``, ``    10.200 ms``): a clock that stands still makes every
    # stage take 0 ms in both runs, so the two outputs can be compared byte for byte.
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    turn = str(EXAMPLES / "turns" / "at_question.json")
    coloured = invoke("--color", "render", turn, color=True).output
    plain = invoke("render", turn).output
    assert "\x1b[36m\x1b[1m==== system prompt ====\x1b[0m" in coloured
    assert "\x1b[32m\x1b[22mrendered\x1b[0m" in coloured
    # Every stage and retriever read the stopped clock (one timed another way would show here).
    stages = plain.split("==== stages ====\n")[1].splitlines()
    assert stages[-1] == f"{'total':<32} {0:>10.3f} ms"
    assert all(line.endswith(f"{0:>10.3f} ms") for line in stages)
    retrieval = plain.split("==== retrieval ====\n")[1].split("\n\n")[0].splitlines()
    timed = [line for line in retrieval if line.endswith(" ms")]
    assert timed and all(line.endswith("  0.0 ms") for line in timed)

    # The colour is all the difference: the same text, aligned the same way.
    assert ANSI.sub("", coloured) == plain


def test_errors_and_warnings_are_labelled_in_colour_on_a_terminal():
    result = invoke("--color", "render", "nope.json", color=True)
    assert result.output == "\x1b[31m\x1b[1mError:\x1b[0m nope.json: no such file\n"


@pytest.mark.parametrize(
    ("flag", "no_color", "expected"),
    [(None, "", None), (None, "1", False), (True, "1", True), (False, "", False)],
)
def test_color_flag_and_no_color_decide_together(monkeypatch, flag, no_color, expected):
    monkeypatch.setenv("NO_COLOR", no_color)
    assert resolve_colour(flag) is expected


def test_pad_counts_wide_characters_twice():
    assert pad("宽", 4) == "宽  "
    assert pad("ab", 4) == "ab  "
