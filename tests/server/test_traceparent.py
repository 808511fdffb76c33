"""W3C `traceparent` on a POST (or a WebSocket frame): the turn it starts joins the
caller's trace, stored with its execution; an invalid one is ignored (a trace of the
turn's own), never an error."""

from __future__ import annotations

import asyncio
import json

import httpx
from websockets.asyncio.client import connect

from ._harness import AUTH, Env, serving

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


async def _send(client: httpx.AsyncClient, sid: str, headers: dict[str, str]) -> httpx.Response:
    return await client.post(
        f"/v1/sessions/{sid}/messages",
        json={"content": [{"type": "text", "text": "hi"}], "if_busy": "enqueue"},
        headers=headers,
    )


async def _started(env: Env, sid: str, turn_id: str) -> dict[str, object]:
    history = await env.host.history(sid)
    (action,) = [a for a in history if a["type"] == "turn.started" and a["turn_id"] == turn_id]
    data: dict[str, object] = action["data"]
    return data


async def test_a_message_with_traceparent_joins_that_trace(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
        sent = await _send(client, sid, {"traceparent": f"00-{TRACE}-{SPAN}-01"})
        assert sent.status_code == 202, sent.text
        ids = sent.json()
    execution = await env.store.get_execution(ids["execution_id"])
    assert execution.trace_context["parent"] == f"00-{TRACE}-{SPAN}-01"
    turn_span = execution.trace_context["traceparent"]
    assert turn_span.startswith(f"00-{TRACE}-") and turn_span.endswith("-01")
    assert turn_span.split("-")[2] != SPAN  # the turn has its own span, a child of the request's
    assert (await _started(env, sid, ids["turn_id"]))["trace_id"] == TRACE


async def test_an_invalid_or_missing_traceparent_gives_the_turn_its_own_trace(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
        bad = await _send(client, sid, {"traceparent": f"00-{'0' * 32}-{SPAN}-01"})
        none = await _send(client, sid, {})
        assert bad.status_code == none.status_code == 202, bad.text
    traces = set()
    for sent in (bad, none):
        ids = sent.json()
        execution = await env.store.get_execution(ids["execution_id"])
        assert execution.trace_context["parent"] is None
        trace_id = execution.trace_context["traceparent"].split("-")[1]
        assert (await _started(env, sid, ids["turn_id"]))["trace_id"] == trace_id
        traces.add(trace_id)
    assert len(traces) == 2 and TRACE not in traces


async def test_a_retry_post_takes_its_traceparent_too(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
        ids = (await _send(client, sid, {})).json()
        claimed = await env.store.claim("sup_test", env.clock(), 15.0)
        assert claimed is not None
        async with env.store.fenced(ids["execution_id"], claimed.epoch) as tx:
            tx.finish("failed", now=env.clock())
        retried = await client.post(
            f"/v1/sessions/{sid}/turns/{ids['turn_id']}/retry",
            json={},
            headers={"traceparent": f"00-{TRACE}-{SPAN}-01"},
        )
        assert retried.status_code == 202, retried.text
    execution = await env.store.get_execution(retried.json()["execution_id"])
    assert execution.trace_context["parent"] == f"00-{TRACE}-{SPAN}-01"
    # The retry's turn span links to the turn it retries.
    original = await env.store.get_execution(ids["execution_id"])
    assert execution.trace_context["links"] == [original.trace_context["traceparent"]]


async def test_a_websocket_frame_with_traceparent_joins_that_trace(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
    frame = {
        "type": "send_message",
        "intent_id": "int_ws_traced",
        "client_id": "cli_ws",
        "content": [{"type": "text", "text": "hi"}],
        "traceparent": f"00-{TRACE}-{SPAN}-01",
    }
    async with serving(env.app) as address:
        url = f"ws://{address}/v1/sessions/{sid}/ws"
        async with connect(url, additional_headers=AUTH) as ws:
            await ws.send(json.dumps(frame))
            while (reply := json.loads(await asyncio.wait_for(ws.recv(), 10)))["type"] != "result":
                pass
    assert reply["result"]["type"] == "accepted", reply
    ids = reply["result"]["ids"]
    execution = await env.store.get_execution(ids["execution_id"])
    assert execution.trace_context["parent"] == f"00-{TRACE}-{SPAN}-01"
    assert (await _started(env, sid, ids["turn_id"]))["trace_id"] == TRACE
