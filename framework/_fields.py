"""Small attrs helpers shared by the records: converters and validators with plain messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

import attrs

__all__ = ["Text", "one_of", "str_tuple"]

#: A field holding what someone wrote (a message, a reply). Ids may arrive as JSON numbers and are
#: taken as strings, but a text must be a string: ``{"text": 1}`` is a mistake, not the text "1".
Text = Annotated[str, "text"]


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
