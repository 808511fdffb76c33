"""The UI among other clients: two browsers racing to approve (first writer wins, both show
the same answer and who gave it), and the CLI and the UI on one session, both ways."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import (
    client_id,
    nua,
    nua_show_json,
    open_request,
    open_session,
    server_state,
    start_demo,
    ui_state_json,
    wait_converged,
)
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def test_two_browsers_race_to_approve(ui: Callable[..., Page], server: Server) -> None:
    sid = start_demo(server)
    request_id = open_request(server, sid)
    a, b = ui(), ui()
    for page in (a, b):
        open_session(page, server, sid)
        page.wait_for_selector(f'[data-request-id="{request_id}"][data-status=open] .options')
    ids = {client_id(a): a, client_id(b): b}
    assert len(ids) == 2, "each browser context is its own client"

    # Both clicks fire at the same instant (one browser, one clock), so both answers are on
    # the wire before either page can see the other's resolution.
    at = int(time.time() * 1000) + 400
    click = """([requestId, option, at]) => setTimeout(() => document.querySelector(
        `[data-request-id="${requestId}"] button[data-option-id="${option}"]`).click(),
        at - Date.now())"""
    a.evaluate(click, [request_id, "allow_once", at])
    b.evaluate(click, [request_id, "reject_once", at])

    shown = {}
    for page in (a, b):
        line = page.wait_for_selector(
            f'[data-request-id="{request_id}"][data-status=resolved] .resolution'
        )
        shown[client_id(page)] = (
            line.get_attribute("data-option-id"),
            line.get_attribute("data-answered-by"),
            line.inner_text().split(" — you")[0],
        )
    # One resolution, shown identically by both, naming the same answerer.
    assert len(set(shown.values())) == 1, shown
    option, winner, _ = next(iter(shown.values()))
    assert winner in ids
    resolved = server_state(server, sid)["turns"][0]["input_requests"][request_id]
    assert (resolved["option_id"], resolved["answered_by"]["client_id"]) == (option, winner)
    assert option == ("allow_once" if ids[winner] is a else "reject_once")

    # The loser's 409 reads as the outcome ("another client answered first"), not an error.
    loser = b if ids[winner] is a else a
    card = f'[data-request-id="{request_id}"]'
    assert loser.locator(f"{card} [data-lost=true]").count() == 1
    assert ids[winner].locator(f"{card} [data-lost=true]").count() == 0
    for page in (a, b):
        assert page.locator(".notice").count() == 0
        assert page.errors == []  # type: ignore[attr-defined]


def test_a_cli_session_in_the_ui_and_a_ui_session_in_the_cli(
    ui: Callable[..., Page], server: Server
) -> None:
    page = ui()

    # Started from the CLI: the list shows it waiting for input, the session view shows the
    # terminal's message and, once the CLI answers, its answer and the same final state.
    started = nua(
        server, "run", "Write a short report", "--title", "From the terminal", "--detach", "--json"
    )
    assert started.returncode == 0, started.stderr
    cli_sid = json.loads(started.stdout)["session_id"]
    page.goto(f"{server.url}/#/")
    row = page.wait_for_selector(
        f'.sessions li[data-session-id="{cli_sid}"] [data-needs-input]', timeout=30_000
    )
    assert row.is_visible()
    assert "From the terminal" in page.inner_text(f'.sessions li[data-session-id="{cli_sid}"]')
    page.click(f'.sessions li[data-session-id="{cli_sid}"] a')
    page.wait_for_selector(f'.session[data-session-id="{cli_sid}"][data-rendered]')
    assert page.inner_text(".turn .msg.user .who") == "User via cli_terminal"
    request_id = open_request(server, cli_sid)
    page.wait_for_selector(f'[data-request-id="{request_id}"][data-status=open]')
    answered = nua(server, "answer", cli_sid, request_id, "--option", "allow_once")
    assert answered.returncode == 0, answered.stderr
    line = page.wait_for_selector(f'[data-request-id="{request_id}"] .resolution')
    assert line.get_attribute("data-answered-by") == "cli_terminal"
    assert "— you" not in line.inner_text()
    assert wait_converged(page, server, cli_sid) == nua_show_json(server, cli_sid)

    # Started and answered in the UI: the CLI shows the same state, and a late CLI answer is
    # told the UI won.
    page.goto(f"{server.url}/#/")
    page.fill("#new-title", "From the browser")
    page.click("button:has-text('New session')")
    page.wait_for_selector(".session[data-rendered]")
    ui_sid = page.get_attribute(".session", "data-session-id")
    assert ui_sid
    page.fill("#composer-text", "Write a short report")
    page.press("#composer-text", "Enter")
    card = page.wait_for_selector(".request[data-status=open]", timeout=30_000)
    request_id = card.get_attribute("data-request-id") or ""
    page.click(f'[data-request-id="{request_id}"] button[data-option-id=allow_once]')
    final = wait_converged(page, server, ui_sid)
    assert final == nua_show_json(server, ui_sid)
    late = nua(server, "answer", ui_sid, request_id, "--option", "reject_once")
    assert late.returncode == 4, (late.returncode, late.stdout, late.stderr)
    assert client_id(page) in late.stdout + late.stderr
    wait_for(lambda: server_state(server, ui_sid)["seq"] == json.loads(ui_state_json(page))["seq"])
    assert page.errors == []  # type: ignore[attr-defined]
