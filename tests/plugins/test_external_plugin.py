"""The example third-party package in ``contrib/examples/promptweave-festival``, installed for real.

The package is built and installed with pip into a temporary directory, then the ``promptweave``
command runs in a subprocess with that directory on ``PYTHONPATH``: entry-point discovery, the
listing commands and a render all see it exactly as they would see any installed distribution.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT

from promptweave import Bot, ChatMessage, Config, Promptweave, RenderContext, Turn
from promptweave.config import StoreConfig
from promptweave.testing import TEST_ENVIRON

REPO = ROOT
EXAMPLE = REPO / "contrib" / "examples" / "promptweave-festival"
AT_QUESTION = REPO / "examples" / "turns" / "at_question.json"

sys.path.insert(0, str(EXAMPLE / "src"))

import promptweave_festival  # noqa: E402
from promptweave_festival import festivals  # noqa: E402


@pytest.fixture(scope="module")
def festival_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed with pip into a fresh directory; the checkout stays untouched."""
    root = tmp_path_factory.mktemp("festival")
    source = root / "source"
    # pip builds in the source tree (build/, *.egg-info): build from a copy instead.
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory: no ``promptweave.toml`` is discovered."""
    directory = tmp_path / "cwd"
    directory.mkdir()
    return directory


def run_cli(
    site: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PROMPTWEAVE_") or key == "PROMPTWEAVE_CACHE_DIR"
    }
    environ["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(site), os.environ.get("PYTHONPATH", "")) if part
    )
    environ.update(env or {})
    result = subprocess.run(
        [sys.executable, "-m", "promptweave", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def run_json(site: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(run_cli(site, cwd, *args, env=env).stdout)


def turn_file_at(directory: Path, time: str) -> Path:
    """``at_question.json`` with the message (and the group's messages) moved to ``time``."""
    data = json.loads(AT_QUESTION.read_text(encoding="utf-8"))
    data["message"]["time"] = time
    for message in data["recent_messages"]:
        message["time"] = time
    path = directory / "turn.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def section_ids(rendered: dict[str, Any]) -> list[str]:
    return [section["id"] for section in rendered["sections"]]


# -- installed, through the CLI ------------------------------------------------------------------


def test_installed_plugin_is_listed_as_external_with_distribution_version_and_hooks(
    festival_site: Path, workdir: Path
) -> None:
    rows = run_json(festival_site, workdir, "plugins", "--json")
    festival = next(row for row in rows if row["name"] == "festival")
    assert festival == {
        "name": "festival",
        "kind": "external",
        "distribution": "promptweave-festival",
        "version": "0.1.0",
        "hooks": ["override_section", "register_sections"],
    }


def test_installed_plugin_places_festival_after_current_time_and_replaces_persona_in_its_group(
    festival_site: Path, workdir: Path
) -> None:
    rows = run_json(
        festival_site, workdir, "sections", "--bot", "10001", "--group", "20002", "--json"
    )
    ids = [row["id"] for row in rows]
    assert ids[ids.index("current_time") + 1] == "festival"
    by_id = {row["id"]: row for row in rows}
    assert by_id["festival"]["plugin"] == "festival"
    assert by_id["festival"]["volatility"] == "turn"
    assert by_id["festival"]["title"] == "【节日提醒】"
    assert by_id["persona"]["override"] == "replace"


def test_installed_plugin_leaves_other_groups_without_override(
    festival_site: Path, workdir: Path
) -> None:
    rows = run_json(
        festival_site, workdir, "sections", "--bot", "10001", "--group", "20001", "--json"
    )
    assert "festival" in [row["id"] for row in rows]
    assert [row["override"] for row in rows] == [None] * len(rows)


def test_render_far_from_any_festival_leaves_the_festival_section_out(
    festival_site: Path, workdir: Path
) -> None:
    # 2026-11-28: the next festival, 元旦 2027, is 34 days away.
    rendered = run_json(festival_site, workdir, "render", str(AT_QUESTION), "--format", "json")
    ids = section_ids(rendered)
    assert "festival" not in ids
    assert ids[ids.index("current_time") + 1] == "tool_context"
    festival_trace = next(s for s in rendered["trace"]["sections"] if s["id"] == "festival")
    assert festival_trace["status"] == "empty"


def test_render_three_days_before_new_year_shows_festival_right_after_current_time(
    festival_site: Path, workdir: Path
) -> None:
    turn_file = turn_file_at(workdir, "2026-12-29T20:41:05+08:00")
    rendered = run_json(festival_site, workdir, "render", str(turn_file), "--format", "json")
    ids = section_ids(rendered)
    assert ids[ids.index("current_time") + 1] == "festival"
    festival = rendered["sections"][ids.index("festival")]
    assert festival["plugin"] == "festival"
    assert festival["text"].splitlines()[:2] == [
        "【节日提醒】",
        "- 距离元旦还有 3 天（2027-01-01）",
    ]
    assert festival["text"] in rendered["system_prompt"]


def test_render_in_the_study_group_uses_the_plugin_persona(
    festival_site: Path, workdir: Path
) -> None:
    rendered = run_json(
        festival_site, workdir, "render", str(AT_QUESTION), "--group", "20002", "--format", "json"
    )
    persona = next(s for s in rendered["sections"] if s["id"] == "persona")
    assert persona["override"] == "replace"
    assert persona["text"].startswith(
        "【核心人格】\n你是小织，这个考研自习群里陪大家一起学习的伙伴"
    )


def test_disable_plugins_env_removes_the_festival_section(
    festival_site: Path, workdir: Path
) -> None:
    turn_file = turn_file_at(workdir, "2026-12-29T20:41:05+08:00")
    env = {"PROMPTWEAVE_DISABLE_PLUGINS": "festival"}
    rendered = run_json(
        festival_site, workdir, "render", str(turn_file), "--format", "json", env=env
    )
    assert "festival" not in section_ids(rendered)
    assert "【节日提醒】" not in rendered["system_prompt"]
    rows = run_json(festival_site, workdir, "plugins", "--json", env=env)
    assert "festival" not in [row["name"] for row in rows]


def test_empty_load_plugins_allowlist_removes_the_festival_section(
    festival_site: Path, workdir: Path
) -> None:
    turn_file = turn_file_at(workdir, "2026-12-29T20:41:05+08:00")
    env = {"PROMPTWEAVE_LOAD_PLUGINS": ""}
    rendered = run_json(
        festival_site, workdir, "render", str(turn_file), "--format", "json", env=env
    )
    assert "festival" not in section_ids(rendered)
    sections = run_json(festival_site, workdir, "sections", "--group", "20002", "--json", env=env)
    assert "festival" not in [row["id"] for row in sections]
    assert [row["override"] for row in sections] == [None] * len(sections)


def test_python_dash_m_framework_runs_the_cli(festival_site: Path, workdir: Path) -> None:
    result = run_cli(festival_site, workdir, "--help")
    assert "Usage: promptweave" in result.stdout


# -- the festival computation, imported from the source tree -------------------------------------


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        (dt.date(2026, 12, 29), ("元旦", dt.date(2027, 1, 1))),
        (dt.date(2026, 2, 10), ("春节", dt.date(2026, 2, 17))),
        (dt.date(2026, 2, 17), ("春节", dt.date(2026, 2, 17))),
        (dt.date(2026, 2, 18), ("元宵节", dt.date(2026, 3, 3))),
        (dt.date(2026, 9, 20), ("中秋节", dt.date(2026, 9, 25))),
        (dt.date(2026, 9, 26), ("国庆节", dt.date(2026, 10, 1))),
        (dt.date(2027, 7, 25), ("七夕", dt.date(2027, 8, 8))),
        (dt.date(2026, 11, 28), None),
        (dt.date(2027, 10, 2), None),
    ],
)
def test_upcoming_festival_is_the_first_one_within_fourteen_days(
    today: dt.date, expected: tuple[str, dt.date] | None
) -> None:
    found = festivals.upcoming_festival(today)
    assert (None if found is None else (found.name, found.date)) == expected


def test_upcoming_festival_window_includes_day_fourteen_and_excludes_day_fifteen() -> None:
    new_year = dt.date(2027, 1, 1)
    assert festivals.upcoming_festival(new_year - dt.timedelta(days=14)) is not None
    assert festivals.upcoming_festival(new_year - dt.timedelta(days=15)) is None


def test_festival_table_holds_each_festival_once_a_year_in_date_order() -> None:
    names = ["元旦", "春节", "元宵节", "清明节", "劳动节", "端午节", "七夕", "中秋节", "国庆节"]
    dates = [festival.date for festival in festivals.FESTIVALS]
    assert dates == sorted(dates)
    for year in (2026, 2027):
        assert [f.name for f in festivals.FESTIVALS if f.date.year == year] == names


@pytest.fixture(scope="module")
def runtime() -> Iterator[Promptweave]:
    yield Promptweave.from_config(
        Config(store=StoreConfig(backend="memory")),
        environ=TEST_ENVIRON,
    )


def context_at(runtime: Promptweave, now: dt.datetime, timezone: str) -> RenderContext:
    turn = Turn(
        bot=Bot(id="10001", name="小织", timezone=timezone),
        group_id="20002",
        message=ChatMessage(sender_id="30017", text="元旦放几天假呀", time=now),
    )
    return runtime.context_for(turn)


def test_festival_days_are_counted_in_the_bot_time_zone(runtime: Promptweave) -> None:
    # 2026-12-31 17:30 UTC is already New Year's Day in Shanghai, still the eve in Los Angeles.
    now = dt.datetime(2026, 12, 31, 17, 30, tzinfo=dt.UTC)
    shanghai = promptweave_festival.render_festival(context_at(runtime, now, "Asia/Shanghai"))
    los_angeles = promptweave_festival.render_festival(
        context_at(runtime, now, "America/Los_Angeles")
    )
    assert shanghai is not None and "- 今天就是元旦（2027-01-01）" in shanghai
    assert los_angeles is not None and "- 明天就是元旦（2027-01-01）" in los_angeles


def test_festival_falls_back_to_china_time_for_an_unknown_zone(runtime: Promptweave) -> None:
    now = dt.datetime(2026, 12, 31, 17, 30, tzinfo=dt.UTC)
    text = promptweave_festival.render_festival(context_at(runtime, now, "Mars/Olympus"))
    assert text is not None and "- 今天就是元旦（2027-01-01）" in text


def test_festival_renders_nothing_when_no_festival_is_near(runtime: Promptweave) -> None:
    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    assert promptweave_festival.render_festival(context_at(runtime, now, "Asia/Shanghai")) is None


def test_festival_override_replaces_only_persona_of_group_20002(runtime: Promptweave) -> None:
    context = context_at(runtime, dt.datetime(2026, 11, 28, tzinfo=dt.UTC), "Asia/Shanghai")
    override = promptweave_festival.override_section(
        section_id="persona", group_id="20002", context=context
    )
    assert override is not None
    assert override.mode.value == "replace"
    assert override.content.startswith("【核心人格】\n你是小织，")
    assert "{persona}" not in override.content
    for section_id, group_id in (("persona", "20001"), ("identity", "20002")):
        assert (
            promptweave_festival.override_section(
                section_id=section_id, group_id=group_id, context=context
            )
            is None
        )
