"""Event subscriptions over HTTP (docs/subscriptions.md).

Creating, deleting and replaying need `manage` in the workspace: a subscription sends the
workspace's actions out of it, to a URL of the admin's choosing. Reading needs `read`.
The signing secret is in the create answer only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from opennua.automation import SubscriptionSpec
from opennua.store import EventDelivery, SubscriptionRecord

from ._authz import Manager, Reader
from ._edge import BODY_ERRORS, MAX_SEQ, Context, errors_doc, guard_json_body, ts

router = APIRouter()
_ERRORS = ("not_found", "validation_error", "unavailable")

EventName = Annotated[str, Field(min_length=1, max_length=64)]
Id = Annotated[str, Field(min_length=1, max_length=128)]


class SubscriptionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Annotated[str, Field(min_length=1, max_length=2000)]
    events: Annotated[list[EventName], Field(min_length=1, max_length=64)]
    deployment: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    session_id: Id | None = None


class ReplayEvent(BaseModel):
    """One recorded event again."""

    model_config = ConfigDict(extra="forbid")
    event_id: Id


class ReplayLog(BaseModel):
    """A session's matching actions again, from a seq of its log (seqs are per session)."""

    model_config = ConfigDict(extra="forbid")
    from_seq: Annotated[int, Field(ge=1)]
    session_id: Id


def subscription_doc(s: SubscriptionRecord) -> dict[str, Any]:
    return {
        "subscription_id": s.subscription_id,
        "workspace_id": s.workspace_id,
        "url": s.url,
        "events": list(s.events),
        "deployment": s.deployment,
        "session_id": s.session_id,
        "format": s.format,
        "execution_id": s.execution_id,
        "state": "active" if s.disabled_at is None else "disabled",
        "disabled_at": None if s.disabled_at is None else ts(s.disabled_at),
        "disabled_reason": s.disabled_reason,
        "created_by": s.created_by,
        "created_at": ts(s.created_at),
    }


def delivery_doc(d: EventDelivery) -> dict[str, Any]:
    return {
        "event_id": d.event_id,
        "event_type": d.event_type,
        "session_id": d.session_id,
        "seq": d.seq,
        "state": d.state,
        "attempts": d.attempts,
        "next_attempt_at": ts(d.next_at) if d.state == "pending" else None,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "created_at": ts(d.created_at),
        "updated_at": ts(d.updated_at),
    }


@router.post(
    "/v1/subscriptions",
    status_code=201,
    dependencies=[Depends(guard_json_body)],
    responses=errors_doc(*BODY_ERRORS, *_ERRORS, "invalid_subscription"),
)
async def create_subscription(ctx: Context, auth: Manager, body: SubscriptionBody) -> JSONResponse:
    """The subscription and its `whsec_` signing secret: the only answer that shows it."""
    assert auth.workspace_id is not None
    spec = SubscriptionSpec(**body.model_dump())
    created, secret = await ctx.subscriptions.create(
        auth.workspace_id, auth.caller.principal_id, spec
    )
    return JSONResponse({**subscription_doc(created), "secret": secret}, status_code=201)


@router.get("/v1/subscriptions", responses=errors_doc(*_ERRORS))
async def list_subscriptions(ctx: Context, auth: Reader) -> dict[str, Any]:
    assert auth.workspace_id is not None
    found = await ctx.subscriptions.in_workspace(auth.workspace_id)
    return {"subscriptions": [subscription_doc(s) for s in found]}


@router.get("/v1/subscriptions/{subscription_id}", responses=errors_doc(*_ERRORS))
async def get_subscription(ctx: Context, auth: Reader, subscription_id: str) -> dict[str, Any]:
    return subscription_doc(await ctx.subscriptions.get(subscription_id))


@router.delete(
    "/v1/subscriptions/{subscription_id}", status_code=204, responses=errors_doc(*_ERRORS)
)
async def delete_subscription(ctx: Context, auth: Manager, subscription_id: str) -> Response:
    """The subscription, what it still owed and its secret go."""
    await ctx.subscriptions.delete(subscription_id)
    return Response(status_code=204)


@router.get("/v1/subscriptions/{subscription_id}/deliveries", responses=errors_doc(*_ERRORS))
async def subscription_deliveries(
    ctx: Context,
    auth: Reader,
    subscription_id: str,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> dict[str, Any]:
    """Newest first: each event's state, attempts, last status and error."""
    found = await ctx.subscriptions.deliveries(subscription_id, limit)
    return {"deliveries": [delivery_doc(d) for d in found]}


@router.post(
    "/v1/subscriptions/{subscription_id}/replay",
    status_code=202,
    dependencies=[Depends(guard_json_body)],
    responses=errors_doc(*BODY_ERRORS, *_ERRORS),
)
async def replay(
    ctx: Context, auth: Manager, subscription_id: str, body: ReplayEvent | ReplayLog
) -> JSONResponse:
    """Queue deliveries again from the log; the deliverer sends them (each with the same
    `webhook-id` as before, so a receiver that has one already can drop it)."""
    if isinstance(body, ReplayEvent):
        await ctx.subscriptions.replay(subscription_id, event_id=body.event_id)
    else:
        await ctx.subscriptions.replay(
            # A seq past any log's end replays nothing; past 2**63 the store cannot hold it.
            subscription_id,
            from_seq=min(body.from_seq, MAX_SEQ),
            session_id=body.session_id,
        )
    return JSONResponse({"subscription_id": subscription_id, "queued": True}, status_code=202)
