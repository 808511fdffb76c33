"""Write programs for execution facts: executions, claims and leases, the fence,
checkpoints, the tool-effect ledger and input requests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._actions import EncodedAction, encode_actions
from ._errors import Fenced, NotFound, SessionBusy, StoreError, WriteConflict
from ._json import dumps, loads
from ._log_ops import Append, CompleteIdempotency, append_to_request_session
from ._records import Claimed, Execution, InputRequestRecord, Lease, Lost, Won
from ._sql import (
    ACTIVE_SQL,
    EXEC_COLS,
    Dialect,
    Effects,
    Op,
    Program,
    Query,
    execution_from_row,
    new_id,
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
            "principal_id, trigger, input, retry_of, snapshot_digest, deadline_at, trace_context) "
            "VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?) "
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
        rows = yield Query(
            "SELECT e.execution_id FROM executions e "
            "WHERE (e.status = 'queued' OR (e.status = 'running' AND e.lease_expires_at <= ?)) "
            "AND (e.deadline_at IS NULL OR e.deadline_at > ?) "
            "AND NOT EXISTS (SELECT 1 FROM executions p WHERE p.session_id = e.session_id "
            f"AND p.pos < e.pos AND p.status IN {ACTIVE_SQL}) "
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
        ended = sorted((execution_from_row(r) for r in rows), key=lambda e: e.created_at)
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


# -- ops that only run inside a fenced unit (the fence has already been checked) ------


@dataclass(frozen=True, slots=True)
class ParkForInput(Op):
    execution_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # An answer can win between the commit that opened the request and this one: its
        # re-queue found the execution still running and did nothing. Then nothing is
        # left to wait for (it has requests, none open), and parking would strand the
        # execution: queue it instead.
        yield Query(
            "UPDATE executions SET status = CASE WHEN EXISTS (SELECT 1 FROM input_requests "
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


# -- journal ops: what an attempt records at every step, with Append. They are data here:
# each backend defines them once, its own way (Dialect.journal; on PostgreSQL in the
# server-side functions).


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
    """Record a tool call as ``started``. Re-starting is allowed (an idempotent tool
    re-run after a resume); re-starting a ``completed`` call is a ``WriteConflict``: its
    effect already happened."""

    execution_id: str
    tool_call_id: str
    idempotency_key: str | None
    now: float | None


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


# -- input requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertInputRequest(Op):
    request: InputRequestRecord

    def run(self, d: Dialect, fx: Effects) -> Program[InputRequestRecord]:
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
                dumps(r.payload, "an input request's payload"),
                r.created_at,
                r.tool_call_id,
                r.expires_at,
            ),
        )
        if not rows:
            raise WriteConflict("input request", r.request_id, "already exists")
        return r


def _lock_execution_of(d: Dialect, request_id: str) -> Program[None]:
    """Lock the request's execution row before touching the request (the order of every
    fenced unit: execution, then its requests). A park in flight holds that row and has
    already found the request open; without waiting for it, the re-queue that follows
    would find the execution still running and do nothing, and the park would strand it
    `waiting_input` for a request no longer open. SQLite's single writer needs none."""
    if d.lock_row:
        yield Query(
            "SELECT 1 FROM executions WHERE execution_id = (SELECT execution_id FROM "
            f"input_requests WHERE request_id = ?){d.lock_row}",
            (request_id,),
        )


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
    actions: tuple[EncodedAction, ...]
    #: The answer's idempotency record, completed only if this answer wins, in its commit.
    complete: CompleteIdempotency | None = None

    def run(self, d: Dialect, fx: Effects) -> Program[Won | Lost]:
        yield from _lock_execution_of(d, self.request_id)
        # The whole first-writer-wins protocol is this one conditional UPDATE: whoever
        # flips 'open' first wins; the losers read the winner's resolution below.
        rows = yield Query(
            "UPDATE input_requests SET status = 'resolved', resolution = ?, "
            "answered_by_principal = ?, answered_by_client = ?, resolved_at = ? "
            "WHERE request_id = ? AND status = 'open' "
            "AND (expires_at IS NULL OR expires_at > ?) RETURNING session_id, execution_id",
            (
                dumps(self.resolution, "an input resolution"),
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
            if self.complete is not None:
                yield from self.complete.run(d, fx)
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
    actions: tuple[EncodedAction, ...]

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        if self.status == "expired":
            yield from _lock_execution_of(d, self.request_id)  # it re-queues, as an answer
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
    """A whole unit of work: the fence check first, then every op in order; each run of
    consecutive journal ops goes to the dialect at once (on PostgreSQL: one call)."""
    results: list[Any] = []
    i = 0
    while i < len(ops) or fence is not None:
        j = i
        while j < len(ops) and type(ops[j]) in JOURNAL_OPS:
            j += 1
        if j > i or fence is not None:
            run: list[JournalOp] = list(ops[i:j])  # type: ignore[arg-type]
            results += yield from d.journal(fence, run, fx)
            fence = None
        if j < len(ops):
            results.append((yield from ops[j].run(d, fx)))
            j += 1
        i = j
    return results
