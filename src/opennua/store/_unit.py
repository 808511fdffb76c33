"""Units of work: ops buffered by the caller, committed together (or not at all).

Buffering is what lets the SQLite writer group-commit: a unit reaches the writer
whole, runs inside one SAVEPOINT of a shared transaction, and its caller is woken
only after the COMMIT that holds it. Results are read from handles after the block.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._actions import EncodedAction, decode_action, encode_actions
from ._auth import EndUnowned, GrantRecord, PutGrant
from ._automation import (
    AdvanceSchedule,
    CheckSchedulerLease,
    DeliveryRecord,
    FireRecord,
    InsertDelivery,
    InsertFire,
)
from ._errors import InvalidInput, StoreError
from ._executions import (
    JOURNAL_OPS,
    TERMINAL_STATUSES,
    CreateExecution,
    Execution,
    Finish,
    JournalOp,
    LedgerSet,
    LedgerStart,
    ParkForInput,
    PruneCheckpoints,
    PutCheckpoint,
    RequestCancel,
    RequireIdle,
)
from ._files import ArtifactRecord, PutArtifact
from ._inputs import (
    CloseInput,
    InputRequestRecord,
    InsertInputRequest,
    Resolution,
    ResolveInput,
    Won,
)
from ._log import (
    Append,
    ClaimIdempotency,
    InsertSession,
    PutSnapshot,
    SessionRecord,
    UpdateSessionTitle,
)
from ._sql import Dialect, Effects, Fence, Op, Program

T = TypeVar("T")
U = TypeVar("U", bound="UnitBuilder")


@dataclass(frozen=True, slots=True)
class Unit:
    """What a backend commits: an optional fence ``(execution_id, epoch, owner)`` and ops."""

    fence: tuple[str, int, str | None] | None
    ops: tuple[Op, ...]

    @property
    def single_append(self) -> bool:
        """An unfenced unit of exactly one append: both backends may run it in one
        set-based batch with other callers' (the hot path of group commit). A unit of
        several appends is one caller's all-or-nothing unit and runs alone."""
        return self.fence is None and len(self.ops) == 1 and type(self.ops[0]) is Append


@dataclass(slots=True)
class Pending:
    """A unit in a backend's write queue, and the future its caller waits on."""

    unit: Unit
    future: asyncio.Future[list[Any]]


def settle(pending: Sequence[Pending], outcomes: Sequence[Any]) -> None:
    """Wake each caller with its unit's results, or the error that voided it (a caller
    that stopped waiting is skipped)."""
    for p, outcome in zip(pending, outcomes, strict=True):
        if p.future.done():
            continue
        if isinstance(outcome, BaseException):
            p.future.set_exception(outcome)
        else:
            p.future.set_result(outcome)


_UNSET: Any = object()


class Handle(Generic[T]):
    """The result of one buffered op, available once its unit committed."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: Any = _UNSET

    @property
    def value(self) -> T:
        if self._value is _UNSET:
            raise StoreError("the unit of work has not committed (yet)")
        return self._value  # type: ignore[no-any-return]


class UnitBuilder:
    """The ops both kinds of unit may buffer."""

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._handles: list[Handle[Any]] = []
        #: After commit: session_id -> every seq this unit's appends got, in order.
        self.seqs: dict[str, list[int]] = {}
        self._appended: list[tuple[str, Sequence[EncodedAction], Sequence[int]]] = []

    def _add(self, op: Op) -> Handle[Any]:
        handle: Handle[Any] = Handle()
        self._ops.append(op)
        self._handles.append(handle)
        return handle

    def _settle(self, results: Sequence[Any]) -> None:
        for op, handle, result in zip(self._ops, self._handles, results, strict=True):
            handle._value = result
            if isinstance(op, Append):
                self.seqs.setdefault(op.session_id, []).extend(result)
                self._appended.append((op.session_id, op.actions, result))
            elif isinstance(op, ResolveInput) and isinstance(result, Won) and result.session_id:
                self._appended.append((result.session_id, op.actions, result.seqs))

    def appended(self, session_id: str) -> list[dict[str, Any]]:
        """After commit: the actions this unit appended to the session, in seq order, as a
        read would return them (re-appended ids with the seq they kept)."""
        out = [
            decode_action(sid, action, seq)
            for sid, actions, seqs in self._appended
            if sid == session_id
            for action, seq in zip(actions, seqs, strict=True)
        ]
        return sorted(out, key=lambda a: int(a["seq"]))

    def append(self, session_id: str, actions: Sequence[Mapping[str, Any]]) -> Handle[list[int]]:
        """Append action envelopes; the store assigns ``seq`` (re-appended ids keep theirs)."""
        return self._add(Append(session_id, encode_actions(session_id, actions)))

    def put_snapshot(self, session_id: str, seq: int, state_json: str) -> Handle[None]:
        return self._add(PutSnapshot(session_id, seq, state_json))

    def put_artifact(self, artifact: ArtifactRecord) -> Handle[ArtifactRecord]:
        return self._add(PutArtifact(artifact))

    def open_input_request(self, request: InputRequestRecord) -> Handle[InputRequestRecord]:
        return self._add(InsertInputRequest(request))


class Transaction(UnitBuilder):
    """An unfenced unit of work (the Host's): every op commits together or none does."""

    def create_session(self, session: SessionRecord) -> Handle[SessionRecord]:
        return self._add(InsertSession(session))

    def update_session_title(self, session_id: str, title: str | None) -> Handle[None]:
        return self._add(UpdateSessionTitle(session_id, title))

    def create_execution(self, execution: Execution) -> Handle[Execution]:
        """Record an accepted command as ``queued`` (its ``status`` field is ignored)."""
        return self._add(CreateExecution(execution))

    def require_idle(self, session_id: str) -> Handle[None]:
        """Void the unit with :class:`SessionBusy` if the session has an active execution
        when it commits (across processes: the check and the unit's writes are atomic)."""
        return self._add(RequireIdle(session_id))

    def request_cancel(self, execution_id: str) -> Handle[Execution]:
        return self._add(RequestCancel(execution_id))

    def put_grant(self, grant: GrantRecord) -> Handle[GrantRecord]:
        """The grant an accepted execution will run under (with its `create_execution`)."""
        return self._add(PutGrant(grant))

    def claim_idempotency(
        self, scope: str, key: str, request_hash: str, now: float, response: Any
    ) -> Handle[None]:
        """The request's key, completed with ``response``, in the unit that does its work:
        :class:`WriteConflict` (nothing written) if another request holds the key."""
        return self._add(ClaimIdempotency(scope, key, request_hash, now, response))

    def resolve_input(
        self,
        request_id: str,
        resolution: Any,
        principal_id: str | None,
        client_id: str | None,
        now: float,
        *,
        actions: Sequence[Mapping[str, Any]] = (),
        idempotency: tuple[str, str, str, Any] | None = None,
    ) -> Handle[Resolution]:
        """First writer wins: ``Won`` re-queues the execution, appends ``actions`` (to the
        request's session) and claims ``idempotency`` ``(scope, key, request_hash,
        response)`` in this unit; everyone else gets ``Lost`` carrying the winning
        resolution (and their key is not taken)."""
        claim = (
            None if idempotency is None else ClaimIdempotency(*idempotency[:3], now, idempotency[3])
        )
        encoded = encode_actions(None, actions)
        op = ResolveInput(request_id, resolution, principal_id, client_id, now, encoded, claim)
        return self._add(op)

    def expire_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> Handle[bool]:
        """``open -> expired``, re-queue the execution, append ``actions``; False if not open."""
        return self._add(CloseInput(request_id, "expired", now, encode_actions(None, actions)))

    def cancel_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> Handle[bool]:
        """``open -> cancelled`` and append ``actions``; False if it was not open."""
        return self._add(CloseInput(request_id, "cancelled", now, encode_actions(None, actions)))

    def end_unowned(
        self,
        execution_id: str,
        status: str,
        *,
        error: Any,
        now: float,
        actions: Sequence[Mapping[str, Any]],
        request_status: str = "cancelled",
    ) -> Handle[Execution | None]:
        """End a parked or queued execution nobody runs (see ``EndUnowned``)."""
        encoded = encode_actions(None, actions)
        return self._add(EndUnowned(execution_id, status, error, now, encoded, request_status))

    def record_fire(
        self, fire: FireRecord, *, expected: float, next_fire_at: float | None
    ) -> Handle[bool]:
        """A schedule's slot fired (this unit's execution): fenced by the scheduler lease
        the fire names, one per slot, and the schedule's next slot moved from `expected`."""
        self._add(CheckSchedulerLease(fire.scheduler_id, fire.epoch))
        self._add(InsertFire(fire))
        return self._add(AdvanceSchedule(fire.schedule_id, expected, next_fire_at))

    def record_delivery(self, delivery: DeliveryRecord) -> Handle[DeliveryRecord]:
        """A webhook delivery accepted (this unit's execution): one per ``webhook-id``."""
        return self._add(InsertDelivery(delivery))


class FencedTransaction(UnitBuilder):
    """A unit an attempt writes under its epoch; see :meth:`Store.fenced`."""

    def __init__(self, execution_id: str, epoch: int, owner: str | None) -> None:
        super().__init__()
        self.execution_id = execution_id
        self.epoch = epoch
        self.owner = owner

    def put_checkpoint_step(self, step_no: int, payload: bytes) -> Handle[None]:
        return self._add(PutCheckpoint(self.execution_id, step_no, _bytes(payload), full=False))

    def put_full_checkpoint(self, step_no: int, payload: bytes) -> Handle[None]:
        return self._add(PutCheckpoint(self.execution_id, step_no, _bytes(payload), full=True))

    def prune_checkpoints(self, step_no: int) -> Handle[None]:
        """Drop what the full checkpoint at ``step_no`` supersedes (put it in this unit)."""
        return self._add(PruneCheckpoints(self.execution_id, step_no))

    def ledger_start(
        self, tool_call_id: str, *, idempotency_key: str | None = None, now: float | None = None
    ) -> Handle[None]:
        return self._add(LedgerStart(self.execution_id, tool_call_id, idempotency_key, now))

    def ledger_ran(self, tool_call_id: str, *, now: float | None = None) -> Handle[None]:
        """A call started and completed within this unit: recorded ``completed`` at once,
        under ``ledger_start``'s rule (a call that completed before cannot run again)."""
        return self._add(LedgerStart(self.execution_id, tool_call_id, None, now, ran=True))

    def ledger_complete(
        self, tool_call_id: str, *, result: Any = None, now: float | None = None
    ) -> Handle[None]:
        return self._add(LedgerSet(self.execution_id, tool_call_id, "completed", result, now))

    def ledger_mark_unknown(self, tool_call_id: str, *, now: float | None = None) -> Handle[None]:
        return self._add(LedgerSet(self.execution_id, tool_call_id, "unknown", None, now))

    def park_for_input(self) -> Handle[None]:
        """``running -> waiting_input`` and release the lease (an answer re-queues it)."""
        return self._add(ParkForInput(self.execution_id))

    def finish(
        self, status: str, *, result: Any = None, error: Any = None, now: float | None = None
    ) -> Handle[None]:
        if status not in TERMINAL_STATUSES:
            raise InvalidInput(f"finish needs a terminal status, got {status!r}")
        return self._add(Finish(self.execution_id, status, result, error, now))


def _bytes(payload: bytes) -> bytes:
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise InvalidInput(f"checkpoint payloads are bytes, got {type(payload).__name__}")
    return bytes(payload)


class UnitScope(Generic[U]):
    """``async with``: yields the builder; on a clean exit commits it, on an error drops it."""

    def __init__(
        self,
        tx: U,
        fence: tuple[str, int, str | None] | None,
        commit: Callable[[Unit], Awaitable[list[Any]]],
    ) -> None:
        self._tx = tx
        self._fence = fence
        self._commit = commit

    async def __aenter__(self) -> U:
        return self._tx

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None:
            return  # nothing was sent: dropping the buffer is the rollback
        results = await self._commit(Unit(self._fence, tuple(self._tx._ops)))
        self._tx._settle(results)


class JournalDialect(Dialect):
    """A backend's dialect: the shared programs' spellings, and its own definition of
    the ops an attempt journals at every step."""

    @abc.abstractmethod
    def journal(
        self, fence: Fence | None, ops: Sequence[JournalOp], fx: Effects
    ) -> Program[list[Any]]:
        """All or nothing: the fence check, then journal ops in order (appends,
        checkpoint records, ledger moves: see ``_executions``); each op's result.

        The fence checks (and where rows lock, locks) the execution row before the unit
        writes: ``NotFound``, or ``Fenced`` unless it is ``running`` at the fence's epoch
        (and owned by its owner, if given).
        """


def unit_program(
    d: JournalDialect, fence: Fence | None, ops: Sequence[Op], fx: Effects
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
