"""The gateway on `nua serve`'s HTTP server, and its audit over the API.

The gateway is its own ASGI app under `/v1/gateway/mcp/` and `/v1/gateway/a2a/`: its
callers are attempts holding a gateway ticket, not API clients with tokens, so it is
outside the Guard and outside `/openapi.json`; it authorizes every request itself
(docs/gateway.md). With `--role all` it shares the port of the API; with `--role
gateway` it is alone there.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from opennua.gateway import A2A_PATH, EGRESS_PATH, PATH
from opennua.protocol import timestamp
from opennua.store import AuditKind, AuditRecord

from ._authz import Manager
from ._edge import Context, errors_doc

router = APIRouter()


class AuditDoc(BaseModel):
    audit_id: str
    at: str
    #: A call to a tool (`tool_call`) or a connection through the egress proxy (`egress`).
    kind: AuditKind
    principal_id: str | None
    execution_id: str | None
    server: str
    tool: str | None
    host: str | None
    credential: str | None
    outcome: str
    code: str | None
    latency_ms: float
    #: An egress proxy connection's (server `egress`): the port and the bytes each way.
    port: int | None = None
    bytes_up: int | None = None
    bytes_down: int | None = None


class AuditList(BaseModel):
    items: list[AuditDoc]


def audit_doc(a: AuditRecord) -> dict[str, Any]:
    return {
        "audit_id": a.audit_id,
        "at": timestamp(a.at),
        "kind": a.kind,
        "principal_id": a.principal_id,
        "execution_id": a.execution_id,
        "server": a.server,
        "tool": a.tool,
        "host": a.host,
        "credential": a.credential,
        "outcome": a.outcome,
        "code": a.code,
        "latency_ms": round(a.latency_ms, 3),
        "port": a.port,
        "bytes_up": a.bytes_up,
        "bytes_down": a.bytes_down,
    }


@router.get(
    "/v1/audit",
    response_model=AuditList,
    responses=errors_doc("not_found", "validation_error", "unavailable"),
)
async def audit(
    ctx: Context,
    auth: Manager,
    execution_id: Annotated[str | None, Query(max_length=128)] = None,
    principal_id: Annotated[str | None, Query(max_length=128)] = None,
    server: Annotated[str | None, Query(max_length=128)] = None,
    tool: Annotated[str | None, Query(max_length=256)] = None,
    outcome: Annotated[str | None, Query(max_length=64)] = None,
    kind: AuditKind | None = None,
    since: Annotated[float | None, Query(ge=0, le=1e11, description="unix seconds")] = None,
    until: Annotated[
        float | None, Query(ge=0, le=1e11, description="unix seconds, exclusive")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    """The gateway's calls and egress proxy connections in a workspace, newest first
    (admins): who, which execution, which tool or host and port, which credential by name,
    the outcome and its latency. Every filter given must hold. No header and no value is
    ever part of a record."""
    records = await ctx.store.list_audit(
        workspace_id=auth.workspace_id,
        execution_id=execution_id,
        principal_id=principal_id,
        server=server,
        tool=tool,
        outcome=outcome,
        kind=kind,
        since=since,
        until=until,
        limit=limit,
    )
    return JSONResponse({"items": [audit_doc(a) for a in records]})


def with_gateway(app: ASGIApp, gateway: ASGIApp) -> ASGIApp:
    """`app`, with requests under the gateway's path answered by `gateway`."""

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["path"].startswith((PATH, A2A_PATH))) or (
            scope["type"] == "websocket" and scope["path"] == EGRESS_PATH
        ):
            await gateway(scope, receive, send)
        else:
            await app(scope, receive, send)

    return dispatch
