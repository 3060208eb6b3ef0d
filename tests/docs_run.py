"""Docs that run: the examples of ``docs/*.md`` and ``README.md``, executed and compared.

Every fenced ``console`` block is a transcript: a line ``$ command`` (continued on lines that start
with ``> ``) is run by ``bash`` in the page's workspace, and the lines after it, up to the next
``$``, are its expected output (standard output and standard error as a terminal shows them).
Every ``python`` block runs too, and must not fail. A page's blocks run in order in one workspace,
a fresh temporary directory holding a copy of ``examples/`` and ``tests/data/``, as a reader
following the page would run them from a clone of promptweave.

In expected output, a line that is only ``…`` stands for any number of lines (none included), and
``…`` inside a line for any text on that line (with the spaces before it, so an aligned column
of durations, ``total        … ms``, matches however wide the number is). Trailing spaces and
trailing blank lines are ignored, and the workspace's path prints as ``…``. The updater writes durations (``3.8 ms``) as
``… ms``: no two runs take the same time. A command that exits with a status other than
0 must be followed by ``$ echo $?`` showing it (each command starts with ``$?`` set to the status
of the one before).

An HTML comment on the line before a block changes what happens to it:

- ``<!-- no-run: REASON -->``: the block is not run (it needs a model server, a network, a
  deployment's files…); the reason is required.
- ``<!-- file: PATH -->``: the block's text is written to ``PATH`` in the workspace, for the blocks
  after it (a plugin's module, its ``pyproject.toml``).

The commands see an environment of their own: ``promptweave``, ``python`` and ``pip`` run the
promptweave of this checkout; ``pip install [-e] DIR`` installs ``DIR`` into the workspace (without
its dependencies, offline), and only what a page installed is loaded from entry points; no
``PROMPTWEAVE_*`` variable of the caller leaks in; the terminal is 80 columns wide and not a
terminal (so there is no colour).

To regenerate the expected output of the blocks whose output changed::

    python -m tests.docs_run --update docs/cli.md      # or no page: every page

The updater keeps each ``…`` that still matches and writes the new output around it; review the
change with ``git diff``. ``python tests/regenerate.py`` runs the updater on every page, with the
other recorded expectations of the tests.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

__all__ = [
    "PAGES",
    "Block",
    "Command",
    "Mismatch",
    "matches",
    "parse_page",
    "regenerate",
    "run_page",
    "update_page",
]

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
#: What a page's workspace starts with: the paths the examples use, copied from the checkout.
WORKSPACE_COPIES = ("examples", "tests/data")
ELLIPSIS = "…"
TIMEOUT_S = 120

_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*(no-run|file):\s*(.*?)\s*-->\s*$")


@attrs.frozen(kw_only=True)
class Command:
    """One ``$`` command of a console block and the output the page shows for it."""

    line: int
    text: str
    expected: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Block:
    """A fenced block that runs: its language, where it is, what the comment before it says."""

    language: str
    line: int
    body: str
    directive: str | None = None
    argument: str = ""
    commands: tuple[Command, ...] = ()


@attrs.frozen(kw_only=True)
class Mismatch:
    """A block whose run differed from the page: a command's output, or a Python error."""

    page: Path
    line: int
    what: str
    expected: tuple[str, ...]
    actual: tuple[str, ...]


def _commands(lines: Sequence[str], first_line: int) -> tuple[Command, ...]:
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"line {first_line + index}: a console block starts with '$ '")
        start = index
        text = [line[2:]]
        index += 1
        while index < len(lines) and (lines[index].startswith("> ") or lines[index] == ">"):
            text.append(lines[index][2:])
            index += 1
        output_start = index
        while index < len(lines) and not lines[index].startswith("$ "):
            index += 1
        commands.append(
            Command(
                line=first_line + start,
                text="\n".join(text),
                expected=tuple(lines[output_start:index]),
            )
        )
    return tuple(commands)


def parse_page(text: str) -> list[Block]:
    """The ``console`` and ``python`` blocks of a Markdown page, with their directives.

    :raises ValueError: a directive without its argument, or a console block that does not
        start with a command.
    """
    lines = text.split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match or not match.group(1):
            index += 1
            continue
        language, start = match.group(1), index
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        body_lines = lines[start + 1 : end]
        directive = _DIRECTIVE.match(lines[start - 1]) if start else None
        if directive is not None and not directive.group(2):
            raise ValueError(f"line {start}: {directive.group(1)} needs an argument")
        if language in ("console", "python") or directive is not None:
            blocks.append(
                Block(
                    language=language,
                    line=start + 1,
                    body="\n".join(body_lines) + "\n",
                    directive=None if directive is None else directive.group(1),
                    argument="" if directive is None else directive.group(2),
                    commands=_commands(body_lines, start + 2)
                    if language == "console" and directive is None
                    else (),
                )
            )
        index = end + 1
    return blocks


def _pattern(expected: Sequence[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            # Spaces before a … are padding (an aligned column): the … takes any width of them.
            pieces = line.split(ELLIPSIS)
            pieces = [piece.rstrip(" ") for piece in pieces[:-1]] + pieces[-1:]
            parts.append(r"[^\n]*?".join(re.escape(piece) for piece in pieces))
            parts.append(r"\n")
    return re.compile("".join(parts))


def _clean(lines: Sequence[str]) -> list[str]:
    cleaned = [line.rstrip() for line in lines]
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    return cleaned


def _text(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether ``actual`` is what ``expected`` shows, ``…`` standing for what it leaves out."""
    return _pattern(_clean(expected)).fullmatch(_text(_clean(actual))) is not None


def _line_matches(expected: str, actual: str) -> bool:
    return expected != ELLIPSIS and matches([expected], [actual])


_DURATION = re.compile(r"\d+\.\d+ ms\b")


def regenerate(expected: Sequence[str], actual: Sequence[str]) -> list[str]:
    """New expected output for ``actual``, keeping what the page chose to show.

    The lines of ``expected`` that still match are kept, and anchor the rest: right after a
    ``…`` an anchor may be found further on, elsewhere it must be the very next line. Between two
    anchors, a page that showed every line gets the new lines; one that left lines out with ``…``
    keeps that ``…``, with as many new lines around it as the page showed there. Durations
    (``3.8 ms``), which no run repeats, are written ``… ms``. When the result does not match
    ``actual`` after all, it is the whole of ``actual``.
    """
    expected = _clean(expected)
    actual = [_DURATION.sub(f"{ELLIPSIS} ms", line) for line in _clean(actual)]
    if matches(expected, actual):
        return expected
    found: list[str] = []
    position = 0
    gap = False  # a … was seen since the last anchor
    before: list[str] = []  # lines since the last anchor that no longer match, before the …
    after: list[str] = []  # and after it

    def describe_region(end: int) -> None:
        region = actual[position:end]
        if not gap:
            found.extend(region)
            return
        head = region[: len(before)]
        tail = region[len(head) :][-len(after) :] if after else []
        found.extend(head)
        if len(region) > len(head) + len(tail):
            found.append(ELLIPSIS)
        found.extend(tail)

    for line in expected:
        if line == ELLIPSIS:
            gap = True
            continue
        if gap:
            anchor = next(
                (at for at in range(position, len(actual)) if _line_matches(line, actual[at])),
                None,
            )
        else:
            anchor = (
                position
                if position < len(actual) and _line_matches(line, actual[position])
                else None
            )
        if anchor is None:
            (after if gap else before).append(line)
            continue
        describe_region(anchor)
        found.append(line)
        position, gap, before, after = anchor + 1, False, [], []
    describe_region(len(actual))
    return found if matches(found, actual) else actual


# -- running ------------------------------------------------------------------------------------

_SHIM = '#!/bin/sh\nexec {command} "$@"\n'

#: ``pip`` as a page runs it: ``pip install [-e] DIR...`` into the page's site directory (the
#: first argument), offline and without dependencies: promptweave itself is this checkout.
_PIP = """
import subprocess
import sys

site, arguments = sys.argv[1], sys.argv[2:]
if not arguments or arguments[0] != "install":
    sys.exit("the docs' pip only installs: pip install [-e] DIR")
sources = [argument for argument in arguments[1:] if not argument.startswith("-")]
command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
command += ["--no-cache-dir", "--disable-pip-version-check", "--target", site, *sources]
sys.exit(subprocess.run(command).returncode)
"""


@attrs.define
class Workspace:
    """A page's directory, its ``bin`` of shims and its site directory for ``pip install``."""

    root: Path
    bin: Path
    site: Path

    @classmethod
    def create(cls, parent: Path) -> Workspace:
        root, tools = parent / "work", parent / "tools"
        bin_dir, site = tools / "bin", tools / "site"
        for directory in (root, bin_dir, site):
            directory.mkdir(parents=True)
        for copied in WORKSPACE_COPIES:
            shutil.copytree(ROOT / copied, root / copied)
        python = sys.executable
        (tools / "pip.py").write_text(_PIP, encoding="utf-8")
        shims = {
            "promptweave": f"{python} -m promptweave",
            "python": python,
            "python3": python,
            "pip": f"{python} {tools / 'pip.py'} {site}",
        }
        for name, command in shims.items():
            shim = bin_dir / name
            shim.write_text(_SHIM.format(command=command), encoding="utf-8")
            shim.chmod(0o755)
        return cls(root=root, bin=bin_dir, site=site)

    def installed(self) -> list[str]:
        """The distributions a page installed, by name."""
        return sorted(
            path.name.split("-", 1)[0].replace("_", "-") for path in self.site.glob("*.dist-info")
        )

    def environ(self) -> dict[str, str]:
        environ = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PROMPTWEAVE_", "PYTEST_", "COLUMNS", "NO_COLOR", "FORCE_COLOR"))
            or key == "PROMPTWEAVE_CACHE_DIR"  # the caller's caches, not the developer's
        }
        environ.update(
            PATH=f"{self.bin}{os.pathsep}{environ.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join([str(ROOT), str(self.site)]),
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
            COLUMNS="80",
            LC_ALL="C.UTF-8",
            TERM="dumb",
            # Entry points: only what the page installed, whatever the caller's environment holds.
            PROMPTWEAVE_LOAD_PLUGINS=",".join(self.installed()),
            # A page's own pytest run sees only the plugins it asks for.
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
            PYTEST_ADDOPTS="-p no:cacheprovider",
        )
        return environ

    def run(self, command: str, previous_status: int) -> tuple[int, list[str]]:
        completed = subprocess.run(
            ["bash", "-c", f"(exit {previous_status}); {command}"],
            cwd=self.root,
            env=self.environ(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_S,
            check=False,
        )
        output = completed.stdout.decode("utf-8", errors="replace")
        output = output.replace(str(self.root.resolve()), ELLIPSIS).replace(
            str(self.root), ELLIPSIS
        )
        return completed.returncode, output.split("\n")


def _page_results(
    page: Path, workspace: Workspace
) -> Iterator[tuple[Block, Command | None, int, list[str]]]:
    """Run the page's blocks in order; yield each command (or Python block) with its status and
    output."""
    for block in parse_page(page.read_text(encoding="utf-8")):
        if block.directive == "no-run":
            continue
        if block.directive == "file":
            target = workspace.root / block.argument
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.body, encoding="utf-8")
            continue
        if block.language == "python":
            script = workspace.root.parent / "tools" / f"block_{block.line}.py"
            script.write_text(block.body, encoding="utf-8")
            status, output = workspace.run(f"python {script}", 0)
            yield block, None, status, output
            continue
        status = 0
        for command in block.commands:
            status, output = workspace.run(command.text, status)
            yield block, command, status, output


def run_page(page: Path, scratch: Path) -> list[Mismatch]:
    """Run every block of ``page`` in a workspace under ``scratch``; what differed."""
    workspace = Workspace.create(scratch)
    found = []
    commands: list[tuple[Block, Command | None, int, list[str]]] = list(
        _page_results(page, workspace)
    )
    for index, (block, command, status, output) in enumerate(commands):
        if command is None:
            if status != 0:
                found.append(
                    Mismatch(
                        page=page,
                        line=block.line,
                        what="python block failed",
                        expected=(),
                        actual=tuple(_clean(output)),
                    )
                )
            continue
        if not matches(command.expected, output):
            found.append(
                Mismatch(
                    page=page,
                    line=command.line,
                    what=f"$ {command.text}",
                    expected=command.expected,
                    actual=tuple(_clean(output)),
                )
            )
        following = commands[index + 1][1] if index + 1 < len(commands) else None
        shown = following is not None and following.text.strip() == "echo $?"
        if status != 0 and not shown:
            found.append(
                Mismatch(
                    page=page,
                    line=command.line,
                    what=f"$ {command.text} exited with status {status}; "
                    "show it with '$ echo $?' after it",
                    expected=(),
                    actual=tuple(_clean(output)),
                )
            )
    return found


def update_page(page: Path, scratch: Path) -> bool:
    """Rewrite the expected output of ``page``'s console blocks from a run; ``True`` when the
    page changed."""
    workspace = Workspace.create(scratch)
    outputs = {
        command.line: output
        for _block, command, _status, output in _page_results(page, workspace)
        if command is not None
    }
    lines = page.read_text(encoding="utf-8").split("\n")
    new_lines = list(lines)
    # Replace from the bottom up, so the line numbers above stay valid.
    for block in reversed(parse_page("\n".join(lines))):
        for command in reversed(block.commands):
            if command.line not in outputs:
                continue
            first = command.line - 1 + command.text.count("\n") + 1
            last = first + len(command.expected)
            new_lines[first:last] = regenerate(command.expected, outputs[command.line])
    if new_lines == lines:
        return False
    page.write_text("\n".join(new_lines), encoding="utf-8")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.docs_run",
        description="Run the console and python blocks of the docs; --update rewrites outputs.",
    )
    parser.add_argument("pages", nargs="*", type=Path, help="pages (default: all)")
    parser.add_argument("--update", action="store_true", help="rewrite the expected outputs")
    arguments = parser.parse_args(argv)
    pages = [page.resolve() for page in arguments.pages] or PAGES
    failed = False
    for page in pages:
        with tempfile.TemporaryDirectory() as scratch:
            if arguments.update:
                changed = update_page(page, Path(scratch))
                print(f"{_shown(page)}: {'updated' if changed else 'unchanged'}")
                continue
            for mismatch in run_page(page, Path(scratch)):
                failed = True
                print(describe(mismatch))
    return 1 if failed else 0


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def describe(mismatch: Mismatch) -> str:
    """The mismatch as a report: where, what ran, and how the page would have to change (the
    diff to the output ``--update`` would write, which keeps every ``…`` that still matches)."""
    where = f"{_shown(mismatch.page)}:{mismatch.line}: {mismatch.what}"
    if not mismatch.expected:
        return "\n".join([where, *mismatch.actual])
    wanted = regenerate(mismatch.expected, mismatch.actual)
    diff = difflib.unified_diff(
        list(_clean(mismatch.expected)), wanted, "page", "run", lineterm="", n=2
    )
    return "\n".join([where, *diff])


if __name__ == "__main__":
    sys.exit(main())
