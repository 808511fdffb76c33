"""Sessions: create, list, read (snapshot and history) and rename."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, JsonValue

from opennua.protocol import CreateSession, UpdateSession, timestamp
from opennua.protocol.intents import NAME_PATTERN
from opennua.store import SessionFilter

from ._authz import Acting, Reader
from ._edge import (
    INTENT_ERRORS,
    MAX_SEQ,
    Context,
    CreateSessionBody,
    IdempotencyKey,
    UpdateSessionBody,
    answer,
    errors_doc,
    guard_json_body,
    intent_key,
    intent_of,
)

router = APIRouter()
#: The workspace a request without an object in its path acts in (default: the caller's
#: first); a query parameter so that authorization reads it before any body.
_Workspace = Annotated[
    str | None, Query(max_length=128, description="default: your first workspace")
]
_READ_ERRORS = ("not_found", "validation_error", "unavailable")
#: What `next_cursor` looks like (the store's keyset: created_at and session id).
_CURSOR = r"^[0-9]{1,12}(\.[0-9]{1,9})?(e\+?[0-9]{1,2})?\|[A-Za-z0-9_]{1,128}$"


class SessionCreated(BaseModel):
    session_id: str


class SessionItem(BaseModel):
    session_id: str
    title: str
    created_at: str
    last_seq: int
    metadata: dict[str, JsonValue]
    status: Literal["idle", "running", "requires_action"]
    last_activity_at: str
    open_input_requests: int
    #: The execution snapshot: `name@version`, the deployment and the snapshot digest.
    plugin: str | None
    deployment: str | None
    snapshot_digest: str | None
    #: Who created it (the principal its turns run as unless its deployment says otherwise).
    principal_id: str | None


class SessionList(BaseModel):
    items: list[SessionItem]
    next_cursor: str | None


class SnapshotDoc(BaseModel):
    seq: int
    state: dict[str, JsonValue]


class ActionPage(BaseModel):
    actions: list[dict[str, JsonValue]]
    next_after: int
    more: bool


@router.post(
    "/v1/sessions",
    status_code=201,
    response_model=SessionCreated,
    responses=errors_doc(*INTENT_ERRORS),
    dependencies=[Depends(guard_json_body)],
)
async def create_session(
    ctx: Context,
    auth: Acting,
    body: CreateSessionBody,
    key: IdempotencyKey = None,
    workspace_id: _Workspace = None,
) -> JSONResponse:
    intent = intent_of(CreateSession, body, intent_key(ctx.host, body, key))
    result = await ctx.host.submit(None, intent, actor=auth.actor(ctx.authority))
    found = result.ids if result.type == "accepted" else {}
    return answer(
        ctx.metrics, "create_session", result, 201, {"session_id": found.get("session_id")}
    )


@router.get("/v1/sessions", response_model=SessionList, responses=errors_doc(*_READ_ERRORS))
async def list_sessions(
    ctx: Context,
    auth: Reader,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(pattern=_CURSOR, description="a `next_cursor`")] = None,
    workspace_id: _Workspace = None,
    status: Annotated[Literal["idle", "running", "requires_action"] | None, Query()] = None,
    deployment: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    principal_id: Annotated[
        str | None, Query(max_length=128, description="the principal that created it")
    ] = None,
    needs_input: Annotated[
        bool | None, Query(description="true: an input request is open; false: none is")
    ] = None,
    since: Annotated[
        float | None, Query(ge=0, le=1e11, description="created at or after (unix seconds)")
    ] = None,
    until: Annotated[
        float | None, Query(ge=0, le=1e11, description="created before (unix seconds)")
    ] = None,
    q: Annotated[
        str | None, Query(min_length=1, max_length=200, description="in the title, any case")
    ] = None,
) -> JSONResponse:
    """Newest first; every filter given must hold. Pages are a keyset (`next_cursor`), so
    the hundredth page costs what the first does and stays stable while sessions are made."""
    where = SessionFilter(
        workspace_id=auth.workspace_id,
        status=status,
        deployment=deployment,
        principal_id=principal_id,
        needs_input=needs_input,
        since=since,
        until=until,
        title=q,
    )
    page = await ctx.host.list_sessions(limit=limit, cursor=cursor, where=where)
    items = [
        {
            "session_id": s.session.session_id,
            "title": s.session.title or "",
            "created_at": timestamp(s.session.created_at),
            "last_seq": s.session.last_seq,
            "metadata": s.session.metadata or {},
            "status": s.status,
            "last_activity_at": timestamp(s.last_activity_at),
            "open_input_requests": s.open_input_requests,
            "plugin": s.session.plugin,
            "deployment": s.session.deployment,
            "snapshot_digest": s.session.snapshot_digest,
            "principal_id": s.session.principal_id,
        }
        for s in page.items
    ]
    return JSONResponse({"items": items, "next_cursor": page.next_cursor})


@router.get(
    "/v1/sessions/{session_id}",
    response_model=SnapshotDoc,
    responses=errors_doc(*_READ_ERRORS),
)
async def snapshot(ctx: Context, auth: Reader, session_id: str) -> Response:
    # The canonical state JSON is spliced in as is: no re-encoding of a large state.
    seq, state_json = await ctx.host.snapshot_json(session_id)
    return Response(f'{{"seq":{seq},"state":{state_json}}}', media_type="application/json")


@router.patch(
    "/v1/sessions/{session_id}",
    response_model=SessionCreated,
    responses=errors_doc(*INTENT_ERRORS),
    dependencies=[Depends(guard_json_body)],
)
async def update_session(
    ctx: Context,
    auth: Acting,
    session_id: str,
    body: UpdateSessionBody,
    key: IdempotencyKey = None,
) -> JSONResponse:
    intent = intent_of(UpdateSession, body, intent_key(ctx.host, body, key))
    result = await ctx.host.submit(session_id, intent, actor=auth.actor(ctx.authority))
    return answer(ctx.metrics, "update_session", result, 200, {"session_id": session_id})


@router.get(
    "/v1/sessions/{session_id}/actions",
    response_model=ActionPage,
    responses=errors_doc(*_READ_ERRORS),
)
async def actions(
    ctx: Context,
    auth: Reader,
    session_id: str,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    # Returned as is (no response model pass): a page holds up to 1,000 stored actions.
    page = await ctx.host.history(session_id, after, limit)
    next_after = page[-1]["seq"] if page else after
    return JSONResponse({"actions": page, "next_after": next_after, "more": len(page) == limit})
