"""Execution facts: executions, claims and leases, the fence, checkpoints and the
tool-effect ledger; their records, write programs and reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._actions import encode_actions
from ._errors import Fenced, NotFound, SessionBusy, StoreError, WriteConflict
from ._json import dumps, loads
from ._log import Append
from ._sql import CHECKED_RECORDS, Columns, Dialect, Effects, Op, Program, Query, new_id

# -- records -------------------------------------------------------------------------


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


#: An execution in one of these is not over: a client may still answer, cancel or wait.
ACTIVE_STATUSES: tuple[ExecutionStatus, ...] = ("queued", "running", "waiting_input")


TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "deadline_exceeded", "revoked"}
)


LedgerStatus = Literal["started", "completed", "unknown"]


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
    #: The tools the client runs itself (`[{name, description, parameters}]`), offered to
    #: the model beside the agent's; None or empty: none.
    client_tools: Any = None


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


#: Its text fields are checked as those of an op that carries it.
CHECKED_RECORDS.add(Execution)


# -- row mapping ---------------------------------------------------------------------


#: `status IN ACTIVE_SQL`: an execution that still has a turn to finish.
ACTIVE_SQL = "(" + ", ".join(f"'{status}'" for status in ACTIVE_STATUSES) + ")"


EXEC_COLS = Columns(
    Execution,
    decode={
        "trigger": loads,
        "input": loads,
        "cancel_requested": bool,
        "result": loads,
        "error": loads,
        "trace_context": loads,
        "client_tools": loads,
    },
)
_ATTEMPT_COLS = Columns(AttemptRecord)
_LEDGER_COLS = Columns(LedgerEntry, decode={"result": loads})


# -- writes --------------------------------------------------------------------------


def _fenced_or_missing(d: Dialect, execution_id: str, epoch: int) -> Program[Fenced]:
    rows = yield Query(
        "SELECT epoch, status FROM executions WHERE execution_id = ?", (execution_id,)
    )
    if not rows:
        raise NotFound("execution", execution_id)
    return Fenced(execution_id, epoch, rows[0][0], rows[0][1])


@dataclass(frozen=True, slots=True)
class CreateExecution(Op):
    execution: Execution

    def run(self, d: Dialect, fx: Effects) -> Program[Execution]:
        e = self.execution
        rows = yield Query(
            "INSERT INTO executions (execution_id, session_id, turn_id, status, created_at, "
            "principal_id, trigger, input, retry_of, snapshot_digest, deadline_at, trace_context, "
            "client_tools) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id",
            (
                e.execution_id,
                e.session_id,
                e.turn_id,
                e.created_at,
                e.principal_id,
                dumps(e.trigger, "an execution's trigger"),
                dumps(e.input, "an execution's input"),
                e.retry_of,
                e.snapshot_digest,
                e.deadline_at,
                dumps(e.trace_context, "an execution's trace context"),
                dumps(e.client_tools or None, "an execution's client tools"),
            ),
        )
        if not rows:
            raise WriteConflict("execution", e.execution_id, "already exists")
        return e


@dataclass(frozen=True, slots=True)
class RequireIdle(Op):
    """Fail the unit with :class:`SessionBusy` while the session has an active execution.

    The session row is locked first (PostgreSQL), so two units that both require the
    same session idle run one after the other and the second sees the first's
    execution: "busy?" and "start a turn" are one decision across every host process.
    """

    session_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            f"SELECT session_id FROM sessions WHERE session_id = ?{d.lock_row}",
            (self.session_id,),
        )
        if not rows:
            raise NotFound("session", self.session_id)
        rows = yield Query(
            f"SELECT 1 FROM executions WHERE session_id = ? AND status IN {ACTIVE_SQL} LIMIT 1",
            (self.session_id,),
        )
        if rows:
            raise SessionBusy(self.session_id)


@dataclass(frozen=True, slots=True)
class Claim(Op):
    supervisor_id: str
    now: float
    ttl: float
    attempt_id: str | None

    def run(self, d: Dialect, fx: Effects) -> Program[Claimed | None]:
        # A session runs its turns one at a time and in order: an execution is only
        # claimable when no earlier-created execution of its session is still active
        # (one waiting for input blocks the ones behind it). Past-deadline executions
        # are left to sweep_deadlines, which ends them so the supervisor can say so.
        # Nor while a collection of the session's workspace holds its lease: the new
        # attempt would restore a workspace whose blobs are deleted, not yet put back.
        rows = yield Query(
            "SELECT e.execution_id FROM executions e "
            "WHERE (e.status = 'queued' OR (e.status = 'running' AND e.lease_expires_at <= ?)) "
            "AND (e.deadline_at IS NULL OR e.deadline_at > ?) "
            "AND NOT EXISTS (SELECT 1 FROM executions p WHERE p.session_id = e.session_id "
            f"AND p.pos < e.pos AND p.status IN {ACTIVE_SQL}) "
            "AND NOT EXISTS (SELECT 1 FROM workspace_collections w "
            "WHERE w.session_id = e.session_id AND w.expires_at > ?) "
            f"ORDER BY e.pos LIMIT 1{d.skip_locked}",
            (self.now, self.now, self.now),
        )
        if not rows:
            return None
        rows = yield Query(
            "UPDATE executions SET status = 'running', owner = ?, epoch = epoch + 1, "
            "attempt = attempt + 1, lease_expires_at = ? WHERE execution_id = ? "
            f"RETURNING {EXEC_COLS}",
            (self.supervisor_id, self.now + self.ttl, rows[0][0]),
        )
        execution = EXEC_COLS.read(rows[0])
        attempt = AttemptRecord(
            attempt_id=self.attempt_id or new_id("att", self.now),
            execution_id=execution.execution_id,
            attempt=execution.attempt,
            epoch=execution.epoch,
            supervisor_id=self.supervisor_id,
            claimed_at=self.now,
        )
        yield Query(
            f"INSERT INTO attempts ({_ATTEMPT_COLS}) VALUES ({_ATTEMPT_COLS.marks})",
            _ATTEMPT_COLS.values(attempt),
        )
        return Claimed(execution, execution.epoch, execution.attempt, attempt.attempt_id)


@dataclass(frozen=True, slots=True)
class Heartbeat(Op):
    execution_id: str
    epoch: int
    now: float
    ttl: float

    def run(self, d: Dialect, fx: Effects) -> Program[Lease]:
        rows = yield Query(
            "UPDATE executions SET lease_expires_at = ? "
            "WHERE execution_id = ? AND epoch = ? AND status = 'running' "
            "RETURNING cancel_requested",
            (self.now + self.ttl, self.execution_id, self.epoch),
        )
        if not rows:
            raise (yield from _fenced_or_missing(d, self.execution_id, self.epoch))
        return Lease(self.now + self.ttl, bool(rows[0][0]))


@dataclass(frozen=True, slots=True)
class Release(Op):
    execution_id: str
    epoch: int

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE executions SET status = 'queued', owner = NULL, lease_expires_at = NULL "
            "WHERE execution_id = ? AND epoch = ? AND status = 'running' RETURNING epoch",
            (self.execution_id, self.epoch),
        )
        if not rows:
            raise (yield from _fenced_or_missing(d, self.execution_id, self.epoch))


@dataclass(frozen=True, slots=True)
class RequestCancel(Op):
    execution_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[Execution]:
        # Cancellation is carried out by whoever runs the execution, with fenced writes.
        # A parked execution has no runner, so it goes back to the queue to be claimed
        # and wound down; a terminal one is left as it is.
        rows = yield Query(
            "UPDATE executions SET cancel_requested = TRUE, status = CASE "
            "WHEN status = 'waiting_input' THEN 'queued' ELSE status END "
            f"WHERE execution_id = ? RETURNING {EXEC_COLS}",
            (self.execution_id,),
        )
        return EXEC_COLS.one(rows, "execution", self.execution_id)


@dataclass(frozen=True, slots=True)
class FenceCollection(Op):
    """Take the collection lease on a session's workspace until `until`: only while the
    session has no active execution, and not from another collector whose lease holds.
    True if this collector holds it now."""

    session_id: str
    collector: str
    now: float
    until: float

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            f"SELECT 1 FROM executions WHERE session_id = ? AND status IN {ACTIVE_SQL} LIMIT 1",
            (self.session_id,),
        )
        if rows:
            return False
        rows = yield Query(
            "INSERT INTO workspace_collections (session_id, collector, expires_at) "
            "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "collector = excluded.collector, expires_at = excluded.expires_at "
            "WHERE workspace_collections.expires_at <= ? "
            "OR workspace_collections.collector = excluded.collector RETURNING session_id",
            (self.session_id, self.collector, self.until, self.now),
        )
        return bool(rows)


@dataclass(frozen=True, slots=True)
class EndCollection(Op):
    session_id: str
    collector: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "DELETE FROM workspace_collections WHERE session_id = ? AND collector = ?",
            (self.session_id, self.collector),
        )


#: What the supervisor says about an execution the sweep ends, given the ids of the input
#: requests it expired (in the order they opened): the actions to append with the end.
Narrate = Callable[[Execution, list[str]], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class SweepDeadlines(Op):
    now: float
    narrate: Narrate

    def run(self, d: Dialect, fx: Effects) -> Program[list[tuple[Execution, list[int]]]]:
        # A running attempt whose lease holds is left alone: its heartbeat sees the
        # deadline and stops the loop, which records what its running call may have done.
        # Ending it here left that call `started` forever (found by the simulation).
        rows = yield Query(
            "UPDATE executions SET status = 'deadline_exceeded', owner = NULL, "
            "lease_expires_at = NULL, finished_at = ? "
            f"WHERE status IN {ACTIVE_SQL} AND deadline_at IS NOT NULL AND deadline_at <= ? "
            "AND NOT (status = 'running' AND lease_expires_at > ?) "
            f"RETURNING {EXEC_COLS}",
            (self.now, self.now, self.now),
        )
        ended = sorted((EXEC_COLS.read(r) for r in rows), key=lambda e: e.created_at)
        if not ended:
            return []
        where, params = d.in_("execution_id", [e.execution_id for e in ended])
        expired = yield Query(
            "UPDATE input_requests SET status = 'expired', resolved_at = ? "
            f"WHERE status = 'open' AND {where} RETURNING execution_id, request_id, created_at",
            [self.now, *params],
        )
        # A call a dead attempt started may have taken effect: say so, never guess.
        yield Query(
            "UPDATE tool_ledger SET status = 'unknown', updated_at = ? "
            f"WHERE status = 'started' AND {where}",
            [self.now, *params],
        )
        requests: dict[str, list[str]] = {}
        for execution_id, request_id, _ in sorted(expired, key=lambda r: (r[2], r[1])):
            requests.setdefault(execution_id, []).append(request_id)
        # The end and what clients are told of it commit together: a sweep that dies
        # between the two left a turn that never ended (found by the simulation).
        items = [
            (
                e.session_id,
                encode_actions(e.session_id, self.narrate(e, requests.get(e.execution_id, []))),
            )
            for e in ended
        ]
        results = yield from d.append(items, fx)
        out = []
        for execution, result in zip(ended, results, strict=True):
            if isinstance(result, StoreError):
                raise result
            out.append((execution, result))
        return out


# -- ops that only run inside a fenced unit (the fence has already been checked) -----


@dataclass(frozen=True, slots=True)
class ParkForInput(Op):
    execution_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # An answer can win between the commit that opened the request and this one: its
        # re-queue found the execution still running and did nothing. Then nothing is
        # left to wait for (it has requests, none open), and parking would strand the
        # execution: queue it instead. Likewise a cancel requested while it ran, before
        # the attempt's next heartbeat saw it: a parked execution has no runner to wind
        # it down, so it goes back to the queue as `RequestCancel` sends a parked one.
        yield Query(
            "UPDATE executions SET status = CASE WHEN cancel_requested THEN 'queued' "
            "WHEN EXISTS (SELECT 1 FROM input_requests "
            "WHERE execution_id = ?) AND NOT EXISTS (SELECT 1 FROM input_requests "
            "WHERE execution_id = ? AND status = 'open') THEN 'queued' ELSE 'waiting_input' "
            "END, owner = NULL, lease_expires_at = NULL WHERE execution_id = ?",
            (self.execution_id, self.execution_id, self.execution_id),
        )


@dataclass(frozen=True, slots=True)
class Finish(Op):
    execution_id: str
    status: str
    result: Any
    error: Any
    now: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE executions SET status = ?, owner = NULL, lease_expires_at = NULL, "
            "result = ?, error = ?, finished_at = ? WHERE execution_id = ?",
            (
                self.status,
                None if self.result is None else dumps(self.result, "an execution's result"),
                None if self.error is None else dumps(self.error, "an execution's error"),
                self.now,
                self.execution_id,
            ),
        )
        yield unknown_if_started(self.execution_id, self.now)


def unknown_if_started(execution_id: str, now: float | None) -> Query:
    """An execution that ends with a call still `started` (an earlier attempt began it and
    died; this one ends without running it: revoked or past its deadline at claim, or
    ended unowned) says the call may have taken effect: `unknown`, never a guess."""
    return Query(
        "UPDATE tool_ledger SET status = 'unknown', updated_at = COALESCE(?, updated_at) "
        "WHERE execution_id = ? AND status = 'started'",
        (now, execution_id),
    )


@dataclass(frozen=True, slots=True)
class PutCheckpoint(Op):
    """A step record (``full=False``) or a compacted full checkpoint; never overwritten
    (``WriteConflict`` on a reused step number)."""

    execution_id: str
    step_no: int
    payload: bytes
    full: bool


@dataclass(frozen=True, slots=True)
class PruneCheckpoints(Op):
    """Drop what the full checkpoint at ``step_no`` supersedes: the fulls before it and the
    step records up to it. A resume reads only the latest full and the steps after it, so
    what is stored stays about one history, not every full ever written."""

    execution_id: str
    step_no: int

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "DELETE FROM checkpoints WHERE execution_id = ? AND step_no < ?",
            (self.execution_id, self.step_no),
        )
        yield Query(
            "DELETE FROM checkpoint_steps WHERE execution_id = ? AND step_no <= ?",
            (self.execution_id, self.step_no),
        )


@dataclass(frozen=True, slots=True)
class LedgerStart(Op):
    """Record a tool call as ``started``, or, ``ran``, as started and completed at once (a
    call whose start and end commit together: one row version, not two). Re-starting is
    allowed (an idempotent tool re-run after a resume); re-starting a ``completed`` call
    is a ``WriteConflict``: its effect already happened."""

    execution_id: str
    tool_call_id: str
    idempotency_key: str | None
    now: float | None
    ran: bool = False


@dataclass(frozen=True, slots=True)
class LedgerSet(Op):
    """Move a ledger entry to ``completed`` (from any state) or ``unknown`` (from
    ``started`` only: ``WriteConflict`` otherwise); ``NotFound`` without an entry."""

    execution_id: str
    tool_call_id: str
    status: str
    result: Any
    now: float | None


JournalOp = Append | PutCheckpoint | LedgerStart | LedgerSet


JOURNAL_OPS = (Append, PutCheckpoint, LedgerStart, LedgerSet)


# -- reads ---------------------------------------------------------------------------


def get_execution(execution_id: str) -> Program[Execution]:
    rows = yield Query(
        f"SELECT {EXEC_COLS} FROM executions WHERE execution_id = ?", (execution_id,)
    )
    return EXEC_COLS.one(rows, "execution", execution_id)


def list_executions(session_id: str, active: bool) -> Program[list[Execution]]:
    # The filter is SQL's: a session holds one execution per turn it ever ran, and decoding
    # them all to find the active one made each message cost the session's whole history.
    where = f" AND status IN {ACTIVE_SQL}" if active else ""
    rows = yield Query(
        f"SELECT {EXEC_COLS} FROM executions WHERE session_id = ?{where} ORDER BY pos",
        (session_id,),
    )
    return [EXEC_COLS.read(r) for r in rows]


def list_attempts(execution_id: str) -> Program[list[AttemptRecord]]:
    rows = yield Query(
        f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE execution_id = ? ORDER BY attempt",
        (execution_id,),
    )
    return [_ATTEMPT_COLS.read(r) for r in rows]


def load_checkpoint(execution_id: str) -> Program[Checkpoint]:
    rows = yield Query(
        "SELECT step_no, payload FROM checkpoints WHERE execution_id = ? "
        "ORDER BY step_no DESC LIMIT 1",
        (execution_id,),
    )
    full = CheckpointPart(rows[0][0], bytes(rows[0][1])) if rows else None
    rows = yield Query(
        "SELECT step_no, payload FROM checkpoint_steps WHERE execution_id = ? AND step_no > ? "
        "ORDER BY step_no",
        (execution_id, full.step_no if full else -1),
    )
    return Checkpoint(execution_id, full, [CheckpointPart(r[0], bytes(r[1])) for r in rows])


def get_ledger(execution_id: str) -> Program[list[LedgerEntry]]:
    rows = yield Query(
        f"SELECT {_LEDGER_COLS} FROM tool_ledger WHERE execution_id = ? ORDER BY tool_call_id",
        (execution_id,),
    )
    return [_LEDGER_COLS.read(r) for r in rows]
