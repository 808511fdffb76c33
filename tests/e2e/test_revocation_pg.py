"""Execution grants with real processes on PostgreSQL: revoking a token stops the work it
started within one heartbeat, and an answer cannot revive a parked one.

`nua serve --lease-ttl 2`: a heartbeat every 2/3 s, so "revoked within TTL/3 + 1 s".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.store import open_store

from ._proc import FakeProvider, Reply, Server, wait_for

LEASE_TTL = 2.0
#: Each run appends one line, then sleeps far longer than the test waits.
SLEEPER = "echo ran >> side_effect.txt; sleep 60"
SCRIPTS = {
    "sleep please": [Reply(calls=[("shell", {"command": SLEEPER})]), Reply(text="done")],
    "ask first": [Reply(calls=[("shell", {"command": "echo hi"})]), Reply(text="done")],
}


@pytest.fixture
def served(tmp_path: Path, pg_url: str) -> Iterator[tuple[Server, str]]:
    provider = FakeProvider(SCRIPTS).start()
    server = Server(tmp_path, db=pg_url, model="openai:fake", env=provider.env()).start()
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
def test_revoking_the_token_ends_a_running_shell_within_one_heartbeat(
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
        assert ended and took <= LEASE_TTL / 3 + 1.0, f"revoked after {took:.2f}s"
        execution = http.get(f"/v1/executions/{execution_id}").json()
        assert execution["error"]["code"] == "grant_revoked"
        # Every client sees why: the turn ended `revoked` with the grant's reason.
        turn = wait_for(lambda: (t := _state(http, sid)["turns"][-1])["stop_reason"] and t)
        assert turn["stop_reason"] == "revoked" and turn["error"]["code"] == "grant_revoked"
        time.sleep(LEASE_TTL * 2)  # nothing re-runs the command: no second attempt
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
