"""Executions: the state of the command a turn runs as (status, attempts, lease, deadline)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, JsonValue

from opennua._common import traceparent_in
from opennua.protocol import timestamp

from ._authz import Reader
from ._edge import Context, errors_doc, ts

router = APIRouter()


class AttemptDoc(BaseModel):
    attempt_id: str
    attempt: int
    epoch: int
    supervisor_id: str
    claimed_at: str


class WorkloadDoc(BaseModel):
    """What ran it: the pinned snapshot and deployment digests, and the supervisor
    instance and attempt of the latest attempt (None before the first claim)."""

    snapshot_digest: str | None
    deployment_digest: str | None
    supervisor_id: str | None
    attempt: int | None
    attempt_id: str | None


class ExecutionDoc(BaseModel):
    execution_id: str
    session_id: str
    turn_id: str
    status: str
    retry_of: str | None
    attempt: int
    epoch: int
    owner: str | None
    cancel_requested: bool
    created_at: str
    deadline_at: str | None
    lease_expires_at: str | None
    finished_at: str | None
    snapshot_digest: str | None
    error: JsonValue
    attempts: list[AttemptDoc]
    #: Whose rights and bill the execution runs on.
    principal_id: str | None
    #: Who or what caused it (recorded for causality; grants nothing).
    trigger: JsonValue
    workload: WorkloadDoc
    #: W3C `traceparent` of the turn's span (docs/observability.md): a client that traces
    #: its own work for the turn (the chat bridge's deliveries) makes its spans children
    #: of it. None for an execution stored before traces were.
    traceparent: str | None


@router.get(
    "/v1/executions/{execution_id}",
    response_model=ExecutionDoc,
    responses=errors_doc("not_found", "unavailable"),
)
async def execution(ctx: Context, auth: Reader, execution_id: str) -> JSONResponse:
    e, attempts = await ctx.host.execution(execution_id)
    session = await ctx.host.session(e.session_id)
    latest = attempts[-1] if attempts else None
    return JSONResponse(
        {
            "execution_id": e.execution_id,
            "session_id": e.session_id,
            "turn_id": e.turn_id,
            "status": e.status,
            "retry_of": e.retry_of,
            "attempt": e.attempt,
            "epoch": e.epoch,
            "owner": e.owner,
            "cancel_requested": e.cancel_requested,
            "created_at": timestamp(e.created_at),
            "deadline_at": ts(e.deadline_at),
            "lease_expires_at": ts(e.lease_expires_at),
            "finished_at": ts(e.finished_at),
            "snapshot_digest": e.snapshot_digest,
            "error": e.error,
            "attempts": [
                {
                    "attempt_id": a.attempt_id,
                    "attempt": a.attempt,
                    "epoch": a.epoch,
                    "supervisor_id": a.supervisor_id,
                    "claimed_at": timestamp(a.claimed_at),
                }
                for a in attempts
            ],
            "principal_id": e.principal_id,
            "trigger": e.trigger,
            "workload": {
                "snapshot_digest": e.snapshot_digest,
                "deployment_digest": session.deployment_digest,
                "supervisor_id": latest.supervisor_id if latest else None,
                "attempt": latest.attempt if latest else None,
                "attempt_id": latest.attempt_id if latest else None,
            },
            "traceparent": traceparent_in(e.trace_context),
        }
    )
