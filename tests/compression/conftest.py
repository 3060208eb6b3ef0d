"""Fixtures of the summary-compression tests: a runtime on SQLite (compression reads and writes the
session store through the turn)."""

from __future__ import annotations

from runtime_fixtures import sqlite_runtime

__all__ = ["sqlite_runtime"]
