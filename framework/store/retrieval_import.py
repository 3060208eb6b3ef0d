"""Read retrieval data files (JSON, JSONL, Markdown, text) into a :class:`RetrievalBatch`.

Formats are in ``docs/retrieval.md``, "Data formats". Every record is validated with the project's
cattrs converter; every problem is reported with its file, line and field, and nothing is written
unless every file is valid (the batch is then written in one transaction).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import cattrs

from promptweave._convert import TOO_DEEP, converter, format_exception, parse_json, shallow
from promptweave.errors import PromptweaveError
from promptweave.store.retrieval import (
    BehaviorRecord,
    ExpressionPairRecord,
    KnowledgeDocument,
    MemoryRecord,
    PersonFactRecord,
    RelationshipRecord,
    RetrievalBatch,
    RetrievalStore,
    RhythmRecord,
    SummaryRecord,
)
from promptweave.text.sanitize import strip_lone_surrogates

__all__ = [
    "AUTO_KIND",
    "DOCUMENT_SUFFIXES",
    "KINDS",
    "RetrievalImportError",
    "import_files",
    "read_files",
]

#: Each kind: the record a line becomes and the batch field it goes to.
KINDS: Mapping[str, tuple[type[Any], str]] = {
    "memories": (MemoryRecord, "memories"),
    "knowledge": (KnowledgeDocument, "knowledge"),
    "relationships": (RelationshipRecord, "relationships"),
    "person_facts": (PersonFactRecord, "person_facts"),
    "expression_pairs": (ExpressionPairRecord, "expression_pairs"),
    "rhythm_baselines": (RhythmRecord, "rhythms"),
    "behavior_strategies": (BehaviorRecord, "strategies"),
    "topic_summaries": (SummaryRecord, "summaries"),
}
#: Tell each file's kind from its name (``memories.jsonl``; ``.md``/``.txt``: knowledge).
AUTO_KIND = "auto"
DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
DATA_SUFFIXES = (".json", ".jsonl")
MAX_PROBLEMS = 50


class RetrievalImportError(PromptweaveError):
    """One or more import files are invalid; nothing was imported.

    :param problems: every problem, one line each, naming the file, the line and the field; the
        message shows the first :data:`MAX_PROBLEMS` of them.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"… and {len(problems) - MAX_PROBLEMS} more problems")
        super().__init__("\n".join(shown))


def _json_array(text: str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, element)`` for each element of a top-level JSON array."""
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if text[position : position + 1] != "[":
        raise ValueError(
            f"line {text.count(chr(10), 0, position) + 1}: expected a JSON array of objects"
        )
    position = _skip_space(text, position + 1)
    if text[position : position + 1] == "]":
        return
    # Lines are counted as the reader moves on, so a large array stays linear to read.
    line, counted = 1, 0
    while True:
        line += text.count("\n", counted, position)
        counted = position
        try:
            element, position = decoder.raw_decode(text, position)
            element = shallow(element)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {exc.lineno}: invalid JSON: {exc.msg}") from exc
        except (RecursionError, ValueError):
            raise ValueError(f"line {line}: invalid JSON: {TOO_DEEP}") from None
        yield line, _clean(element)
        position = _skip_space(text, position)
        mark = text[position : position + 1]
        if mark == "]":
            return
        if mark != ",":
            line = text.count("\n", 0, position) + 1
            raise ValueError(f"line {line}: expected ',' or ']' in the JSON array")
        position = _skip_space(text, position + 1)


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n\ufeff":
        position += 1
    return position


def _clean(value: Any) -> Any:
    """Drop lone surrogates (JSON may spell them as escapes) from every string of ``value``."""
    if isinstance(value, str):
        return strip_lone_surrogates(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    return value


def _json_lines(text: str) -> Iterator[tuple[int, Any]]:
    # Only "\n" ends a line: str.splitlines() would also split on U+2028 inside a JSON string.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            data = parse_json(line)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"line {number}: invalid JSON at column {exc.colno}: {exc.msg}"
            ) from exc
        except ValueError as exc:
            raise ValueError(f"line {number}: invalid JSON: {exc}") from exc
        yield number, _clean(data)


def _structure(
    data: Any, record: type[Any], defaults: Mapping[str, str]
) -> tuple[Any | None, list[str]]:
    if not isinstance(data, dict):
        return None, [f"expected a JSON object, got {type(data).__name__}"]
    try:
        return converter.structure({**defaults, **data}, record), []
    except cattrs.BaseValidationError as exc:
        problems = cattrs.transform_error(exc, path="$", format_exception=format_exception)
    except (ValueError, TypeError) as exc:
        problems = [str(exc)]
    hints = {
        "$.bot_id": "give --bot or a bot_id field",
        "$.group_id": "give --group or a group_id field",
    }
    return None, [
        next((f"{p} ({hint})" for field, hint in hints.items() if p.endswith(field)), p)
        for p in problems
    ]


def _read_one(kind: str, path: Path, defaults: Mapping[str, str], problems: list[str]) -> list[Any]:
    record, _field = KINDS[kind]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return []
    suffix = path.suffix.lower()
    if suffix in DOCUMENT_SUFFIXES:
        if kind != "knowledge":
            problems.append(f"{path}: a {suffix} file can only be imported as knowledge")
            return []
        data = {"source": path.name, "text": text}
        if suffix == ".txt":
            data["title"] = path.stem
        document, found = _structure(data, KnowledgeDocument, defaults)
        problems.extend(f"{path}: {problem}" for problem in found)
        return [] if document is None else [document]
    if suffix not in DATA_SUFFIXES:
        problems.append(f"{path}: unsupported file type {suffix or '(none)'}; use .json or .jsonl")
        return []
    records = []
    try:
        for line, data in (_json_lines if suffix == ".jsonl" else _json_array)(text):
            value, found = _structure(data, record, defaults)
            problems.extend(f"{path}: line {line}: {problem}" for problem in found)
            if value is not None:
                records.append(value)
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
    return records


def _kind_of(path: Path) -> str | None:
    if path.suffix.lower() in DOCUMENT_SUFFIXES:
        return "knowledge"
    stem = path.name.split(".", 1)[0]
    return stem if stem in KINDS else None


def _expand(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.suffix.lower() in (*DOCUMENT_SUFFIXES, *DATA_SUFFIXES)
            )
        else:
            yield path


def read_files(
    kind: str,
    paths: Sequence[Path],
    *,
    bot_id: str | None = None,
    group_id: str | None = None,
) -> RetrievalBatch:
    """Read and validate ``paths`` as ``kind`` (or :data:`AUTO_KIND`).

    :param bot_id: the bot of records that name none.
    :param group_id: the group of records that name none (``""``: the private-chat scope).
    :raises RetrievalImportError: one line per problem, naming file, line and field.
    """
    if kind != AUTO_KIND and kind not in KINDS:
        known = ", ".join([*KINDS, AUTO_KIND])
        raise RetrievalImportError([f"unknown kind {kind!r}; use one of {known}"])
    defaults = {
        key: value
        for key, value in (("bot_id", bot_id), ("group_id", group_id))
        if value is not None
    }
    problems: list[str] = []
    fields: dict[str, list[Any]] = {field: [] for _record, field in KINDS.values()}
    expanded = list(_expand(paths))
    if not expanded:
        names = ", ".join(str(path) for path in paths)
        raise RetrievalImportError(
            [
                f"{names}: no file to import (directories are searched for "
                f"{', '.join((*DATA_SUFFIXES, *DOCUMENT_SUFFIXES))} files)"
            ]
        )
    for path in expanded:
        file_kind = _kind_of(path) if kind == AUTO_KIND else kind
        if file_kind is None:
            problems.append(
                f"{path}: cannot tell the kind from the name; name it after a kind "
                f"({', '.join(KINDS)}), for example memories.jsonl"
            )
            continue
        if not path.exists():
            problems.append(f"{path}: no such file")
            continue
        fields[KINDS[file_kind][1]].extend(_read_one(file_kind, path, defaults, problems))
    if problems:
        raise RetrievalImportError(problems)
    return RetrievalBatch(**{name: tuple(values) for name, values in fields.items()})


def import_files(
    store: RetrievalStore,
    kind: str,
    paths: Sequence[Path],
    *,
    bot_id: str | None = None,
    group_id: str | None = None,
) -> dict[str, int]:
    """Validate ``paths`` and write them to ``store`` in one transaction: all or nothing.

    :returns: how many records of each kind were written.
    :raises RetrievalImportError: a file is invalid; nothing was written.
    """
    batch = read_files(kind, paths, bot_id=bot_id, group_id=group_id)
    written = store.write(batch)
    return {name: count for name, count in written.items() if count}
