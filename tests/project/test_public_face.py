"""The public face of ``promptweave``: one table of names, each resolving to its defining module,
each documented, and the type checkers' imports equal to the table
(``docs/architecture.md#the-public-face``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from docs_support import ROOT, prose_lines

import promptweave
from promptweave.plugins import hookspecs

FACADE = ROOT / "framework" / "__init__.py"

#: Each page that documents public names, and the heading of its table of them: what a plugin
#: receives, returns and raises on the hooks page, what embedding a bot needs on the architecture
#: page.
NAME_TABLES = {
    ROOT / "docs" / "plugin_hooks.md": "## Public names",
    ROOT / "docs" / "architecture.md": "## The public face",
}

_ROW = re.compile(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \| \S")
_HEADING = re.compile(r"^#{1,2} ")

PUBLIC = sorted(promptweave.__all__)


def _documented(page: Path, heading: str) -> list[str]:
    """The names the rows of the tables under ``heading`` give, in order, up to the next heading
    of the same or a higher level."""
    names: list[str] = []
    inside = False
    for line in prose_lines(page.read_text(encoding="utf-8")):
        if _HEADING.match(line):
            inside = line.strip() == heading
        elif inside and (match := _ROW.match(line)):
            names.append(match.group(1))
    return names


DOCUMENTED = {page: _documented(page, heading) for page, heading in NAME_TABLES.items()}


def _type_checker_imports() -> dict[str, str]:
    """What the ``if TYPE_CHECKING:`` block of the facade imports: each name and its module."""
    tree = ast.parse(FACADE.read_text(encoding="utf-8"))
    guard = next(node for node in tree.body if isinstance(node, ast.If))
    imported: dict[str, str] = {}
    for node in guard.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names:
            # ``Name as Name`` re-exports the name to a strict type checker.
            assert alias.asname == alias.name, f"import {alias.name} as {alias.name}"
            imported[alias.name] = node.module
    return imported


def test_the_face_is_small() -> None:
    # Guards the parametrized tests below against passing vacuously; the number is not frozen.
    assert {"hookimpl", "Section", "Promptweave"} <= set(PUBLIC)
    assert len(PUBLIC) < 100


def test_all_and_dir_come_from_the_one_table() -> None:
    assert sorted(promptweave._DEFINED_IN) == PUBLIC
    assert set(PUBLIC) <= set(dir(promptweave))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves_to_its_defining_module(name: str) -> None:
    module = importlib.import_module(promptweave._DEFINED_IN[name])
    value = getattr(promptweave, name)
    assert value is getattr(module, name)
    assert name in module.__all__, f"{module.__name__}.__all__ lacks {name}"
    if inspect.isclass(value) or inspect.isfunction(value):
        # The table names the module that defines the name, not one that imports it.
        assert value.__module__ == module.__name__


def test_the_type_checkers_import_what_the_table_names() -> None:
    imported = _type_checker_imports()
    if imported != promptweave._DEFINED_IN:
        by_module: dict[str, list[str]] = {}
        for name, module in promptweave._DEFINED_IN.items():
            by_module.setdefault(module, []).append(name)
        expected = "\n".join(
            f"    from {module} import "
            + ", ".join(f"{name} as {name}" for name in sorted(by_module[module]))
            for module in sorted(by_module)
        )
        pytest.fail(f"the TYPE_CHECKING block of {FACADE.name} should read:\n{expected}")


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_has_a_row_in_the_docs(name: str) -> None:
    pages = [page.name for page, names in DOCUMENTED.items() if name in names]
    assert len(pages) == 1, (
        f"{name}: give it one row in the table of public names of docs/plugin_hooks.md or "
        f"docs/architecture.md (found in {pages})"
    )


def test_the_docs_tables_name_only_public_names() -> None:
    stale = {
        page.name: [name for name in names if name not in PUBLIC]
        for page, names in DOCUMENTED.items()
    }
    assert stale == {page.name: [] for page in DOCUMENTED}


def test_every_record_a_hook_passes_is_public() -> None:
    # The types the hook signatures name: hookspecs imports them, for annotations only.
    tree = ast.parse(Path(hookspecs.__file__).read_text(encoding="utf-8"))
    named = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("promptweave.")
        for alias in node.names
    }
    assert named
    assert sorted(named - set(PUBLIC)) == []


#: The docs pages, and the example plugin package written as a third party writes one.
_PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
_EXAMPLE_PACKAGES = sorted((ROOT / "contrib" / "examples").glob("*/src/**/*.py"))
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _promptweave_imports(source: str) -> list[str]:
    """Each import of ``source`` from promptweave: ``promptweave.x`` or ``promptweave:Name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] == (
            "promptweave"
        ):
            if node.module == "promptweave":
                found.extend(f"promptweave:{alias.name}" for alias in node.names)
            else:
                found.append(str(node.module))
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.partition(".")[0] == "promptweave")
    return found


def _not_public(imports: list[str]) -> list[str]:
    return [
        name
        for name in imports
        if not (name == "promptweave" or name.removeprefix("promptweave:") in PUBLIC)
    ]


def test_the_example_pages_and_packages_are_found() -> None:
    assert any(_PYTHON_BLOCK.search(page.read_text(encoding="utf-8")) for page in _PAGES)
    assert _EXAMPLE_PACKAGES


@pytest.mark.parametrize("page", _PAGES, ids=[page.name for page in _PAGES])
def test_the_examples_in_the_docs_import_public_names_only(page: Path) -> None:
    for number, block in enumerate(_PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")), 1):
        assert _not_public(_promptweave_imports(block)) == [], f"python block {number}"


@pytest.mark.parametrize(
    "module", _EXAMPLE_PACKAGES, ids=[module.name for module in _EXAMPLE_PACKAGES]
)
def test_the_example_plugin_package_imports_public_names_only(module: Path) -> None:
    assert _not_public(_promptweave_imports(module.read_text(encoding="utf-8"))) == []
