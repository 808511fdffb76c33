"""Intents on a session's turns: send a message, cancel, answer an input request, retry.

Each builds the protocol's intent object (the one the WebSocket takes too) and submits it
to the Host; `answer` maps the result onto HTTP.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, JsonValue

from opennua.host import Actor
from opennua.protocol import AnswerInput, Cancel, ReportDelivery, RetryTurn, SendMessage

from ._authz import Acting, Authorized
from ._edge import (
    INTENT_ERRORS,
    AnswerBody,
    AppContext,
    CancelBody,
    Context,
    DeliveryBody,
    IdempotencyKey,
    MessageBody,
    RetryBody,
    answer,
    errors_doc,
    guard_json_body,
    ids,
    intent_key,
    intent_of,
)

router = APIRouter(dependencies=[Depends(guard_json_body)])


def _actor(ctx: AppContext, auth: Authorized) -> Actor:
    return auth.actor(ctx.authority)


class TurnAccepted(BaseModel):
    turn_id: str
    execution_id: str


class DeliveryAccepted(BaseModel):
    delivery_id: str


class Answered(BaseModel):
    resolution: dict[str, JsonValue]


@router.post(
    "/v1/sessions/{session_id}/messages",
    status_code=202,
    response_model=TurnAccepted,
    responses=errors_doc(*INTENT_ERRORS, "session_busy"),
)
async def send_message(
    ctx: Context, auth: Acting, session_id: str, body: MessageBody, key: IdempotencyKey = None
) -> JSONResponse:
    intent = intent_of(SendMessage, body, intent_key(ctx.host, body, key))
    result = await ctx.host.submit(session_id, intent, actor=_actor(ctx, auth))
    return answer(ctx.metrics, intent.type, result, 202, ids(result, "turn_id", "execution_id"))


@router.post(
    "/v1/sessions/{session_id}/cancel",
    status_code=202,
    response_model=TurnAccepted,
    responses=errors_doc(*INTENT_ERRORS, "turn_not_active"),
)
async def cancel(
    ctx: Context, auth: Acting, session_id: str, body: CancelBody, key: IdempotencyKey = None
) -> JSONResponse:
    intent = intent_of(Cancel, body, intent_key(ctx.host, body, key))
    result = await ctx.host.submit(session_id, intent, actor=_actor(ctx, auth))
    return answer(ctx.metrics, intent.type, result, 202, ids(result, "turn_id", "execution_id"))


@router.post(
    "/v1/sessions/{session_id}/input-requests/{request_id}/answer",
    response_model=Answered,
    responses=errors_doc(*INTENT_ERRORS, "input_request_resolved", "gone"),
)
async def answer_input(
    ctx: Context,
    auth: Acting,
    session_id: str,
    request_id: str,
    body: AnswerBody,
    key: IdempotencyKey = None,
) -> JSONResponse:
    intent = intent_of(AnswerInput, body, intent_key(ctx.host, body, key), request_id=request_id)
    result = await ctx.host.submit(session_id, intent, actor=_actor(ctx, auth))
    resolution = result.resolution if result.type == "accepted" else None
    return answer(ctx.metrics, intent.type, result, 200, {"resolution": resolution})


@router.post(
    "/v1/sessions/{session_id}/turns/{turn_id}/retry",
    status_code=202,
    response_model=TurnAccepted,
    responses=errors_doc(*INTENT_ERRORS, "turn_active"),
)
async def retry(
    ctx: Context,
    auth: Acting,
    session_id: str,
    turn_id: str,
    body: RetryBody,
    key: IdempotencyKey = None,
) -> JSONResponse:
    intent = intent_of(RetryTurn, body, intent_key(ctx.host, body, key), turn_id=turn_id)
    result = await ctx.host.submit(session_id, intent, actor=_actor(ctx, auth))
    return answer(ctx.metrics, intent.type, result, 202, ids(result, "turn_id", "execution_id"))


@router.post(
    "/v1/sessions/{session_id}/deliveries/{delivery_id}",
    status_code=202,
    response_model=DeliveryAccepted,
    responses=errors_doc(*INTENT_ERRORS, "delivery_closed"),
)
async def report_delivery(
    ctx: Context,
    auth: Acting,
    session_id: str,
    delivery_id: str,
    body: DeliveryBody,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """A bridge reports a delivery's new state; the Host appends `delivery.updated`."""
    key = intent_key(ctx.host, body, key)
    intent = intent_of(ReportDelivery, body, key, delivery_id=delivery_id)
    result = await ctx.host.submit(session_id, intent, actor=_actor(ctx, auth))
    return answer(ctx.metrics, intent.type, result, 202, ids(result, "delivery_id"))
