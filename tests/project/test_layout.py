"""The layout of ``framework``: stage packages in layers, one-way imports, a stable public face.

``docs/architecture.md`` describes the rules these tests hold the tree to.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
from base_support import ROOT

import promptweave

FRAMEWORK = Path(promptweave.__file__).parent


#: The layers of ``promptweave``, bottom first (``docs/architecture.md``, "Layers"): each entry
#: names the packages (or top modules) of one layer. A module imports only from its own layer or
#: lower ones, and two packages of one layer never import each other both ways.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_fields", "_convert", "_dates", "_cache_dir", "_patterns", "errors", "timing"),
    ("text",),
    ("items", "turn", "config"),
    ("store",),
    ("messages",),
    ("decision",),
    ("plugins",),
    ("session",),
    ("routing",),
    ("retrieval",),
    ("prompt",),
    ("turn_context",),
    ("providers",),
    ("compression",),
    ("delivery",),
    ("learning",),
    ("pipeline",),
    ("runtime", "loop"),
    ("replay",),
    ("serve",),
    ("cli", "testing", "__main__", "__init__"),
)

#: The one exception to the package layers: a stage's records modules, what the plugin contract
#: carries, sit in the records layer of :mod:`promptweave.decision`, below the plugin machinery and
#: every stage that runs (``docs/architecture.md``, "Layers").
RECORDS_MODULES = frozenset(
    {
        "promptweave.routing.signals",
        "promptweave.prompt.render_context",
        "promptweave.providers.exchange",
        "promptweave.providers.prefix",
        "promptweave.delivery.outgoing",
        "promptweave.loop.events",
        "promptweave.plugins.contributions",
    }
)

#: The modules the plugin contract may import for its annotations: records only, never a stage
#: that runs (``docs/architecture.md``, "Dependency rules").
HOOKSPEC_IMPORTS_ALLOWED = re.compile(
    r"promptweave\.(config|decision|items|turn|plugins\.contributions|prompt\.render_context|"
    r"messages\.prompt_message|providers\.exchange|store\.session_rows|delivery\.outgoing|"
    r"loop\.events)$"
)


#: The plugin packages inside ``promptweave``: plugins, not the core the layout rules are about.
PLUGIN_PACKAGES = ("promptweave.builtin_plugins", "promptweave.contrib")

_LAYER_OF = {name: index for index, names in enumerate(LAYERS) for name in names}
_RECORDS_LAYER = _LAYER_OF["decision"]


def _graph() -> grimp.ImportGraph:
    # grimp reads every import statement, those under ``if TYPE_CHECKING:`` included.
    return grimp.build_graph("promptweave", cache_dir=None)


def _package(module: str) -> str:
    """The package (or top module) of ``promptweave`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(module: str) -> int:
    if module in RECORDS_MODULES:
        return _RECORDS_LAYER
    return _LAYER_OF[_package(module)]


def _core_imports(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Every import between two modules of the core, the plugin packages left out."""
    return sorted(
        (importer, imported)
        for importer in graph.modules
        if not importer.startswith(PLUGIN_PACKAGES)
        for imported in graph.find_modules_directly_imported_by(importer)
        if not imported.startswith(PLUGIN_PACKAGES)
    )


def layer_violations(imports: list[tuple[str, str]]) -> list[str]:
    """The imports that break the layers: upward, or both ways between packages of one layer."""
    between = {
        (_package(a), _package(b))
        for a, b in imports
        if _package(a) != _package(b) and _layer(a) == _layer(b)
    }
    found = []
    for importer, imported in imports:
        upward = _layer(importer) < _layer(imported)
        both_ways = (
            _package(importer) != _package(imported)
            and _layer(importer) == _layer(imported)
            and (_package(imported), _package(importer)) in between
        )
        if upward or both_ways:
            found.append(f"{importer} -> {imported}")
    return found


def test_every_package_has_a_layer() -> None:
    graph = _graph()
    core = {m for m in graph.modules if not m.startswith(PLUGIN_PACKAGES)}
    assert sorted({_package(m) for m in core} - set(_LAYER_OF)) == []
    assert sorted(RECORDS_MODULES - core) == []


def test_packages_import_only_down_the_layers() -> None:
    # Annotation imports count: a type named under ``if TYPE_CHECKING:`` ties the layers as well.
    assert layer_violations(_core_imports(_graph())) == []


def test_the_layer_check_sees_a_back_import() -> None:
    assert layer_violations([("promptweave.store.sessions", "promptweave.routing.router")]) == [
        "promptweave.store.sessions -> promptweave.routing.router"
    ]
    assert layer_violations(
        [
            ("promptweave.runtime", "promptweave.loop.live"),
            ("promptweave.loop.live", "promptweave.runtime"),
        ]
    ) == [
        "promptweave.runtime -> promptweave.loop.live",
        "promptweave.loop.live -> promptweave.runtime",
    ]


def test_records_modules_import_only_records_and_below() -> None:
    graph = _graph()
    upward = sorted(
        f"{module} -> {imported}"
        for module in RECORDS_MODULES
        for imported in graph.find_modules_directly_imported_by(module)
        if _layer(imported) > _RECORDS_LAYER
    )
    assert upward == []


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


def test_every_package_has_a_folder_of_tests() -> None:
    # The tests live by stage (README.md, "Run the tests"): tests/<package>/ for each package of
    # framework/, beside the folders of what no package holds alone (the whole turn, the docs).
    framework = ROOT / "framework"
    packages = sorted(p.name for p in framework.iterdir() if (p / "__init__.py").is_file())
    tests = ROOT / "tests"
    assert [name for name in packages if not (tests / name).is_dir()] == []
