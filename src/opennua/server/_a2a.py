"""A2A (agents calling agents) over HTTP: a deployment's Agent Card and its JSON-RPC
binding (docs/protocols.md, "A2A").

One more client of the Host: a message becomes `CreateSession`/`SendMessage` (or, for a
task waiting on input, `AnswerInput`) through `SessionHost.submit`, and every task it
shows is folded from the session's log (`opennua.protocols.a2a`): there is no task store,
so `GetTask` and `SubscribeToTask` answer the same after a restart. The SDK's types are
imported on the first A2A request, not at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Send
from starlette.types import Scope as ASGIScope

from opennua.auth import Denied
from opennua.automation import RenderStep
from opennua.host import Refused, Scope
from opennua.protocol.state import SessionState
from opennua.store import SubscriptionRecord

from ._authz import Authorized, Reader
from ._edge import AppContext, Context, errors_doc
from ._gzip import gzip_send
from ._problems import Problem

if TYPE_CHECKING:  # the SDK's types only for the checker: imported on the first request
    from a2a.types import StreamResponse

    from opennua.protocols.a2a import RequestId

router = APIRouter()
_DOC = errors_doc("not_found")


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def _scope(ctx: AppContext, auth: Authorized, name: str) -> Scope:
    """The caller's view of the registry; `not_found` unless the deployment is in it."""
    scope = Scope(str(auth.workspace_id), auth.caller.principal_id)
    try:
        await ctx.host.registry.deployment(name, scope)
    except Refused as exc:
        raise Problem("not_found", f"no deployment named {name!r}") from exc
    return scope


@router.get("/v1/a2a/{name}/.well-known/agent-card.json", responses=_DOC)
async def agent_card(ctx: Context, auth: Reader, name: str, request: Request) -> JSONResponse:
    """The deployment's Agent Card: its plugin's skills, the JSON-RPC URL, bearer auth."""
    scope = await _scope(ctx, auth, name)
    from google.protobuf.json_format import MessageToDict

    from opennua.protocols import a2a

    registry = ctx.host.registry
    try:
        snap = await registry.resolve(name, scope)
        plugin = await registry.plugin_of(await registry.version(snap.plugin, snap.version, scope))
    except Refused as exc:
        raise Problem("not_found", exc.detail) from exc
    card = a2a.agent_card(
        deployment=name,
        url=f"{_base_url(request)}/v1/a2a/{name}",
        plugin=plugin.name,
        version=plugin.version,
        description=plugin.description,
        skills=[a2a.Skill(s.name, s.description) for s in plugin.skills],
        # Pushes are subscriptions (the deliverer runs where `nua serve` runs executions).
        push_notifications=ctx.subscriptions.secrets_available,
    )
    return JSONResponse(MessageToDict(card))


@router.post(
    "/v1/a2a/{name}",
    response_class=Response,
    responses={
        200: {
            "description": "a JSON-RPC response, or for the streaming methods an SSE stream "
            "of them (`data:` lines), as the A2A JSON-RPC binding defines",
            "content": {"application/json": {}, "text/event-stream": {}},
        },
        **_DOC,
    },
)
async def json_rpc(ctx: Context, auth: Reader, name: str, request: Request) -> Response:
    """The A2A v1 JSON-RPC binding of the deployment (`SendMessage`, `GetTask`, …).
    Protocol faults answer 200 with a JSON-RPC error, as the binding says."""
    await _scope(ctx, auth, name)
    from opennua.protocols import a2a

    from ._a2a_tasks import A2ACall, Caller

    body = await request.body()
    try:
        rpc = a2a.parse_call(body, request.headers.get("a2a-version"))
    except a2a.RpcError as exc:
        return JSONResponse(a2a.error_body(exc.error, exc.id))
    if rpc.need == "act":
        try:
            ctx.authority.check(auth.caller, auth.workspace_id, "act")
        except Denied as exc:
            raise Problem(exc.code, exc.detail) from exc
    caller = Caller(
        principal_id=auth.caller.principal_id,
        workspace_id=str(auth.workspace_id),
        actor=auth.actor(ctx.authority),
        watch=lambda: ctx.streams.watching(auth.caller, auth.workspace_id),
    )
    call = A2ACall(
        ctx.host,
        ctx.hub,
        caller,
        name,
        _base_url(request),
        ctx.heartbeat_seconds,
        ctx.subscriptions,
    )
    if rpc.method in a2a.STREAMING:
        try:
            first, rest = await call.stream(rpc)
        except a2a.RpcError as exc:
            return JSONResponse(a2a.error_body(exc.error, rpc.id))
        return _Stream(_sse(rpc.id, first, rest), ctx.send_timeout_seconds)
    try:
        result = await call.unary(rpc)
    except a2a.RpcError as exc:
        return JSONResponse(a2a.error_body(exc.error, rpc.id))
    return JSONResponse(a2a.result_body(result, rpc.id))


class _Stream(StreamingResponse):
    """The SSE response; a peer that stops reading is dropped after the send timeout (as
    our own streams do, `_streams`), so it pins neither its subscription nor a task."""

    def __init__(self, content: AsyncIterator[str], send_timeout: float) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._send_timeout = send_timeout

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        out = gzip_send(scope, send)

        async def timed(message: Message) -> None:
            async with asyncio.timeout(self._send_timeout):
                await out(message)

        with contextlib.suppress(TimeoutError):
            await super().__call__(scope, receive, timed)


def push_renderer(subscription: SubscriptionRecord, state: SessionState) -> RenderStep:
    """The deliverer's renderer for A2A push configs (`opennua.protocols.a2a` on the
    first push: a server start does not import the SDK)."""
    from opennua.protocols import a2a

    assert subscription.session_id is not None and subscription.execution_id is not None
    return a2a.push_step(
        subscription.session_id, subscription.execution_id, subscription.origin or "", state
    )


async def _sse(
    request_id: RequestId,
    first: StreamResponse,
    rest: AsyncIterator[StreamResponse | None],
) -> AsyncIterator[str]:
    """Each event as one `data:` line holding a JSON-RPC response; a comment on quiet."""
    from google.protobuf.json_format import MessageToDict

    from opennua.protocols import a2a

    yield f"data: {json.dumps(a2a.result_body(MessageToDict(first), request_id))}\n\n"
    try:
        async for event in rest:
            if event is None:
                yield ": heartbeat\n\n"
                continue
            body = a2a.result_body(MessageToDict(event), request_id)
            yield f"data: {json.dumps(body)}\n\n"
    except a2a.RpcError as exc:
        yield f"event: error\ndata: {json.dumps(a2a.error_body(exc.error, request_id))}\n\n"
