"""The web UI shows external deliveries (a chat bridge's messages) apart from the turn:
each with its state, attempts and last error, updated live as the bridge reports."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page

from tests.browser._ui import open_session, start_demo
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def _report(server: Server, sid: str, **body: object) -> None:
    base = {"channel": "matrix", "target": "!room:hs", "kind": "card", "client_id": "cli_bridge"}
    with server.client() as http:
        response = http.post(f"/v1/sessions/{sid}/deliveries/dlv_card", json={**base, **body})
        assert response.status_code == 202, response.text


def test_the_side_panel_shows_a_delivery_retrying_then_sent(
    ui: Callable[..., Page], server: Server
) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    assert page.locator(".deliveries-panel").is_hidden()
    _report(server, sid, status="pending")
    error = {"code": "unreachable", "message": "connection refused"}
    _report(server, sid, status="retrying", attempts=1, error=error,
            next_attempt_at="2026-11-29T08:00:02Z")  # fmt: skip
    item = page.wait_for_selector('.delivery[data-delivery-id="dlv_card"][data-status=retrying]')
    text = item.inner_text()
    assert "matrix card → !room:hs" in text and "1 attempt" in text
    assert "connection refused" in text
    _report(server, sid, status="sent", attempts=2, event_id="$ev")
    item = page.wait_for_selector('.delivery[data-delivery-id="dlv_card"][data-status=sent]')
    assert "2 attempts" in item.inner_text() and "refused" not in item.inner_text()
    assert page.errors == []  # type: ignore[attr-defined]
