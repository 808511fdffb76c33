"""The web UI shows an MCP server the turn went on without, and why (issue 30): live and
after a reload, the server's last stderr lines on the turn's timeline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.browser._ui import nua, open_session, send_message
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "flaky", "version": "1.0.0", "description": "a broken server"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    broken = "echo 'npm error code EAI_AGAIN' >&2; exit 1"
    servers = {"broken": {"command": "sh", "args": ["-c", broken]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


def test_an_unavailable_server_is_shown_with_why(
    ui: Callable[..., Page], server: Server, tmp_path: Path
) -> None:
    for args in (
        ("plugin", "publish", str(_plugin(tmp_path / "plugin"))),
        ("plugin", "release", "flaky", "1.0.0"),
        ("deploy", "flaky", "--plugin", "flaky", "--model", "scripted:demo"),
    ):
        done = nua(server, *args)
        assert done.returncode == 0, done.stdout + done.stderr
    with server.client() as http:
        created = http.post("/v1/sessions", json={"deployment": "flaky", "client_id": "cli_api"})
    sid: str = created.json()["session_id"]
    page = ui()
    open_session(page, server, sid)
    send_message(server, sid, "hello")
    card = page.wait_for_selector('[data-kind="mcp_unavailable"]', timeout=30_000)
    text = card.inner_text()
    assert "MCP server broken is unavailable" in text
    assert "npm error code EAI_AGAIN" in text
    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    assert page.locator('[data-kind="mcp_unavailable"]').count() == 1
    assert page.errors == []  # type: ignore[attr-defined]
