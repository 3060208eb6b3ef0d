"""Small attrs helpers shared by the records: converters and validators with plain messages."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated, Any

import attrs

__all__ = [
    "FrozenMapping",
    "Text",
    "finite",
    "finite_seconds",
    "has_lone_surrogate",
    "one_of",
    "platform_id",
    "str_tuple",
]

#: A field holding what someone wrote (a message, a reply). Ids may arrive as JSON numbers and are
#: taken as strings, but a text must be a string: ``{"text": 1}`` is a mistake, not the text "1".
Text = Annotated[str, "text"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    """Freeze an iterable of strings (lists from JSON/TOML become tuples).

    A bare string is refused: it would silently become a tuple of its characters.
    """
    if isinstance(values, str):
        raise ValueError(f"expected a list of strings, not the string {values!r}")
    return tuple(values)


def one_of(*choices: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """A validator whose error reads ``role must be one of 'user', 'assistant', not 'bot'``."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices:
            allowed = ", ".join(repr(choice) for choice in choices)
            raise ValueError(f"{attribute.name} must be one of {allowed}, not {value!r}")

    return check


def finite(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    """A validator for a number that must be finite (``inf`` and ``nan`` are no values)."""
    if not (isinstance(value, int | float) and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")


def finite_seconds(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    """A validator for a duration: a finite number of seconds, 0 or more (``inf`` and ``nan``
    would pass a plain ``ge(0)`` one way or the other)."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{attribute.name} must be a finite number of seconds, 0 or more, not {value!r}"
        )


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds an unpaired UTF-16 surrogate (JSON can spell one as ``\\ud800``),
    which no store, hash or JSON output can encode."""
    return _LONE_SURROGATE.search(text) is not None


def platform_id(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A validator for an account, group or message id, or a tuple of them: no lone surrogate.

    Text has them dropped; an id is refused instead, since dropping them could make two ids
    one.
    """
    # The common case first: one id that is plain ASCII text cannot hold a surrogate.
    if type(value) is str and value.isascii():
        return
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, str) and has_lone_surrogate(item):
            raise ValueError(
                f"{attribute.name} {item!r} holds a lone surrogate (U+D800–U+DFFF), "
                "which is not text"
            )


class FrozenMapping(Mapping[str, Any]):
    """A read-only mapping for settings shared by every turn and plugin; unlike
    :class:`types.MappingProxyType` it pickles (settings travel to worker processes)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenMapping], tuple[dict[str, Any]]]:
        return (FrozenMapping, (self._data,))
