"""A page that goes away, and a server that goes away: reload mid-task shows the same
timeline in the same order and keeps following; `kill -9` of the server mid-task, then a
restart: the page reconnects, shows the resumed attempt, and ends on the CLI's state."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import (
    deliver,
    expected_keys,
    nua_show_json,
    open_session,
    server_state,
    start_demo,
    statuses,
    timeline_keys,
    ui_state_json,
    wait_converged,
)
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(150)]


def _approve_in_page(page: Page) -> None:
    card = page.wait_for_selector(".request[data-status=open]", timeout=30_000)
    request_id = card.get_attribute("data-request-id")
    page.click(f'[data-request-id="{request_id}"] button[data-option-id=allow_once]')


# Both act "mid-task": between the sub-agent's first tool call and the turn's end. At the
# demo's 0.3 s a step that is about a second, which a loaded machine can spend on a reload
# or on drawing frames; a 1 s model step gives these tests several seconds.
@pytest.mark.parametrize("server", ["1.0"], indirect=True)
def test_reload_mid_task_keeps_the_timeline_and_follows_on(
    ui: Callable[..., Page], server: Server
) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    _approve_in_page(page)
    # Mid-task: the sub-agent is working.
    page.wait_for_selector(".worker[data-status=running] .timeline.nested [data-kind=tool_call]")
    before = timeline_keys(page)
    seq_before = json.loads(ui_state_json(page))["seq"]

    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    after = timeline_keys(page)
    # The same items in the same order (the task went on meanwhile: maybe more of them).
    assert after[: len(before)] == before
    assert json.loads(ui_state_json(page))["seq"] >= seq_before
    assert page.locator(".turn[data-state=ended]").count() == 0, "reloaded before the end"

    # ... and it keeps following live to the end, with no second load.
    page.wait_for_selector(".turn[data-state=ended]", timeout=30_000)
    final = wait_converged(page, server, sid)
    assert timeline_keys(page) == expected_keys(server_state(server, sid))
    assert final == ui_state_json(page)
    assert page.inner_text("#connection") == "Live"

    # A `resync` frame (the server dropped a slow subscriber) and a hole in the log both
    # fetch a snapshot and follow from there: the indicator says so, the state is the same.
    for event, data in (
        ("resync", {"seq": json.loads(final)["seq"]}),
        (
            "action",
            {
                "v": 1,
                "session_id": sid,
                "seq": json.loads(final)["seq"] + 2,
                "id": "act_x",
                "type": "turn.state",
                "ts": "2026-01-01T00:00:00Z",
                "data": {"state": "running"},
            },
        ),
    ):
        before = len(statuses(page))
        sources = page.evaluate("window.__nuaTest.sources.length")
        deliver(page, event, data)
        wait_for(lambda n=before: statuses(page)[n:][-1:] == ["live"], timeout=10)
        assert "resyncing" in statuses(page)[before:]
        assert page.evaluate("window.__nuaTest.sources.length") == sources + 1
        assert ui_state_json(page) == final
    assert page.errors == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("server", ["1.0"], indirect=True)
def test_kill9_mid_task_then_restart(ui: Callable[..., Page], server: Server) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    _approve_in_page(page)
    page.wait_for_selector(".worker[data-status=running]")
    assert page.locator(".turn[data-state=ended]").count() == 0
    seq_at_kill = json.loads(ui_state_json(page))["seq"]

    server.kill9()
    page.wait_for_selector("#connection[data-status=reconnecting]", timeout=10_000)
    server.start()  # same port and data directory

    # The page reconnects by itself (from the seq it holds) and follows the new attempt.
    page.wait_for_selector("#connection[data-status=live]", timeout=20_000)
    url = page.evaluate("window.__nuaTest.sources.at(-1).url")
    assert int(url.rsplit("after=", 1)[1]) >= seq_at_kill
    marker = page.wait_for_selector(".attempt.restarted", timeout=30_000)
    assert "resumed after restart" in marker.inner_text()
    page.wait_for_selector(".turn[data-state=ended]", timeout=60_000)
    final = wait_converged(page, server, sid)
    state = json.loads(final)
    assert state["seq"] > seq_at_kill
    turn = state["turns"][0]
    assert turn["stop_reason"] == "end_turn", turn["error"]
    restarted = [
        a
        for before, a in zip(turn["attempts"], turn["attempts"][1:], strict=False)
        if a["supervisor_id"] != before["supervisor_id"]
    ]
    assert restarted and all(a["resumed_from_checkpoint"] for a in restarted)
    assert page.locator(".attempt.restarted").count() == len(restarted)

    # The page's confirmed state is, byte for byte, what the CLI folds from the server.
    assert final == nua_show_json(server, sid)
    assert timeline_keys(page) == expected_keys(state)
    wait_for(lambda: page.inner_text("#connection") == "Live", timeout=5)
    assert page.errors == []  # type: ignore[attr-defined]
