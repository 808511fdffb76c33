"""The web UI as the operator's console (docs/web.md, "The console"), against one real
`nua serve` with real data: plugins published and released, deployments (one reaching a
remote MCP server through the gateway with a credential), secrets, a hook with an
accepted and a refused delivery, a schedule, demo sessions waiting for input, usage, and
the gateway's audit of real calls.

Each page: it renders the server's data, one action works from the page, a viewer sees
no button for what they may not do and a request forged from their page is refused, axe
finds no serious violation, and its controls are reachable by keyboard.
`NUA_WRITE_SCREENSHOT=1` refreshes docs/console-*.png.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from opennua.automation import sign
from tests._support.plugins import publish_helper, release_helper
from tests._support.polling import wait_for
from tests.browser._a11y import reach_by_keyboard, serious_violations
from tests.browser._ui import nua, open_ui, send_message
from tests.e2e._proc import FakeProvider, Reply, Server
from tests.gateway._flows import ended
from tests.gateway.conftest import Remote, plugin_dir, start_remote

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
UNLISTED = 9  # a port no deployment lists: the egress proxy refuses it


def _scripts(remote: Remote) -> dict[str, list[Reply]]:
    # A shell command in the sandbox: one connection the deployment lists, one it does not.
    curl = "curl -sS --noproxy '' -o /dev/null http://127.0.0.1:{}/"
    fetch = f"{curl.format(remote.port)}; {curl.format(UNLISTED)}; true"
    return {
        "use the notes": [
            Reply(calls=[("notes__lookup", {"word": "durable"})]),
            Reply(calls=[("notes__broken", {})]),
            Reply(text="done"),
        ],
        "fetch through the proxy": [Reply(calls=[("shell", {"command": fetch})]), Reply(text="ok")],
    }


@dataclass
class World:
    server: Server
    remote: Remote
    workspace_id: str
    viewer_token: str
    hook: dict[str, Any]
    waiting: str  # a demo session waiting for an approval


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("console")
    remote = start_remote(f"canary-{os.urandom(12).hex()}", folder)
    provider = FakeProvider(_scripts(remote)).start()
    data = folder / "data"
    data.mkdir()
    env = provider.env() | {"NUA_DEMO_STEP_DELAY": "0.05"}
    server = Server(data, model="openai:fake", env=env).start()
    try:
        yield _populate(server, remote, folder)
    finally:
        server.stop()
        remote.proc.terminate()
        remote.proc.wait(10)
        provider.stop()


def _populate(server: Server, remote: Remote, folder: Path) -> World:
    root = plugin_dir(folder / "plugin", remote.url, egress=["127.0.0.1"])
    (root / "commands").mkdir()
    (root / "commands" / "hello.md").write_text("Say hello.\n")
    (root / "output-styles").mkdir()
    (root / "output-styles" / "terse.md").write_text("Be terse.\n")  # not run: said
    assert nua(server, "plugin", "publish", str(root)).returncode == 0
    assert nua(server, "plugin", "release", "notes-agent", "1.0.0").returncode == 0
    with server.client() as c:
        publish_helper(c, "1.0.0")
        release_helper(c, "1.0.0")
        publish_helper(c, "1.1.0")
        assert c.put("/v1/secrets/notes-token", json={"value": remote.token}).status_code == 200
        spec = {
            "plugin": "notes-agent",
            "model": "openai:fake",
            "credentials": [{"server": "notes", "secret": "notes-token"}],
            "egress": [f"127.0.0.1:{remote.port}"],
        }
        assert c.put("/v1/deployments/notes", json=spec).status_code == 200, "notes"
        spec = {
            "plugin": "helper",
            "model": "scripted:demo",
            "limits": {"max_steps": 40},
            "egress": ["pypi.org:443", "files.pythonhosted.org:443"],
        }
        assert c.put("/v1/deployments/support", json=spec).status_code == 200
        workspace_id = c.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
        viewer = c.post("/v1/users", json={"name": "vera"}).json()
        member = f"/v1/workspaces/{workspace_id}/members/{viewer['principal_id']}"
        assert c.put(member, json={"role": "viewer"}).status_code == 200
        hook = c.post("/v1/hooks", json={"name": "orders", "prompt": "order {{ payload }}"})
        hook_doc = hook.json()
        schedule = {"name": "nightly", "cron": "0 3 * * *", "prompt": "tidy up"}
        assert c.post("/v1/schedules", json=schedule).status_code == 201
        # One real gateway flow: two calls audited (one ok, one failing), usage recorded.
        made = c.post("/v1/sessions", json={"deployment": "notes", "title": "notes run"})
        notes = made.json()["session_id"]
    send_message(server, notes, "use the notes")
    send_message(server, notes, "fetch through the proxy")  # two egress connections
    with server.client() as c:
        assert ended(c, notes, answer=True)["stop_reason"] == "end_turn"  # the shell approved
    # The hook: one delivery refused (no signature), one accepted.
    url = f"/v1/hooks/{hook_doc['hook_id']}"
    body = json.dumps({"order": 7}).encode()
    assert httpx.post(server.url + url, content=body, timeout=10).status_code == 401
    signed = sign(hook_doc["secret"], "msg_console", int(time.time()), body)
    assert httpx.post(server.url + url, content=body, headers=signed, timeout=10).status_code == 202
    waiting = _demo(server, "waiting for you")
    with server.client() as c:
        wait_for(lambda: len(c.get("/v1/audit").json()["items"]) >= 4, timeout=60)
    return World(server, remote, workspace_id, viewer["token"], hook_doc, waiting)


def _demo(server: Server, title: str) -> str:
    with server.client() as c:
        made = c.post("/v1/sessions", json={"deployment": "support", "title": title})
    sid: str = made.json()["session_id"]
    send_message(server, sid)
    wait_for(lambda: _state(server, sid)["open_input_requests"], timeout=60)
    return sid


def _state(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as c:
        state: dict[str, Any] = c.get(f"/v1/sessions/{sid}").json()["state"]
    return state


def _page(browser: Browser, world: World, route: str, *, viewer: bool = False) -> Page:
    page = open_ui(browser, world.server, token=world.viewer_token if viewer else None)
    page.goto(f"{world.server.url}/{route}")
    page.wait_for_selector("main [data-loaded]")
    return page


def _forged(page: Page, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """A request made from the page with its cookie, as a script in it could."""
    answer: dict[str, Any] = page.evaluate(
        """async ([method, path, body]) => {
            const r = await fetch(path, { method, headers: { "Content-Type": "application/json" },
                                          body: body === null ? undefined : JSON.stringify(body) });
            return { status: r.status, body: await r.json().catch(() => null) };
        }""",
        [method, path, body],
    )
    return answer


def _refused(answer: dict[str, Any]) -> None:
    assert answer["status"] == 403, answer
    assert answer["body"]["code"] == "insufficient_role", answer


def _clean(page: Page) -> None:
    assert serious_violations(page) == []
    assert page.errors == []  # type: ignore[attr-defined]


def _screenshot(page: Page, name: str) -> None:
    if os.environ.get("NUA_WRITE_SCREENSHOT"):
        page.evaluate("window.scrollTo(0, 0)")  # else the sticky bar is drawn mid-page
        page.screenshot(path=str(DOCS / f"console-{name}.png"), full_page=True)


def test_sessions_filters_pages_snapshot_and_live_badges(browser: Browser, world: World) -> None:
    server = world.server
    with server.client() as c:
        for n in range(55):  # more than a page
            assert c.post("/v1/sessions", json={"title": f"bulk {n:02}"}).status_code == 201
    live = _demo(server, "live badge")
    page = _page(browser, world, "#/")
    row = f'.sessions li[data-session-id="{live}"]'
    page.fill("#filter-q", "badge")
    page.press("#filter-q", "Enter")
    page.wait_for_selector(f"{row} [data-needs-input]")
    snapshot = _state(server, live)["snapshot_digest"].removeprefix("sha256:")[:12]
    assert "helper@1.0.0 · support" in page.inner_text(row) and snapshot in page.inner_text(row)
    # Answered elsewhere: the badge goes and the status moves, without a reload.
    request = _state(server, live)["open_input_requests"][0]["request_id"]
    with server.client() as c:
        answer = {"option_id": "allow_once", "client_id": "cli_api"}
        c.post(f"/v1/sessions/{live}/input-requests/{request}/answer", json=answer)
    page.wait_for_selector(f"{row} [data-needs-input]", state="detached", timeout=10_000)
    # Filters: needs input only, then one deployment; the keyset pages through the rest.
    page.fill("#filter-q", "")
    page.check("#filter-needs-input")
    page.wait_for_selector(f'.sessions li[data-session-id="{world.waiting}"]')
    assert page.eval_on_selector_all(".sessions li", "els => els.length") >= 1
    assert all(
        s == "requires_action"
        for s in page.eval_on_selector_all(".sessions li", "els => els.map(e => e.dataset.status)")
    )
    page.uncheck("#filter-needs-input")
    page.wait_for_function("() => document.querySelectorAll('.sessions li').length === 50")
    first = page.eval_on_selector_all(".sessions li", "els => els.map(e => e.dataset.sessionId)")
    page.click("text=Older sessions")
    page.wait_for_function("() => document.querySelector('.pager').textContent.includes('Page 2')")
    page.wait_for_function(
        "(ids) => ![...document.querySelectorAll('.sessions li')]"
        ".some(e => ids.includes(e.dataset.sessionId))",
        arg=first,
    )
    _screenshot(page, "sessions")
    assert reach_by_keyboard(page, "#filter-needs-input")
    _clean(page)

    viewer = _page(browser, world, "#/", viewer=True)
    assert viewer.query_selector("button:has-text('New session')") is None
    _refused(_forged(viewer, "POST", "/v1/sessions", {"title": "forged"}))
    # A session a viewer follows: no composer, no answer, no cancel; the server agrees.
    viewer.goto(f"{server.url}/#/s/{world.waiting}")
    viewer.wait_for_selector(f'.session[data-session-id="{world.waiting}"] .request')
    assert viewer.is_visible(".read-only")
    for control in ("form.composer", ".request button.option", "button.cancel", "button.retry"):
        assert viewer.query_selector(control) is None, control
    request = _state(server, world.waiting)["open_input_requests"][0]["request_id"]
    path = f"/v1/sessions/{world.waiting}/input-requests/{request}/answer"
    _refused(_forged(viewer, "POST", path, {"option_id": "allow_once", "client_id": "cli_v"}))
    assert serious_violations(viewer) == []
    viewer.context.close()
    page.context.close()


def test_plugins_versions_contents_release_and_a_cli_release_within_a_second(
    browser: Browser, world: World
) -> None:
    page = _page(browser, world, "#/plugins")
    listed = page.inner_text('tr[data-plugin="notes-agent"]')
    assert "1.0.0" in listed and "stable → 1.0.0" in listed
    page.click("a:text-is('helper')")
    page.wait_for_selector('.version-detail[data-version="1.0.0"]')
    versions = page.inner_text("table:has(caption:text('Versions'))")
    assert "1.1.0" in versions and "1.0.0" in versions and "owner" in versions
    with world.server.client() as c:
        digest = c.get("/v1/plugins/helper/versions/1.1.0").json()["digest"]
    assert digest.removeprefix("sha256:")[:12] in versions
    # Release from the page: a confirmation that says "later sessions only".
    page.select_option("#release-version", "1.1.0")
    page.click("button:has-text('Release…')")
    dialog = page.wait_for_selector("dialog[open]")
    assert "Later sessions only" in dialog.inner_text()
    page.click("dialog[open] button:has-text('Release')")
    page.wait_for_selector('tr[data-channel="stable"] .channel-version:text("1.1.0")')
    # A release made in the CLI shows within a second.
    done = nua(world.server, "plugin", "rollback", "helper")
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    page.wait_for_selector('tr[data-channel="stable"] .channel-version:text("1.0.0")', timeout=5000)
    assert time.monotonic() - started < 1.0
    # A version's contents: servers, requested egress and what opennua does not run.
    page.goto(f"{world.server.url}/#/plugins/notes-agent/1.0.0")
    page.wait_for_selector('.version-detail[data-version="1.0.0"]')
    detail = page.inner_text(".version-detail")
    assert "notes (remote)" in detail and "127.0.0.1" in detail
    assert "output-styles/: ignored: output styles shape Claude Code's terminal" in detail
    assert page.is_visible('.tree [data-path="commands/hello.md"]')
    _screenshot(page, "plugins")
    assert reach_by_keyboard(page, "button:has-text('Release…')")
    _clean(page)

    viewer = _page(browser, world, "#/plugins/helper", viewer=True)
    viewer.wait_for_selector(".version-detail[data-version]")
    assert viewer.query_selector("button:has-text('Release')") is None
    assert viewer.query_selector("button:has-text('Roll back')") is None
    path = "/v1/plugins/helper/channels/stable/release"
    _refused(_forged(viewer, "POST", path, {"version": "1.1.0"}))
    viewer.context.close()
    page.context.close()


def test_deployments_detail_and_a_form_the_server_validates(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/deployments/notes")
    spec = page.inner_text(".spec")
    assert "notes-agent on channel stable" in spec
    assert "notes: header Authorization from secret notes-token" in spec
    # Egress: the deployment's list is enforced; the plugin's own is a request beside it.
    assert page.get_attribute(".spec .egress", "data-egress") == f"127.0.0.1:{world.remote.port}"
    assert "127.0.0.1 (a request: the deployment's list above is what is enforced)" in spec
    assert world.remote.token not in page.content()
    page.goto(f"{world.server.url}/#/deployments/support")
    page.wait_for_selector(f'tr[data-session-id="{world.waiting}"]')  # running on it
    assert "max steps: 40" in page.inner_text(".spec")
    _screenshot(page, "deployment")
    # Create from the form: the server's validation answers, then a valid one is saved.
    page.goto(f"{world.server.url}/#/deployments/new")
    page.wait_for_selector("form.deployment-form")
    page.fill("#dep-name", "triage")
    page.select_option("#dep-plugin", "helper")
    page.fill("#dep-model", "no model here")
    page.click("button:has-text('Create')")
    problem = page.wait_for_selector(".problems [data-code]")
    assert problem.get_attribute("data-code") == "validation_error"
    assert "model" in page.inner_text(".problems")
    page.fill("#dep-model", "scripted:demo")
    page.fill("#dep-version", "1.1.0")
    page.click("button:has-text('Create')")
    page.wait_for_selector("section[data-page='Deployment triage'] .spec")
    assert "helper pinned at 1.1.0" in page.inner_text(".spec")
    # Edit: the form holds the saved spec; a change is a new digest.
    digest = page.inner_text(".spec code.digest")
    page.click("a:has-text('Edit')")
    page.wait_for_selector("form.deployment-form")
    assert page.input_value("#dep-version") == "1.1.0"
    page.fill("#dep-steps", "7")
    page.fill("#dep-egress", "pypi.org")  # no port: `nua deploy --egress` refuses it too
    page.click("button:has-text('Save')")
    page.wait_for_selector(".problems [data-code='validation_error']")
    assert "egress.0" in page.inner_text(".problems")
    page.fill("#dep-egress", "pypi.org:443\n10.0.0.0/8:5432")
    page.click("button:has-text('Save')")
    page.wait_for_selector("section[data-page='Deployment triage'] .spec :text('max steps: 7')")
    assert page.inner_text(".spec code.digest") != digest
    egress = page.get_attribute(".spec .egress", "data-egress")
    assert egress == "pypi.org:443 10.0.0.0/8:5432"
    assert reach_by_keyboard(page, "a:has-text('Edit')")
    page.goto(f"{world.server.url}/#/deployments")
    page.wait_for_selector('tr[data-deployment="triage"]')
    assert "helper pinned at 1.1.0" in page.inner_text('tr[data-deployment="triage"]')
    _clean(page)

    viewer = _page(browser, world, "#/deployments", viewer=True)
    assert viewer.query_selector("text=New deployment") is None
    viewer.goto(f"{world.server.url}/#/deployments/support")
    viewer.wait_for_selector(".spec")
    assert viewer.query_selector("a:has-text('Edit')") is None
    body = {"plugin": "helper", "model": "scripted:demo"}
    _refused(_forged(viewer, "PUT", "/v1/deployments/support", body))
    viewer.context.close()
    page.context.close()


def test_people_tokens_shown_once_and_revoked(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/people")
    members = page.inner_text("table:has(caption:text('Members'))")
    assert "owner" in members and "vera" in members and "viewer" in members
    page.fill("#token-name", "ci")
    page.click("button:has-text('Create token')")
    value = page.wait_for_selector("#new-token-value").input_value()
    assert value and "shown once" in page.inner_text(".reveal")
    token_id = page.get_attribute(".once", "data-token-id")
    row = f'tr[data-token-id="{token_id}"]'
    page.wait_for_selector(row)
    assert value not in page.inner_text(row)
    with httpx.Client(base_url=world.server.url, timeout=10) as c:
        assert c.get("/v1/whoami", headers={"Authorization": f"Bearer {value}"}).status_code == 200
        page.click("button:has-text('Done')")
        assert value not in page.content()  # shown once: gone from the page
        page.click(f"{row} button:has-text('Revoke')")
        page.click("dialog[open] button:has-text('Revoke')")
        page.wait_for_selector(f"{row} :text('revoked')")
        assert c.get("/v1/whoami", headers={"Authorization": f"Bearer {value}"}).status_code == 401
    assert reach_by_keyboard(page, "button:has-text('Create token')")
    _clean(page)

    viewer = _page(browser, world, "#/people", viewer=True)
    assert viewer.query_selector("button:has-text('Save role')") is None
    assert viewer.query_selector("button:has-text('Remove')") is None
    assert viewer.query_selector("#agent-name") is None
    assert viewer.query_selector("table.member-tokens") is None
    assert not viewer.is_visible("section.everyone")
    with world.server.client() as c:
        owner = c.get("/v1/whoami").json()["principal_id"]
    path = f"/v1/workspaces/{world.workspace_id}/members/{owner}"
    _refused(_forged(viewer, "PUT", path, {"role": "viewer"}))
    _refused(_forged(viewer, "DELETE", f"/v1/workspaces/{world.workspace_id}/tokens/{token_id}"))
    _refused(_forged(viewer, "PUT", f"/v1/admins/{owner}"))
    _refused(_forged(viewer, "POST", f"/v1/users/{owner}/disable"))
    viewer.context.close()
    page.context.close()


def test_people_server_admin_and_a_members_token_revoked_here(
    browser: Browser, world: World
) -> None:
    """A member's token revoked for this workspace only; a person made a server admin and
    disabled everywhere by a server admin: their tokens refused, their waiting turn revoked."""
    server = world.server
    with server.client() as c:
        dora = c.post("/v1/users", json={"name": "dora"}).json()
        member = f"/v1/workspaces/{world.workspace_id}/members/{dora['principal_id']}"
        assert c.put(member, json={"role": "member"}).status_code == 200
    auth = {"Authorization": f"Bearer {dora['token']}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=10) as d:
        laptop = d.post("/v1/tokens", json={"name": "laptop"}).json()
        sid = d.post("/v1/sessions", json={"deployment": "support"}).json()["session_id"]
        text = [{"type": "text", "text": "Write a short report"}]
        assert d.post(f"/v1/sessions/{sid}/messages", json={"content": text}).status_code == 202
    wait_for(lambda: _state(server, sid)["open_input_requests"], timeout=60)
    page = _page(browser, world, "#/people")

    row = f'tr[data-member-token-id="{laptop["token_id"]}"]'
    assert "dora" in page.inner_text(row)
    page.click(f"{row} button:has-text('Revoke laptop of dora here')")
    assert "other workspaces" in page.inner_text("dialog[open]")
    page.click("dialog[open] button:has-text('Revoke here')")
    page.wait_for_selector(f"{row} :text('revoked here')")
    with httpx.Client(base_url=server.url, timeout=10) as c:
        here = {"Authorization": f"Bearer {laptop['token']}"}
        assert c.get("/v1/whoami", headers=here).json()["workspaces"] == []
        assert c.get(f"/v1/sessions/{sid}", headers=here).status_code == 404

    row = f'section.everyone tr[data-principal-id="{dora["principal_id"]}"]'
    page.click(f"{row} button:has-text('Make dora a server admin')")
    page.click("dialog[open] button:has-text('Make server admin')")
    page.wait_for_selector(f"{row} [data-server-admin]")
    page.click(f"{row} button:has-text('Disable dora')")
    warning = page.inner_text("dialog[open]")
    assert "token" in warning and "refused" in warning and "ends revoked" in warning
    page.click("dialog[open] button:has-text('Disable')")
    page.wait_for_selector(f"{row} :text('disabled')")
    assert page.query_selector(f"{row} button") is None
    first = f'tr[data-member-token-id="{dora["token"].split(".")[1]}"]'  # nua.tok_….secret
    page.wait_for_selector(f"{first} :text('holder disabled')")
    assert page.query_selector(f"{first} button") is None
    with httpx.Client(base_url=server.url, headers=auth, timeout=10) as d:
        assert d.get("/v1/whoami").status_code == 401
    turn = wait_for(lambda: _state(server, sid)["turns"][-1]["stop_reason"], timeout=10)
    assert turn == "revoked"
    _screenshot(page, "people")
    assert reach_by_keyboard(page, "section.everyone tr:has-text('vera') button", presses=200)
    _clean(page)
    page.context.close()


def test_secrets_rotate_a_write_only_value(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/secrets")
    row = 'tr[data-secret="notes-token"]'
    page.wait_for_selector(row)
    assert "never" not in page.inner_text(row)  # the gateway used it
    before = page.get_attribute(f"{row} td:nth-child(3) time", "datetime")
    with world.server.client() as c:
        c.put("/v1/secrets/spare", json={"value": "old-spare-value"})
    page.wait_for_selector('tr[data-secret="spare"]')
    page.click("button:has-text('Rotate spare')")
    assert page.input_value("#secret-name") == "spare"
    assert page.evaluate("document.activeElement.id") == "secret-value"
    page.fill("#secret-value", "new-spare-value")
    page.click("button:has-text('Save secret')")
    page.wait_for_function("() => document.querySelector('#secret-value').value === ''")
    assert page.get_attribute(f"{row} td:nth-child(3) time", "datetime") == before
    content = page.content()
    assert "new-spare-value" not in content and world.remote.token not in content
    _screenshot(page, "secrets")
    _clean(page)

    viewer = _page(browser, world, "#/secrets", viewer=True)
    viewer.wait_for_selector(row)
    assert viewer.query_selector("button:has-text('Rotate')") is None
    assert viewer.query_selector("#secret-value") is None
    _refused(_forged(viewer, "PUT", "/v1/secrets/spare", {"value": "forged"}))
    viewer.context.close()
    page.context.close()


def test_automation_hooks_deliveries_refusals_and_pause(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/automation")
    hook = f'li[data-hook-id="{world.hook["hook_id"]}"]'
    page.wait_for_selector(f'{hook} [data-delivery-id="msg_console"] a')
    assert page.is_visible(f'{hook} .refusals [data-code="bad_signature"]')
    assert '"order"' not in page.inner_text(hook)  # never the payload
    page.click("button:has-text('Pause nightly')")
    page.wait_for_selector("li.schedule [data-paused]")
    _screenshot(page, "automation")
    assert reach_by_keyboard(page, "button:has-text('Resume nightly')")
    _clean(page)

    viewer = _page(browser, world, "#/automation", viewer=True)
    viewer.wait_for_selector("li.schedule [data-paused]")
    assert viewer.query_selector("button:has-text('Resume')") is None
    schedule = viewer.get_attribute("li.schedule", "data-schedule-id")
    _refused(_forged(viewer, "POST", f"/v1/schedules/{schedule}/resume"))
    viewer.context.close()
    page.context.close()


def test_usage_numbers_equal_nua_usage_for_the_same_period(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/usage")
    for by in ("deployment", "model", "principal"):
        page.select_option("#usage-by", by)
        page.wait_for_selector(f"table.totals[data-by='{by}'] tbody tr")
        since = page.get_attribute("table.totals", "data-since")
        assert since is not None
        cli = nua(world.server, "usage", "--by", by, "--since", since, "--json")
        assert cli.returncode == 0, cli.stderr
        expected = {str(i["key"]): i for i in json.loads(cli.stdout)["items"]}
        shown = page.eval_on_selector_all(
            "table.totals tbody tr",
            """rows => Object.fromEntries(rows.map(r => [r.dataset.key, Object.fromEntries(
                [...r.querySelectorAll('[data-field]')].map(c => [c.dataset.field,
                    c.dataset.field === 'cost_usd' ? c.title : c.textContent.replaceAll(',', '')])
            )]))""",
        )
        assert set(shown) == set(expected), by
        for key, item in expected.items():
            for field, value in shown[key].items():
                assert value == str(item[field]), (by, key, field)
    assert page.eval_on_selector_all(".chart canvas", "els => els.length") == 2
    page.select_option("#usage-period", "7d")
    page.wait_for_function(
        "() => document.querySelector('#chart-tokens').ariaLabel.includes('6 hours')"
    )
    _screenshot(page, "usage")
    _clean(page)
    viewer = _page(browser, world, "#/usage", viewer=True)  # reading usage is a viewer's right
    viewer.wait_for_selector("table.totals tbody tr")
    viewer.context.close()
    page.context.close()


def test_audit_filters_and_never_a_value(browser: Browser, world: World) -> None:
    page = _page(browser, world, "#/audit")
    page.wait_for_selector("table.audit tbody tr[data-kind='egress']")
    text = page.inner_text("table.audit")
    assert "lookup" in text and "notes-token" in text and "tool call" in text
    assert world.remote.token not in page.content()
    outcomes = page.eval_on_selector_all(
        "table.audit tbody tr", "r => r.map(e => e.dataset.outcome)"
    )
    assert "ok" in outcomes and len(set(outcomes)) > 1
    _screenshot(page, "audit")
    # The egress proxy's connections, by kind: host and port, bytes, allowed or why not.
    page.select_option("#audit-kind", "egress")
    page.click("button:has-text('Filter')")
    rows = "table.audit tbody tr"
    page.wait_for_function(
        f"() => [...document.querySelectorAll('{rows}')].every(e => e.dataset.kind === 'egress')"
    )
    allowed = page.inner_text(f"{rows}[data-outcome='ok']")
    assert "egress connection" in allowed and f"127.0.0.1:{world.remote.port}" in allowed
    assert "up " in allowed and "down " in allowed and "up 0 B" not in allowed
    refused = page.inner_text(f"{rows}[data-outcome='refused']")
    assert f"127.0.0.1:{UNLISTED}" in refused and "refused: egress_denied" in refused
    assert reach_by_keyboard(page, "#audit-kind")
    _clean(page)

    viewer = _page(browser, world, "#/", viewer=True)
    assert not viewer.is_visible("#nav a[href='#/audit']")  # not offered
    viewer.goto(f"{world.server.url}/#/audit")
    viewer.wait_for_selector("[role=alert] .notice")
    assert "your role" in viewer.inner_text("[role=alert]")
    assert _forged(viewer, "GET", "/v1/audit?kind=egress")["status"] == 403
    viewer.context.close()
    page.context.close()
