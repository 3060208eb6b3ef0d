"""What start-up imports: ``import framework`` loads no stage, and rendering a turn file loads no
part of the live loop, of delivery or of session compression (``docs/performance.md``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from base_support import RENDER_SCRIPT, ROOT

import promptweave


def _isolated() -> dict[str, str]:
    """A child's environment: this tree, no plugin autoload, the test's own cache directory."""
    return {
        "PYTHONPATH": str(ROOT),
        "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PROMPTWEAVE_CACHE_DIR": os.environ["PROMPTWEAVE_CACHE_DIR"],
    }


#: Modules a turn render never needs: the live loop, delivery, session compression, image
#: downloads, fuzzy matching, route files, the event log, the name suggestions of errors, and
#: asyncio with what it brings (no retriever of a render waits: docs/performance.md#start-up).
NOT_FOR_RENDER = (
    "promptweave.loop.live",
    "promptweave.loop.tools",
    "promptweave.replay.chat_log",
    "promptweave.delivery.onebot",
    "promptweave.delivery.plan",
    "promptweave.delivery.reply_contract",
    "promptweave.compression.summary",
    "promptweave.cli.route_batch",
    "urllib.request",
    "http.client",
    "rapidfuzz",
    "difflib",
    "asyncio",
    "ssl",
    "subprocess",
)

#: Modules a render needs no more once the discovery cache holds the installed plugins (the
#: metadata parsers and what they bring), and without a store file (the SQLite backends, the
#: data importer).
NOT_FOR_A_CACHED_RENDER = (
    "importlib_metadata",
    "importlib.metadata",
    "zipp",
    "zipfile",
    "email",
    "csv",
    "tempfile",
    "promptweave.store.deliveries_sqlite",
    "promptweave.store.retrieval_sqlite",
    "promptweave.store.routing_state_sqlite",
    "promptweave.store.sessions_sqlite",
    "promptweave.store.row_memo",
    "promptweave.store.retrieval_import",
    "promptweave.cli.data",
)


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded once ``code`` has run in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**_isolated(), **(env or {})},
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


RENDER = RENDER_SCRIPT


def test_importing_the_facade_loads_no_stage_of_a_turn() -> None:
    loaded = _modules_after("import promptweave")
    assert sorted(m for m in loaded if m.startswith("promptweave.")) == []
    assert "asyncio" not in loaded
    assert "attrs" not in loaded


def test_a_name_read_from_the_facade_loads_its_module_alone() -> None:
    loaded = _modules_after("from promptweave import quote_user_text")
    assert "promptweave.text.sanitize" in loaded
    assert "promptweave.runtime" not in loaded


def test_rendering_a_turn_file_loads_no_loop_delivery_or_compression() -> None:
    loaded = _modules_after(RENDER)
    assert "promptweave.runtime" in loaded
    assert sorted(set(NOT_FOR_RENDER) & loaded) == []


def test_rendering_a_turn_file_compiles_no_pattern_of_the_learners() -> None:
    # Compiled at import, the learners' patterns (which a render never matches) and the detector
    # of a hint with nothing to quote were a tenth of the command (docs/performance.md#start-up).
    script = (
        RENDER + "import sys\n"
        "from promptweave._patterns import _LazyPattern\n"
        "compiled = sorted(\n"
        "    f'{name}.{key}'\n"
        "    for name, module in list(sys.modules.items())\n"
        "    if name.startswith('promptweave.builtin_plugins.')\n"
        "    for key, value in vars(module).items()\n"
        "    if isinstance(value, _LazyPattern) and 'search' in vars(value)\n"
        ")\n"
        "lazy = sum(\n"
        "    isinstance(value, _LazyPattern)\n"
        "    for module in list(sys.modules.values())\n"
        "    for value in vars(module).values()\n"
        ")\n"
        "from promptweave.builtin_plugins import wording_hints\n"
        "detector = 'pattern' in vars(wording_hints._injection_detector())\n"
        "print(json.dumps([compiled, lazy, detector]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import json\n" + script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=_isolated(),
    )
    compiled, lazy, detector = json.loads(result.stdout.splitlines()[-1])
    assert compiled == []
    assert lazy > 20
    assert detector is False


def test_the_command_installs_its_code_cache_before_any_module_of_promptweave_loads() -> None:
    # A record class built before the cache is installed compiles its code on every start, and
    # one built before the collector is paused is walked by it (docs/performance.md#start-up).
    loaded = _modules_after("import promptweave.cli.startup")
    ours = sorted(m for m in loaded if m.startswith("promptweave."))
    assert ours == ["promptweave._cache_dir", "promptweave.cli", "promptweave.cli.startup"]
    # Nor attrs: it builds classes of its own as it loads (the command imports this first).
    assert sorted({"attr", "attrs", "cattrs", "click", "pluggy"} & loaded) == []


def test_a_render_with_the_caches_filled_parses_no_metadata_and_loads_no_sqlite_backend(
    tmp_path: Path,
) -> None:
    env = {"PROMPTWEAVE_CACHE_DIR": str(tmp_path)}
    first = _modules_after(RENDER, env)
    assert "importlib_metadata" in first  # the first run scans, and fills the cache
    loaded = _modules_after(RENDER, env)
    assert "promptweave.runtime" in loaded
    assert sorted(m for m in loaded if m.partition(".")[0] in NOT_FOR_A_CACHED_RENDER) == []
    assert sorted(m for m in loaded if m in NOT_FOR_A_CACHED_RENDER) == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = promptweave.NoSuchName  # type: ignore[attr-defined]


def test_the_command_leaves_the_collector_nothing_to_walk_at_exit() -> None:
    # An exit handler registered before the command runs after the command's own ones.
    script = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n" + RENDER
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=_isolated(),
    )
    assert result.stdout.splitlines()[-1] == "frozen True"
