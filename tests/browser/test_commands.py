"""The web UI and a plugin's slash commands: the composer lists them (from the session's
plugin version), a click fills `/name `, sending `/name args` runs it (the message shows
as typed; the server expands it), and an unknown `/name` is refused with the server's
list of commands."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import open_session, server_state
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

REVIEW = "---\ndescription: Review a pull request\nargument-hint: PR\n---\nReview #$1.\n"


def _publish_with_a_command(server: Server) -> None:
    manifest = {"name": "slasher", "version": "1.0.0", "description": "Has a command."}
    files = {
        ".claude-plugin/plugin.json": json.dumps(manifest).encode(),
        "commands/review-pr.md": REVIEW.encode(),
    }
    with server.client() as client:
        for data in files.values():
            octets = {"Content-Type": "application/octet-stream"}
            client.post("/v1/plugin-files", content=data, headers=octets).raise_for_status()
        listing = {
            p: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for p, d in files.items()
        }
        client.post("/v1/plugins", json={"files": listing}).raise_for_status()
        spec = {"plugin": "slasher", "version": "1.0.0", "model": "scripted:demo"}
        client.put("/v1/deployments/slash", json=spec).raise_for_status()


def test_the_composer_lists_sends_and_refuses_slash_commands(
    ui: Callable[..., Page], server: Server
) -> None:
    _publish_with_a_command(server)
    with server.client() as client:
        created = client.post("/v1/sessions", json={"deployment": "slash", "client_id": "cli_t"})
    sid = created.json()["session_id"]
    page = ui()
    open_session(page, server, sid)

    command = page.wait_for_selector(".composer-commands button.command")
    assert command.inner_text() == "/review-pr"
    assert command.get_attribute("title") == "Review a pull request — PR"
    command.click()
    assert page.input_value("#composer-text") == "/review-pr "
    page.type("#composer-text", "123")
    page.keyboard.press("Enter")
    turn = wait_for(lambda: (server_state(server, sid)["turns"] or [None])[0], timeout=30)
    assert turn["messages"][turn["user_message_id"]]["text"] == "/review-pr 123"
    page.wait_for_selector(".turn :text('/review-pr 123')")

    page.fill("#composer-text", "/nope now")
    page.keyboard.press("Enter")
    notice = page.wait_for_selector('.notice[data-code="unknown_command"]')
    assert "its commands: /review-pr" in notice.inner_text()
    assert page.input_value("#composer-text") == "/nope now"  # given back to fix
    assert len(server_state(server, sid)["turns"]) == 1
    assert page.errors == []  # type: ignore[attr-defined]
