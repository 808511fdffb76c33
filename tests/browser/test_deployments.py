"""The web UI and deployments: the new-session form chooses a deployment, the session
header shows the snapshot the session runs, and the list shows status, input requests and
name@version from the list route alone (no session snapshot is fetched to draw it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests._support.plugins import publish_helper, release_helper
from tests.browser._ui import open_request, start_demo
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def test_new_session_on_a_deployment_and_the_list_from_the_list_route(
    ui: Callable[..., Page], server: Server
) -> None:
    with server.client() as client:
        v1 = publish_helper(client, "1.0.0")
        release_helper(client, "1.0.0")
        spec = {"plugin": "helper", "model": "scripted:demo"}
        assert client.put("/v1/deployments/support", json=spec).status_code == 200
    waiting = start_demo(server, title="waiting one")
    open_request(server, waiting)

    page = ui()
    snapshot_reads: list[str] = []
    page.on(
        "request",
        lambda r: (
            snapshot_reads.append(r.url)
            if "/v1/sessions/" in r.url and r.url.rstrip("/").count("/") == 5
            else None
        ),
    )
    page.reload()
    row = page.wait_for_selector(f'.sessions li[data-session-id="{waiting}"] [data-needs-input]')
    assert row.is_visible()
    item = page.inner_text(f'.sessions li[data-session-id="{waiting}"]')
    assert "default@" in item
    page.wait_for_timeout(4500)  # one list refresh
    assert snapshot_reads == [], "the list must not read session snapshots"

    page.wait_for_selector("#new-deployment option[value=support]", state="attached")
    page.fill("#new-title", "On support")
    page.select_option("#new-deployment", "support")
    page.click("button:has-text('New session')")
    page.wait_for_selector(".session[data-rendered]")
    sid = page.get_attribute(".session", "data-session-id")
    with server.client() as client:
        state = client.get(f"/v1/sessions/{sid}").json()["state"]
    assert state["deployment"] == "support" and state["plugin"]["digest"] == v1["digest"]
    head = page.inner_text(".session-head .snapshot")
    short = state["snapshot_digest"].removeprefix("sha256:")[:12]
    assert head == f"helper@1.0.0 · support · scripted:demo · {short}"
    assert page.errors == []  # type: ignore[attr-defined]
