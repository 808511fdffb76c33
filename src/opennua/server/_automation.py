"""Schedules and webhooks over HTTP (docs/automation.md).

Managing them needs `manage` in the workspace: a schedule or a hook makes work run as a
deployment's principal, which may hold more rights than a member. Reading needs `read`.
A delivery (`POST /v1/hooks/{hook_id}`) carries no token: the hook's Standard Webhooks
signature is its authentication, checked before anything else is read; a bad one is 401
`bad_signature`, counted in `/metrics` and logged without the payload.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from opennua.automation import (
    AutomationError,
    BadSignature,
    HookSpec,
    Run,
    ScheduleSpec,
)
from opennua.store import HookRecord, ScheduleRecord

from ._authz import Manager, Reader, Signed
from ._edge import BODY_ERRORS, Context, errors_doc, guard_json_body, ts
from ._problems import Problem

log = logging.getLogger("opennua.server.hooks")
router = APIRouter()
#: What every route here may answer besides its own codes (an unknown workspace or
#: object, a bad query parameter, the store or the secret store not answering).
_ERRORS = ("not_found", "validation_error", "unavailable")

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name
    cron: Annotated[str, Field(min_length=1, max_length=200)]
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = "UTC"
    deployment: Annotated[str, Field(min_length=1, max_length=64)] = "default"
    prompt: Annotated[str, Field(min_length=1, max_length=20_000)]
    misfire: Literal["skip", "run_once"] = "skip"
    session_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class HookBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name
    deployment: Annotated[str, Field(min_length=1, max_length=64)] = "default"
    prompt: Annotated[str, Field(min_length=1, max_length=20_000)]
    max_bytes: Annotated[int, Field(ge=1, le=1 << 20)] = 64 * 1024


def _problem(exc: AutomationError) -> Problem:
    return Problem(exc.code, exc.detail)


def _run(run: Run) -> dict[str, Any]:
    f = run.fire
    return {
        "fire_time": ts(f.fire_at),
        "fired_at": ts(f.fired_at),
        "lag_seconds": round(f.fired_at - f.fire_at, 3),
        "session_id": f.session_id,
        "turn_id": f.turn_id,
        "execution_id": f.execution_id,
        "status": run.status,
        "scheduler_id": f.scheduler_id,
        "error": None
        if f.refused_code is None
        else {"code": f.refused_code, "message": f.refused_detail or ""},
    }


def _schedule(s: ScheduleRecord, runs: list[Run] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schedule_id": s.schedule_id,
        "workspace_id": s.workspace_id,
        "name": s.name,
        "cron": s.cron,
        "timezone": s.timezone,
        "deployment": s.deployment,
        "prompt": s.prompt,
        "misfire": s.misfire,
        "session_id": s.session_id,
        "paused": s.paused,
        "next_fire_time": None if s.paused else ts(s.next_fire_at),
        "created_by": s.created_by,
        "created_at": ts(s.created_at),
    }
    if runs is not None:
        out["recent_runs"] = [_run(r) for r in runs]
    return out


def _hook(h: HookRecord, request: Request) -> dict[str, Any]:
    return {
        "hook_id": h.hook_id,
        "workspace_id": h.workspace_id,
        "name": h.name,
        "deployment": h.deployment,
        "prompt": h.prompt,
        "max_bytes": h.max_bytes,
        "url": str(request.url_for("deliver", hook_id=h.hook_id)),
        "created_by": h.created_by,
        "created_at": ts(h.created_at),
    }


# -- schedules ---------------------------------------------------------------------------


@router.post(
    "/v1/schedules",
    status_code=201,
    dependencies=[Depends(guard_json_body)],
    responses=errors_doc(*BODY_ERRORS, *_ERRORS, "invalid_schedule", "already_exists"),
)
async def create_schedule(ctx: Context, auth: Manager, body: ScheduleBody) -> JSONResponse:
    assert auth.workspace_id is not None
    spec = ScheduleSpec(**body.model_dump())
    try:
        created = await ctx.automation.create_schedule(
            auth.workspace_id, auth.caller.principal_id, spec
        )
    except AutomationError as exc:
        raise _problem(exc) from None
    return JSONResponse(_schedule(created, []), status_code=201)


@router.get("/v1/schedules", responses=errors_doc(*_ERRORS))
async def list_schedules(
    ctx: Context, auth: Reader, runs: Annotated[int, Query(ge=0, le=50)] = 5
) -> dict[str, Any]:
    """The workspace's schedules with their next fire and most recent runs."""
    assert auth.workspace_id is not None
    out = []
    for s in await ctx.automation.schedules(auth.workspace_id):
        recent = await ctx.automation.runs(s.schedule_id, runs) if runs else []
        out.append(_schedule(s, recent))
    return {"schedules": out}


@router.get("/v1/schedules/{schedule_id}", responses=errors_doc(*_ERRORS))
async def get_schedule(ctx: Context, auth: Reader, schedule_id: str) -> dict[str, Any]:
    s = await ctx.automation.schedule(schedule_id)
    return _schedule(s, await ctx.automation.runs(schedule_id))


@router.get("/v1/schedules/{schedule_id}/runs", responses=errors_doc(*_ERRORS))
async def schedule_runs(
    ctx: Context,
    auth: Reader,
    schedule_id: str,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> dict[str, Any]:
    """Newest first: each fire's slot, when it fired, its session, turn and status."""
    await ctx.automation.schedule(schedule_id)
    return {"runs": [_run(r) for r in await ctx.automation.runs(schedule_id, limit)]}


@router.post("/v1/schedules/{schedule_id}/pause", responses=errors_doc(*_ERRORS))
async def pause_schedule(ctx: Context, auth: Manager, schedule_id: str) -> dict[str, Any]:
    return _schedule(await ctx.automation.pause(schedule_id))


@router.post("/v1/schedules/{schedule_id}/resume", responses=errors_doc(*_ERRORS))
async def resume_schedule(ctx: Context, auth: Manager, schedule_id: str) -> dict[str, Any]:
    """Go on from the next slot after now (what the pause skipped is not caught up)."""
    return _schedule(await ctx.automation.resume(schedule_id))


@router.delete("/v1/schedules/{schedule_id}", status_code=204, responses=errors_doc(*_ERRORS))
async def delete_schedule(ctx: Context, auth: Manager, schedule_id: str) -> Response:
    await ctx.automation.delete_schedule(schedule_id)
    return Response(status_code=204)


# -- hooks -------------------------------------------------------------------------------


@router.post(
    "/v1/hooks",
    status_code=201,
    dependencies=[Depends(guard_json_body)],
    responses=errors_doc(*BODY_ERRORS, *_ERRORS, "invalid_hook", "already_exists"),
)
async def create_hook(
    ctx: Context, auth: Manager, body: HookBody, request: Request
) -> JSONResponse:
    """The hook, its URL and its signing secret: the only answer that shows the secret."""
    assert auth.workspace_id is not None
    spec = HookSpec(**body.model_dump())
    try:
        hook, secret = await ctx.automation.create_hook(
            auth.workspace_id, auth.caller.principal_id, spec
        )
    except AutomationError as exc:
        raise _problem(exc) from None
    return JSONResponse({**_hook(hook, request), "secret": secret}, status_code=201)


@router.get("/v1/hooks", responses=errors_doc(*_ERRORS))
async def list_hooks(ctx: Context, auth: Reader, request: Request) -> dict[str, Any]:
    assert auth.workspace_id is not None
    return {"hooks": [_hook(h, request) for h in await ctx.automation.hooks(auth.workspace_id)]}


@router.delete("/v1/hooks/{hook_id}", status_code=204, responses=errors_doc(*_ERRORS))
async def delete_hook(ctx: Context, auth: Manager, hook_id: str) -> Response:
    """The hook and its secret go; deliveries already accepted keep their runs."""
    await ctx.automation.delete_hook(hook_id)
    return Response(status_code=204)


@router.post(
    "/v1/hooks/{hook_id}",
    name="deliver",
    status_code=202,
    dependencies=[Depends(Signed())],
    responses=errors_doc(
        *_ERRORS,
        "bad_signature",
        "payload_too_large",
        "invalid_payload",
        "idempotency_key_reused",
        "deployment_unresolvable",
    ),
)
async def deliver(ctx: Context, hook_id: str, request: Request) -> JSONResponse:
    """A Standard Webhooks delivery: 202 `{delivery_id, session_id, turn_id,
    execution_id}`; a redelivery (same `webhook-id`) gets the same answer."""
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        delivered = await ctx.automation.deliver(hook_id, body, headers)
    except BadSignature as exc:
        ctx.metrics.webhooks.labels(result="bad_signature").inc()
        # Which hook and why, never the payload or the signature headers' values.
        log.warning("webhook %s refused: %s", hook_id[:40], exc)
        raise Problem("bad_signature", "the webhook signature is not valid") from None
    except AutomationError as exc:
        ctx.metrics.webhooks.labels(result="invalid").inc()
        raise _problem(exc) from None
    result = "replayed" if delivered.replayed else "accepted"
    ctx.metrics.webhooks.labels(result=result).inc()
    return JSONResponse(delivered.answer, status_code=202)
