"""Issue 12, bug 3: one client must not be able to freeze a session's live channel.

Against a real uvicorn on loopback (SQLite): a cursor beyond the head, and a subscriber
that leaves while the channel's first read is still running.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from ._harness import AUTH, Env, serving


def _client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://{base}", headers=AUTH, timeout=10)


async def _session_with_four_turns(client: httpx.AsyncClient) -> str:
    sid: str = (await client.post("/v1/sessions", json={"title": "s"})).json()["session_id"]
    for text in ("one", "two", "three", "four"):
        body = {"content": [{"type": "text", "text": text}]}
        assert (await client.post(f"/v1/sessions/{sid}/messages", json=body)).status_code == 202
    return sid  # 5 actions: session.created, then a turn.started each


async def _seqs(ws: ClientConnection, count: int, timeout: float = 5.0) -> list[int]:
    seqs: list[int] = []
    async with asyncio.timeout(timeout):
        while len(seqs) < count:
            frame = json.loads(await ws.recv())
            if frame["type"] == "actions":
                seqs.extend(action["seq"] for action in frame["actions"])
    return seqs


async def _sse_lines(lines_in: AsyncIterator[str], until: str, timeout: float = 5.0) -> list[str]:
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        async for line in lines_in:
            lines.append(line)
            if line.startswith(until):
                return lines
    return lines


async def test_a_cursor_beyond_the_head_gets_resync_and_freezes_nobody(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _session_with_four_turns(client)
        url = f"ws://{base}/v1/sessions/{sid}/ws"
        # The first subscriber claims to have seen seq 1,000,000 and stays connected.
        async with client.stream("GET", f"/v1/sessions/{sid}/events?after=1000000") as first:
            first_lines = first.aiter_lines()
            await _sse_lines(first_lines, ": connected")
            await asyncio.sleep(0.2)  # it is subscribed (or answered) by now
            # A later subscriber gets its backlog and then every live action.
            async with connect(f"{url}?after=0", additional_headers=AUTH) as ws:
                assert await _seqs(ws, 5) == [1, 2, 3, 4, 5]
                body = {"content": [{"type": "text", "text": "five"}]}
                await client.post(f"/v1/sessions/{sid}/messages", json=body)
                assert await _seqs(ws, 1) == [6]
            # The first one was told to resync (to the head it was connected at).
            lines = await _sse_lines(first_lines, "data: ")
            assert "event: resync" in lines
            assert json.loads(lines[-1].removeprefix("data: ")) == {"seq": 5}
        # Last-Event-ID beyond the head: the same answer.
        beyond = {"Last-Event-ID": "1000000"}
        async with client.stream("GET", f"/v1/sessions/{sid}/events", headers=beyond) as r:
            lines = await _sse_lines(r.aiter_lines(), "data: ")
            assert "event: resync" in lines and lines[-1] == 'data: {"seq": 6}'
        # So is a WebSocket's cursor: resync, then close 4000.
        async with connect(f"{url}?after=1000000", additional_headers=AUTH) as ws:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert frame == {"type": "resync", "seq": 6}
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000


async def test_a_subscriber_leaving_during_the_first_read_leaves_the_backlog_intact(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSE connects, reads `: connected` and leaves while the channel's first read of the
    log is still running (forced: reads are slow while it connects); the next WebSocket
    at after=0 must still get its whole backlog and then live actions."""
    real_read = env.store.read
    slow = asyncio.Event()

    async def read(session_id: str, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        if slow.is_set():
            await asyncio.sleep(0.3)
        return await real_read(session_id, after, limit)

    monkeypatch.setattr(env.store, "read", read)
    async with serving(env.app) as base, _client(base) as client:
        for attempt in range(8):
            sid = await _session_with_four_turns(client)
            slow.set()
            async with client.stream("GET", f"/v1/sessions/{sid}/events?after=0") as response:
                await _sse_lines(response.aiter_lines(), ": connected")
            await asyncio.sleep(0.1)  # the server notices the disconnect mid-read
            slow.clear()
            await asyncio.sleep(0.3)  # the cut-short read returns (and is ignored)
            url = f"ws://{base}/v1/sessions/{sid}/ws?after=0"
            async with connect(url, additional_headers=AUTH) as ws:
                assert await _seqs(ws, 5) == [1, 2, 3, 4, 5], f"attempt {attempt}"
                body = {"content": [{"type": "text", "text": "live"}]}
                await client.post(f"/v1/sessions/{sid}/messages", json=body)
                assert await _seqs(ws, 1) == [6], f"attempt {attempt}"
            assert env.hub.open_streams == 0 or await _drained(env)


async def _drained(env: Env) -> bool:
    for _ in range(100):
        if env.hub.open_streams == 0 and env.hub.subscriber_count == 0:
            return True
        await asyncio.sleep(0.02)
    return False
