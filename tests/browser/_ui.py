"""Helpers shared by the browser tests: log a page in, read what it shows, compare with the
server (HTTP snapshot) and with the CLI (`nua show --json`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from playwright.sync_api import Browser, Page

from opennua.protocol import state_to_json
from tests._support.polling import wait_for
from tests.e2e._proc import Server

# Runs before the page's own scripts. It only slows the *delivery* of streamed deltas,
# like a slow network would: the scripted demo model commits a response's deltas in one
# transaction, so without it all of them reach the page within one frame.
PACE_DELTAS = """
(() => {
  const Real = window.EventSource;
  window.EventSource = class extends Real {
    addEventListener(type, listener, options) {
      if (type !== "action") return super.addEventListener(type, listener, options);
      let chain = Promise.resolve();
      return super.addEventListener(type, (event) => {
        const delay = JSON.parse(event.data).type === "message.delta" ? 60 : 0;
        chain = chain.then(() => new Promise((resolve) => setTimeout(() => {
          listener(event);
          resolve();
        }, delay)));
      }, options);
    }
  };
})();
"""


# Runs before the page's own scripts: keeps the page's EventSources within reach (so a test
# can deliver a frame the server would send) and records the connection indicator's states.
OBSERVE = """
(() => {
  const Real = window.EventSource;
  const test = (window.__nuaTest = { sources: [], statuses: [] });
  window.EventSource = class extends Real {
    constructor(...args) {
      super(...args);
      test.sources.push(this);
    }
  };
  document.addEventListener("DOMContentLoaded", () => {
    const el = document.getElementById("connection");
    new MutationObserver(() => test.statuses.push(el.dataset.status)).observe(el, {
      attributes: true,
      attributeFilter: ["data-status"],
    });
  });
})();
"""


def deliver(page: Page, event: str, data: dict[str, Any]) -> None:
    """Deliver an SSE frame to the page's current stream, as if the server had sent it."""
    page.evaluate(
        """([event, data]) => window.__nuaTest.sources.at(-1).dispatchEvent(
               new MessageEvent(event, { data: JSON.stringify(data) }))""",
        [event, data],
    )


def statuses(page: Page) -> list[str]:
    seen: list[str] = page.evaluate("window.__nuaTest.statuses")
    return seen


def open_ui(
    browser: Browser, server: Server, *, pace_deltas: bool = False, token: str | None = None
) -> Page:
    """A fresh browser context (own cookies, own client_id) logged in through the link, as
    the owner or as the holder of `token`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.set_default_timeout(30_000)
    context.add_init_script(OBSERVE)
    if pace_deltas:
        context.add_init_script(PACE_DELTAS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{server.url}/login?token={token or server.token}")
    page.wait_for_selector(".list-page")
    assert page.url == f"{server.url}/", "the login link lands on the UI"
    return page


def open_session(page: Page, server: Server, sid: str) -> None:
    page.goto(f"{server.url}/#/s/{sid}")
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')


def client_id(page: Page) -> str:
    value: str = page.evaluate("window.__nuaClientId")
    return value


def ui_state(page: Page) -> dict[str, Any]:
    raw = page.evaluate("window.__nuaState()")
    assert raw is not None, "no session open"
    parsed: dict[str, Any] = json.loads(raw)
    return parsed


def ui_state_json(page: Page) -> str:
    raw: str = page.evaluate("window.__nuaState()")
    return raw


def server_state(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as http:
        body: dict[str, Any] = http.get(f"/v1/sessions/{sid}").json()
    return body["state"]


def start_demo(server: Server, *, title: str = "demo", text: str = "Write a short report") -> str:
    sid = create_session(server, title=title)
    send_message(server, sid, text)
    return sid


def create_session(server: Server, *, title: str = "demo") -> str:
    with server.client() as http:
        created = http.post("/v1/sessions", json={"title": title, "client_id": "cli_api"})
    sid: str = created.json()["session_id"]
    return sid


def send_message(server: Server, sid: str, text: str = "Write a short report") -> None:
    body = {"client_id": "cli_api", "content": [{"type": "text", "text": text}]}
    with server.client() as http:
        assert http.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 202


def open_request(server: Server, sid: str) -> str:
    opened = wait_for(lambda: server_state(server, sid)["open_input_requests"], timeout=30)
    request_id: str = opened[0]["request_id"]
    return request_id


def wait_converged(page: Page, server: Server, sid: str, timeout: float = 60) -> str:
    """Wait until the last turn ended and the page holds the server's seq; return its JSON."""

    def settled() -> str | None:
        state = server_state(server, sid)
        if not state["turns"] or state["turns"][-1]["state"] != "ended":
            return None
        mine = ui_state_json(page)
        return mine if mine and json.loads(mine)["seq"] == state["seq"] else None

    converged: str = wait_for(settled, timeout=timeout, interval=0.2)
    return converged


def canonical(state: dict[str, Any]) -> str:
    return state_to_json(state)  # type: ignore[arg-type]


def timeline_keys(page: Page) -> list[str]:
    """Every drawn timeline item (nested sub-agent items included), in document order."""
    keys: list[str] = page.eval_on_selector_all(
        ".turn .timeline > li[data-key]", "els => els.map(e => e.dataset.key)"
    )
    return keys


def expected_keys(state: dict[str, Any]) -> list[str]:
    """The document order the UI must draw for a state: each timeline in order, a worker's
    items right after its card; a response's reasoning is drawn inside its message's card."""
    out: list[str] = []

    def walk(turn: dict[str, Any], timeline: list[dict[str, str]]) -> None:
        for ref in timeline:
            kind, item = ref["kind"], ref["id"]
            if kind == "reasoning" and item in turn["messages"]:
                continue
            out.append(f"{kind}:{item}")
            if kind == "worker":
                walk(turn, turn["workers"][item]["timeline"])

    for turn in state["turns"]:
        walk(turn, turn["timeline"])
    return out


def nua(
    server: Server, *args: str, client: str = "cli_terminal"
) -> subprocess.CompletedProcess[str]:
    """The real CLI against this server, as another client."""
    command = [sys.executable, "-m", "opennua.cli", "--url", server.url, "--data", str(server.data)]
    command += ["--client-id", client, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def nua_show_json(server: Server, sid: str) -> str:
    """`nua show --json`: the canonical state JSON, as the CLI folds it."""
    shown = nua(server, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()
