"""Fixtures of the NoneBot plugin's tests: every test here runs in the NoneBot session
(``nonebot_support.nonebot_started``, shared through the root conftest), and ``app`` is nonebug's
test app."""

from __future__ import annotations

import pytest
from nonebug import App

__all__ = ["app"]


@pytest.fixture(autouse=True)
def _in_the_nonebot_session(nonebot_started: None) -> None:
    """Start NoneBot (once per run) before any test of this folder."""


@pytest.fixture
def app(nonebot_started: None) -> App:
    """nonebug's test app: define a test case with it and run it."""
    return App()
