"""The layout of ``framework``: stage packages and one-way imports.

``docs/architecture.md`` describes the rules these tests hold the tree to.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

import promptweave

FRAMEWORK = Path(promptweave.__file__).parent

#: The modules the plugin contract may import for its annotations: records only, never a stage
#: that runs (``docs/architecture.md``, "Dependency rules").
HOOKSPEC_IMPORTS_ALLOWED = re.compile(
    r"promptweave\.(config|decision|items|turn|plugins\.records|prompt\.render_context|"
    r"conversation\.(images|sequence)|providers\.records|store\.sessions|delivery\.records|loop\.records)$"
)


#: The plugin packages inside ``promptweave``: plugins, not the core the layout rules are about.
PLUGIN_PACKAGES = ("promptweave.builtin_plugins", "promptweave.contrib")


def _graph() -> grimp.ImportGraph:
    # grimp reads every import statement, those under ``if TYPE_CHECKING:`` included.
    return grimp.build_graph("promptweave", cache_dir=None)


def test_no_import_circle_among_framework_modules() -> None:
    graph = _graph()
    circles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                circles.append(" -> ".join((importer, *back)))
    assert circles == []


def test_no_framework_module_imports_the_facade() -> None:
    graph = _graph()
    importers = graph.find_modules_that_directly_import("promptweave")
    assert {m for m in importers if not m.startswith(PLUGIN_PACKAGES)} == set()


def test_hookspecs_depend_on_records_alone() -> None:
    imported = _graph().find_modules_directly_imported_by("promptweave.plugins.hookspecs")
    assert sorted(m for m in imported if not HOOKSPEC_IMPORTS_ALLOWED.match(m)) == []


def test_top_of_framework_keeps_to_the_shared_modules() -> None:
    top = sorted(p.stem for p in FRAMEWORK.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, top


def test_package_inits_hold_a_docstring_only() -> None:
    for init in FRAMEWORK.glob("*/__init__.py"):
        body = ast.parse(init.read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), init


def test_no_two_module_names_differ_only_by_a_prefix_or_suffix() -> None:
    stems = {p.stem for p in FRAMEWORK.rglob("*.py") if not p.stem.startswith("__")}
    confusing = sorted(
        (stem, other)
        for stem in stems
        for other in (f"turn_{stem}", f"{stem}_io", f"{stem}file")
        if other in stems
    )
    assert confusing == []
