"""Execution grants with real processes on PostgreSQL: revoking a token stops the work it
started within a second, and an answer cannot revive a parked one; with two hosts, a
revocation made on one ends the streams held open on the other and is refused there at
the very next request (issue 29, and issue 35's token cache).

`nua serve --lease-ttl 15`: a heartbeat every 5 s, so work that ends within a second was
stopped by the revocation's wake-up (NOTIFY), not by the next heartbeat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from opennua.store import open_store
from tests._support.polling import wait_for

from ._proc import FakeProvider, Reply, Server

LEASE_TTL = 15.0
#: The promise: a revocation ends what it breaks within this long, on every host.
WITHIN = 1.0
#: Each run appends one line, then sleeps far longer than the test waits.
SLEEPER = "echo ran >> side_effect.txt; sleep 60"
SCRIPTS = {
    "sleep please": [Reply(calls=[("shell", {"command": SLEEPER})]), Reply(text="done")],
    "ask first": [Reply(calls=[("shell", {"command": "echo hi"})]), Reply(text="done")],
}


@pytest.fixture
def served(tmp_path: Path, pg_url: str) -> Iterator[tuple[Server, str]]:
    provider = FakeProvider(SCRIPTS).start()
    server = Server(
        tmp_path, db=pg_url, model="openai:fake", env=provider.env(), lease_ttl=str(LEASE_TTL)
    ).start()
    try:
        yield server, pg_url
    finally:
        server.stop()
        provider.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _bob(http: httpx.Client) -> tuple[str, dict[str, str]]:
    """A member of the default workspace: his token id and his bearer header."""
    me = http.get("/v1/whoami").json()
    workspace = me["workspaces"][0]["workspace_id"]
    bob = http.post("/v1/users", json={"name": "bob"}).json()
    added = http.put(
        f"/v1/workspaces/{workspace}/members/{bob['principal_id']}", json={"role": "member"}
    )
    assert added.status_code == 200, added.text
    token_id = bob["token"].split(".")[1]
    return token_id, _bearer(bob["token"])


def _start(http: httpx.Client, bob: dict[str, str], text: str) -> tuple[str, str]:
    sid = http.post("/v1/sessions", json={}, headers=bob).json()["session_id"]
    sent = http.post(
        f"/v1/sessions/{sid}/messages",
        json={"content": [{"type": "text", "text": text}]},
        headers=bob,
    )
    assert sent.status_code == 202, sent.text
    return sid, sent.json()["execution_id"]


def _state(http: httpx.Client, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = http.get(f"/v1/sessions/{sid}").json()["state"]
    return state


def _open_request(http: httpx.Client, sid: str) -> str:
    opened = wait_for(lambda: _state(http, sid)["open_input_requests"], timeout=30)
    return str(opened[0]["request_id"])


def _ledger(pg_url: str, execution_id: str) -> list[Any]:
    async def read() -> list[Any]:
        async with await open_store(pg_url) as store:
            return await store.get_ledger(execution_id)

    return asyncio.run(read())


@pytest.mark.slow
@pytest.mark.postgres
def test_revoking_the_token_ends_a_running_shell_within_a_second(
    served: tuple[Server, str],
) -> None:
    server, pg_url = served
    with server.client() as http:
        token_id, bob = _bob(http)
        sid, execution_id = _start(http, bob, "sleep please")
        rid = _open_request(http, sid)
        answered = http.post(
            f"/v1/sessions/{sid}/input-requests/{rid}/answer",
            json={"option_id": "allow_once"},
            headers=bob,
        )
        assert answered.status_code == 200, answered.text
        effect = server.data / "workspaces" / sid / "side_effect.txt"
        wait_for(effect.exists, timeout=30)  # the command is running (sleeping) now
        revoked = http.delete(f"/v1/tokens/{token_id}", headers=bob)  # "I leaked it"
        assert revoked.status_code == 200, revoked.text
        started = time.monotonic()
        ended = wait_for(
            lambda: http.get(f"/v1/executions/{execution_id}").json()["status"] == "revoked",
            timeout=10,
            interval=0.05,
        )
        took = time.monotonic() - started
        assert ended and took <= WITHIN, f"revoked after {took:.2f}s"
        execution = http.get(f"/v1/executions/{execution_id}").json()
        assert execution["error"]["code"] == "grant_revoked"
        # Every client sees why: the turn ended `revoked` with the grant's reason.
        turn = wait_for(lambda: (t := _state(http, sid)["turns"][-1])["stop_reason"] and t)
        assert turn["stop_reason"] == "revoked" and turn["error"]["code"] == "grant_revoked"
        time.sleep(2)  # nothing re-runs the command: no second attempt
        assert effect.read_text() == "ran\n", "the side effect happened exactly once"
        ledger = _ledger(pg_url, execution_id)
        assert [entry.status for entry in ledger] == ["unknown"]
        # bob's token is dead for the API too.
        assert http.get("/v1/whoami", headers=bob).json()["code"] == "token_revoked"


@pytest.mark.slow
@pytest.mark.postgres
def test_an_answer_to_a_parked_turn_whose_principal_left_is_refused(
    served: tuple[Server, str],
) -> None:
    server, _ = served
    with server.client() as http:
        _, bob = _bob(http)
        sid, execution_id = _start(http, bob, "ask first")
        rid = _open_request(http, sid)
        workspace = http.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
        bob_id = http.get("/v1/whoami", headers=bob).json()["principal_id"]
        removed = http.delete(f"/v1/workspaces/{workspace}/members/{bob_id}")
        assert removed.status_code == 204, removed.text
        # The owner may answer in this workspace, but the execution runs on bob's grant.
        refused = http.post(
            f"/v1/sessions/{sid}/input-requests/{rid}/answer", json={"option_id": "allow_once"}
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "grant_revoked"
        assert "membership_removed" in refused.json()["detail"]
        assert http.get(f"/v1/executions/{execution_id}").json()["status"] == "revoked"
        state = wait_for(lambda: (s := _state(http, sid))["turns"][-1]["stop_reason"] and s)
        assert state["turns"][-1]["stop_reason"] == "revoked"
        assert state["open_input_requests"] == []
        assert state["status"] == "idle"


@pytest.mark.slow
@pytest.mark.postgres
def test_a_parked_turn_ends_within_a_second_of_a_revocation_on_another_host(
    served: tuple[Server, str],
) -> None:
    """Nobody answers: removing bob through a second host (its own process) ends the turn
    he parked on the first, and its request expires."""
    server, pg_url = served
    other = Server(server.data, db=pg_url, role="host", lease_ttl=str(LEASE_TTL)).start()
    try:
        with server.client() as http, other.client() as there:
            _, bob = _bob(http)
            sid, execution_id = _start(http, bob, "ask first")
            _open_request(http, sid)
            workspace = http.get("/v1/whoami").json()["workspaces"][0]["workspace_id"]
            bob_id = http.get("/v1/whoami", headers=bob).json()["principal_id"]
            removed = there.delete(f"/v1/workspaces/{workspace}/members/{bob_id}")
            assert removed.status_code == 204, removed.text
            started = time.monotonic()
            wait_for(
                lambda: http.get(f"/v1/executions/{execution_id}").json()["status"] == "revoked",
                timeout=10,
                interval=0.02,
            )
            took = time.monotonic() - started
            assert took <= WITHIN, f"the parked turn ended {took:.2f}s after the revocation"
            state = _state(http, sid)
            assert state["open_input_requests"] == [] and state["status"] == "idle"
            resolved = [
                a
                for a in http.get(f"/v1/sessions/{sid}/actions").json()["actions"]
                if a["type"] == "input_request.resolved"
            ]
            assert [(a["data"]["outcome"], a["data"].get("reason")) for a in resolved] == [
                ("expired", "revoked")
            ]
    finally:
        other.stop()


async def _sse_end(url: str, sid: str, bearer: dict[str, str], ready: asyncio.Event) -> float:
    """Hold a real SSE stream open until the server ends it; when that was."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as c,
        c.stream("GET", f"/v1/sessions/{sid}/events", headers=bearer) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith(": connected"):
                ready.set()
    return time.monotonic()


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_revocation_on_one_host_closes_streams_and_refuses_requests_on_the_other(
    served: tuple[Server, str],
) -> None:
    server, pg_url = served
    other = Server(server.data, db=pg_url, role="host", lease_ttl=str(LEASE_TTL)).start()
    try:
        with server.client() as http:
            token_id, bob = _bob(http)
            sid = http.post("/v1/sessions", json={}, headers=bob).json()["session_id"]
        ready = asyncio.Event()
        sse = asyncio.ensure_future(_sse_end(other.url, sid, bob, ready))
        ws_url = other.url.replace("http://", "ws://") + f"/v1/sessions/{sid}/ws"
        async with (
            connect(ws_url, additional_headers=bob) as ws,
            httpx.AsyncClient(base_url=other.url, timeout=10) as there,
            httpx.AsyncClient(base_url=server.url, timeout=10) as here,
        ):
            await asyncio.wait_for(ready.wait(), 30)
            await asyncio.wait_for(ws.recv(), 30)
            # The other host has just authenticated bob: its token cache is warm.
            assert (await there.get("/v1/whoami", headers=bob)).status_code == 200
            revoked = await here.delete(f"/v1/tokens/{token_id}", headers=bob)
            assert revoked.status_code == 200, revoked.text
            at = time.monotonic()
            # The very next requests on the other host are refused, long before its
            # cache (1 s) would have expired on its own.
            while (await there.get("/v1/whoami", headers=bob)).status_code == 200:
                assert time.monotonic() - at < 0.3, "the other host still took the token"
            ended_at = await asyncio.wait_for(sse, 10)
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            ws_at = time.monotonic()
        assert ended_at - at <= WITHIN, f"SSE on the other host ended {ended_at - at:.2f}s on"
        assert ws_at - at <= WITHIN, f"WebSocket on the other host closed {ws_at - at:.2f}s on"
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    finally:
        other.stop()


@pytest.mark.slow
@pytest.mark.postgres
def test_a_split_deployments_supervisor_stops_a_running_turn_within_a_second(
    tmp_path: Path, pg_url: str
) -> None:
    """`--role host` takes the revocation; the shell runs in a `--role supervisor`
    process, which has no app of its own and follows the store's wake-ups itself."""
    provider = FakeProvider(SCRIPTS).start()
    env = provider.env()
    # The host deploys the default agent with the model the supervisor runs.
    host = Server(
        tmp_path, db=pg_url, role="host", model="openai:fake", lease_ttl=str(LEASE_TTL)
    ).start()
    supervisor = Server(
        tmp_path, db=pg_url, role="supervisor", model="openai:fake", env=env,
        lease_ttl=str(LEASE_TTL),
    ).start()  # fmt: skip
    try:
        with host.client() as http:
            token_id, bob = _bob(http)
            sid, execution_id = _start(http, bob, "sleep please")
            rid = _open_request(http, sid)
            answered = http.post(
                f"/v1/sessions/{sid}/input-requests/{rid}/answer",
                json={"option_id": "allow_once"},
                headers=bob,
            )
            assert answered.status_code == 200, answered.text
            wait_for((tmp_path / "workspaces" / sid / "side_effect.txt").exists, timeout=30)
            assert http.delete(f"/v1/tokens/{token_id}", headers=bob).status_code == 200
            started = time.monotonic()
            wait_for(
                lambda: http.get(f"/v1/executions/{execution_id}").json()["status"] == "revoked",
                timeout=10,
                interval=0.02,
            )
            took = time.monotonic() - started
            assert took <= WITHIN, f"revoked after {took:.2f}s"
    finally:
        supervisor.stop()
        host.stop()
        provider.stop()
