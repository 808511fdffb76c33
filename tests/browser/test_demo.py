"""The demo task driven from the web UI in Chromium: streaming, approval, sub-agent, artifact
download, usage; the composer's `if_busy`; and a screenshot of the finished session."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route

from tests._support.polling import wait_for
from tests.browser._ui import (
    client_id,
    expected_keys,
    open_request,
    open_session,
    server_state,
    start_demo,
    timeline_keys,
    ui_state_json,
    wait_converged,
)
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshot-demo.png"


def test_the_demo_task_from_the_ui(ui: Callable[..., Page], server: Server) -> None:
    page = ui(pace_deltas=True)
    me = client_id(page)
    page.fill("#new-title", "Report from the UI")
    page.click("button:has-text('New session')")
    page.wait_for_selector(".session[data-rendered]")
    sid = page.get_attribute(".session", "data-session-id")
    assert sid and sid.startswith("ses_")

    # The message shows at once, from the overlay, while its POST is held back; the
    # confirmed state does not have it until the server's action arrives.
    held: list[Route] = []
    page.route("**/v1/sessions/*/messages", lambda route: held.append(route))
    page.fill("#composer-text", "Write a short report")
    page.press("#composer-text", "Enter")  # Enter sends
    pending = page.wait_for_selector(".pending > li[data-status=sending]")
    assert "Write a short report" in pending.inner_text()
    assert page.input_value("#composer-text") == ""
    while not held:
        page.wait_for_timeout(20)
    assert json.loads(ui_state_json(page))["turns"] == []
    assert page.locator(".turn").count() == 0
    held[0].continue_()
    page.unroute("**/v1/sessions/*/messages")
    page.wait_for_selector(".turn .msg.user:has-text('Write a short report')")
    page.wait_for_selector(".pending > li", state="detached")

    # The approval card opens, and focus moves to it so the keyboard can answer.
    card = page.wait_for_selector(".request[data-status=open]")
    request_id = card.get_attribute("data-request-id")
    wait_for(lambda: page.evaluate("document.activeElement?.dataset?.requestId") == request_id, 10)
    assert "Run command" in (card.inner_text())

    # Mid-task, a message set to "don't send it" when busy is refused: rolled back, the text
    # handed back, shown as a notice; nothing reached the confirmed state.
    page.select_option("#composer-if-busy", "reject")
    page.fill("#composer-text", "Another thing")
    page.press("#composer-text", "Enter")
    page.wait_for_selector(".notice[data-code=session_busy]")
    assert page.input_value("#composer-text") == "Another thing"
    assert page.locator(".pending > li").count() == 0
    assert page.locator(".turn").count() == 1
    page.fill("#composer-text", "")

    page.click(f'[data-request-id="{request_id}"] button[data-option-id=allow_once]')
    resolution = page.wait_for_selector(f'[data-request-id="{request_id}"] .resolution')
    assert resolution.get_attribute("data-answered-by") == me
    assert "Allow" in resolution.inner_text() and "— you" in resolution.inner_text()

    # The sub-agent card fills: its own plan and steps, nested under it.
    worker = page.wait_for_selector(".worker[data-status=completed]", timeout=30_000)
    assert worker.query_selector(".worker-plan .plan-entry[data-status=completed]")
    assert worker.query_selector(".timeline.nested [data-kind=tool_call]")
    assert "Summary:" in worker.inner_text()

    # Streamed text appears while it streams (caret, aria-busy), then completes.
    page.wait_for_function(
        """() => [...document.querySelectorAll('.msg.assistant[data-status=streaming]')]
                 .some(m => m.getAttribute('aria-busy') === 'true'
                            && m.querySelector('.caret')
                            && m.querySelector('.text').textContent.length > 0)""",
        polling="raf",
    )
    page.wait_for_selector(".turn[data-state=ended]", timeout=30_000)
    final = wait_converged(page, server, sid)
    state = server_state(server, sid)
    assert (
        page.locator(".msg.assistant[data-status=complete] .text")
        .last.inner_text()
        .startswith("Done.")
    )

    # The artifact downloads, and its bytes are the ones the server registered.
    [artifact] = state["artifacts"].values()
    with page.expect_download() as download:
        page.click(f'.artifact[data-artifact-id="{artifact["artifact_id"]}"] a.download')
    path = download.value.path()
    assert download.value.suggested_filename == "report.md"
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == artifact["sha256"]
    with server.client() as http:
        registered = http.get(f"/v1/artifacts/{artifact['artifact_id']}").json()
    assert registered["sha256"] == artifact["sha256"]

    # Usage: all five token counts per model for the turn (sub-agents included) and session.
    usage = state["turns"][0]["usage_by_model"]["scripted:demo"]
    row = page.locator('.turn-usage table[data-scope=turn] tr.model:has-text("scripted:demo")')
    for field, value in usage.items():
        assert row.locator(f"td[data-field={field}]").inner_text() == f"{value:,}", field
    worker_usage = next(iter(state["turns"][0]["workers"].values()))["usage"]
    assert 0 < worker_usage["input_tokens"] < usage["input_tokens"]
    assert page.locator(".usage-panel td[data-field=input_tokens]").first.inner_text() == (
        f"{state['usage']['input_tokens']:,}"
    )

    # Plan panel, file change, order — and the confirmed state is the server's, to the byte.
    assert page.locator(".plan-panel .plan-entry[data-status=completed]").count() == 4
    assert page.locator("[data-kind=file_change]:has-text('notes.md')").count() == 1
    assert timeline_keys(page) == expected_keys(state)
    assert final == ui_state_json(page)
    assert page.inner_text("#connection") == "Live"
    assert page.errors == []  # type: ignore[attr-defined]


def test_screenshot_of_a_finished_demo_session(
    ui: Callable[..., Page], server: Server, tmp_path: Path
) -> None:
    sid = start_demo(server, title="Write a short report")
    with server.client() as http:
        request_id = open_request(server, sid)
        answer = {"client_id": "cli_api", "option_id": "allow_once"}
        assert (
            http.post(f"/v1/sessions/{sid}/input-requests/{request_id}/answer", json=answer)
        ).status_code == 200
    page = ui()
    open_session(page, server, sid)
    wait_converged(page, server, sid)
    # Open the cards a reader would: the sub-agent's output and one reasoning.
    page.locator(".worker .reasoning summary").first.click()
    page.wait_for_timeout(200)
    # A viewport as tall as the page, so the sticky bar and composer sit where they belong.
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": 1280, "height": height})
    page.wait_for_timeout(200)
    shot = tmp_path / "screenshot-demo.png"
    page.screenshot(path=str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    if os.environ.get("NUA_WRITE_SCREENSHOT"):
        shutil.copyfile(shot, SCREENSHOT)
    assert page.errors == []  # type: ignore[attr-defined]


def test_cancel_retry_and_interrupt_from_the_ui(ui: Callable[..., Page], server: Server) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    page.wait_for_selector(".request[data-status=open]")

    page.click("button:has-text('Cancel turn 1')")
    page.wait_for_selector(".turn[data-state=ended] .turn-state.state-cancelled")
    # A cancelled turn is never shown as waiting for input.
    page.wait_for_selector(".request[data-status=resolved] .resolution[data-outcome=cancelled]")
    assert page.locator(".request[data-status=open]").count() == 0

    page.click("button:has-text('Retry turn 1')")
    second = page.wait_for_selector(".turn:nth-child(2)")
    assert "Retry of turn 1" in second.inner_text()
    page.wait_for_selector(".turn:nth-child(2) .request[data-status=open]")

    # A message sent with "interrupt" while turn 2 waits: turn 2 is cancelled, turn 3 runs.
    page.select_option("#composer-if-busy", "interrupt")
    page.fill("#composer-text", "Start over")
    page.press("#composer-text", "Enter")
    page.wait_for_selector(".turn:nth-child(2)[data-state=ended] .state-cancelled")
    third = page.wait_for_selector(".turn:nth-child(3)")
    assert "Start over" in third.inner_text()
    third_turn = wait_for(lambda: server_state(server, sid)["turns"][2], timeout=10)
    assert third_turn["trigger"]["client_id"] == client_id(page)
    assert page.locator(".notice").count() == 0
    assert page.errors == []  # type: ignore[attr-defined]
