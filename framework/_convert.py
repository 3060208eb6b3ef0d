"""The one cattrs converter for user-written files (config, persona packs, overrides, turn files).

It forbids unknown keys and turns structuring errors into one line per problem with its key path,
so ``promptweave.toml: invalid value for type, expected int @ $.budget.chars`` says what to fix.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
import cattrs.gen
import cattrs.v

from promptweave._fields import Text
from promptweave.errors import ConfigError

T = TypeVar("T")

#: The deepest nesting of arrays and objects a JSON document read from a user may have. A turn
#: file needs about ten levels; a thousand would exhaust Python's stack in the parser.
MAX_JSON_DEPTH = 64
#: The range of an integer read from a file: what SQLite and Redis can store.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"

converter = cattrs.Converter(forbid_extra_keys=True)


def _kind(value: Any) -> str:
    """How a JSON or TOML reader would call ``value``'s type."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), "a number")


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


def _structure_int(value: Any, _type: type) -> int:
    # 1.5 must not become 1, nor true become 1, nor 10**30 reach an SQLite bind.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)  # worded by cattrs: "invalid value for type, expected int"
    if not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"expected an integer between -2**63 and 2**63-1, not {value}")
    return value


def _structure_float(value: Any, _type: type) -> float:
    # inf and nan pass every "ge(0)" or "le(1)" check one way or the other; no setting means them.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(value)  # worded by cattrs: "invalid value for type, expected float"
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, not {value!r}")
    return float(value)


def _record_hook(cls: type) -> Callable[[Any, type], Any]:
    """The structure hook of an attrs record: cattrs' own, after checking that the value is an
    object at all (cattrs would raise ``AttributeError`` on a string)."""
    structure_fields: Callable[[Any, type], Any] = cattrs.gen.make_dict_structure_fn(cls, converter)

    def structure_record(value: Any, type_: type) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected an object, got {_kind(value)}")
        return structure_fields(value, type_)

    return structure_record


converter.register_structure_hook(dt.datetime, _structure_datetime)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook_factory(attrs.has, _record_hook)
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
        # attrs' own validators raise ValueError(message, attribute, ...): the message alone.
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        return message
    if isinstance(exc, ValueError) and isinstance(type_, type) and issubclass(type_, enum.Enum):
        return str(exc)
    if isinstance(exc, ValueError) and str(exc).startswith("expected "):
        return str(exc)  # the project's own hooks say what they expected
    return cattrs.v.format_exception(exc, type_)


def structure(
    data: Any,
    cls: type[T],
    source: str,
    error: type[ConfigError] = ConfigError,
    path: str = "$",
) -> T:
    """Structure ``data`` into ``cls``; raise ``error`` with one line per problem.

    :param path: the key path of ``data`` in its file, when it is not the whole file.
    """
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            problems = cattrs.transform_error(exc, path=path, format_exception=format_exception)
        else:
            problems = [str(exc) if path == "$" else f"{exc} @ {path}"]
        raise error(source, problems) from exc


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> str:
    """``not UTF-8 at line 3 column 7 (byte 0xff)``: where a decoding error is, for a person."""
    before = data[: exc.start]
    line = before.count(b"\n") + 1
    column = len(before) - (before.rfind(b"\n") + 1) + 1
    return f"not UTF-8 at line {line} column {column} (byte 0x{data[exc.start]:02x})"


def read_text(path: Path, error: type[ConfigError] = ConfigError) -> str:
    """A user's UTF-8 text file; unreadable or not UTF-8 raises ``error`` naming the place."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(str(path), [f"cannot read: {exc.strerror or exc}"]) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(str(path), [not_utf8(data, exc)]) from exc


def load_toml(path: Path, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """Read a TOML file; a syntax error names the file and the position."""
    text = read_text(path, error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(str(path), [f"invalid TOML: {exc}"]) from exc


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break
        pending.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str) -> Any:
    """``json.loads``, refusing a document nested deeper than :data:`MAX_JSON_DEPTH`.

    :raises json.JSONDecodeError: not JSON.
    :raises ValueError: nested too deeply (the message says so).
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    return shallow(data)


def shallow(data: Any) -> Any:
    """``data`` when it nests at most :data:`MAX_JSON_DEPTH` levels deep.

    :raises ValueError: it nests deeper.
    """
    if json_depth(data) > MAX_JSON_DEPTH:
        raise ValueError(TOO_DEEP)
    return data


def load_json(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """Read a JSON file; a syntax error names the file, line and column."""
    text = read_text(path, error)
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise error(
            str(path), [f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from exc
    except ValueError as exc:
        raise error(str(path), [f"invalid JSON: {exc}"]) from exc
