"""Prefix stability: how much of a request is a byte-identical prefix of the previous one.

A provider's prompt cache reuses the longest prefix it has seen before. For consecutive turns of
one conversation, :func:`compare_request_prefix` measures that prefix on the exact body bytes and
names where it ends: the first section of the system prompt or the first message that differs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "PrefixReport",
    "TextLabels",
    "canonical_json",
    "common_prefix_length",
    "compare_request_prefix",
    "labelled_segments",
]

#: JSON path of a string -> ``(label, piece)`` pairs whose pieces concatenate to that string.
TextLabels = Mapping[tuple[str | int, ...], Sequence[tuple[str, str]]]

_MESSAGE_LISTS = ("messages", "input")


#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` makes an encoder of these
#: settings on every call; the encoder keeps no state between calls, so one serves them all (the
#: same text, without the set-up, which is most of the cost of a short value).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def canonical_json(body: Any) -> str:
    """The exact text of a request body: compact, UTF-8 characters kept, key order kept."""
    return _CANONICAL.encode(body)


def _escaped(text: str) -> str:
    return _CANONICAL.encode(text)[1:-1]


def _is_mapping(value: Any) -> bool:
    # A body is made of dicts; the ABC's check is the slow path for any other mapping.
    return type(value) is dict or isinstance(value, Mapping)


def _label_for(path: tuple[str | int, ...], body: Mapping[str, Any]) -> str:
    if not path:
        return "body"
    head = path[0]
    if head in _MESSAGE_LISTS and len(path) > 1 and isinstance(path[1], int):
        index = path[1]
        item = body[str(head)][index]
        # A Responses input item without a role (a function call, its output) is named by type.
        kind = (item.get("role") or item.get("type", "?")) if _is_mapping(item) else "?"
        return f"message {index} ({kind})"
    if head == "system" and len(path) > 1:
        return f"system block {path[1]}"
    return str(head)


def labelled_segments(body: Mapping[str, Any], labels: TextLabels) -> list[tuple[str, str]]:
    """Serialize ``body`` as :func:`canonical_json` does, as labelled pieces.

    Strings at a path in ``labels`` are split into their labelled pieces (a system prompt into
    its sections); everything else is labelled by its message or top-level key.
    """
    out: list[tuple[str, str]] = []
    append = out.append
    # The paths that hold a labelled string, and every path above one: below any other path of
    # a message (or of a top-level key), everything has one label, so the subtree is one piece.
    above_labels = {path[:depth] for path in labels for depth in range(len(path) + 1)}

    def emit(value: Any, path: tuple[str | int, ...], label: str) -> None:
        # ``label`` is _label_for(path, body), worked out once by the caller.
        mapping = _is_mapping(value)
        if (
            path
            and path not in above_labels
            and len(path) >= (2 if path[0] in _ONE_LABEL_BELOW_ITEMS else 1)
            and (mapping or isinstance(value, list | tuple))
            and _plain_keys(value)
        ):
            append((label, _CANONICAL.encode(value)))
            return
        if mapping:
            append((label, "{"))
            for number, (key, item) in enumerate(value.items()):
                child = (*path, key)
                child_label = _label_for(child, body)
                append((child_label, f"{',' if number else ''}{json.dumps(key)}:"))
                emit(item, child, child_label)
            append((label, "}"))
        elif isinstance(value, list | tuple):
            append((label, "["))
            for number, item in enumerate(value):
                child = (*path, number)
                child_label = _label_for(child, body)
                if number:
                    # The comma belongs to the item it introduces: an appended message is
                    # reported as that message, not as the list.
                    append((child_label, ","))
                emit(item, child, child_label)
            append((label, "]"))
        elif isinstance(value, str) and path in labels:
            append((label, '"'))
            out.extend((piece_label, _escaped(piece)) for piece_label, piece in labels[path])
            append((label, '"'))
        else:
            append((label, _CANONICAL.encode(value)))

    emit(body, (), "body")
    return out


#: The top-level keys whose items are labelled one by one (``message 3 (user)``,
#: ``system block 1``); below any other top-level key everything has that key's label.
_ONE_LABEL_BELOW_ITEMS = frozenset({*_MESSAGE_LISTS, "system"})


#: What a body holds below its containers: the leaves of :func:`_plain_keys` (quick to tell).
_SCALARS = (str, int, float, type(None))


def _plain_keys(value: Any) -> bool:
    """Every key in ``value`` is an ASCII string, so the subtree serializes to the same text
    whole as key by key (a key piece is ``json.dumps(key)``, ASCII-escaped)."""
    if isinstance(value, _SCALARS):
        return True
    if _is_mapping(value):
        return all(
            type(key) is str and key.isascii() and _plain_keys(item) for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_plain_keys(item) for item in value)
    return True


@attrs.frozen(kw_only=True)
class PrefixReport:
    """How a request compares with the previous one of its conversation.

    :param common_prefix_bytes: length of the byte-identical prefix.
    :param request_bytes: size of this request's body.
    :param previous_bytes: size of the previous body.
    :param first_difference: where the prefix ends: ``"section current_time"``,
        ``"message 4 (user)"``, a top-level key such as ``"model"``; ``None`` when identical or
        when this request only extends the previous one.
    :param new_bytes: the bytes of what is new in this request: the current message with its
        per-turn part (the per-turn sections of the system prompt, the sidecar, the ambient
        excerpt, wording hints, the timeline's images) and the messages the previous request did
        not carry (the previous answer); for a tool round, the round it appends
        (``docs/cost.md``, "The layout of a request").
    """

    common_prefix_bytes: int
    request_bytes: int
    previous_bytes: int
    first_difference: str | None
    new_bytes: int = 0

    @property
    def uncached_bytes(self) -> int:
        """The bytes of this request that are not a prefix of the previous one."""
        return self.request_bytes - self.common_prefix_bytes

    @property
    def uncached_per_new_byte(self) -> float | None:
        """:attr:`uncached_bytes` per :attr:`new_bytes` (1.0: only what is new is processed
        again); ``None`` when nothing is new."""
        return self.uncached_bytes / self.new_bytes if self.new_bytes else None

    @property
    def ratio(self) -> float:
        """Share of this request that is a cached-prefix candidate."""
        return self.common_prefix_bytes / self.request_bytes if self.request_bytes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "common_prefix_bytes": self.common_prefix_bytes,
            "request_bytes": self.request_bytes,
            "previous_bytes": self.previous_bytes,
            "ratio": round(self.ratio, 4),
            "first_difference": self.first_difference,
            "new_bytes": self.new_bytes,
            "uncached_bytes": self.uncached_bytes,
        }


def common_prefix_length(previous: bytes, current: bytes) -> int:
    """How many leading bytes ``previous`` and ``current`` share."""
    # Binary search on slice equality: the comparisons run in C, not byte by byte in Python.
    low, high = 0, min(len(previous), len(current))
    while low < high:
        middle = (low + high + 1) // 2
        if previous[:middle] == current[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def compare_request_prefix(
    previous: bytes, segments: Sequence[tuple[str, str]], *, new_bytes: int = 0
) -> PrefixReport:
    """Compare a previous body's bytes with this request's labelled segments.

    :param new_bytes: the bytes of what is new in this request (:attr:`PrefixReport.new_bytes`).
    """
    current = b"".join(piece.encode() for _, piece in segments)
    common = common_prefix_length(previous, current)
    first_difference = None
    if common < len(current) and common < len(previous):
        offset = 0
        for label, piece in segments:
            offset += len(piece.encode())
            if offset > common:
                first_difference = label
                break
    return PrefixReport(
        common_prefix_bytes=common,
        request_bytes=len(current),
        previous_bytes=len(previous),
        first_difference=first_difference,
        new_bytes=new_bytes,
    )
