"""The web UI logs a person in with their own token (the form), shows who is signed in,
and shows who answered each request; a revoked token ends the login."""

from __future__ import annotations

from typing import Any

import pytest

from tests._support.polling import wait_for
from tests.browser._ui import open_session
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def _alice(server: Server) -> dict[str, Any]:
    with server.client() as http:
        workspace = http.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
        alice: dict[str, Any] = http.post("/v1/users", json={"name": "alice"}).json()
        http.put(
            f"/v1/workspaces/{workspace}/members/{alice['principal_id']}", json={"role": "member"}
        ).raise_for_status()
    return alice


def test_a_person_logs_in_with_their_token_and_sees_who_answered(
    browser: Any, server: Server
) -> None:
    alice = _alice(server)
    context = browser.new_context()
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("form[action='/login']")
        page.fill("#login-token", alice["token"])
        page.click("form[action='/login'] button[type=submit]")
        page.wait_for_selector(".list-page")
        whoami = page.wait_for_selector("#whoami:not([hidden])")
        assert "Signed in as alice" in whoami.inner_text()
        assert whoami.get_attribute("data-principal-id") == alice["principal_id"]
        assert alice["token"] not in page.url, "the token never travels in a URL"

        # The owner starts the demo; alice answers its approval from another client.
        bearer = {"Authorization": f"Bearer {alice['token']}"}
        with server.client() as http:
            sid = http.post("/v1/sessions", json={"title": "shared"}).json()["session_id"]
            http.post(
                f"/v1/sessions/{sid}/messages",
                json={"content": [{"type": "text", "text": "write the report"}]},
            ).raise_for_status()
            state = lambda: http.get(f"/v1/sessions/{sid}").json()["state"]  # noqa: E731
            rid = wait_for(lambda: state()["open_input_requests"], timeout=60)[0]["request_id"]
            http.post(
                f"/v1/sessions/{sid}/input-requests/{rid}/answer",
                json={"client_id": "cli_alice", "option_id": "allow_once"},
                headers=bearer,
            ).raise_for_status()
        open_session(page, server, sid)
        line = page.wait_for_selector('.resolution[data-answered-by="cli_alice"]')
        assert alice["principal_id"] in line.inner_text()

        # Revoking her token (she may; nobody else may touch a person's token) ends the
        # browser's login too.
        with server.client() as http:
            token_id = alice["token"].split(".")[1]
            http.delete(f"/v1/tokens/{token_id}", headers=bearer).raise_for_status()
        page.goto(server.url + "/")
        page.wait_for_selector("form[action='/login']")
    finally:
        context.close()
