"""A session's live streams: Server-Sent Events and the WebSocket (docs/server.md)."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Header, Query, WebSocket
from starlette.responses import Response

from opennua.store import NotFound

from ._authz import Anyone, Reader, authorize
from ._edge import MAX_SEQ, Context, errors_doc
from ._problems import Problem
from ._streams import NOT_FOUND_CLOSE_CODE, SSEResponse, websocket_session

router = APIRouter()
_SEQ = re.compile(r"[0-9]{1,19}", re.ASCII)


@router.get(
    "/v1/sessions/{session_id}/events",
    response_class=Response,
    responses={
        200: {"description": "the session's actions as SSE", "content": {"text/event-stream": {}}},
        **errors_doc("not_found", "validation_error", "unavailable"),
    },
)
async def events(
    ctx: Context,
    auth: Reader,
    session_id: str,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> SSEResponse:
    await ctx.host.session(session_id)
    if last_event_id is not None:
        # EventSource resends the last id it saw on reconnect: it wins over `after`.
        # ASCII digits only ('²'.isdigit() is true) and within the seq range.
        if not _SEQ.fullmatch(last_event_id) or int(last_event_id) > MAX_SEQ:
            raise Problem("validation_error", "Last-Event-ID must be a seq (0 to 2^63-1)")
        after = int(last_event_id)
    return SSEResponse(
        ctx.hub,
        session_id,
        after,
        heartbeat=ctx.heartbeat_seconds,
        send_timeout=ctx.send_timeout_seconds,
        watch=ctx.streams.watching(auth.caller, auth.workspace_id),
    )


@router.websocket("/v1/sessions/{session_id}/ws")
async def ws(
    websocket: WebSocket,
    ctx: Context,
    auth: Anyone,
    session_id: str,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    client_id: Annotated[str | None, Query(max_length=128)] = None,
) -> None:
    await websocket.accept()
    try:
        reader = await authorize(websocket, "read")
        await ctx.host.session(session_id)
    except (NotFound, Problem):
        # Accepted first: a close before accepting is an HTTP 403 the client cannot tell
        # from a refused credential. Another workspace's session is "not found" too.
        await websocket.close(code=NOT_FOUND_CLOSE_CODE, reason="session not found")
        return
    try:
        actor = (await authorize(websocket, "act")).actor(ctx.authority)
    except Problem:
        actor = None  # a viewer: reads the session, its intents are refused

    def count(intent: str, result: str) -> None:
        ctx.metrics.intents.labels(intent=intent, result=result).inc()

    async with ctx.streams.watching(reader.caller, reader.workspace_id) as watched:
        await websocket_session(
            websocket,
            ctx.host,
            ctx.hub,
            session_id,
            after,
            client_id,
            heartbeat=ctx.heartbeat_seconds,
            send_timeout=ctx.send_timeout_seconds,
            on_intent=count,
            actor=actor,
            watched=watched,
        )
