"""Issue 12, bug 9: SSE readers that never read are dropped like stalled WebSockets.

Real TCP sockets with a tiny receive buffer that never read, against a real uvicorn on
loopback; the assertions are on what the Hub holds for them, not on RSS.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._support.polling import until

from ._harness import AUTH, TOKEN, Env, environment, serving

SEND_TIMEOUT = 1.0


@pytest.fixture
async def env(tmp_path: Path) -> Any:
    async with environment(
        f"sqlite:///{tmp_path}/nua.db", tmp_path, send_timeout_seconds=SEND_TIMEOUT
    ) as e:
        yield e


def _stalled_reader(base: str, sid: str) -> socket.socket:
    host, port = base.split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    request = (
        f"GET /v1/sessions/{sid}/events?after=0 HTTP/1.1\r\nHost: {base}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    )
    sock.sendall(request.encode())
    return sock  # and never read from again


def _read_until_reset(sock: socket.socket) -> int:
    """The bytes a stalled socket still held before the server's reset reached it."""
    received = 0
    with pytest.raises(ConnectionResetError):
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
    return received


def _overflowing() -> int:
    """How many 1 MB actions a stalled reader cannot absorb: more than the kernel's largest
    autotuned send buffer (4 MiB on Linux by default; 3 MB fitted in it, and no reader
    ever stalled), so the server's writes to it must block."""
    try:
        largest = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, ValueError, IndexError):
        largest = 4 << 20
    return largest // 1_000_000 + 2


def _big(sid: str, n: int) -> dict[str, Any]:
    return {
        "v": 1,
        "session_id": sid,
        "id": f"act_big_{n}",
        "type": "test.filler",
        "ts": "2027-01-15T08:00:00.000Z",
        "data": {"blob": "x" * 1_000_000},
    }


async def test_sse_readers_that_never_read_are_dropped_within_the_timeout(env: Env) -> None:
    async with serving(env.app) as base:
        async with httpx.AsyncClient(base_url=f"http://{base}", headers=AUTH) as client:
            sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
            sockets = [_stalled_reader(base, sid) for _ in range(20)]
            try:
                await until(lambda: env.hub.open_streams == 20, 10)
                # A reader that does read, to show delivery goes on for everyone else.
                async with client.stream("GET", f"/v1/sessions/{sid}/events?after=1") as live:
                    lines = live.aiter_lines()
                    count = _overflowing()
                    for n in range(count):
                        await env.store.append(sid, [_big(sid, n)])
                        await env.hub.notify(sid)
                    ids = []
                    async with asyncio.timeout(10 + count):
                        async for line in lines:
                            if line.startswith("id: "):
                                ids.append(line)
                                if len(ids) == count:
                                    break
                    assert ids == [f"id: {seq}" for seq in range(2, 2 + count)]
                    # Every stalled reader is dropped within the send timeout (plus the
                    # time its first writes took to fill the socket buffers), and what
                    # was queued for it is released.
                    started = asyncio.get_running_loop().time()
                    await until(lambda: env.hub.open_streams == 1, 4 * SEND_TIMEOUT)
                    waited = asyncio.get_running_loop().time() - started
                    assert waited <= 4 * SEND_TIMEOUT
                    assert env.hub.queued_bytes == 0
                    assert env.hub.subscriber_count == 1
                # The server reset the connections: each stalled socket holds at most what
                # its own receive buffer took before it stalled, then the reset. What the
                # server had queued was discarded, not left to an orphaned kernel socket
                # that would trickle megabytes on (or give up on the peer without a word).
                # Read in a thread: the server runs on this event loop, and a stream the Hub
                # has dropped may not have aborted its connection yet (a blocking recv here
                # would keep it from ever doing so: CI saw one such recv time out).
                for sock in sockets:
                    sock.settimeout(15)
                    received = await asyncio.to_thread(_read_until_reset, sock)
                    assert received <= 64 * 1024
            finally:
                for sock in sockets:
                    sock.close()
        await until(lambda: env.hub.open_streams == 0, 5)
