"""Plain frozen records the store returns. No behaviour, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

ExecutionStatus = Literal[
    "queued",
    "running",
    "waiting_input",
    "completed",
    "failed",
    "cancelled",
    "deadline_exceeded",
    "revoked",
]
ACTIVE_STATUSES: tuple[ExecutionStatus, ...] = ("queued", "running", "waiting_input")
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "deadline_exceeded", "revoked"}
)
InputStatus = Literal["open", "resolved", "expired", "cancelled"]
LedgerStatus = Literal["started", "completed", "unknown"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    session_id: str
    created_at: float
    workspace_id: str | None = None
    principal_id: str | None = None
    title: str | None = None
    plugin_digest: str | None = None
    deployment_digest: str | None = None
    metadata: dict[str, Any] | None = None
    last_seq: int = 0
    #: The execution snapshot beside the two digests: ``name@version``, the deployment's
    #: name, the model, and the snapshot's own digest.
    plugin: str | None = None
    deployment: str | None = None
    model: str | None = None
    snapshot_digest: str | None = None


SessionListStatus = Literal["idle", "running", "requires_action"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """A session as a list shows it: its row plus what its executions say now."""

    session: SessionRecord
    status: SessionListStatus
    open_input_requests: int
    last_activity_at: float


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    #: Pass back as ``cursor`` for the next (older) page; None when this was the last one.
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    state_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    execution_id: str
    session_id: str
    turn_id: str
    status: ExecutionStatus
    created_at: float
    principal_id: str | None = None
    trigger: Any = None
    input: Any = None
    retry_of: str | None = None
    snapshot_digest: str | None = None
    deadline_at: float | None = None
    owner: str | None = None
    epoch: int = 0
    attempt: int = 0
    lease_expires_at: float | None = None
    cancel_requested: bool = False
    result: Any = None
    error: Any = None
    finished_at: float | None = None
    #: W3C trace context of the turn's span: {"traceparent": ..., "parent": ...} (see
    #: docs/observability.md); None when the execution was accepted without one.
    trace_context: Any = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """A successful claim: the attempt must present ``epoch`` on every write."""

    execution: Execution
    epoch: int
    attempt: int
    attempt_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    attempt_id: str
    execution_id: str
    attempt: int
    epoch: int
    supervisor_id: str
    claimed_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    """A renewed lease; ``cancel_requested`` tells the attempt to wind down."""

    expires_at: float
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class CheckpointPart:
    step_no: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The latest compacted checkpoint (if any) and every step recorded after it."""

    execution_id: str
    full: CheckpointPart | None
    steps: list[CheckpointPart]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    execution_id: str
    tool_call_id: str
    status: LedgerStatus
    idempotency_key: str | None
    result: Any
    updated_at: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequestRecord:
    request_id: str
    session_id: str
    execution_id: str
    turn_id: str
    status: InputStatus
    payload: Any
    created_at: float
    tool_call_id: str | None = None
    resolution: Any = None
    answered_by_principal: str | None = None
    answered_by_client: str | None = None
    expires_at: float | None = None
    resolved_at: float | None = None


@dataclass(frozen=True, slots=True)
class Won:
    """This answer resolved the request; the execution was re-queued in the same commit."""

    resolution: Any


@dataclass(frozen=True, slots=True)
class Lost:
    """Someone else got there first (or the request is no longer open).

    ``status`` is the request's status now; ``resolution`` and ``answered_by_*`` are the
    winner's when ``status == "resolved"``.
    """

    status: InputStatus
    resolution: Any
    answered_by_principal: str | None
    answered_by_client: str | None


@dataclass(frozen=True, slots=True)
class New:
    """No live record had this key: the caller owns the request now."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """The first request with this key has not completed yet."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The key completed before: return the stored response."""

    response: Any


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The key was used with a different request body."""


IdempotencyOutcome = New | InFlight | Replay | Mismatch
Resolution = Won | Lost


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRecord:
    artifact_id: str
    session_id: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: float
    turn_id: str | None = None
    tool_call_id: str | None = None


# -- who may do what (opennua.auth decides; these are its durable facts) -------------

Role = Literal["owner", "admin", "member", "viewer"]
PrincipalKind = Literal["user", "agent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceRecord:
    workspace_id: str
    name: str
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PrincipalRecord:
    principal_id: str
    kind: PrincipalKind
    name: str
    created_at: float
    #: An agent principal's home workspace; None for a user.
    workspace_id: str | None = None
    created_by: str | None = None
    disabled_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipRecord:
    workspace_id: str
    principal_id: str
    role: Role
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    token_id: str
    principal_id: str
    #: sha256 of the secret, hex. The secret is never stored.
    secret_hash: str
    created_at: float
    name: str | None = None
    expires_at: float | None = None
    revoked_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantRecord:
    """What one execution may do, and until when (renewed with its lease)."""

    execution_id: str
    principal_id: str
    workspace_id: str
    expires_at: float
    token_id: str | None = None
    snapshot_digest: str | None = None
    model: str | None = None
    caps: dict[str, Any] | None = None
    revoked_at: float | None = None
    revoked_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    """One `usage.recorded` action with what it is attributed to."""

    workspace_id: str | None
    principal_id: str | None
    model: str
    ts: str
    tokens: dict[str, int]
