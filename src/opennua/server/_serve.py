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
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from opennua._common import write_private
from opennua.auth import Authority
from opennua.automation import SUBSCRIPTION_RETRY, Deliverer, Outbound, Scheduler
from opennua.gateway import Gateway, issue_ticket
from opennua.host import DEFAULT_WORKSPACE_QUOTA, Hub, SessionHost
from opennua.runtime import (
    AGENT_TOOL_NAMES,
    ModelConfigError,
    SandboxLimits,
    check_model,
    choose_sandbox,
    describe_sandbox,
    model_from_env,
)
from opennua.secrets import (
    SecretKeyError,
    SecretStore,
    decode_key,
    open_secret_store,
    rotate_key,
)
from opennua.server._a2a import push_renderer
from opennua.server._app import MAX_BODY, create_app
from opennua.server._gateway import with_gateway
from opennua.server._guard import default_allowed_hosts
from opennua.server._metrics import Metrics
from opennua.server._revocations import follow_revocations
from opennua.server._streams import ABORT_EXTENSION
from opennua.server._tracing import Telemetry, telemetry_from_env
from opennua.store import InvalidInput, Store, Unavailable, open_store
from opennua.supervisor import DEFAULT_RETENTION

if TYPE_CHECKING:
    from opennua.runtime import AgentDefinition, GatewayRoute, Sandbox, SandboxMode
    from opennua.supervisor import Supervisor

Role = Literal["all", "host", "supervisor", "gateway"]
DEFAULT_PORT = 7421
#: `nua serve` exits with this (sysexits' EX_CONFIG) when its configuration cannot work,
#: e.g. the model's provider key is missing: said at startup, not at the first turn.
EXIT_CONFIG = 78
#: ... and with this (EX_UNAVAILABLE) when its database did not answer within `db_wait`.
EXIT_UNAVAILABLE = 69


@dataclass(frozen=True)
class ServeConfig:
    data_dir: Path
    db: str | None = None
    role: Role = "all"
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    model: str | None = None
    lease_ttl: float = 15.0
    #: Executions the supervisor runs at once; the rest wait queued. A turn parked for an
    #: answer holds no slot.
    max_executions: int = 8
    deadline_seconds: float = 3600.0
    #: How `shell` and stdio MCP servers run: `auto` (bubblewrap where it starts, else
    #: Landlock), `bwrap`, `landlock`, or ("none", the operator's choice) unconfined.
    sandbox: str = "auto"
    #: Resource limits of every sandboxed program (docs/runtime.md, "The sandbox").
    sandbox_limits: SandboxLimits = field(default_factory=SandboxLimits)
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
    #: Bytes of uploaded plugin files each workspace may hold (docs/plugins.md
    #: "Publishing"); None: no limit.
    workspace_quota: int | None = DEFAULT_WORKSPACE_QUOTA
    #: Event subscriptions may be delivered to loopback and private addresses
    #: (docs/subscriptions.md, "Egress"); off: public addresses only.
    allow_private_subscriptions: bool = False
    #: Seconds before a failed delivery's first retry (then doubled per try, up to an hour).
    subscription_retry_base: float = 5.0
    #: Seconds a starting process waits for its database to answer: a server started
    #: during a database restart (or before it, by a service manager) rides it out
    #: instead of crash-looping.
    db_wait: float = 60.0

    def __post_init__(self) -> None:
        # Absolute from the start: the sandbox binds workspaces by path after changing
        # into them, so a relative data directory named nothing there ("bwrap: Can't find
        # source path"), and every other path derived from it would move with the cwd.
        object.__setattr__(self, "data_dir", Path(self.data_dir).resolve())

    @property
    def sandbox_mode(self) -> SandboxMode:
        """The mode in force: `auto` resolved (bubblewrap is tried once per process)."""
        return choose_sandbox(self.sandbox)

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir}/nua.db"


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


def owner_token(data_dir: Path) -> str:
    """The local owner token, created once with mode 0600 (the CLI reads it from here)."""
    path = data_dir / "token"
    if not path.exists():
        private_dir(data_dir)
        token = secrets.token_urlsafe(32)
        if write_private(path, token + "\n", replace=False):
            return token
        # Another process sharing this data directory created it first: use theirs.
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise RuntimeError(f"the owner token file {path} is empty")
    return token


async def _open_store_waiting(config: ServeConfig) -> Store:
    """The store, once its database answers: a PostgreSQL server is retried (1 s, then up
    to 5 s apart) for `config.db_wait` seconds, said once on stderr. A bad URL exits
    EXIT_CONFIG at once, a database still silent at the deadline EXIT_UNAVAILABLE. A
    SQLite file that cannot be opened is not a server that may come back: it exits at once."""
    server = config.db_url.split(":", 1)[0].lower() in ("postgresql", "postgres")
    deadline = time.monotonic() + (config.db_wait if server else 0.0)
    delay, said = 1.0, False
    while True:
        try:
            return await open_store(config.db_url, data_dir=config.data_dir, blobs=config.blobs)
        except InvalidInput as exc:
            print(f"nua serve: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_CONFIG) from None
        except Unavailable as exc:
            if time.monotonic() + delay > deadline:
                print(f"nua serve: {exc}", file=sys.stderr, flush=True)
                raise SystemExit(EXIT_UNAVAILABLE) from None
            if not said:
                print(f"nua serve: waiting for the database: {exc}", file=sys.stderr, flush=True)
                said = True
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def serve(config: ServeConfig) -> None:
    """Run until SIGTERM/SIGINT; then stop claiming, release leases and close the store.

    Exits with EXIT_CONFIG (after one line on stderr) when a supervisor could not run the
    configured model, e.g. its provider key is missing.

    Ready (`/readyz`) as soon as the store is open and HTTP listens: the Supervisor, the
    runtime it imports and the recovery it does (claiming what a killed process left
    running, the deadline sweep) start right after, behind it (docs/reliability.md).
    """
    model = config.model or model_from_env()
    if config.role in ("all", "supervisor"):
        try:
            check_model(model)
        except ModelConfigError as exc:
            print(f"nua serve: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_CONFIG) from None
    private_dir(config.data_dir)
    token = owner_token(config.data_dir)
    store = await _open_store_waiting(config)
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
            config, model, store, secret_store, stop, supervisor_id, token, metrics, telemetry
        )
    finally:
        telemetry.shutdown()  # spans and metrics still queued are exported, not lost


@dataclass
class _Running:
    """What the process runs, filled in as it starts (the Host reports appends to the
    Supervisor, which starts after it)."""

    supervisor: Supervisor | None = None

    async def recheck_grants(self, principal_ids: Collection[str]) -> None:
        """The app's revocation follower reaches this process's Supervisor through this
        (it starts after the app): `_revocations.Rechecks`."""
        if self.supervisor is not None:
            await self.supervisor.recheck_grants(principal_ids)


async def _serve(
    config: ServeConfig,
    model: str,
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
        # Login cookies and download links are MACed with the server's secret: every host
        # sharing NUA_SECRET_KEY accepts them, and a reader of the database forges none.
        authority = Authority(store, secret_key=secret_store.mac_key("authority"))
        await authority.bootstrap(token)
        running = _Running()
        tasks: list[asyncio.Task[None]] = []
        #: What ends a task that runs until told (at shutdown).
        closing: list[Callable[[], None]] = []
        gateway = None
        if config.role in ("all", "gateway"):
            gateway = Gateway(store, secret_store, tracer_provider=telemetry.tracer_provider)
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
                on_append=lambda count: _appended(metrics, running.supervisor, count),
                grant_check=authority.grant_problem,
                workspace_quota=config.workspace_quota,
                priced=_model_priced,
                agent_tools=AGENT_TOOL_NAMES,
            )
            await host.registry.ensure_builtin(model)
            allowed = [*default_allowed_hosts(config.host, config.port), *config.allowed_hosts]
            app = create_app(
                host,
                store,
                hub,
                authority=authority,
                metrics=metrics,
                allowed_hosts=allowed,
                secrets=secret_store,
                supervisor=running,
                allow_private_subscriptions=config.allow_private_subscriptions,
            )
            served = app if gateway is None else with_gateway(app, gateway)
            server = uvicorn.Server(uvicorn_config(served, config.host, config.port))
            tasks.append(asyncio.create_task(server.serve()))
            await _listening(server, tasks[-1])
            # So `nua run` and friends on this data directory find the server without --url.
            write_private(config.data_dir / "url", f"http://{_reach(config.host)}:{config.port}\n")
        scheduler: Scheduler | None = None
        deliverer: Deliverer | None = None
        if config.role in ("all", "supervisor"):
            supervisor = await _start_executing(
                config, model, store, authority, metrics, telemetry, secret_store,
                gateway, supervisor_id, running,
                None if host is None else host.published,
            )  # fmt: skip
            tasks.append(asyncio.create_task(supervisor.run()))
            if host is None:
                host = _supervisor_host(config, store, metrics, supervisor, authority)
                # No app follows revocations here: stop this process's attempts on the
                # grants a revocation breaks, then end what they left parked.
                rights = store.watch_rights()
                revocations = follow_revocations(
                    rights, authority, supervisor=supervisor, host=host
                )
                tasks.append(asyncio.create_task(revocations))
                closing.append(rights.close)
            # Schedules fire where executions run; one scheduler at a time holds the lease.
            scheduler = Scheduler(
                store,
                host,
                scheduler_id=supervisor_id,
                ttl=config.lease_ttl,
                on_fire=lambda lag: _fired(metrics, lag),
            )
            tasks.append(asyncio.create_task(scheduler.run()))
            # Subscriptions are delivered beside it, under a lease of their own.
            deliverer = Deliverer(
                store,
                secret_store,
                deliverer_id=supervisor_id,
                outbound=Outbound(allow_private=config.allow_private_subscriptions),
                retry=replace(SUBSCRIPTION_RETRY, base=config.subscription_retry_base),
                ttl=config.lease_ttl,
                renderers={"a2a": push_renderer},
            )
            tasks.append(asyncio.create_task(deliverer.run()))
        settle_heap()
        _announce(config, model, supervisor_id, token)
        await stop.wait()
        if scheduler is not None:
            await scheduler.shutdown()
        if deliverer is not None:
            await deliverer.shutdown()
        if running.supervisor is not None:
            await running.supervisor.shutdown()
        if server is not None:
            server.should_exit = True
        for close in closing:
            close()
        for task in tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(task, 10)
        if gateway is not None:
            await gateway.aclose()  # its last audit records are written


async def _listening(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """Until uvicorn has bound its socket (or failed to: its error is raised here)."""
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the HTTP server stopped before it started")
        await asyncio.sleep(0.005)


async def _start_executing(
    config: ServeConfig,
    model: str,
    store: Store,
    authority: Authority,
    metrics: Metrics,
    telemetry: Telemetry,
    secret_store: SecretStore,
    gateway: Gateway | None,
    supervisor_id: str,
    running: _Running,
    published: Callable[[str, list[dict[str, Any]]], Awaitable[None]] | None = None,
) -> Supervisor:
    """The Supervisor of this process. What it imports (the agent loop: pydantic-ai, the
    MCP client; seconds of CPU) is imported here, after HTTP answers, and in a thread, so
    the event loop goes on answering meanwhile; its recovery runs in its own loop."""
    agent, supervisor_class = await asyncio.to_thread(_load_executing, model)
    # Which confinement is in force (`auto` tries bubblewrap once per process): in a
    # thread too, for the same reason.
    sandbox = await asyncio.to_thread(_sandbox_of, config)
    issuer = None
    if config.gateway_url is not None:
        issuer = _issuer(store, config.gateway_url)
    elif config.role == "all":
        # Its own gateway, reached in-process (the URL names it in spans and errors).
        issuer = _issuer(store, f"http://{_reach(config.host)}:{config.port}", gateway)
    running.supervisor = supervisor_class(
        store,
        agent,
        supervisor_id=supervisor_id,
        data_dir=config.data_dir,
        ttl=config.lease_ttl,
        concurrency=config.max_executions,
        sandbox=sandbox,
        tracing=telemetry.tracing,
        on_claim=metrics.claims.inc,
        on_fenced=metrics.fenced_writes.inc,
        on_append=metrics.actions_appended.inc,
        # This process's Host fans out and folds the attempts' actions as committed,
        # without reading them back; other processes' Hosts follow the store.
        on_committed=published,
        grant_check=authority.renew_grant,
        gateway=issuer,
        sandbox_secret=secret_store.get,
        retention=config.workspace_retention if config.workspace_retention > 0 else None,
    )
    return running.supervisor


def _load_executing(model: str) -> tuple[AgentDefinition, type[Supervisor]]:
    from opennua.runtime import default_agent
    from opennua.supervisor import Supervisor

    return default_agent(model), Supervisor


def _sandbox_of(config: ServeConfig) -> Sandbox:
    from opennua.runtime import Sandbox

    return Sandbox(config.sandbox_mode, config.sandbox_limits)


def _model_priced(model: str) -> bool:
    """The runtime's `model_priced`, imported when a deployment is first saved."""
    from opennua.runtime import model_priced

    return model_priced(model)


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
    from opennua.runtime import GatewayRoute

    async def issue(execution_id: str, epoch: int) -> GatewayRoute:
        ticket = await issue_ticket(store, execution_id, epoch, time.time())
        egress = here.egress.over_stream if here is not None else None
        return GatewayRoute(url, ticket, app=here, egress=egress)

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
        workspace_quota=config.workspace_quota,
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
        lines.append(describe_sandbox(config.sandbox_mode))
    print("\n".join(lines), flush=True, file=sys.stdout)


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
