"""One opennua deployment calls another through A2A, as a tool, with real processes: one
`nua serve` hosts deployment `b` (the echo agent) and deployment `a`, whose plugin
declares `b` as a remote A2A agent (`.a2a.json`). A's turn runs on the offline
`scripted:a2a` model, which sends the user's message to the agent; the gateway injects
B's credential (an opennua token of an agent principal, held as a workspace secret and
named by reference), B's turn runs, and A's tool result carries B's answer.

Then what goes wrong is a failed tool call with a clear error, never a crash: the
credential deleted (`secret_missing`, refused by the gateway), the token revoked (B
answers 401), a host outside the egress list (refused when deploying).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import Server

from ._flows import ask, calls_by_name, ended, session_state

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

TOOL = "helper__send_message"


def _plugin(root: Path, name: str, files: dict[str, str]) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": name, "version": "1.0.0", "description": f"the {name} agent"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    for path, text in files.items():
        (root / path).write_text(text)
    return root


def _publish(nua: Nua, root: Path, name: str) -> None:
    published = nua("plugin", "publish", str(root))
    assert published.exit_code == 0, published.output
    assert nua("plugin", "release", name, "1.0.0").exit_code == 0


def _deploy(http: httpx.Client, name: str, spec: dict[str, Any]) -> httpx.Response:
    # B answers on this machine's loopback: the gateway reaches it through an admin's entry.
    body = {"model": "scripted:a2a", "egress": ["127.0.0.1:1-65535"], **spec}
    return http.put(f"/v1/deployments/{name}", json=body)


def _agent_token(http: httpx.Client) -> tuple[str, str]:
    """(token id, token) of a new agent principal of the owner's workspace (a member)."""
    workspace = http.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
    agent = http.post(
        f"/v1/workspaces/{workspace}/agent-principals", json={"name": "a-calls-b"}
    ).json()
    made = http.post("/v1/tokens", json={"principal_id": agent["principal_id"]})
    assert made.status_code == 201, made.text
    return made.json()["token_id"], made.json()["token"]


def _audit(nua: Nua) -> list[dict[str, Any]]:
    listed = nua("audit", "--json")
    assert listed.exit_code == 0, listed.output
    return [json.loads(line) for line in listed.output.splitlines() if line.strip()]


def _publish_both(nua: Nua, tmp_path: Path, b_url: str) -> None:
    """`echo` (B's plugin) and `caller` (A's), whose agent `helper` is at `b_url`."""
    _publish(nua, _plugin(tmp_path / "echo", "echo", {"AGENTS.md": "Echo.\n"}), "echo")
    agents = {"agents": {"helper": {"url": b_url, "description": "the echo agent"}}}
    caller = _plugin(
        tmp_path / "caller",
        "caller",
        {
            "AGENTS.md": "Ask the helper.\n",
            ".a2a.json": json.dumps(agents),
            # Loopback: the plugin's egress list names it (as the MCP e2e tests do).
            "opennua.toml": '[access]\negress = ["127.0.0.1"]\n',
        },
    )
    _publish(nua, caller, "caller")


def _started(tmp_path: Path, *, step_delay: str) -> tuple[Server, Nua]:
    """A `nua serve` with both plugins published (the demo paced by `step_delay`)."""
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, env={"NUA_DEMO_STEP_DELAY": step_delay}).start()
    nua = Nua(server)
    try:
        _publish_both(nua, tmp_path, f"{server.url}/v1/a2a/b")
    except BaseException:
        server.stop()
        raise
    return server, nua


def test_a_deployment_calls_another_through_a2a_via_the_gateway(tmp_path: Path) -> None:
    server, nua = _started(tmp_path, step_delay="0")
    data = server.data
    try:
        with server.client() as http:
            token_id, token = _agent_token(http)
            assert _deploy(http, "b", {"plugin": "echo"}).status_code in (200, 201)
            credential = [{"server": "helper", "secret": "b-token"}]
            missing = _deploy(http, "a", {"plugin": "caller", "credentials": credential})
            assert missing.status_code == 422 and missing.json()["code"] == "secret_missing"
            assert nua("secret", "set", "b-token", input=token + "\n").exit_code == 0
            deployed = _deploy(http, "a", {"plugin": "caller", "credentials": credential})
            assert deployed.status_code in (200, 201), deployed.text
            # A host outside the plugin's egress list is refused when deploying, named.
            evil = _deploy(
                http,
                "a-evil",
                {
                    "plugin": "caller",
                    "tools": {"helper": {"url": "http://evil.example/v1/a2a/b"}},
                },
            )
            assert evil.status_code == 422 and evil.json()["code"] == "egress_denied", evil.text
            assert "A2A agent helper at evil.example" in evil.json()["detail"]

            # A's turn calls B through the gateway; B's turn runs; A reads B's answer.
            sid, _ = ask(http, "hello from A", deployment="a")
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            call = calls_by_name(turn)[TOOL]
            assert call["status"] == "completed", call
            result = json.loads(call["output"])
            assert result["state"] == "completed" and result["text"] == "echo: hello from A"
            said = [m["text"] for m in turn["messages"].values() if m["role"] == "assistant"]
            assert f"{TOOL} answered: " in "".join(said) and "echo: hello from A" in "".join(said)
            # B's side: the task is a turn of a session on deployment b, run as the
            # agent principal whose token the gateway injected.
            b_state = session_state(http, result["context_id"])
            [b_turn] = b_state["turns"]
            assert b_turn["execution_id"] == result["task_id"]
            assert b_turn["stop_reason"] == "end_turn"
            assert b_turn["trigger"]["principal_id"] != turn["trigger"]["principal_id"]

            records = wait_for(lambda: [a for a in _audit(nua) if a["server"] == "helper"], 10)
            [record] = records
            assert record["tool"] == "send_message" and record["outcome"] == "ok", record
            assert record["credential"] == "b-token" and record["host"] == "127.0.0.1"
            assert record["execution_id"] == turn["execution_id"]

            # B waiting for its caller's input (the demo asks to approve a command): A's
            # tool result says so, with the task id a follow-up names.
            assert _deploy(http, "b-demo", {"plugin": "echo", "model": "scripted:demo"}).is_success
            demo_url = {"helper": {"url": f"{server.url}/v1/a2a/b-demo"}}
            spec = {"plugin": "caller", "credentials": credential, "tools": demo_url}
            assert _deploy(http, "a-demo", spec).json()["name"] == "a-demo"
            sid, _ = ask(http, "write the report", deployment="a-demo")
            turn = ended(http, sid)
            waiting = json.loads(calls_by_name(turn)[TOOL]["output"])
            assert waiting["state"] == "input-required" and waiting["task_id"], waiting
            assert "call again with this task_id" in waiting["next"]
            b_turn = session_state(http, waiting["context_id"])["turns"][0]
            assert b_turn["state"] == "requires_action" and b_turn["stop_reason"] is None

            # The token revoked: B refuses it; A's tool call fails, saying so.
            assert http.delete(f"/v1/tokens/{token_id}").status_code == 200
            sid, _ = ask(http, "after the revocation", deployment="a")
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            call = calls_by_name(turn)[TOOL]
            assert call["status"] == "failed", call
            assert "HTTP 401 token_revoked" in call["error"]["message"], call

            # The secret deleted: the gateway refuses the call before it leaves.
            assert nua("secret", "delete", "b-token").exit_code == 0
            sid, _ = ask(http, "without the secret", deployment="a")
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            call = calls_by_name(turn)[TOOL]
            assert call["status"] == "failed" and "secret_missing" in json.dumps(call), call
            records = wait_for(
                lambda: [a for a in _audit(nua) if a["server"] == "helper"][3:] and _audit(nua),
                10,
            )
            outcomes = sorted((a["outcome"], a["code"]) for a in records if a["server"] == "helper")
            # B's answer, B waiting for input, B refusing the token, the gateway refusing.
            assert outcomes == [("error", "upstream_401"), ("ok", None), ("ok", None),
                                ("refused", "secret_missing")]  # fmt: skip
        # Nothing of the token reached a log or the model's view of the call.
        assert token not in "".join(p.read_text() for p in data.glob("serve-*.log"))
    finally:
        server.stop()


def test_a_call_in_flight_when_the_server_dies_is_the_same_task_after_the_restart(
    tmp_path: Path,
) -> None:
    """kill -9 while A's call waits on B (the demo, paced): after the restart A's attempt
    re-runs the call (idempotent), with the same message id, and B's A2A server answers
    with the task it already has: B ran one turn, not two."""
    server, nua = _started(tmp_path, step_delay="1.5")
    try:
        with server.client() as http:
            _, token = _agent_token(http)
            assert nua("secret", "set", "b-token", input=token + "\n").exit_code == 0
            assert _deploy(http, "b", {"plugin": "echo", "model": "scripted:demo"}).is_success
            spec = {"plugin": "caller", "credentials": [{"server": "helper", "secret": "b-token"}]}
            assert _deploy(http, "a", spec).is_success
            sid, _ = ask(http, "write the report", deployment="a")

            def b_running() -> list[dict[str, Any]]:
                listed = http.get("/v1/sessions", params={"deployment": "b"}).json()["items"]
                return listed if listed and session_state(http, listed[0]["session_id"])[
                    "turns"
                ][0]["state"] == "running" else []  # fmt: skip

            [b_session] = wait_for(b_running, 60, "B's turn running")
        server.kill9()
        server.start()
        with server.client() as http:
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            result = json.loads(calls_by_name(turn)[TOOL]["output"])
            assert result["state"] == "input-required", result
            assert result["context_id"] == b_session["session_id"]
            b_state = session_state(http, b_session["session_id"])
            assert [t["execution_id"] for t in b_state["turns"]] == [result["task_id"]]
            # A's side: the call started before the crash and was re-run after it.
            attempts = http.get(f"/v1/executions/{turn['execution_id']}").json()["attempts"]
            assert len(attempts) >= 2, attempts
            assert len(http.get("/v1/sessions", params={"deployment": "b"}).json()["items"]) == 1
    finally:
        server.stop()
