"""The one error style of the ``promptweave`` command (``docs/cli.md``, "Errors").

Every problem is one line, ``Error: FILE:LINE: field.path: problem``, with the parts that are
known. The library's errors say the same things in their own words (``turn.json: required field
missing @ $.bot.name``, ``memories.jsonl: line 2: …``); :func:`parse_problem` reads them into a
:class:`Problem`, and :func:`report_lines` prints each distinct problem once, with the lines it
occurred on collapsed into a count, an input value it quotes cut to
:data:`promptweave.text.sanitize.ECHO_MAX_CHARS` characters and the problem to
:data:`~promptweave.text.sanitize.ERROR_MAX_CHARS`. The exit status says who has to act: 2 for the command line
and the input files it names, 1 for the configuration (config file, persona pack, overrides,
plugins) and for what failed at run time, 3 when ``render`` refuses to print a request for a turn
the bot stays silent on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import click

from promptweave._patterns import lazy_pattern
from promptweave.cli.style import coloured
from promptweave.errors import ConfigError
from promptweave.text.sanitize import shorten_error

__all__ = [
    "EXIT_CONFIG",
    "EXIT_INPUT",
    "EXIT_PASS",
    "CommandError",
    "InputError",
    "PassRefused",
    "Problem",
    "config_error",
    "configured_file_problem",
    "input_error",
    "parse_problem",
    "problems_of",
    "report_lines",
    "require_file",
    "shown_path",
]

#: The configuration, a persona pack, an overrides file or a plugin is wrong, or the run failed.
EXIT_CONFIG = 1
#: The command line or an input file it names is wrong (click's usage errors exit 2 too).
EXIT_INPUT = 2
#: ``render --format openai|responses|anthropic`` for a turn the routing decided to pass.
EXIT_PASS = 3

#: At most this many distinct problems are printed; the rest are counted in one line.
MAX_SHOWN = 20

_SOURCE_LINE = lazy_pattern(r"^(?P<file>.+):(?P<line>\d+)$")
_LINE_PREFIX = lazy_pattern(r"^line (?P<line>\d+): ")
_JSON_AT = lazy_pattern(r"^invalid JSON at line (?P<line>\d+) column (?P<column>\d+): ")
_KEY_PATH = lazy_pattern(r" @ \$(?P<path>\S*)(?P<hint> \(.*\))?$")
_SUBSCRIPT = lazy_pattern(r"\['((?:[^'\\]|\\.)*)'\]")
_BARE_KEY = lazy_pattern(r"^[A-Za-z0-9_-]+$")


@attrs.frozen(kw_only=True)
class Problem:
    """One problem, located as precisely as the error that reported it allows.

    :param file: the file at fault, as the user named it.
    :param line: the line of ``file``, for line-oriented files and syntax errors.
    :param path: the key path inside the file's data (``bot.id``, ``messages[0].text``).
    :param text: what is wrong.
    """

    text: str
    file: str | None = None
    line: int | None = None
    path: str | None = None

    def where(self) -> str:
        """``FILE:LINE: path: ``, with the parts that are known."""
        place = ""
        if self.file is not None:
            place = self.file if self.line is None else f"{self.file}:{self.line}"
        elif self.line is not None:
            place = f"line {self.line}"
        parts = [part for part in (place, self.path) if part]
        return "".join(f"{part}: " for part in parts)


def _key_path(cattrs_path: str) -> str | None:
    """``$.bots['10001'].groups`` as ``bots.10001.groups``; ``$`` (the top level) as ``None``."""

    def key(match: re.Match[str]) -> str:
        name = match.group(1)
        return f".{name}" if _BARE_KEY.match(name) else f'."{name}"'

    path = _SUBSCRIPT.sub(key, cattrs_path).lstrip(".")
    return path or None


def _plain(text: str) -> str:
    """The library's wording for an unreadable file, in the command's words."""
    if text in ("cannot read: No such file or directory", "no such file"):
        return "no such file"
    if text == "cannot read: Is a directory":
        return "is a directory, not a file"
    return text.removeprefix("Error ")


def parse_problem(source: str | None, text: str) -> Problem:
    """Read one problem as the library words it: ``source`` is the file it names (``None`` when
    the text begins with it), ``text`` the problem, perhaps with ``line N:`` in front and
    ``@ $.key.path`` (and a hint in parentheses) at the end."""
    line: int | None = None
    if source is None and ": " in text and not text.startswith("line "):
        source, text = text.split(": ", 1)
    if source is not None and (match := _SOURCE_LINE.match(source)):
        source, line = match.group("file"), int(match.group("line"))
    if match := _LINE_PREFIX.match(text):
        line, text = int(match.group("line")), text[match.end() :]
    if match := _JSON_AT.match(text):
        line = int(match.group("line"))
        text = f"invalid JSON at column {match.group('column')}: {text[match.end() :]}"
    path = None
    if match := _KEY_PATH.search(text):
        path = _key_path(match.group("path"))
        text = text[: match.start()] + (match.group("hint") or "")
    return Problem(file=source, line=line, path=path, text=_plain(text))


def configured_file_problem(text: str) -> Problem:
    """A problem of a file the configuration names (an overrides file), which the library
    reports by its resolved, absolute path: shown as the user would type it from here."""
    return _relative(parse_problem(None, text))


def problems_of(exc: BaseException) -> list[Problem]:
    """The problems an exception of the library reports, one per line of its message."""
    # Imported on the error path only: the importer is no part of ``render``.
    from promptweave.store.retrieval_import import RetrievalImportError

    if isinstance(exc, ConfigError):
        return [parse_problem(exc.source, problem) for problem in exc.problems]
    if isinstance(exc, RetrievalImportError):
        return [parse_problem(None, problem) for problem in exc.problems]
    return [Problem(text=_plain(line)) for line in str(exc).splitlines() if line.strip()]


def _spans(lines: Sequence[int]) -> str:
    """``1, 2, 3, 7`` as ``1-3, 7``."""
    spans: list[list[int]] = []
    for number in sorted(set(lines)):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def report_lines(problems: Iterable[Problem]) -> list[str]:
    """One line per distinct problem, in the order first seen: a problem repeated on several
    lines of a file is printed once, at its first line, with the count and the lines."""
    grouped: dict[tuple[str | None, str | None, str], list[Problem]] = {}
    for problem in problems:
        grouped.setdefault((problem.file, problem.path, problem.text), []).append(problem)
    lines = []
    for found in grouped.values():
        first = found[0]
        numbers = [p.line for p in found if p.line is not None]
        if len(found) == 1:
            count = ""
        elif len(numbers) == len(found):
            count = f" ({len(found)} lines: {_spans(numbers)})"
        else:
            count = f" (×{len(found)})"
        lines.append(f"{first.where()}{shorten_error(first.text)}{count}")
    if len(lines) > MAX_SHOWN:
        hidden = len(lines) - MAX_SHOWN
        lines = [*lines[:MAX_SHOWN], f"… and {hidden} more problems"]
    return lines


class CommandError(click.ClickException):
    """Problems that end a command: each printed as ``Error: …`` on standard error, then the
    command exits with :data:`EXIT_CONFIG` (the configuration is wrong, or the run failed)."""

    exit_code = EXIT_CONFIG

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(report_lines(self.problems)))

    def show(self, file: IO[Any] | None = None) -> None:
        label = coloured("Error:", "red", bold=True)
        for line in report_lines(self.problems):
            click.echo(f"{label} {line}", err=file is None, file=file)


class InputError(CommandError):
    """The command line or an input file it names is wrong: exit status :data:`EXIT_INPUT`."""

    exit_code = EXIT_INPUT


class PassRefused(CommandError):
    """A request body asked for a turn the bot stays silent on: exit status :data:`EXIT_PASS`."""

    exit_code = EXIT_PASS


def input_error(found: BaseException | Sequence[Problem]) -> InputError:
    """An input file or the command line is wrong: exit status 2."""
    return InputError(found if isinstance(found, Sequence) else problems_of(found))


def config_error(found: BaseException | Sequence[Problem]) -> CommandError:
    """The configuration is wrong, or the run failed: exit status 1. The files a configuration
    names (a persona pack, an overrides file) are shown relative to here when they are below."""
    problems = found if isinstance(found, Sequence) else problems_of(found)
    return CommandError([_relative(problem) for problem in problems])


def _relative(problem: Problem) -> Problem:
    if problem.file is not None and Path(problem.file).is_absolute():
        return attrs.evolve(problem, file=shown_path(Path(problem.file)))
    return problem


def shown_path(path: Path) -> str:
    """``path`` as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def require_file(path: Path) -> None:
    """Fail with exit status 2 unless ``path`` is a file that exists."""
    if path.is_dir():
        raise input_error([Problem(file=str(path), text="is a directory, not a file")])
    if not path.exists():
        raise input_error([Problem(file=str(path), text="no such file")])
