"""The gateway on `nua serve`'s HTTP server, and its audit over the API.

The gateway is its own ASGI app under `/v1/gateway/mcp/`: its callers are attempts
holding a gateway ticket, not API clients with tokens, so it is outside the Guard and
outside `/openapi.json`; it authorizes every request itself (docs/gateway.md). With
`--role all` it shares the port of the API; with `--role gateway` it is alone there.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from opennua.gateway import PATH
from opennua.host import rfc3339
from opennua.store import AuditRecord

from ._authz import Manager
from ._edge import Context, errors_doc

router = APIRouter()


class AuditDoc(BaseModel):
    audit_id: str
    at: str
    principal_id: str | None
    execution_id: str | None
    server: str
    tool: str | None
    host: str | None
    credential: str | None
    outcome: str
    code: str | None
    latency_ms: float


class AuditList(BaseModel):
    items: list[AuditDoc]


def audit_doc(a: AuditRecord) -> dict[str, Any]:
    return {
        "audit_id": a.audit_id,
        "at": rfc3339(a.at),
        "principal_id": a.principal_id,
        "execution_id": a.execution_id,
        "server": a.server,
        "tool": a.tool,
        "host": a.host,
        "credential": a.credential,
        "outcome": a.outcome,
        "code": a.code,
        "latency_ms": round(a.latency_ms, 3),
    }


@router.get(
    "/v1/audit",
    response_model=AuditList,
    responses=errors_doc("not_found", "validation_error", "unavailable"),
)
async def audit(
    ctx: Context,
    auth: Manager,
    execution_id: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> JSONResponse:
    """The gateway's calls in a workspace, newest first (admins): who, which execution,
    which tool, which credential by name, the outcome and its latency."""
    records = await ctx.store.list_audit(
        workspace_id=auth.workspace_id, execution_id=execution_id, limit=limit
    )
    return JSONResponse({"items": [audit_doc(a) for a in records]})


def with_gateway(app: ASGIApp, gateway: ASGIApp) -> ASGIApp:
    """`app`, with requests under the gateway's path answered by `gateway`."""

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PATH):
            await gateway(scope, receive, send)
        else:
            await app(scope, receive, send)

    return dispatch
