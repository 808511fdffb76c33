"""The gateway's end-to-end flows, shared by the tests that run them: a `nua serve` whose
model is a FakeProvider scripted to call the notes server's tools, a session asked, its
turn awaited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Reply, Server

from .conftest import Remote, plugin_dir

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
SHELL_PROBE = "env; cat /proc/self/environ | tr '\\0' '\\n'; ls -la; echo probe-done"
SCRIPTS = {
    "use the notes": [
        Reply(calls=[("notes__whoami", {})]),
        Reply(calls=[("notes__quirky", {})]),
        Reply(calls=[("notes__broken", {})]),
        Reply(calls=[("notes__lookup", {"word": "durable"})]),
        Reply(text="done"),
    ],
    "slow one": [Reply(calls=[("notes__slow", {"seconds": 4})]), Reply(text="done")],
    "probe the sandbox": [Reply(calls=[("shell", {"command": SHELL_PROBE})]), Reply(text="ok")],
    "revoke me": [
        Reply(calls=[("notes__slow", {"seconds": 2})]),
        Reply(calls=[("notes__lookup", {"word": "after"})]),
        Reply(text="done"),
    ],
}


def session_state(http: httpx.Client, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = http.get(f"/v1/sessions/{sid}").json()["state"]
    return state


def ask(
    http: httpx.Client,
    text: str,
    headers: dict[str, str] | None = None,
    *,
    deployment: str = "notes",
) -> tuple[str, str]:
    """(session id, execution id) of a new session on `deployment` asked `text`."""
    made = http.post("/v1/sessions", json={"deployment": deployment}, headers=headers)
    assert made.status_code == 201, made.text
    sid = made.json()["session_id"]
    sent = http.post(
        f"/v1/sessions/{sid}/messages",
        json={"content": [{"type": "text", "text": text}]},
        headers=headers,
    )
    assert sent.status_code == 202, sent.text
    return sid, sent.json()["execution_id"]


def ended(http: httpx.Client, sid: str, *, answer: bool = False) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        state = session_state(http, sid)
        if answer:
            for request in state["open_input_requests"]:
                http.post(
                    f"/v1/sessions/{sid}/input-requests/{request['request_id']}/answer",
                    json={"option_id": "allow_once"},
                )
        turn: dict[str, Any] = state["turns"][-1]
        return turn if turn["stop_reason"] else None

    found: dict[str, Any] = wait_for(done, timeout=90, interval=0.2)
    return found


def calls_by_name(turn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in turn["tool_calls"].values()}


def setup(
    tmp_path: Path,
    remote: Remote,
    provider: FakeProvider,
    env: dict[str, str] | None = None,
    **options: Any,
) -> Server:
    data = tmp_path / "data"
    data.mkdir()
    env = provider.env() | {"NUA_DEMO_STEP_DELAY": "0"} | (env or {})
    server = Server(data, model="openai:fake", env=env, **options).start()
    nua = Nua(server)
    root = plugin_dir(tmp_path / "plugin", remote.url, egress=["127.0.0.1"])
    published = nua("plugin", "publish", str(root))
    assert published.exit_code == 0, published.output
    assert nua("plugin", "release", "notes-agent", "1.0.0").exit_code == 0
    return server


DEPLOY = (
    "deploy", "notes", "--plugin", "notes-agent", "--model", "openai:fake",
    "--credential", "notes=notes-token",
    # The remote server listens on loopback: an admin's address entry lets the gateway in.
    "--egress", "127.0.0.1:1-65535",
)  # fmt: skip
