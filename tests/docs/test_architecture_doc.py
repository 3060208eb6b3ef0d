"""``docs/architecture.md`` shows the tree ``framework/`` actually has.

The page's tree is generated from the files by :func:`framework_tree`; when a module is added,
moved or removed, the test fails and prints the tree to paste. The stage table may name only
packages and modules that exist, and every stage package has a row.
"""

from __future__ import annotations

import re
from pathlib import Path

from docs_support import ROOT, prose_lines

FRAMEWORK = ROOT / "framework"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: The width of a tree line, as for the rest of the docs.
WIDTH = 100
#: The column where a package's modules start.
MODULES_COLUMN = 20

_FENCED_BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\.py)?/?`")


def _packages() -> list[Path]:
    return sorted(
        path
        for path in FRAMEWORK.iterdir()
        if path.is_dir() and not path.name.startswith(("_", "."))
    )


def _package_lines(package: Path, *, last: bool) -> list[str]:
    """The package's name, then its modules (and subpackages), wrapped in a column of their own."""
    names = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    names += sorted(f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name[0] not in "_.")
    lines = []
    line = f"{'└── ' if last else '├── '}{package.name}/".ljust(MODULES_COLUMN - 1)
    on_line = 0
    for name in names:
        if on_line and len(line) + 1 + len(name) > WIDTH:
            lines.append(line)
            line, on_line = ("" if last else "│").ljust(MODULES_COLUMN - 1), 0
        line += f" {name}"
        on_line += 1
    return [*lines, line]


def framework_tree() -> str:
    """``framework/`` two levels deep: each stage package with its modules, then the top modules."""
    packages = _packages()
    modules = sorted(p.name for p in FRAMEWORK.glob("*.py"))
    lines = ["framework/"]
    for index, package in enumerate(packages):
        lines += _package_lines(package, last=index == len(packages) - 1 and not modules)
    for index, module in enumerate(modules):
        lines.append(("└── " if index == len(modules) - 1 else "├── ") + module)
    return "\n".join(lines) + "\n"


def _page() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def _stage_rows() -> list[tuple[str, list[str]]]:
    """The (package, modules) of each row of the stage table."""
    rows = []
    in_table = False
    for line in prose_lines(_page()):
        if line.startswith("| stage | package |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            package = _CODE.findall(cells[1])
            rows.append((package[0], _CODE.findall(cells[2])))
    return rows


def test_the_tree_on_the_page_is_the_tree_of_framework() -> None:
    blocks = [b for b in _FENCED_BLOCK.findall(_page()) if b.startswith("framework/\n")]
    expected = framework_tree()
    assert blocks == [expected], "paste this tree into docs/architecture.md:\n" + expected


def test_the_generated_tree_names_every_module() -> None:
    tree = framework_tree()
    for path in FRAMEWORK.rglob("*.py"):
        if path.stem != "__init__" and "__pycache__" not in path.parts:
            name = path.name if path.parent == FRAMEWORK else path.stem
            assert re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", tree), path


def test_every_stage_package_has_a_row_in_the_stage_table() -> None:
    listed = {package for package, _ in _stage_rows()}
    assert {package.name for package in _packages()} <= listed


def test_every_module_the_stage_table_names_exists() -> None:
    rows = _stage_rows()
    assert rows
    for package, modules in rows:
        where = FRAMEWORK if package == "framework" else FRAMEWORK / package
        assert where.is_dir(), package
        for module in modules:
            assert (where / f"{module}.py").is_file(), f"{package}/{module}.py"
