"""Turn files: one turn in JSON (``docs/turn_file.md``), read by ``promptweave render``."""

from __future__ import annotations

from pathlib import Path

from framework._convert import load_json, structure
from framework.errors import TurnFileError
from framework.turn import Turn

__all__ = ["load_turn_file"]


def load_turn_file(path: Path) -> Turn:
    """Read a turn file; a malformed one raises :class:`framework.errors.TurnFileError` with one
    line per problem, naming the file and the key path."""
    data = load_json(path, TurnFileError)
    if not isinstance(data, dict):
        raise TurnFileError(str(path), ["the top level must be a JSON object"])
    return structure(data, Turn, str(path), TurnFileError)
