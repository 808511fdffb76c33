"""The web UI shows a restored workspace and what it lost (issue 17): a change written into
the workspace while the turn waits for approval was never committed, so the attempt that
resumes after the approval drops it — live, after a reload and from history, every client
is told which file."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import open_request, open_session, start_demo, ui_state_json, wait_converged
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_lost_uncommitted_change_is_shown(ui: Callable[..., Page], server: Server) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    request_id = open_request(server, sid)
    workspace = server.data / "workspaces" / sid
    wait_for(lambda: (workspace / "notes.md").exists(), timeout=30)
    # Parked: notes.md is committed. Written now, outside any step, these never are.
    (workspace / "scratch.txt").write_text("never committed\n")
    (workspace / "notes.md").write_text("edited behind the agent's back\n")
    page.click(f'[data-request-id="{request_id}"] button[data-option-id=allow_once]')
    card = page.wait_for_selector(".restore.warn", timeout=30_000)
    assert "Attempt 2: workspace restored" in card.inner_text()
    assert "Lost uncommitted changes: notes.md, scratch.txt" in card.inner_text()
    final = wait_converged(page, server, sid)
    (turn,) = json.loads(final)["turns"]
    assert turn["stop_reason"] == "end_turn"
    # The committed notes came back, and the command counted them, not the edit.
    assert not (workspace / "scratch.txt").exists()
    shell = next(c for c in turn["tool_calls"].values() if c["name"] == "shell")
    assert shell["output"].startswith("5 lines"), shell["output"]  # not the 1-line edit

    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    assert page.locator(".restore.warn").count() == 1
    assert ui_state_json(page) == final
    assert page.errors == []  # type: ignore[attr-defined]
