"""The one cattrs converter for user-written files (config, persona packs, overrides, turn files).

It forbids unknown keys and turns structuring errors into one line per problem with its key path,
so ``promptweave.toml: invalid value for type, expected int @ $.budget.chars`` says what to fix.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import tomllib
from pathlib import Path
from typing import Any, TypeVar

import cattrs
import cattrs.v

from framework._fields import Text
from framework.errors import ConfigError

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)


def _structure_datetime(value: Any, _type: type) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 time string, got {type(value).__name__}")
    return dt.datetime.fromisoformat(value)


def _structure_str(value: Any, _type: type) -> str:
    # Platform ids arrive as JSON numbers or strings; booleans and containers are mistakes.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return str(value)


def _structure_enum(value: Any, cls: type[enum.StrEnum]) -> enum.StrEnum:
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(member.value for member in cls)
        raise ValueError(f"expected one of {choices}, not {value!r}") from None


def _structure_bool(value: Any, _type: type) -> bool:
    # TOML and JSON have real booleans; "maybe" or 1 is a mistake, not True.
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {type(value).__name__}")
    return value


converter.register_structure_hook(dt.datetime, _structure_datetime)
converter.register_structure_hook(bool, _structure_bool)
converter.register_unstructure_hook(dt.datetime, lambda value: value.isoformat())
converter.register_structure_hook(str, _structure_str)


def _structure_str_tuple(value: Any, _type: type) -> tuple[str, ...]:
    # cattrs would iterate a bare string into its characters: "images": "https://…" must be an
    # error, not 40 one-letter URLs.
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"expected a list of strings, not {value!r}")
    return tuple(_structure_str(item, str) for item in value)


converter.register_structure_hook_func(lambda cls: cls == tuple[str, ...], _structure_str_tuple)


def _structure_text(value: Any, _type: type) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


converter.register_structure_hook_func(lambda cls: cls == Text, _structure_text)
# A StrEnum is also a str: without its own hook it would take the str hook and skip validation.
converter.register_structure_hook(enum.StrEnum, _structure_enum)


def format_exception(exc: BaseException, type_: type | None) -> str:
    """cattrs' wording, except that a ValueError a record raised itself keeps its message (its
    validators and converters name the field and the rule)."""
    if isinstance(exc, ValueError) and type_ is None:
        return str(exc)
    if isinstance(exc, ValueError) and isinstance(type_, type) and issubclass(type_, enum.Enum):
        return str(exc)
    if isinstance(exc, ValueError) and str(exc).startswith("expected "):
        return str(exc)  # the project's own hooks say what they expected
    return cattrs.v.format_exception(exc, type_)


def structure(data: Any, cls: type[T], source: str, error: type[ConfigError] = ConfigError) -> T:
    """Structure ``data`` into ``cls``; raise ``error`` with one line per problem."""
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            problems = cattrs.transform_error(exc, path="$", format_exception=format_exception)
        else:
            problems = [str(exc)]
        raise error(source, problems) from exc


def load_toml(path: Path, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """Read a TOML file; a syntax error names the file and the position."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise error(str(path), [f"cannot read: {exc.strerror or exc}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(str(path), [f"invalid TOML: {exc}"]) from exc


def load_json(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """Read a JSON file; a syntax error names the file, line and column."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(str(path), [f"cannot read: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise error(str(path), [f"not UTF-8: {exc}"]) from exc
    except json.JSONDecodeError as exc:
        raise error(
            str(path), [f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from exc
