"""Meta-tests that keep the documentation honest.

Every hook has a section in ``docs/plugin_hooks.md`` headed by its exact signature and a
``test_hook_<name>`` test; every link between documentation pages resolves, anchors included; every
Python example in the docs at least compiles.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from docs_support import ROOT, anchors, headings, prose_lines

import promptweave
from promptweave.plugins import hookspecs

DOCS = ROOT / "docs"
TESTS = ROOT / "tests"
PLUGIN_HOOKS = DOCS / "plugin_hooks.md"
PAGES = sorted([*DOCS.glob("*.md"), ROOT / "README.md"])

_SPEC_ATTRIBUTE = f"{hookspecs.PROJECT_NAME}_spec"
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)\)")
_HOOK_HEADING = re.compile(r"^## `([a-z_]+)\((.*)\)`$")
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _hookspecs() -> dict[str, Callable[..., Any]]:
    """Every function of ``promptweave.plugins.hookspecs`` marked as a hook specification."""
    return {
        name: function
        for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(function, _SPEC_ATTRIBUTE)
    }


def _signature(function: Callable[..., Any]) -> str:
    parameters = ", ".join(inspect.signature(function).parameters)
    return f"{function.__name__}({parameters})"


def _local_links() -> list[tuple[Path, str]]:
    links = []
    for page in PAGES:
        for line in prose_lines(page.read_text(encoding="utf-8")):
            for target in _LINK.findall(line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    links.append((page, target))
    return links


HOOKS = _hookspecs()
LINKS = _local_links()


def test_hookspecs_are_found() -> None:
    # Guards the two parametrized tests below against passing vacuously.
    assert {"register_sections", "override_section"} <= set(HOOKS)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_has_a_docs_section_headed_by_its_exact_signature(name: str) -> None:
    signature = _signature(HOOKS[name])
    titles = headings(PLUGIN_HOOKS)
    assert any(f"`{signature}`" in title for title in titles), (
        f"docs/plugin_hooks.md has no heading `## `{signature}``"
    )


def test_every_hook_heading_in_the_docs_names_an_existing_hook() -> None:
    documented = {
        match.group(1): match.group(2)
        for heading in headings(PLUGIN_HOOKS)
        if (match := _HOOK_HEADING.match(f"## {heading}"))
    }
    stale = {name: args for name, args in documented.items() if name not in HOOKS}
    assert not stale, f"docs/plugin_hooks.md documents hooks that do not exist: {stale}"


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_has_a_test_hook_function(name: str) -> None:
    pattern = re.compile(rf"^\s*(async\s+)?def test_hook_{name}\(", re.MULTILINE)
    files = [path for path in TESTS.rglob("*.py") if path.name != Path(__file__).name]
    assert any(pattern.search(path.read_text(encoding="utf-8")) for path in files), (
        f"no test under tests/ is named test_hook_{name}"
    )


def test_docs_pages_are_found() -> None:
    assert {"index.md", "plugin_hooks.md", "writing_plugins.md"} <= {p.name for p in PAGES}
    assert LINKS


@pytest.mark.parametrize(
    ("page", "target"),
    LINKS,
    ids=[f"{page.name}->{target}" for page, target in LINKS],
)
def test_links_between_docs_pages_resolve(page: Path, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    linked = (page.parent / path_part).resolve() if path_part else page
    assert linked.exists(), f"{page.name} links to {target}, which does not exist"
    if anchor and linked.suffix == ".md":
        assert anchor in anchors(linked), (
            f"{page.name} links to {target}, but {linked.name} has no heading with that anchor"
        )


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_in_the_docs_compile(page: Path) -> None:
    for number, block in enumerate(_PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")), 1):
        compile(block, f"{page.name} python block {number}", "exec")


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_names_the_docs_import_from_framework_exist(page: Path) -> None:
    import ast

    for number, block in enumerate(_PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")), 1):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module == "promptweave":
                missing = [a.name for a in node.names if not hasattr(promptweave, a.name)]
                assert not missing, f"{page.name} python block {number} imports {missing}"


# -- the test command ----------------------------------------------------------------------------

_SKIPPING = """
import pytest


@pytest.mark.parametrize("n", range(5))
def test_needs_a_server(n):
    pytest.skip("no server")


def test_runs():
    pass
"""


def _run_skipping(pytester, monkeypatch, required=()):
    """A run of five skipped tests and one that passes, with the plugin the suite uses, and
    ``required`` the only ``PROMPTWEAVE_REQUIRE_*`` variables set."""
    for name in [name for name in os.environ if name.startswith("PROMPTWEAVE_REQUIRE_")]:
        monkeypatch.delenv(name)
    for name in required:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    pytester.makepyfile(_SKIPPING)
    return pytester.runpytest_subprocess("-p", "skip_summary", "-p", "no:cacheprovider")


def test_skipped_tests_are_summarised_in_one_line_per_reason(pytester, monkeypatch):
    result = _run_skipping(pytester, monkeypatch)
    assert result.ret == 0
    assert result.outlines.count("5 skipped: no server") == 1
    assert not any(line.startswith("SKIPPED") for line in result.outlines)


@pytest.mark.parametrize("service", ["PROMPTWEAVE_REQUIRE_REDIS", "PROMPTWEAVE_REQUIRE_LLAMA"])
def test_a_skipped_test_fails_the_run_where_services_are_required(pytester, monkeypatch, service):
    result = _run_skipping(pytester, monkeypatch, required=[service])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert f"{service}=1: no test may be skipped, and 5 were" in result.outlines
