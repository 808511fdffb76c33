"""Input requests: a parked execution's questions and the first answer that wins;
their records, write programs and reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._actions import EncodedAction
from ._errors import NotFound, WriteConflict
from ._json import dumps, loads
from ._log import ClaimIdempotency, append_to_request_session
from ._sql import CHECKED_RECORDS, Columns, Dialect, Effects, Op, Program, Query, Where

# -- records -------------------------------------------------------------------------


InputStatus = Literal["open", "resolved", "expired", "cancelled"]


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
    #: The request's session and the seqs the answer's actions got there.
    session_id: str | None = field(default=None, compare=False)
    seqs: tuple[int, ...] = field(default=(), compare=False)


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


Resolution = Won | Lost


#: Its text fields are checked as those of an op that carries it.
CHECKED_RECORDS.add(InputRequestRecord)


# -- row mapping ---------------------------------------------------------------------


INPUT_COLS = Columns(InputRequestRecord, decode={"payload": loads, "resolution": loads})


# -- writes --------------------------------------------------------------------------


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
    #: The answer's idempotency key, claimed only if this answer wins, in its commit.
    claim: ClaimIdempotency | None = None

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
            seqs = yield from append_to_request_session(d, session_id, self.actions, fx)
            if self.claim is not None:
                yield from self.claim.run(d, fx)
            return Won(self.resolution, session_id, tuple(seqs))
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


# -- reads ---------------------------------------------------------------------------


def get_input_request(request_id: str) -> Program[InputRequestRecord]:
    rows = yield Query(
        f"SELECT {INPUT_COLS} FROM input_requests WHERE request_id = ?", (request_id,)
    )
    return INPUT_COLS.one(rows, "input request", request_id)


def list_input_requests(
    session_id: str | None, execution_id: str | None, status: str | None
) -> Program[list[InputRequestRecord]]:
    where = Where()
    where.equal("session_id", session_id)
    where.equal("execution_id", execution_id)
    where.equal("status", status)
    rows = yield Query(
        f"SELECT {INPUT_COLS} FROM input_requests {where}ORDER BY created_at, request_id",
        where.params,
    )
    return [INPUT_COLS.read(r) for r in rows]
