"""``promptweave serve`` (``docs/cli.md``): the store it opens, where it listens, the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner
from dashboard_support import BOT, GROUP, NOW
from fastapi.testclient import TestClient

from promptweave.cli.main import cli


def _serve(monkeypatch: pytest.MonkeyPatch, *arguments: str) -> tuple[Any, dict[str, Any], str]:
    started: dict[str, Any] = {}

    def run(app: Any, **options: Any) -> None:
        started["app"], started["options"] = app, options

    monkeypatch.setattr(uvicorn, "run", run)
    result = CliRunner().invoke(cli, ["serve", *arguments])
    assert result.exit_code == 0, result.output
    return started["app"], started["options"], result.output


def test_serve_listens_on_the_loopback_read_only_by_default(
    monkeypatch: pytest.MonkeyPatch, replayed_store: Path
) -> None:
    app, options, output = _serve(
        monkeypatch, "--store", str(replayed_store), "--now", NOW.isoformat()
    )
    assert (options["host"], options["port"]) == ("127.0.0.1", 8765)
    assert "(read-only)" in output
    client = TestClient(app)
    assert f'data-group="{GROUP}"' in client.get("/").text
    forget = client.post(f"/groups/{BOT}/{GROUP}/learned/forget", json={"kind": "k", "key": "k"})
    assert forget.status_code == 403


def test_serve_with_a_token_allows_the_actions_that_carry_it(
    monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    monkeypatch.setenv("PROMPTWEAVE_DASHBOARD_TOKEN", "from-the-env")
    app, _, output = _serve(monkeypatch, "--store", str(store), "--port", "9999")
    assert "actions need the admin token" in output
    client = TestClient(app)
    url = f"/groups/{BOT}/{GROUP}/learned/forget"
    assert client.post(url, json={"kind": "k", "key": "k"}).status_code == 401
    missing = client.post(
        url, json={"kind": "k", "key": "k"}, headers={"Authorization": "Bearer from-the-env"}
    )
    assert missing.status_code == 404  # allowed, but there is no such item


def test_serve_without_a_store_file_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--store", str(tmp_path / "absent.sqlite3")])
    assert result.exit_code == 2
    assert "no store at" in result.output


def test_serve_warns_when_it_listens_beyond_the_loopback(
    monkeypatch: pytest.MonkeyPatch, replayed_store: Path
) -> None:
    _, options, output = _serve(monkeypatch, "--store", str(replayed_store), "--host", "0.0.0.0")
    assert options["host"] == "0.0.0.0"
    assert "anyone who reaches it reads every group's messages" in output
