"""The gateway with real processes: `nua serve` (its model a FakeProvider that calls the
tools), a remote MCP server subprocess that wants a bearer token, the CLI.

- through the gateway the tool call succeeds; the same call without it gets 401;
- a host outside the egress list is refused when deploying and when calling;
- secret canaries: the credential is a unique value; after full flows (calls, a failing
  call whose error echoes the header, a kill -9 mid-turn and a restart, a shell command
  in the sandbox) it occurs nowhere outside the encrypted secret table;
- revoking the grant during a call: the gateway refuses the next call, the execution
  ends `revoked`, the audit shows both.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.secrets import SecretKey
from opennua.store import DeploymentRecord, open_store
from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Server

from ._flows import (
    DEPLOY,
    INIT,
    MCP_HEADERS,
    SCRIPTS,
    ask,
    calls_by_name,
    ended,
    session_state,
    setup,
)
from .conftest import Remote

#: Real processes on a shared machine: a flow with a kill -9 and a restart takes a while.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(SCRIPTS).start()
    try:
        yield fake
    finally:
        fake.stop()


def _audit(nua: Nua, *extra: str) -> list[dict[str, Any]]:
    listed = nua("audit", "--json", *extra)
    assert listed.exit_code == 0, listed.output
    return [json.loads(line) for line in listed.output.splitlines() if line.strip()]


def _search(canary: str, *places: Path) -> list[str]:
    found = []
    needle = canary.encode()
    for place in places:
        for path in [place] if place.is_file() else sorted(place.rglob("*")):
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path))
    return found


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest) -> str | None:
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


def test_through_the_gateway_and_nowhere_else_the_secret_canary(
    tmp_path: Path, remote: Remote, provider: FakeProvider, db: str | None
) -> None:
    canary = remote.token
    # Without the gateway (and its credential), the server answers 401.
    direct = httpx.post(remote.url, json=INIT, headers=MCP_HEADERS, timeout=10)
    assert direct.status_code == 401
    assert httpx.post(remote.url, json=INIT, headers={**MCP_HEADERS, "Authorization": "Bearer "
                      "nope"}, timeout=10).status_code == 401  # fmt: skip

    server = setup(tmp_path, remote, provider, db=db)
    nua = Nua(server)
    answers: list[str] = []
    try:
        missing = nua(*DEPLOY)
        assert missing.exit_code == 7 and "secret_missing" in missing.output, missing.output
        assert nua("secret", "set", "notes-token", input=canary + "\n").exit_code == 0
        deployed = nua(*DEPLOY)
        assert deployed.exit_code == 0, deployed.output
        shown = nua("deployment", "show", "notes")
        assert "notes: Authorization <- secret notes-token" in shown.output
        # Egress at deploy time: a host outside the plugin's list is refused, named.
        evil = nua("deploy", "evil", *DEPLOY[2:], "--tool", "notes=http://evil.example/mcp")
        assert evil.exit_code == 7 and "egress_denied" in evil.output
        assert "evil.example" in evil.output

        with server.client() as http:
            sid, execution_id = ask(http, "use the notes")
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            calls = calls_by_name(turn)
            # The service echoed the credential: the gateway redacted it by name.
            whoami = calls["notes__whoami"]
            assert whoami["status"] == "completed", whoami
            assert whoami["output"] == "you called with Bearer [redacted:notes-token]"
            # Echoed with its characters JSON-escaped, in an SSE answer cut mid-escape.
            quirky = calls["notes__quirky"]
            assert quirky["output"] == "you called with Bearer [redacted:notes-token]", quirky
            broken = calls["notes__broken"]
            assert broken["status"] == "failed" and "[redacted:notes-token]" in json.dumps(broken)
            assert calls["notes__lookup"]["output"] == "durable: a short definition"
            answers += [
                json.dumps(session_state(http, sid)),
                http.get(f"/v1/sessions/{sid}/actions").text,
            ]
            shown = nua("show", sid)
            assert shown.exit_code == 0 and "[redacted:notes-token]" in shown.output
            answers.append(shown.output)

            records = wait_for(lambda: len(a := _audit(nua)) >= 3 and a, timeout=10)
            by_tool = {a["tool"]: a for a in records}
            assert by_tool["whoami"]["outcome"] == "ok" and by_tool["broken"]["outcome"] == "error"
            for record in by_tool.values():
                assert record["execution_id"] == execution_id
                assert record["credential"] == "notes-token" and record["host"] == "127.0.0.1"
                assert record["principal_id"] and record["latency_ms"] > 0
            answers.append(json.dumps(records))
            listed = http.get("/v1/secrets").json()["items"]
            assert listed[0]["name"] == "notes-token" and listed[0]["last_used_at"]
            answers.append(json.dumps(listed))

            # A restart mid-turn: kill -9 while a call is in flight, then start again.
            sid, _ = ask(http, "slow one")
            wait_for(lambda: any(c["name"] == "notes__slow"
                                 for t in session_state(http, sid)["turns"]
                                 for c in t["tool_calls"].values()), timeout=60)  # fmt: skip
        server.kill9()
        server.start()
        with server.client() as http:
            turn = ended(http, sid, answer=True)
            answers.append(json.dumps(session_state(http, sid)))
            # The sandbox: its environment and files hold no credential.
            sid, _ = ask(http, "probe the sandbox")
            turn = ended(http, sid, answer=True)
            probe = calls_by_name(turn)["shell"]
            assert "probe-done" in json.dumps(probe), probe
            answers.append(json.dumps(probe))
            # A failing request's error body (no ticket; a forged one) has no value either.
            for headers in ({}, {"Authorization": "Bearer gwt.exe_x.forged"}):
                refused = http.post(
                    "/v1/gateway/mcp/notes", json=INIT, headers={**MCP_HEADERS, **headers}
                )
                assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
                answers.append(refused.text)
    finally:
        server.stop()

    assert canary not in "\n".join(answers)
    assert canary not in json.dumps(provider.requests), "the model saw the credential"
    # Everything on disk: the SQLite file and its WAL, blobs, checkpoints, the plugin
    # cache, the sessions' workspaces, and the server's stdout/stderr (serve-*.log).
    assert list(server.data.glob("serve-*.log"))
    assert db is not None or (server.data / "nua.db").exists()
    assert _search(canary, server.data) == []
    if db is not None:  # the database itself, as an operator's backup would hold it
        dump = subprocess.run(["pg_dump", db], capture_output=True, check=True).stdout
        assert b"gateway_audit" in dump and b"notes-token" in dump  # the tables are there
        assert canary.encode() not in dump
    control = tmp_path / "control.bin"  # the search does find a value where one is
    control.write_bytes(b"x" + canary.encode() + b"y")
    assert _search(canary, control) == [str(control)]


def test_egress_outside_the_list_is_refused_at_call_time(
    tmp_path: Path, remote: Remote, provider: FakeProvider
) -> None:
    server = setup(tmp_path, remote, provider)
    nua = Nua(server)
    try:
        assert nua("secret", "set", "notes-token", input=remote.token + "\n").exit_code == 0
        assert nua(*DEPLOY).exit_code == 0
        # A configuration written around the registry (no deploy-time check) points the
        # server at a host outside the egress list: the turn fails, nothing is sent there.
        # (The runtime refuses it when it builds the agent; the gateway's own check of the
        # same rule is tests/gateway/test_gateway_checks.py.)
        spec = {
            "plugin": "notes-agent", "channel": "stable", "model": "openai:fake",
            "tools": {"notes": {"url": "http://evil.example/mcp"}},
            "credentials": [{"server": "notes", "secret": "notes-token"}],
        }  # fmt: skip

        async def write() -> None:
            url = f"sqlite:///{server.data}/nua.db"
            async with await open_store(url, data_dir=server.data) as store:
                workspace = (await store.list_workspaces())[0].workspace_id
                record = DeploymentRecord(name="notes", digest="sha256:forged", spec=spec,
                                          created_at=1.0, workspace_id=workspace)  # fmt: skip
                await store.put_deployment(record)

        asyncio.run(write())
        with server.client() as http:
            sid, _ = ask(http, "use the notes")
            turn = ended(http, sid)
        assert turn["stop_reason"] == "failed", turn
        assert "evil.example" in json.dumps(turn["error"]) and "egress" in json.dumps(turn)
        assert [r for r in _audit(nua) if r["outcome"] == "ok"] == []
    finally:
        server.stop()


def test_revoking_the_grant_mid_call_ends_the_turn_within_a_second(
    tmp_path: Path, remote: Remote, provider: FakeProvider
) -> None:
    # Heartbeats every 10 s: the revocation's wake-up, not the lease renewal, stops the
    # turn; the call in flight is cut, and no later call is made (or the gateway refuses
    # it: tests/gateway/test_gateway_checks.py).
    server = setup(tmp_path, remote, provider, lease_ttl="30")
    nua = Nua(server)
    try:
        assert nua("secret", "set", "notes-token", input=remote.token + "\n").exit_code == 0
        assert nua(*DEPLOY).exit_code == 0
        with server.client() as http:
            workspace = http.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
            bob = http.post("/v1/users", json={"name": "bob"}).json()
            http.put(f"/v1/workspaces/{workspace}/members/{bob['principal_id']}",
                     json={"role": "member"})  # fmt: skip
            as_bob = {"Authorization": f"Bearer {bob['token']}"}
            started = remote.output().count(b"slow started")
            sid, execution_id = ask(http, "revoke me", headers=as_bob)
            # Revoked once the remote runs the call, not when the runtime starts it: the
            # call passed the gateway's check before the revocation.
            wait_for(lambda: remote.output().count(b"slow started") > started,
                     timeout=60, interval=0.05)  # fmt: skip
            token_id = bob["token"].split(".")[1]
            assert http.delete(f"/v1/tokens/{token_id}", headers=as_bob).status_code == 200
            at = time.monotonic()
            wait_for(
                lambda: http.get(f"/v1/executions/{execution_id}").json()["status"] == "revoked",
                timeout=10,
                interval=0.02,
            )
            assert time.monotonic() - at <= 1.0
            turn = ended(http, sid)
            assert turn["stop_reason"] == "revoked", turn
            assert turn["error"]["code"] == "grant_revoked"
        records = wait_for(lambda: _audit(nua), timeout=10)
        assert [r["tool"] for r in records if r["outcome"] == "ok"] == []
        assert all(r["execution_id"] == execution_id for r in records)
        assert "lookup" not in {r["tool"] for r in records if r["outcome"] != "refused"}
    finally:
        server.stop()


@pytest.mark.postgres
def test_a_split_deployment_reaches_the_gateway_process_over_http(
    tmp_path: Path, remote: Remote, provider: FakeProvider, pg_url: str
) -> None:
    # `--role all` reaches its own gateway in-process; given `--gateway-url` it goes to
    # that one, as a `--role supervisor` of a split deployment does.
    key = {"NUA_SECRET_KEY": SecretKey.generate().encoded()}
    gateway = Server(tmp_path / "data", db=pg_url, role="gateway", env=key)
    server = setup(tmp_path, remote, provider, db=pg_url, env=key,
                    args=["--gateway-url", gateway.url])  # fmt: skip
    nua = Nua(server)
    try:
        gateway.start()  # on the same data directory: the owner's token is the same
        assert nua("secret", "set", "notes-token", input=remote.token + "\n").exit_code == 0
        assert nua(*DEPLOY).exit_code == 0
        with server.client() as http:
            sid, execution_id = ask(http, "use the notes")
            turn = ended(http, sid)
            assert turn["stop_reason"] == "end_turn", turn
            whoami = calls_by_name(turn)["notes__whoami"]
            assert whoami["output"] == "you called with Bearer [redacted:notes-token]"
            quirky = calls_by_name(turn)["notes__quirky"]  # the gateway process redacts it too
            assert quirky["output"] == "you called with Bearer [redacted:notes-token]", quirky
            records = wait_for(lambda: len(a := _audit(nua)) >= 3 and a, timeout=10)
            assert {r["execution_id"] for r in records} == {execution_id}
            # With the gateway process gone, the same call has nowhere to go.
            gateway.stop()
            sid, _ = ask(http, "use the notes")
            turn = ended(http, sid)
            assert turn["stop_reason"] != "end_turn" or calls_by_name(turn) == {}, turn
            assert "[redacted:notes-token]" not in json.dumps(turn)
    finally:
        server.stop()
        gateway.stop()
