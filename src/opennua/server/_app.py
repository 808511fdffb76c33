"""The FastAPI app: every route of docs/server.md over one SessionHost, composed here.

Routes are thin and live in one router per resource (`_sessions`, `_intents`, `_live`,
`_executions`, `_artifacts`, `_health`): they build the protocol's intent objects (the
same ones the WebSocket takes), hand them to the Host and map its results onto HTTP.
Reads go through the Host too. All arbitration and every durable write happens in the
Host and the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Collection

from fastapi import FastAPI

from opennua.auth import Authority
from opennua.automation import Automation, Subscriptions
from opennua.host import Hub, SessionHost
from opennua.plugins import MAX_FILE_BYTES
from opennua.secrets import SecretStore
from opennua.store import Store

from . import (
    _a2a,
    _agui,
    _artifacts,
    _automation,
    _console,
    _executions,
    _gateway,
    _health,
    _intents,
    _live,
    _plugins,
    _principals,
    _problems,
    _secrets,
    _sessions,
    _subscriptions,
    _usage,
)
from ._authz import unguarded
from ._edge import AppContext
from ._guard import Guard, HostCheck
from ._metrics import Metrics
from ._revocations import Rechecks, Streams, follow_revocations
from ._streams import HEARTBEAT_SECONDS, SEND_TIMEOUT_SECONDS
from ._tracing import TraceParent
from ._web import WebUI

MAX_BODY = 1 << 20


def create_app(
    host: SessionHost,
    store: Store,
    hub: Hub,
    *,
    authority: Authority,
    metrics: Metrics | None = None,
    max_body: int = MAX_BODY,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    send_timeout_seconds: float = SEND_TIMEOUT_SECONDS,
    allowed_hosts: Collection[str] | None = None,
    follow_store: bool = True,
    clock: Callable[[], float] = time.time,
    secrets: SecretStore | None = None,
    supervisor: Rechecks | None = None,
    allow_private_subscriptions: bool = False,
) -> FastAPI:
    """The HTTP/SSE/WebSocket surface of one Host.

    `follow_store` runs `hub.follow(store.watch())` and `host.keep_snapshots(...)` for the
    app's lifetime, so actions appended by supervisors (in this process or another) reach
    subscribers and snapshots keep up, and follows the store's revocations
    (`_revocations.follow_revocations`, with `supervisor`: the one in this process, whose
    attempts a revocation stops); pass False when the composition root runs them.
    `allowed_hosts` is the Host allow-list (None: any Host; `nua serve` always passes one).
    `store` is read directly only by `/readyz`. `secrets` keeps webhook signing secrets
    (without one, creating or receiving hooks answers `unavailable`).
    """
    metrics = metrics or Metrics()
    metrics.watch_hub(hub)
    streams = Streams(authority)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not follow_store:
            yield
            return
        watchers = [store.watch(), store.watch(), store.watch_rights()]
        revocations = follow_revocations(
            watchers[2], authority, streams=streams, supervisor=supervisor, host=host
        )
        tasks = [
            asyncio.ensure_future(hub.follow(watchers[0])),
            asyncio.ensure_future(host.keep_snapshots(watchers[1])),
            asyncio.ensure_future(revocations),
        ]
        try:
            yield
        finally:
            for watcher in watchers:
                watcher.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

    modules = (
        _health,
        _sessions,
        _live,
        _intents,
        _executions,
        _artifacts,
        _plugins,
        _principals,
        _automation,
        _subscriptions,
        _secrets,
        _gateway,
        _usage,
        _console,
        _agui,
        _a2a,
    )
    routers = [m.router for m in modules]
    app = FastAPI(
        title="opennua",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # The routes themselves, not the routers: an included router is one entry that
        # FastAPI walks again for every request, with bookkeeping per route it tries, which
        # was a tenth of a webhook delivery's time on the loop (the delivery is route ~60).
        routes=[route for router in routers for route in router.routes],
        # FastAPI's own OpenTelemetry: opennua sets up its telemetry itself
        # (`_tracing`) and installs no global providers, so this only asked the global
        # ones on every request whether it was on (~3% of a delivery's loop time).
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    _problems.install(app)

    # Authorization is declared by every route (`_authz.Allow`): one without is a bug.
    missing = unguarded(app.router.routes)
    if missing:
        raise RuntimeError(f"routes without authorization: {missing}")
    _problems.index_methods(app, (route for router in routers for route in router.routes))

    app.state.context = AppContext(
        host=host,
        hub=hub,
        metrics=metrics,
        authority=authority,
        clock=clock,
        heartbeat_seconds=heartbeat_seconds,
        send_timeout_seconds=send_timeout_seconds,
        store=store,
        automation=Automation(store, host, secrets, clock=clock),
        subscriptions=Subscriptions(
            store, secrets, clock=clock, allow_private=allow_private_subscriptions
        ),
        streams=streams,
        secrets=secrets,
    )
    app.state.metrics = metrics
    app.state.host = host
    # Nothing, including 404s for unknown paths, is answered before auth ...
    app.add_middleware(Guard, authority=authority, max_body=max_body, max_upload=MAX_FILE_BYTES)
    # ... except the web UI's own static files (added after, so outside): public code that
    # holds no session data and must load to show a logged-out visitor how to log in ...
    app.add_middleware(WebUI)
    # ... and nothing at all for a Host this server is not reached by (DNS rebinding).
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed=list(allowed_hosts))
    app.add_middleware(TraceParent)
    return app
