"""The web UI's automation page, its schedules: each with its next fire and recent runs
(from a real `nua serve` whose scheduler fires a per-second schedule), a run links to its
session, and a paused schedule says so."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def test_the_schedules_page_lists_next_fire_and_recent_runs(
    ui: Callable[..., Page], server: Server
) -> None:
    with server.client() as client:
        ticking = client.post(
            "/v1/schedules",
            json={"name": "ticker", "cron": "* * * * * *", "prompt": "tick {{ fire_time }}"},
        ).json()
        yearly = client.post(
            "/v1/schedules",
            json={"name": "new-year", "cron": "0 0 1 1 *", "timezone": "Asia/Tokyo",
                  "prompt": "happy new year"},
        ).json()  # fmt: skip
        assert client.post(f"/v1/schedules/{yearly['schedule_id']}/pause").status_code == 200
        wait_for(
            lambda: (
                len(client.get(f"/v1/schedules/{ticking['schedule_id']}/runs").json()["runs"]) >= 2
            ),
            timeout=30,
        )
    page = ui()
    page.click("nav >> text=Automation")
    ticker = f'.schedules li[data-schedule-id="{ticking["schedule_id"]}"]'
    page.wait_for_selector(f"{ticker} .runs li")
    head = page.inner_text(f"{ticker} .schedule-head")
    assert "ticker" in head and "* * * * * *" in head and "UTC" in head
    assert "Next fire" in head
    paused = f'.schedules li[data-schedule-id="{yearly["schedule_id"]}"]'
    assert page.is_visible(f"{paused} [data-paused]")
    assert "Asia/Tokyo" in page.inner_text(paused)
    # The runs are the fires' own: the page's newest run is one the API lists (read after
    # the page drew it: a per-second schedule goes on firing meanwhile), with its session.
    slot = page.get_attribute(f"{ticker} .runs li", "data-fire-time")
    with server.client() as client:
        runs = client.get(f"/v1/schedules/{ticking['schedule_id']}/runs").json()["runs"]
    run = next(r for r in runs if r["fire_time"] == slot)
    link = page.get_attribute(f'{ticker} .runs li[data-fire-time="{slot}"] a', "href")
    assert link == f"#/s/{run['session_id']}"
    page.click(f'{ticker} .runs li[data-fire-time="{slot}"] a')
    page.wait_for_selector(f'.session[data-session-id="{run["session_id"]}"]')
    with server.client() as client:
        client.post(f"/v1/schedules/{ticking['schedule_id']}/pause")
    assert page.errors == []  # type: ignore[attr-defined]
