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
class Session:
    session_id: str
    created_at: float
    workspace_id: str | None = None
    principal_id: str | None = None
    title: str | None = None
    plugin_digest: str | None = None
    deployment_digest: str | None = None
    metadata: dict[str, Any] | None = None
    last_seq: int = 0


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


@dataclass(frozen=True, slots=True)
class Claimed:
    """A successful claim: the attempt must present ``epoch`` on every write."""

    execution: Execution
    epoch: int
    attempt: int
    attempt_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
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
class CheckpointRecord:
    step_no: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The latest compacted checkpoint (if any) and every step recorded after it."""

    execution_id: str
    full: CheckpointRecord | None
    steps: list[CheckpointRecord]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    execution_id: str
    tool_call_id: str
    status: LedgerStatus
    idempotency_key: str | None
    result: Any
    updated_at: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequest:
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
class Artifact:
    artifact_id: str
    session_id: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: float
    turn_id: str | None = None
    tool_call_id: str | None = None
