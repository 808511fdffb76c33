"""What a revocation ends, within a second (issue 29): open SSE and WebSocket streams of
the caller, held by real clients over a real socket, and the turns that wait on a grant
the revocation broke; for a token revoked everywhere or for one workspace, a membership
removed, an agent principal or a user disabled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ._harness import AUTH, Env, park_for_input, serving
from ._world import add_user

#: The promise: a revocation ends what it breaks within this long.
WITHIN = 1.0
TEXT = {"content": [{"type": "text", "text": "hi"}]}


@dataclass
class Person:
    principal_id: str
    token: str
    workspace_id: str

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def token_id(self) -> str:
        return self.token.split(".")[1]


async def _workspace(c: httpx.AsyncClient) -> str:
    me = (await c.get("/v1/whoami", headers=AUTH)).json()
    workspace: str = me["workspaces"][0]["workspace_id"]
    return workspace


async def _person(c: httpx.AsyncClient, role: str = "member") -> Person:
    workspace = await _workspace(c)
    principal_id, token = await add_user(c, AUTH, workspace, role)
    return Person(principal_id, token, workspace)


async def _agent(c: httpx.AsyncClient) -> Person:
    workspace = await _workspace(c)
    agent = (
        await c.post(
            f"/v1/workspaces/{workspace}/agent-principals",
            json={"name": "reader", "role": "member"},
            headers=AUTH,
        )
    ).json()
    made = await c.post("/v1/tokens", json={"principal_id": agent["principal_id"]}, headers=AUTH)
    return Person(agent["principal_id"], made.json()["token"], workspace)


async def _session(c: httpx.AsyncClient, who: Person) -> str:
    created = await c.post("/v1/sessions", json={}, headers=who.bearer)
    assert created.status_code == 201, created.text
    sid: str = created.json()["session_id"]
    return sid


# -- the revocations -------------------------------------------------------------------------

Revoke = Callable[[httpx.AsyncClient, Person], Awaitable[httpx.Response]]
Make = Callable[[httpx.AsyncClient], Awaitable[Person]]


async def _token_revoked(c: httpx.AsyncClient, who: Person) -> httpx.Response:
    return await c.delete(f"/v1/tokens/{who.token_id}", headers=who.bearer)  # "I leaked it"


async def _token_revoked_here(c: httpx.AsyncClient, who: Person) -> httpx.Response:
    url = f"/v1/workspaces/{who.workspace_id}/tokens/{who.token_id}"
    return await c.delete(url, headers=AUTH)  # the workspace's owner, for its work only


async def _membership_removed(c: httpx.AsyncClient, who: Person) -> httpx.Response:
    url = f"/v1/workspaces/{who.workspace_id}/members/{who.principal_id}"
    return await c.delete(url, headers=AUTH)


async def _user_disabled(c: httpx.AsyncClient, who: Person) -> httpx.Response:
    return await c.post(f"/v1/users/{who.principal_id}/disable", headers=AUTH)


async def _agent_disabled(c: httpx.AsyncClient, who: Person) -> httpx.Response:
    return await c.post(f"/v1/agent-principals/{who.principal_id}/disable", headers=AUTH)


#: name -> (who is cut off, how, the WebSocket close code, the SSE `revoked` code)
CASES: dict[str, tuple[Make, Revoke, int, str]] = {
    "token_revoked": (_person, _token_revoked, 4401, "token_revoked"),
    "token_revoked_for_the_workspace": (_person, _token_revoked_here, 4403, "not_found"),
    "membership_removed": (_person, _membership_removed, 4403, "not_found"),
    "user_disabled": (_person, _user_disabled, 4401, "principal_disabled"),
    "agent_disabled": (_agent, _agent_disabled, 4401, "principal_disabled"),
}


# -- the clients -----------------------------------------------------------------------------


@dataclass
class SSEReader:
    """A real SSE client on its own connection: every event as it arrives, and when the
    server ended the response."""

    events: list[tuple[str, str]] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    ended_at: float = 0.0

    async def read(self, base: str, sid: str, headers: dict[str, str]) -> None:
        async with (
            httpx.AsyncClient(base_url=base, timeout=30) as c,
            c.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response,
        ):
            assert response.status_code == 200
            event = "message"
            async for line in response.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                elif line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    self.events.append((event, line.removeprefix("data: ")))
        self.ended_at = time.monotonic()
        self.ended.set()


@contextlib.asynccontextmanager
async def sse(base: str, sid: str, headers: dict[str, str]) -> AsyncIterator[SSEReader]:
    reader = SSEReader()
    task = asyncio.ensure_future(reader.read(base, sid, headers))
    try:
        await asyncio.wait_for(reader.connected.wait(), 10)
        yield reader
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _closed_within(ws: object, deadline: float) -> tuple[int, float]:
    """Read until the server closes; its close code and when."""
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(ws.recv(), deadline)  # type: ignore[attr-defined]
    frame = closed.value.rcvd
    assert frame is not None, "the connection dropped without a close frame"
    return frame.code, time.monotonic()


# -- streams -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
async def test_a_revocation_ends_the_callers_open_streams_within_a_second(
    env: Env, case: str
) -> None:
    make, revoke, close_code, sse_code = CASES[case]
    async with serving(env.app) as address:
        base = f"http://{address}"
        async with httpx.AsyncClient(base_url=base, timeout=20) as c:
            who = await make(c)
            bystander = await _person(c)  # another member: their streams go on
            sid = await _session(c, who)
            url = f"ws://{address}/v1/sessions/{sid}/ws"
            async with (
                sse(base, sid, who.bearer) as reader,
                sse(base, sid, bystander.bearer) as watching,
                connect(url, additional_headers=who.bearer) as ws,
            ):
                await asyncio.wait_for(ws.recv(), 10)  # the socket is live (catch-up)
                revoked = await revoke(c, who)
                assert revoked.status_code < 300, revoked.text
                at = time.monotonic()
                await asyncio.wait_for(reader.ended.wait(), 5)
                code, ws_at = await _closed_within(ws, 5)
                assert reader.ended_at - at <= WITHIN, f"SSE ended {reader.ended_at - at:.2f}s on"
                assert ws_at - at <= WITHIN, f"WebSocket closed {ws_at - at:.2f}s on"
                assert code == close_code
                kind, data = reader.events[-1]
                assert kind == "revoked" and json.loads(data)["code"] == sse_code
                # Nobody else's stream is touched: the bystander still receives actions.
                renamed = await c.patch(
                    f"/v1/sessions/{sid}", json={"title": "still here"}, headers=AUTH
                )
                assert renamed.status_code == 200, renamed.text
                for _ in range(100):
                    if any('"session.updated"' in d for _, d in watching.events):
                        break
                    await asyncio.sleep(0.05)
                assert any('"session.updated"' in d for _, d in watching.events)
                assert not watching.ended.is_set()
            # And a new stream of the revoked caller is refused outright.
            again = await c.get(f"/v1/sessions/{sid}/events", headers=who.bearer)
            assert again.status_code in (401, 404)


async def test_a_socket_whose_caller_became_a_viewer_reads_on_and_may_no_longer_act(
    env: Env,
) -> None:
    async with (
        serving(env.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}", timeout=20) as c,
    ):
        who = await _person(c)
        sid = await _session(c, who)
        url = f"ws://{address}/v1/sessions/{sid}/ws"
        async with connect(url, additional_headers=who.bearer) as ws:
            await asyncio.wait_for(ws.recv(), 10)
            lowered = await c.put(
                f"/v1/workspaces/{who.workspace_id}/members/{who.principal_id}",
                json={"role": "viewer"},
                headers=AUTH,
            )
            assert lowered.status_code == 200, lowered.text
            await asyncio.sleep(WITHIN)
            intent = {"type": "cancel", "intent_id": "int_after", "client_id": "cli_ws"}
            await ws.send(json.dumps(intent))
            while (frame := json.loads(await asyncio.wait_for(ws.recv(), 10)))["type"] != (
                "result"
            ):
                pass
            assert frame["result"]["code"] == "insufficient_role"


# -- turns waiting on a broken grant -----------------------------------------------------------


@pytest.mark.parametrize("case", ["token_revoked", "membership_removed", "user_disabled"])
async def test_a_revocation_ends_a_turn_waiting_for_approval_within_a_second(
    env: Env, case: str
) -> None:
    """Nobody answers: the revocation alone ends the parked turn, its request expires
    (reason `revoked`), and every client is told (the actions are in the log)."""
    make, revoke, _, _ = CASES[case]
    options = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]
    async with (
        serving(env.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}", timeout=20) as c,
    ):
        who = await make(c)
        sid = await _session(c, who)
        sent = (await c.post(f"/v1/sessions/{sid}/messages", json=TEXT, headers=who.bearer)).json()
        eid = sent["execution_id"]
        rid = await park_for_input(env, sid, eid, sent["turn_id"], options=options)
        async with sse(f"http://{address}", sid, AUTH) as owner_watching:
            assert (await revoke(c, who)).status_code < 300
            at = time.monotonic()
            while (await c.get(f"/v1/executions/{eid}", headers=AUTH)).json()["status"] != (
                "revoked"
            ):
                assert time.monotonic() - at <= WITHIN, "the parked turn did not end in time"
                await asyncio.sleep(0.02)
            for _ in range(100):
                if any('"turn.ended"' in d for _, d in owner_watching.events):
                    break
                await asyncio.sleep(0.02)
        actions = [json.loads(d) for kind, d in owner_watching.events if kind == "action"]
        resolved = next(a for a in actions if a["type"] == "input_request.resolved")
        assert resolved["data"] == {
            "request_id": rid,
            "outcome": "expired",
            "reason": "revoked",
        }
        ended = next(a for a in actions if a["type"] == "turn.ended")
        assert ended["data"]["stop_reason"] == "revoked"
        assert ended["data"]["error"]["code"] == "grant_revoked"
        assert (await env.store.get_input_request(rid)).status == "expired"
        state = (await c.get(f"/v1/sessions/{sid}", headers=AUTH)).json()["state"]
        assert state["open_input_requests"] == [] and state["status"] == "idle"
        # A later answer finds nothing to resume, and is told why: the grant, not just
        # "gone" (the same answer an answerer racing the revocation gets).
        late = await c.post(
            f"/v1/sessions/{sid}/input-requests/{rid}/answer",
            json={"option_id": "allow"},
            headers=AUTH,
        )
        assert late.status_code == 403, late.text
        assert late.json()["code"] == "grant_revoked"


async def test_a_revocation_leaves_a_turn_whose_grant_still_holds(env: Env) -> None:
    """A token revoked for another workspace, or another token of the same person, does
    not end work started with this one."""
    options = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]
    async with (
        serving(env.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}", timeout=20) as c,
    ):
        who = await _person(c)
        spare = (await c.post("/v1/tokens", json={}, headers=who.bearer)).json()
        sid = await _session(c, who)
        sent = (await c.post(f"/v1/sessions/{sid}/messages", json=TEXT, headers=who.bearer)).json()
        await park_for_input(env, sid, sent["execution_id"], sent["turn_id"], options=options)
        assert (await c.delete(f"/v1/tokens/{spare['token_id']}", headers=who.bearer)).is_success
        await asyncio.sleep(WITHIN)
        status = (await c.get(f"/v1/executions/{sent['execution_id']}", headers=AUTH)).json()
        assert status["status"] == "waiting_input"


async def test_a_stream_registering_after_the_wake_up_is_checked_as_it_registers(
    env: Env,
) -> None:
    """The request was authenticated, then the revocation's wake-up came (and found no
    stream of that caller yet), then the stream registered: it ends at once."""
    from opennua.server._revocations import Streams

    async with env.client() as c:
        who = await _person(c)
    caller = await env.authority.authenticate(who.token)  # the request's authentication
    await env.store.revoke_token(who.token_id, env.clock())
    env.authority.forget()  # what the wake-up does, before any stream was registered
    streams = Streams(env.authority)
    async with streams.watching(caller, who.workspace_id) as watched:
        assert watched.denied is not None and watched.denied.code == "token_revoked"
        assert watched.close_code == 4401
    assert len(streams) == 0
