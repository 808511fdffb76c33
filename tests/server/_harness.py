"""A Host + app over a real store, with a fake clock and deterministic ids."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from opennua.auth import Authority
from opennua.host import Hub, SessionHost
from opennua.protocol import action_id, new_id, timestamp
from opennua.protocol.ids import IdKind
from opennua.runtime import AGENT_TOOL_NAMES, model_priced
from opennua.secrets import SecretKey, SecretStore
from opennua.server import create_app
from opennua.server._serve import uvicorn_config
from opennua.store import InputRequestRecord, Store, open_store

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class CountingIds:
    """Unique, ordered, reproducible ids (entropy is a counter)."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._n = 0

    def __call__(self, kind: IdKind) -> str:
        self._n += 1
        return new_id(kind, ms=int(self._clock() * 1000), entropy=self._n.to_bytes(10, "big"))


@dataclass
class Env:
    store: Store
    hub: Hub
    host: SessionHost
    clock: FakeClock
    app: FastAPI
    authority: Authority

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(transport=transport, base_url="http://testserver", **kwargs)


@contextlib.asynccontextmanager
async def environment(
    url: str,
    data_dir: Path,
    *,
    max_actions: int = 1000,
    max_bytes: int = 1 << 20,
    **app_options: Any,
) -> AsyncIterator[Env]:
    store = await open_store(url, data_dir=data_dir)
    try:
        hub = Hub(store, max_actions=max_actions, max_bytes=max_bytes)
        clock = FakeClock()
        authority = Authority(store, clock=clock)
        await authority.bootstrap(TOKEN)
        host = SessionHost(
            store,
            hub,
            clock=clock,
            ids=CountingIds(clock),
            grant_check=authority.grant_problem,
            priced=model_priced,  # as `nua serve` wires it
            agent_tools=AGENT_TOOL_NAMES,  # likewise
        )
        await host.registry.ensure_builtin("scripted:demo")
        secrets = await SecretStore.open(store, SecretKey.generate(), clock=clock)
        options = {"heartbeat_seconds": 0.2, "clock": clock, "secrets": secrets, **app_options}
        app = create_app(host, store, hub, authority=authority, **options)
        yield Env(store, hub, host, clock, app, authority)
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """Run `app` on a loopback port in this event loop; yield its base URL."""
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", 0))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def park_for_input(
    env: Env,
    session_id: str,
    execution_id: str,
    turn_id: str,
    *,
    options: list[dict[str, Any]] | None = None,
    response_schema: dict[str, Any] | None = None,
    expires_in: float | None = None,
) -> str:
    """Play the Supervisor: claim the execution, park it and open an input request."""
    store, now = env.store, env.clock()
    claimed = await store.claim("sup_test", now, 15.0)
    assert claimed is not None and claimed.execution.execution_id == execution_id
    entropy = hashlib.sha256(execution_id.encode()).digest()[:10]
    request_id = new_id("request", ms=int(now * 1000), entropy=entropy)
    opened: dict[str, Any] = {
        "request_id": request_id,
        "reason": "tool_call" if options else "input_required",
        "prompt": "May I?",
        "options": options,
        "response_schema": response_schema,
        "expires_at": timestamp(now + expires_in) if expires_in else None,
    }
    action = {
        "v": 1,
        "session_id": session_id,
        "id": action_id(execution_id, "opened"),
        "type": "input_request.opened",
        "ts": timestamp(now),
        "turn_id": turn_id,
        "data": opened,
    }
    async with store.fenced(execution_id, claimed.epoch) as tx:
        tx.open_input_request(
            InputRequestRecord(
                request_id=request_id,
                session_id=session_id,
                execution_id=execution_id,
                turn_id=turn_id,
                status="open",
                payload=opened,
                created_at=now,
                expires_at=now + expires_in if expires_in else None,
            )
        )
        tx.append(session_id, [action])
        tx.park_for_input()
    await env.hub.notify(session_id)
    return request_id
