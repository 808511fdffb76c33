"""Write programs for execution facts: executions, claims and leases, the fence,
checkpoints, the tool-effect ledger and input requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import Conflict, Fenced, NotFound
from ._log_ops import Action, append_to_request_session
from ._records import Claimed, Execution, InputRequest, Lease, Lost, Won
from ._sql import (
    EXEC_COLS,
    Dialect,
    Effects,
    Op,
    Program,
    Query,
    Row,
    dumps,
    execution_from_row,
    loads,
    new_id,
)

_ACTIVE = "('queued', 'running', 'waiting_input')"


def fence_program(d: Dialect, execution_id: str, epoch: int, owner: str | None) -> Program[None]:
    """Check (and on PostgreSQL lock) the execution row before a fenced unit writes.

    The lock makes a concurrent claim skip the row and a concurrent heartbeat wait, so
    the epoch cannot move between this check and the unit's commit.
    """

    def check(rows: list[Row]) -> None:
        if not rows:
            raise NotFound("execution", execution_id)
        current, status, current_owner = rows[0]
        if current != epoch or status != "running" or owner not in (None, current_owner):
            raise Fenced(execution_id, epoch, current, status)

    # A check, not a read: nothing below depends on it, and a failed check rolls the whole
    # unit back, so PostgreSQL can pipeline the unit's statements behind it.
    yield Query(
        f"SELECT epoch, status, owner FROM executions WHERE execution_id = ?{d.for_update}",
        (execution_id,),
        check=check,
    )


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
            "principal_id, trigger, input, retry_of, snapshot_digest, deadline_at) "
            "VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id",
            (
                e.execution_id,
                e.session_id,
                e.turn_id,
                e.created_at,
                e.principal_id,
                dumps(e.trigger),
                dumps(e.input),
                e.retry_of,
                e.snapshot_digest,
                e.deadline_at,
            ),
        )
        if not rows:
            raise Conflict("execution", e.execution_id, "already exists")
        return e


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
        rows = yield Query(
            "SELECT e.execution_id FROM executions e "
            "WHERE (e.status = 'queued' OR (e.status = 'running' AND e.lease_expires_at <= ?)) "
            "AND (e.deadline_at IS NULL OR e.deadline_at > ?) "
            "AND NOT EXISTS (SELECT 1 FROM executions p WHERE p.session_id = e.session_id "
            f"AND p.pos < e.pos AND p.status IN {_ACTIVE}) "
            f"ORDER BY e.pos LIMIT 1{d.skip_locked}",
            (self.now, self.now),
        )
        if not rows:
            return None
        rows = yield Query(
            "UPDATE executions SET status = 'running', owner = ?, epoch = epoch + 1, "
            "attempt = attempt + 1, lease_expires_at = ? WHERE execution_id = ? "
            f"RETURNING {EXEC_COLS}",
            (self.supervisor_id, self.now + self.ttl, rows[0][0]),
        )
        execution = execution_from_row(rows[0])
        attempt_id = self.attempt_id or new_id("att", self.now)
        yield Query(
            "INSERT INTO attempts (attempt_id, execution_id, attempt, epoch, supervisor_id, "
            "claimed_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                attempt_id,
                execution.execution_id,
                execution.attempt,
                execution.epoch,
                self.supervisor_id,
                self.now,
            ),
        )
        return Claimed(execution, execution.epoch, execution.attempt, attempt_id)


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
        if not rows:
            raise NotFound("execution", self.execution_id)
        return execution_from_row(rows[0])


@dataclass(frozen=True, slots=True)
class SweepDeadlines(Op):
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[list[Execution]]:
        rows = yield Query(
            "UPDATE executions SET status = 'deadline_exceeded', owner = NULL, "
            "lease_expires_at = NULL, finished_at = ? "
            f"WHERE status IN {_ACTIVE} AND deadline_at IS NOT NULL AND deadline_at <= ? "
            f"RETURNING {EXEC_COLS}",
            (self.now, self.now),
        )
        ended = sorted((execution_from_row(r) for r in rows), key=lambda e: e.created_at)
        if ended:
            where, params = d.in_("execution_id", [e.execution_id for e in ended])
            yield Query(
                "UPDATE input_requests SET status = 'expired', resolved_at = ? "
                f"WHERE status = 'open' AND {where}",
                [self.now, *params],
            )
        return ended


# -- ops that only run inside a fenced unit (the fence has already been checked) ------


@dataclass(frozen=True, slots=True)
class ParkForInput(Op):
    execution_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE executions SET status = 'waiting_input', owner = NULL, "
            "lease_expires_at = NULL WHERE execution_id = ?",
            (self.execution_id,),
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
                None if self.result is None else dumps(self.result),
                None if self.error is None else dumps(self.error),
                self.now,
                self.execution_id,
            ),
        )


@dataclass(frozen=True, slots=True)
class PutCheckpoint(Op):
    """A step record (``full=False``) or a compacted full checkpoint; never overwritten."""

    execution_id: str
    step_no: int
    payload: bytes
    full: bool

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        table = "checkpoints" if self.full else "checkpoint_steps"

        def check(rows: list[Row]) -> None:
            if not rows:
                raise Conflict(table, f"{self.execution_id}/{self.step_no}", "already recorded")

        yield Query(
            f"INSERT INTO {table} (execution_id, step_no, payload) VALUES (?, ?, ?) "
            "ON CONFLICT (execution_id, step_no) DO NOTHING RETURNING step_no",
            (self.execution_id, self.step_no, self.payload),
            check=check,
        )


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
    execution_id: str
    tool_call_id: str
    idempotency_key: str | None
    now: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # Re-starting is allowed (an idempotent tool re-run after a resume); re-starting
        # a call that completed is not: its effect already happened.

        def check(rows: list[Row]) -> None:
            if not rows:
                raise Conflict("tool call", self.tool_call_id, "already completed")

        yield Query(
            "INSERT INTO tool_ledger (execution_id, tool_call_id, status, idempotency_key, "
            "result, updated_at) VALUES (?, ?, 'started', ?, NULL, ?) "
            "ON CONFLICT (execution_id, tool_call_id) DO UPDATE SET status = 'started', "
            "idempotency_key = excluded.idempotency_key, updated_at = excluded.updated_at "
            "WHERE tool_ledger.status <> 'completed' RETURNING status",
            (self.execution_id, self.tool_call_id, self.idempotency_key, self.now),
            check=check,
        )


@dataclass(frozen=True, slots=True)
class LedgerSet(Op):
    """Move a ledger entry to ``completed`` (from any state) or ``unknown`` (from started)."""

    execution_id: str
    tool_call_id: str
    status: str
    result: Any
    now: float | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        only_started = " AND status = 'started'" if self.status == "unknown" else ""

        def missing(rows: list[Row]) -> None:
            if not rows:
                raise NotFound("tool call", self.tool_call_id)

        # `completed` applies from any state, so no row updated means no entry: a check
        # (pipelined on PostgreSQL). `unknown` needs a second look to say why it failed.
        rows = yield Query(
            "UPDATE tool_ledger SET status = ?, result = ?, updated_at = ? "
            f"WHERE execution_id = ? AND tool_call_id = ?{only_started} RETURNING status",
            (
                self.status,
                None if self.result is None else dumps(self.result),
                self.now,
                self.execution_id,
                self.tool_call_id,
            ),
            check=missing if self.status == "completed" else None,
        )
        if not rows and self.status != "completed":
            rows = yield Query(
                "SELECT status FROM tool_ledger WHERE execution_id = ? AND tool_call_id = ?",
                (self.execution_id, self.tool_call_id),
            )
            if not rows:
                raise NotFound("tool call", self.tool_call_id)
            raise Conflict("tool call", self.tool_call_id, f"is {rows[0][0]}, not started")


# -- input requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenInputRequest(Op):
    request: InputRequest

    def run(self, d: Dialect, fx: Effects) -> Program[InputRequest]:
        r = self.request
        rows = yield Query(
            "INSERT INTO input_requests (request_id, session_id, execution_id, turn_id, "
            "status, payload, created_at, tool_call_id, expires_at) "
            "VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?) "
            "ON CONFLICT (request_id) DO NOTHING RETURNING request_id",
            (
                r.request_id,
                r.session_id,
                r.execution_id,
                r.turn_id,
                dumps(r.payload),
                r.created_at,
                r.tool_call_id,
                r.expires_at,
            ),
        )
        if not rows:
            raise Conflict("input request", r.request_id, "already exists")
        return r


def _requeue(execution_id: str) -> Query:
    return Query(
        "UPDATE executions SET status = 'queued' "
        "WHERE execution_id = ? AND status = 'waiting_input'",
        (execution_id,),
    )


@dataclass(frozen=True, slots=True)
class ResolveInput(Op):
    request_id: str
    resolution: Any
    principal_id: str | None
    client_id: str | None
    now: float
    actions: tuple[Action, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[Won | Lost]:
        # The whole first-writer-wins protocol is this one conditional UPDATE: whoever
        # flips 'open' first wins; the losers read the winner's resolution below.
        rows = yield Query(
            "UPDATE input_requests SET status = 'resolved', resolution = ?, "
            "answered_by_principal = ?, answered_by_client = ?, resolved_at = ? "
            "WHERE request_id = ? AND status = 'open' "
            "AND (expires_at IS NULL OR expires_at > ?) RETURNING session_id, execution_id",
            (
                dumps(self.resolution),
                self.principal_id,
                self.client_id,
                self.now,
                self.request_id,
                self.now,
            ),
        )
        if rows:
            session_id, execution_id = rows[0]
            yield _requeue(execution_id)
            yield from append_to_request_session(d, session_id, self.actions, fx)
            return Won(self.resolution)
        rows = yield Query(
            "SELECT status, resolution, answered_by_principal, answered_by_client "
            "FROM input_requests WHERE request_id = ?",
            (self.request_id,),
        )
        if not rows:
            raise NotFound("input request", self.request_id)
        status, resolution, principal, client = rows[0]
        # Still 'open' here means past expires_at: it is expired, the sweeper just has
        # not recorded it yet.
        return Lost("expired" if status == "open" else status, loads(resolution), principal, client)


@dataclass(frozen=True, slots=True)
class CloseInput(Op):
    """Expire (re-queues the execution so it can go on without an answer) or cancel."""

    request_id: str
    status: str
    now: float
    actions: tuple[Action, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        rows = yield Query(
            "UPDATE input_requests SET status = ?, resolved_at = ? "
            "WHERE request_id = ? AND status = 'open' RETURNING session_id, execution_id",
            (self.status, self.now, self.request_id),
        )
        if not rows:
            exists = yield Query(
                "SELECT 1 FROM input_requests WHERE request_id = ?", (self.request_id,)
            )
            if not exists:
                raise NotFound("input request", self.request_id)
            return False
        session_id, execution_id = rows[0]
        if self.status == "expired":
            yield _requeue(execution_id)
        yield from append_to_request_session(d, session_id, self.actions, fx)
        return True


def unit_program(
    d: Dialect, fence: tuple[str, int, str | None] | None, ops: Sequence[Op], fx: Effects
) -> Program[list[Any]]:
    """A whole unit of work: the fence check first, then every op in order."""
    if fence is not None:
        yield from fence_program(d, *fence)
    results = []
    for op in ops:
        results.append((yield from op.run(d, fx)))
    return results
