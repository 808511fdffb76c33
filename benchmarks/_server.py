"""Shared by the server benchmarks: a Host + Hub + HTTP app on loopback, in this process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from opennua.auth import Authority
from opennua.host import Hub, SessionHost
from opennua.protocol.ids import new_id
from opennua.server import create_app
from opennua.server._serve import uvicorn_config
from opennua.store import Store

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_demo(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`nua serve` on `data` with the zero-delay scripted demo, as its own process; returns
    once it is ready (the token is in `data / "token"`)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data), "--port", str(port),
         "--model", "scripted:demo"],
        env=dict(os.environ, NUA_DEMO_STEP_DELAY="0"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("nua serve did not become ready in 90 s")


@dataclass
class Running:
    url: str
    host: SessionHost
    hub: Hub


@contextlib.asynccontextmanager
async def serving(store: Store, port: int) -> AsyncIterator[Running]:
    """The app `nua serve --role host` builds, under uvicorn on 127.0.0.1:port."""
    hub = Hub(store)
    authority = Authority(store)
    await authority.bootstrap(TOKEN)
    host = SessionHost(store, hub, clock=time.time, grant_check=authority.grant_problem)
    await host.registry.ensure_builtin("scripted:demo")
    app = create_app(host, store, hub, authority=authority)
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield Running(f"http://127.0.0.1:{port}", host, hub)
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


def envelope(session_id: str, action_id: str, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 1,
        "session_id": session_id,
        "seq": None,
        "id": action_id,
        "type": type_,
        "ts": "2026-11-29T08:00:00.000Z",
        "turn_id": None,
        "run_id": None,
        "client_id": None,
        "intent_id": None,
        "data": data,
    }


async def new_session(store: Store, tag: bytes = b"bench") -> str:
    """A session written straight into the store, in the first workspace (the one a fresh
    data directory gets), so the owner's token may read it."""
    now = time.time()
    sid = new_id("session", ms=int(now * 1000), entropy=tag.ljust(10, b"-")[:10])
    workspaces = await store.list_workspaces()
    workspace_id = workspaces[0].workspace_id if workspaces else None
    await store.create_session(sid, created_at=now, title="bench", workspace_id=workspace_id)
    created = {
        "title": "bench",
        "principal_id": "prn_owner",
        "plugin": None,
        "deployment_digest": "sha256:bench",
        "metadata": {},
    }
    await store.append(sid, [envelope(sid, "act_" + sid[4:], "session.created", created)])
    return sid


async def streaming_turn(store: Store, sid: str, message_id: str = "msg_bench") -> str:
    """Open a running turn and an assistant message that `message.delta`s can extend."""
    turn = "trn_" + sid[4:]
    started = {
        "execution_id": "exe_" + sid[4:],
        "message_id": "msg_user",
        "trigger": {"kind": "message", "principal_id": "prn_owner"},
        "input": [{"type": "text", "text": "go"}],
        "trace_id": "trace",
    }
    actions = [
        envelope(sid, "act_turn" + sid[4:], "turn.started", started),
        envelope(sid, "act_state" + sid[4:], "turn.state", {"state": "running", "attempt": 1}),
        envelope(
            sid,
            "act_msg" + sid[4:],
            "message.started",
            {"message_id": message_id, "role": "assistant"},
        ),
    ]
    for action in actions:
        action["turn_id"] = turn
        action["run_id"] = "run_" + sid[4:]
    await store.append(sid, actions)
    return turn


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (0..100), nearest-rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary_ms(values: list[float]) -> str:
    if not values:
        return "no samples"
    ms = [v * 1000 for v in values]
    return (
        f"p50 {pct(ms, 50):7.2f} ms  p90 {pct(ms, 90):7.2f} ms  p99 {pct(ms, 99):7.2f} ms"
        f"  max {max(ms):7.2f} ms  mean {statistics.fmean(ms):6.2f} ms  (n={len(ms)})"
    )


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
