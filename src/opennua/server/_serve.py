"""The composition root of `nua serve`: store, hub, host, supervisor and HTTP in one place.

Roles: `all` (embedded default: everything in one process), `host` (HTTP + fan-out, no
execution) and `supervisor` (executions only). Many processes of either role share one
PostgreSQL; any host serves any session and supervisors share the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import uvicorn

from opennua.host import SessionHost
from opennua.host.hub import Hub
from opennua.runtime import default_agent
from opennua.server._app import create_app
from opennua.server._metrics import Metrics
from opennua.store import open_store
from opennua.supervisor import Supervisor

Role = Literal["all", "host", "supervisor"]
DEFAULT_PORT = 7421


@dataclass(frozen=True)
class ServeConfig:
    data_dir: Path
    db: str | None = None
    role: Role = "all"
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    model: str | None = None
    lease_ttl: float = 15.0
    deadline_seconds: float = 3600.0

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir.resolve()}/nua.db"


def uvicorn_config(app: Any, host: str, port: int) -> uvicorn.Config:
    """How every opennua HTTP server runs (benchmarks use it too, to measure the same)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        # Each frame would be compressed again for every subscriber; actions are small
        # and the link is usually local, so the CPU is better spent elsewhere.
        ws_per_message_deflate=False,
    )


def owner_token(data_dir: Path) -> str:
    """The local owner token, created once with mode 0600 (the CLI reads it from here)."""
    path = data_dir / "token"
    if path.exists():
        return _read_token(path)
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process sharing this data directory created it first: use theirs.
        return _read_token(path)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def _read_token(path: Path) -> str:
    for _ in range(50):
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token
        time.sleep(0.01)  # the creator has the file open and is about to write it
    raise RuntimeError(f"the owner token file {path} is empty")


async def serve(config: ServeConfig) -> None:
    """Run until SIGTERM/SIGINT; then stop claiming, release leases and close the store."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    token = owner_token(config.data_dir)
    agent = default_agent(config.model)
    store = await open_store(config.db_url, data_dir=config.data_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    supervisor_id = f"sup_{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(3)}"
    # One registry per process; a supervisor in this process counts its claims there too.
    metrics = Metrics()
    async with store:
        supervisor: Supervisor | None = None
        tasks: list[asyncio.Task[None]] = []
        if config.role in ("all", "supervisor"):
            supervisor = Supervisor(
                store,
                agent,
                supervisor_id=supervisor_id,
                data_dir=config.data_dir,
                ttl=config.lease_ttl,
                on_claim=metrics.claims.inc,
                on_fenced=metrics.fenced_writes.inc,
                on_append=metrics.actions_appended.inc,
            )
            tasks.append(asyncio.create_task(supervisor.run()))
        server = None
        if config.role in ("all", "host"):
            hub = Hub(store.read)
            host = SessionHost(
                store,
                hub,
                clock=time.time,
                agent_digest=agent.digest,
                deadline_seconds=config.deadline_seconds,
                on_append=lambda count: _appended(metrics, supervisor, count),
            )
            app = create_app(host, store, hub, token=token, metrics=metrics)
            server = uvicorn.Server(uvicorn_config(app, config.host, config.port))
            tasks.append(asyncio.create_task(server.serve()))
        _announce(config, agent.model, supervisor_id, token)
        await stop.wait()
        if supervisor is not None:
            await supervisor.shutdown()
        if server is not None:
            server.should_exit = True
        for task in tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(task, 10)


def _appended(metrics: Metrics, supervisor: Supervisor | None, count: int) -> None:
    metrics.actions_appended.inc(count)
    if supervisor is not None:
        supervisor.nudge()  # an accepted message or answer may be claimable now


def _announce(config: ServeConfig, model: str, supervisor_id: str, token: str) -> None:
    lines = [f"opennua {config.role} · model {model} · store {config.db_url}"]
    if config.role in ("all", "host"):
        url = f"http://{_browsable(config.host)}:{config.port}"
        lines.append(f"listening on http://{config.host}:{config.port}")
        lines.append(f"owner token: {config.data_dir / 'token'}")
        # The one place the token is shown: the link trades it for a cookie and redirects
        # to the web UI (the same token is in the 0600 token file the CLI reads).
        lines.append(f"web UI: {url}/login?token={token}")
    if config.role in ("all", "supervisor"):
        lines.append(f"supervisor {supervisor_id}")
    print("\n".join(lines), flush=True, file=sys.stdout)


def _browsable(host: str) -> str:
    """A host a browser can open: a wildcard bind address is reached via loopback."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
