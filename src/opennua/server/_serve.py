"""The composition root of `nua serve`: store, hub, host, supervisor and HTTP in one place.

Roles: `all` (embedded default: everything in one process), `host` (HTTP + fan-out, no
execution), `supervisor` (executions only) and `gateway` (remote MCP calls only, see
docs/gateway.md). Many processes of each role share one PostgreSQL; any host serves any
session, supervisors share the queue, and any gateway answers any attempt.

What `nua serve` writes itself is private whatever the umask: the data directory it
creates is 0700, the token and url files are 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import secrets
import signal
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from opennua.auth import Authority
from opennua.automation import Scheduler
from opennua.gateway import Gateway, issue_ticket
from opennua.host import Hub, SessionHost
from opennua.runtime import (
    AgentDefinition,
    GatewayRoute,
    ModelConfigError,
    SandboxMode,
    default_agent,
    resolve_model,
    sandbox_problem,
)
from opennua.secrets import (
    SecretKeyError,
    SecretStore,
    decode_key,
    open_secret_store,
    rotate_key,
)
from opennua.server._app import MAX_BODY, create_app
from opennua.server._gateway import with_gateway
from opennua.server._guard import default_allowed_hosts
from opennua.server._metrics import Metrics
from opennua.server._streams import ABORT_EXTENSION
from opennua.server._tracing import Telemetry, telemetry_from_env
from opennua.store import InvalidInput, Store, open_store
from opennua.supervisor import DEFAULT_RETENTION, Supervisor

Role = Literal["all", "host", "supervisor", "gateway"]
DEFAULT_PORT = 7421
#: `nua serve` exits with this (sysexits' EX_CONFIG) when its configuration cannot work,
#: e.g. the model's provider key is missing: said at startup, not at the first turn.
EXIT_CONFIG = 78


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
    #: How `shell` runs: under bubblewrap, or ("none", the operator's choice) unconfined.
    sandbox: SandboxMode = "bwrap"
    #: Host header values allowed besides the defaults (the bound address, `localhost`,
    #: `127.0.0.1` and `[::1]` with the port); `NAME` allows any port, `*` any Host.
    allowed_hosts: tuple[str, ...] = ()
    #: Where blobs live: `file:///dir` or `s3://bucket/prefix`; None is the store's
    #: default (SQLite: DATA/blobs; PostgreSQL: the database itself).
    blobs: str | None = None
    #: Where this process's supervisor reaches the gateway: `--role all` uses its own,
    #: in-process; a `--role supervisor` needs one given (else remote MCP servers fail
    #: their turn with `gateway_unavailable`).
    gateway_url: str | None = None
    #: Seconds the workspace of an ended session is kept before its blobs are collected
    #: (docs/workspace.md "Retention"); 0 or less: kept forever.
    workspace_retention: float = DEFAULT_RETENTION

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir.resolve()}/nua.db"


class _AbortableHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a way for the app to drop its connection at once.

    ASGI has none: a response that ends early is closed gracefully, which for a peer that
    never reads means its unsent bytes stay buffered for as long as it stays connected.
    The SSE stream calls `scope["extensions"]["opennua.abort"]["abort"]()` instead.
    """

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        app = self.app

        def reset() -> None:
            # Linger 0 makes the close a reset: a plain close would leave the unsent bytes
            # to an orphaned kernel socket probing a zero window, which may give up without
            # telling the peer, and holds up to the send buffer of memory until it does.
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()  # type: ignore[attr-defined]

        abort = {"abort": reset}

        async def with_abort(scope: Any, receive: Any, send: Any) -> None:
            scope.setdefault("extensions", {})[ABORT_EXTENSION] = abort
            await app(scope, receive, send)

        self.app = with_abort


class _WebSockets(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, minus two false alarms: a handshake refused with an
    HTTP response (how the guard answers 401/403) counts as completed, so uvicorn no
    longer logs "ASGI callable returned without completing handshake" for each one; and
    a send after the protocol closed the connection itself (a frame over the size limit,
    a keepalive timeout) is the peer gone (`ClientDisconnected`), not the RuntimeError
    uvicorn keeps for an app that sends after its own close."""

    app_closed = False

    async def send(self, message: Any) -> None:
        if self.close_sent and not self.app_closed and message["type"] == "websocket.send":
            raise ClientDisconnected()
        if message["type"] == "websocket.close":
            self.app_closed = True
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            self.handshake_complete = True


def uvicorn_config(app: Any, host: str, port: int, *, max_body: int = MAX_BODY) -> uvicorn.Config:
    """How every opennua HTTP server runs (benchmarks use it too, to measure the same)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        # httptools (C), not h11: its parsing and framing was a quarter of the loop's CPU
        # per request (py-spy on benchmarks/automation.py); GET /healthz went 1.7x.
        http=_AbortableHttpTools,
        ws=_WebSockets,
        # Each frame would be compressed again for every subscriber; actions are small
        # and the link is usually local, so the CPU is better spent elsewhere.
        ws_per_message_deflate=False,
        # Frames over the body limit are refused (close 1009) before they are read whole.
        ws_max_size=max_body,
    )


def private_dir(path: Path) -> None:
    """Create `path` (and parents) if missing; what this creates is 0700 whatever the umask."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, mode 0600 whatever the umask (written aside, renamed)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, path)


def owner_token(data_dir: Path) -> str:
    """The local owner token, created once with mode 0600 (the CLI reads it from here)."""
    path = data_dir / "token"
    if path.exists():
        return _read_token(path)
    private_dir(data_dir)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process sharing this data directory created it first: use theirs.
        return _read_token(path)
    os.fchmod(fd, 0o600)
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
    """Run until SIGTERM/SIGINT; then stop claiming, release leases and close the store.

    Exits with EXIT_CONFIG (after one line on stderr) when a supervisor could not run the
    configured model, e.g. its provider key is missing.
    """
    agent = default_agent(config.model)
    if config.role in ("all", "supervisor"):
        try:
            resolve_model(agent.model)
        except ModelConfigError as exc:
            print(f"nua serve: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_CONFIG) from None
    private_dir(config.data_dir)
    token = owner_token(config.data_dir)
    try:
        store = await open_store(config.db_url, data_dir=config.data_dir, blobs=config.blobs)
    except InvalidInput as exc:
        print(f"nua serve: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CONFIG) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    supervisor_id = f"sup_{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(3)}"
    # One registry per process; a supervisor in this process counts its claims there too.
    metrics = Metrics()
    telemetry = telemetry_from_env(os.environ, metrics.registry)
    try:
        secret_store = await _open_secrets(store, config)
        await _serve(
            config, agent, store, secret_store, stop, supervisor_id, token, metrics, telemetry
        )
    finally:
        telemetry.shutdown()  # spans and metrics still queued are exported, not lost


async def _serve(
    config: ServeConfig,
    agent: AgentDefinition,
    store: Store,
    secret_store: SecretStore,
    stop: asyncio.Event,
    supervisor_id: str,
    token: str,
    metrics: Metrics,
    telemetry: Telemetry,
) -> None:
    async with store:
        # Zero setup: the first start makes the default workspace, whose owner's token is
        # the local owner token (and moves sessions from before workspaces into it).
        authority = Authority(store)
        await authority.bootstrap(token)
        supervisor: Supervisor | None = None
        tasks: list[asyncio.Task[None]] = []
        gateway = None
        if config.role in ("all", "gateway"):
            gateway = Gateway(store, secret_store, tracer_provider=telemetry.tracer_provider)
        issuer = None
        if config.gateway_url is not None:
            issuer = _issuer(store, config.gateway_url)
        elif config.role == "all":
            # Its own gateway, reached in-process (the URL names it in spans and errors).
            issuer = _issuer(store, f"http://{_reach(config.host)}:{config.port}", gateway)
        if config.role in ("all", "supervisor"):
            supervisor = Supervisor(
                store,
                agent,
                supervisor_id=supervisor_id,
                data_dir=config.data_dir,
                ttl=config.lease_ttl,
                sandbox=config.sandbox,
                tracing=telemetry.tracing,
                on_claim=metrics.claims.inc,
                on_fenced=metrics.fenced_writes.inc,
                on_append=metrics.actions_appended.inc,
                grant_check=authority.renew_grant,
                gateway=issuer,
                sandbox_secret=secret_store.get,
                retention=config.workspace_retention if config.workspace_retention > 0 else None,
            )
            tasks.append(asyncio.create_task(supervisor.run()))
        server = None
        if config.role == "gateway":
            assert gateway is not None
            alone = with_gateway(_health_only, gateway)
            server = uvicorn.Server(uvicorn_config(alone, config.host, config.port))
            tasks.append(asyncio.create_task(server.serve()))
        host: SessionHost | None = None
        if config.role in ("all", "host"):
            hub = Hub(store)
            host = SessionHost(
                store,
                hub,
                clock=time.time,
                deadline_seconds=config.deadline_seconds,
                on_append=lambda count: _appended(metrics, supervisor, count),
                grant_check=authority.grant_problem,
            )
            await host.registry.ensure_builtin(agent.model)
            allowed = [*default_allowed_hosts(config.host, config.port), *config.allowed_hosts]
            app = create_app(
                host,
                store,
                hub,
                authority=authority,
                metrics=metrics,
                allowed_hosts=allowed,
                secrets=secret_store,
            )
            served = app if gateway is None else with_gateway(app, gateway)
            server = uvicorn.Server(uvicorn_config(served, config.host, config.port))
            tasks.append(asyncio.create_task(server.serve()))
            # So `nua run` and friends on this data directory find the server without --url.
            write_private(config.data_dir / "url", f"http://{_reach(config.host)}:{config.port}\n")
        scheduler: Scheduler | None = None
        if supervisor is not None:
            # Schedules fire where executions run; one scheduler at a time holds the lease.
            scheduler = Scheduler(
                store,
                host or _supervisor_host(config, store, metrics, supervisor, authority),
                scheduler_id=supervisor_id,
                ttl=config.lease_ttl,
                on_fire=lambda lag: _fired(metrics, lag),
            )
            tasks.append(asyncio.create_task(scheduler.run()))
        settle_heap()
        _announce(config, agent.model, supervisor_id, token)
        await stop.wait()
        if scheduler is not None:
            await scheduler.shutdown()
        if supervisor is not None:
            await supervisor.shutdown()
        if server is not None:
            server.should_exit = True
        for task in tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(task, 10)
        if gateway is not None:
            await gateway.aclose()  # its last audit records are written


#: Young-generation collections: one per this many net allocations (CPython's default
#: is 700). See `settle_heap`.
GC_THRESHOLD = 7000


def settle_heap() -> None:
    """Once startup is done: collect its garbage, then move everything left (modules,
    the app and its routes, pydantic schemas: ~200,000 objects) out of the collector's
    sight, and collect the young generation less often.

    Each full collection walked that whole heap, which never becomes garbage: ~180 ms in
    which the event loop answered nothing, every ~1,000 webhook deliveries. And a young
    collection has a cost of its own beyond the objects it visits, so at CPython's
    default threshold (700) they took ~10% of a delivery's loop time; at 7,000 it is ~1%
    (docs/automation.md, "Figures"). Cycles made later are still collected; only what
    exists now is never looked at again (what of it becomes garbage is freed by
    reference counting, unless it is in a cycle)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)


def _issuer(
    store: Store, url: str, here: Gateway | None = None
) -> Callable[[str, int], Awaitable[GatewayRoute]]:
    async def issue(execution_id: str, epoch: int) -> GatewayRoute:
        ticket = await issue_ticket(store, execution_id, epoch, time.time())
        return GatewayRoute(url, ticket, app=here)

    return issue


async def _health_only(scope: Any, receive: Any, send: Any) -> None:
    """What a `--role gateway` process answers besides the gateway: `/healthz`."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    ok = scope["type"] == "http" and scope["path"] == "/healthz"
    status, body = (200, b'{"status":"ok"}') if ok else (404, b'{"code":"not_found"}')
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _supervisor_host(
    config: ServeConfig,
    store: Store,
    metrics: Metrics,
    supervisor: Supervisor,
    authority: Authority,
) -> SessionHost:
    """A Host for the scheduler of a supervisor-only process: it accepts the turns fires
    start (hosts elsewhere follow the store and fan them out)."""
    return SessionHost(
        store,
        Hub(store),
        deadline_seconds=config.deadline_seconds,
        on_append=lambda count: _appended(metrics, supervisor, count),
        grant_check=authority.grant_problem,
    )


def _fired(metrics: Metrics, lag: float) -> None:
    metrics.schedule_fires.inc()
    metrics.schedule_lag.observe(lag)


async def _open_secrets(store: Store, config: ServeConfig) -> SecretStore:
    """The secret store, its key proven against the store now: a wrong key is a startup
    error (one line, EXIT_CONFIG), not a failure at the first tool call."""
    try:
        return await open_secret_store(store, config.data_dir)
    except SecretKeyError as exc:
        await store.close()
        print(f"nua serve: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CONFIG) from None


async def rotate_secret_key(config: ServeConfig, new_key: str | None = None) -> int:
    """`nua secret rotate-key`: re-seal every secret of the store under a new key (given,
    when the key comes from `NUA_SECRET_KEY`; else generated into DATA/secret.key).
    ValueError with one line for the operator when the key is wrong or malformed."""
    try:
        given = None if new_key is None else decode_key(new_key, "the new key")
        store = await open_store(config.db_url, data_dir=config.data_dir, blobs=config.blobs)
        async with store:
            count, _ = await rotate_key(store, config.data_dir, new_key=given)
    except (SecretKeyError, InvalidInput) as exc:
        raise ValueError(str(exc)) from None
    return count


def _appended(metrics: Metrics, supervisor: Supervisor | None, count: int) -> None:
    metrics.actions_appended.inc(count)
    if supervisor is not None:
        supervisor.nudge()  # an accepted message or answer may be claimable now


def _announce(config: ServeConfig, model: str, supervisor_id: str, token: str) -> None:
    lines = [f"opennua {config.role} · model {model} · store {config.db_url}"]
    if config.blobs is not None:
        lines.append(f"blobs {config.blobs}")
    if config.role in ("all", "gateway"):
        lines.append(f"gateway on http://{config.host}:{config.port}/v1/gateway/mcp/")
    if config.role in ("all", "host"):
        url = f"http://{_browsable(config.host)}:{config.port}"
        lines.append(f"listening on http://{config.host}:{config.port}")
        lines.append(f"owner token: {config.data_dir / 'token'}")
        # The one place the token is shown: the link trades it for a cookie and redirects
        # to the web UI (the same token is in the 0600 token file the CLI reads).
        lines.append(f"web UI: {url}/login?token={token}")
    if config.role in ("all", "supervisor"):
        lines.append(f"supervisor {supervisor_id}")
        lines.append(_sandbox_banner(config.sandbox))
    print("\n".join(lines), flush=True, file=sys.stdout)


def _sandbox_banner(mode: SandboxMode) -> str:
    if mode == "none":
        return "sandbox: NONE — shell commands run unconfined"
    problem = sandbox_problem(mode)  # tried once per process; the supervisor reuses it
    if problem is not None:
        return (
            f"sandbox: bubblewrap UNAVAILABLE ({problem}) — shell commands are refused; "
            "--sandbox none runs them unconfined"
        )
    return "sandbox: bubblewrap"


def _reach(host: str) -> str:
    """How a local client reaches a bind address (a wildcard bind via IPv4 loopback)."""
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"[{reach}]" if ":" in reach else reach


def _browsable(host: str) -> str:
    """A host a browser can open: a wildcard bind address is reached via loopback."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
