"""The project speaks of itself: no citation of material that does not ship with it.

Code, tests, docs and examples cite the project's own reference page, ``docs/design.md``, by the
anchor of one of its headings (``docs/design.md#degradation``). A citation of the design notes the
project was built from (a numbered source file, its directory, a design or style memo) means
nothing to a user, so none may appear; and every ``docs/design.md#<anchor>`` must land on a heading.
The pages and docstrings name ``framework``'s modules and names (``promptweave.routing.router``,
``framework/plugins/hookspecs.py``) only as they exist, so a module that moves takes its mentions
along.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_support import ROOT, anchors

#: The trees that ship with the project, and its front page.
SHIPPED = ("framework", "builtin_plugins", "contrib", "tests", "docs", "examples", "benchmarks")
FRONT_PAGE = ROOT / "README.md"
TEXT_SUFFIXES = frozenset({".py", ".md", ".toml", ".json", ".jsonl", ".txt", ".cfg", ".ini"})
#: Build output and tool caches are not the project's text.
SKIPPED_DIRS = frozenset({"__pycache__", "build", "dist"})

#: Spelled apart so that this file passes its own scan.
SEED = "seed"
#: The design and style memos the project was built from; neither ships with it.
MEMOS = ("DESIGN", "STYLE")

#: What a citation of the project's source notes looks like, each with what it names. A random
#: seed (``--seed N``, ``random.Random(seed)``, ``"seed": 1``) matches none of them.
CITATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a source note by number", re.compile(rf"\b{SEED}\s*#?\s*0\d\d\b", re.IGNORECASE)),
    ("a source note by file name", re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")),
    ("the source notes' directory", re.compile(rf"\b{SEED}s?/", re.IGNORECASE)),
    (
        "the source notes as an authority",
        re.compile(
            rf"(?<![a-z])the[ _]{SEED}(?:['’]s\b|s\b|s_|[ _](?:values?|order|defaults?|examples?|"
            r"does|says|design)\b)",
            re.IGNORECASE,
        ),
    ),
    # Case-sensitive: docs/design.md is the project's own page.
    *((f"the {name.lower()} memo", re.compile(rf"\b{name}\.md\b")) for name in MEMOS),
)

#: A dotted name in ``promptweave`` (``promptweave.routing.router.Router``; not a file such as
#: ``promptweave.toml``) and a path in the ``framework/`` tree.
FRAMEWORK_NAME = re.compile(
    r"(?<![\w./-])promptweave(?!\.(?:toml|sqlite3|log|jsonl?|html)\b)(?:\.[A-Za-z_]\w*)+"
)
FRAMEWORK_PATH = re.compile(r"(?<![\w./])framework/[\w/]*\w(?:\.py)?")
#: Where the project names its own modules for a reader: the pages and the docstrings.
NAMING_TREES = ("framework", "builtin_plugins", "contrib", "docs")

#: A citation of the project's reference page with an anchor.
DESIGN_CITATION = re.compile(r"\bdocs/design\.md#([A-Za-z0-9_-]+)")
DESIGN_PAGE = ROOT / "docs/design.md"


def _shipped_files() -> Iterator[Path]:
    yield FRONT_PAGE
    for tree in SHIPPED:
        for path in sorted((ROOT / tree).rglob("*")):
            relative = path.relative_to(ROOT).parts
            if any(part in SKIPPED_DIRS or part.startswith(".") for part in relative):
                continue
            if any(part.endswith(".egg-info") for part in relative):
                continue
            if path.is_file() and path.suffix in TEXT_SUFFIXES:
                yield path


def _lines() -> Iterator[tuple[str, int, str]]:
    for path in _shipped_files():
        where = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield where, number, line


def _citations(line: str) -> list[str]:
    return [what for what, pattern in CITATIONS if pattern.search(line)]


LINES = list(_lines())


def test_the_scan_reads_every_shipped_tree() -> None:
    scanned = {where.split("/")[0] for where, _, _ in LINES}
    assert scanned == {*SHIPPED, FRONT_PAGE.name}


@pytest.mark.parametrize(
    "text",
    [
        f"(see {SEED} 004, 入口路由)",
        f"{SEED.title()} 000: 5%",
        f"{SEED}004",
        f"read /work/shared/{SEED}s/",
        f"004_{'f7' * 8}.txt",
        f"every field has the {SEED}'s default",
        f"def test_defaults_are_the_{SEED}s():",
        f"def test_memory_blocks_follow_the_{SEED}_order():",
        f"as the {SEED} does for a provider",
        f"{MEMOS[0]}.md §3",
        f"see {MEMOS[1]}.md",
    ],
)
def test_a_citation_of_the_source_notes_is_recognised(text: str) -> None:
    assert _citations(text)


@pytest.mark.parametrize(
    "text",
    [
        "promptweave route FILE [--seed N]",
        f"rng=random.Random({SEED})",
        f'{{"id": "z03", "{SEED}": 0, "expect": {{}}}}',
        f"# random.Random(0) draws 0.844 >= 0.25 ({SEED}=0)",
        f"for {SEED} in range(200):",
        f"the line's random {SEED}",
        f"{SEED.title()} the random source (quote, shape).",
        "(docs/design.md#degradation, 运行态不可用时的退化)",
    ],
)
def test_a_random_seed_or_a_design_page_citation_is_not_a_citation(text: str) -> None:
    assert _citations(text) == []


def test_no_shipped_file_cites_the_source_notes() -> None:
    found = [
        f"{where}:{number}: {', '.join(what)}: {line.strip()}"
        for where, number, line in LINES
        if (what := _citations(line))
    ]
    assert found == [], "cite docs/design.md#<anchor> instead:\n" + "\n".join(found)


def test_every_design_page_citation_lands_on_a_heading() -> None:
    known = anchors(DESIGN_PAGE)
    cited = [
        (where, number, anchor)
        for where, number, line in LINES
        for anchor in DESIGN_CITATION.findall(line)
    ]
    # Guards against passing vacuously: the code cites the page throughout.
    assert sum(where.startswith("framework/") for where, _, _ in cited) > 20
    broken = [
        f"{where}:{number}: #{anchor}" for where, number, anchor in cited if anchor not in known
    ]
    assert broken == [], "docs/design.md has no heading with these anchors:\n" + "\n".join(broken)


#: Logger names the code asks for (``promptweave.stages``): dotted like modules, named in the docs.
LOGGER_NAMES = frozenset(
    name
    for tree in ("framework", "builtin_plugins", "contrib")
    for path in (ROOT / tree).rglob("*.py")
    for name in re.findall(r'getLogger\("([\w.]+)"\)', path.read_text(encoding="utf-8"))
)


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of ``promptweave``, an attribute reached from one, or a
    logger the code asks for."""
    if dotted in LOGGER_NAMES:
        return True
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


# Importing promptweave.contrib.nonebot needs NoneBot initialised.
@pytest.mark.usefixtures("nonebot_started")
def test_every_framework_name_the_docs_and_docstrings_give_exists() -> None:
    lines = [
        (where, number, line)
        for where, number, line in LINES
        if where == FRONT_PAGE.name or where.split("/")[0] in NAMING_TREES
    ]
    names = [
        (where, number, name)
        for where, number, line in lines
        for name in FRAMEWORK_NAME.findall(line)
    ]
    paths = [
        (where, number, path)
        for where, number, line in lines
        for path in FRAMEWORK_PATH.findall(line)
    ]
    assert len(names) > 50 and paths
    missing = [f"{where}:{number}: {name}" for where, number, name in names if not _resolves(name)]
    missing += [
        f"{where}:{number}: {path}" for where, number, path in paths if not (ROOT / path).exists()
    ]
    assert missing == [], "these names of framework no longer exist:\n" + "\n".join(missing)
