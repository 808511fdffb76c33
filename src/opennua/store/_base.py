"""The store contract. Each public method is one unit of work (or one read) so that
every write, whichever method made it, goes through the same commit path."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from . import _reads as reads
from ._blobs import BlobStore
from ._errors import StoreError
from ._exec_ops import (
    Claim,
    CloseInput,
    CreateExecution,
    Heartbeat,
    OpenInputRequest,
    Release,
    RequestCancel,
    ResolveInput,
    SweepDeadlines,
)
from ._log_ops import (
    AbandonIdempotency,
    Append,
    BeginIdempotency,
    CompleteIdempotency,
    CreateSession,
    PutArtifact,
    PutSnapshot,
    UpdateSessionTitle,
    normalize_actions,
)
from ._records import (
    Artifact,
    Attempt,
    Checkpoint,
    Claimed,
    Execution,
    IdempotencyOutcome,
    InputRequest,
    Lease,
    LedgerEntry,
    Page,
    Resolution,
    Session,
    Snapshot,
)
from ._sql import Op, Program
from ._unit import FencedTransaction, Transaction, Unit, UnitScope
from ._watch import Watcher

T = TypeVar("T")

DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0


class Store(abc.ABC):
    """Every durable fact of opennua. Use as ``async with await open_store(...) as store``."""

    def __init__(self, blobs: BlobStore | None) -> None:
        self._blobs = blobs

    # -- backend hooks ---------------------------------------------------------------

    @abc.abstractmethod
    async def _commit(self, unit: Unit) -> list[Any]:
        """Commit one unit; return its ops' results, or raise the error that voided it."""

    @abc.abstractmethod
    async def _read(self, program: Program[T]) -> T:
        """Run a read program on a reader connection."""

    @abc.abstractmethod
    def watch(self) -> Watcher:
        """Wake-ups ``(session_id, seq)`` for appends committed after this call.

        A wake-up only: re-read from your last seq. Close it (``async with``) when done.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish queued writes, then release connections and threads. Idempotent."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def blobs(self) -> BlobStore:
        if self._blobs is None:
            raise StoreError("this store was opened without a data_dir: no blob store")
        return self._blobs

    async def _one(self, op: Op) -> Any:
        (result,) = await self._commit(Unit(None, (op,)))
        return result

    # -- units of work ---------------------------------------------------------------

    def transaction(self) -> UnitScope[Transaction]:
        """``async with store.transaction() as tx:`` buffer Host writes; commit at exit."""
        return UnitScope(Transaction(), None, self._commit)

    def fenced(
        self, execution_id: str, epoch: int, *, owner: str | None = None
    ) -> UnitScope[FencedTransaction]:
        """``async with store.fenced(eid, epoch) as tx:`` the only way an attempt writes.

        At exit the execution's epoch (and owner, if given) is checked and the row
        locked; if it moved on or the execution is no longer running, nothing of the
        unit is written and :class:`Fenced` is raised.
        """
        fence = (execution_id, epoch, owner)
        return UnitScope(FencedTransaction(execution_id, epoch, owner), fence, self._commit)

    # -- sessions and the action log -------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        created_at: float,
        workspace_id: str | None = None,
        principal_id: str | None = None,
        title: str | None = None,
        plugin_digest: str | None = None,
        deployment_digest: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        session = Session(
            session_id=session_id,
            created_at=created_at,
            workspace_id=workspace_id,
            principal_id=principal_id,
            title=title,
            plugin_digest=plugin_digest,
            deployment_digest=deployment_digest,
            metadata=metadata,
        )
        result: Session = await self._one(CreateSession(session))
        return result

    async def get_session(self, session_id: str) -> Session:
        return await self._read(reads.get_session(session_id))

    async def list_sessions(
        self, *, limit: int = 50, cursor: str | None = None, workspace_id: str | None = None
    ) -> Page[Session]:
        """Newest first; pass ``page.next_cursor`` back to get the next, older page."""
        return await self._read(reads.list_sessions(limit, cursor, workspace_id))

    async def update_session_title(self, session_id: str, title: str | None) -> None:
        await self._one(UpdateSessionTitle(session_id, title))

    async def append(self, session_id: str, actions: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append envelopes atomically; return their seqs (gapless per session).

        An action whose ``id`` is already in the session is not written again: its
        existing seq is returned.
        """
        result: list[int] = await self._one(
            Append(session_id, normalize_actions(session_id, actions))
        )
        return result

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Actions with ``seq > after`` in seq order, at most ``limit``."""
        return await self._read(reads.read_actions(session_id, after, limit))

    async def put_snapshot(self, session_id: str, seq: int, state_json: str) -> None:
        await self._one(PutSnapshot(session_id, seq, state_json))

    async def get_snapshot(self, session_id: str) -> Snapshot | None:
        return await self._read(reads.get_snapshot(session_id))

    # -- idempotency records ---------------------------------------------------------

    async def begin(
        self,
        scope: str,
        key: str,
        request_hash: str,
        now: float,
        *,
        ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    ) -> IdempotencyOutcome:
        """Claim an idempotency key: ``New`` (yours), ``InFlight``, ``Replay`` or ``Mismatch``.

        Expired records count as absent. Of concurrent callers with one key, exactly
        one gets ``New``.
        """
        result: IdempotencyOutcome = await self._one(
            BeginIdempotency(scope, key, request_hash, now, ttl)
        )
        return result

    async def complete(self, scope: str, key: str, response: Any) -> None:
        """Store the response later ``begin`` calls with the same key replay."""
        await self._one(CompleteIdempotency(scope, key, response))

    async def abandon(self, scope: str, key: str) -> None:
        """Forget an in-flight key whose request failed, so a retry can run it again."""
        await self._one(AbandonIdempotency(scope, key))

    # -- executions ------------------------------------------------------------------

    async def create_execution(self, execution: Execution) -> Execution:
        result: Execution = await self._one(CreateExecution(execution))
        return result

    async def get_execution(self, execution_id: str) -> Execution:
        return await self._read(reads.get_execution(execution_id))

    async def list_executions(self, session_id: str) -> list[Execution]:
        return await self._read(reads.list_executions(session_id))

    async def list_attempts(self, execution_id: str) -> list[Attempt]:
        return await self._read(reads.list_attempts(execution_id))

    async def claim(
        self, supervisor_id: str, now: float, ttl: float, *, attempt_id: str | None = None
    ) -> Claimed | None:
        """Take the oldest runnable execution (see docs/store.md for the ordering rule)."""
        result: Claimed | None = await self._one(Claim(supervisor_id, now, ttl, attempt_id))
        return result

    async def heartbeat(self, execution_id: str, epoch: int, now: float, ttl: float) -> Lease:
        """Renew the lease to ``now + ttl``, or raise :class:`Fenced`."""
        result: Lease = await self._one(Heartbeat(execution_id, epoch, now, ttl))
        return result

    async def release(self, execution_id: str, epoch: int) -> None:
        """Graceful shutdown: back to ``queued`` so another supervisor claims it at once."""
        await self._one(Release(execution_id, epoch))

    async def request_cancel(self, execution_id: str) -> Execution:
        result: Execution = await self._one(RequestCancel(execution_id))
        return result

    async def sweep_deadlines(self, now: float) -> list[Execution]:
        """End every active execution past its deadline as ``deadline_exceeded``.

        Their open input requests are expired in the same commit. Returns the ended
        executions so the supervisor can append ``turn.ended`` for each.
        """
        result: list[Execution] = await self._one(SweepDeadlines(now))
        return result

    # -- checkpoints and the tool-effect ledger (written via fenced()) -----------------

    async def load_checkpoint(self, execution_id: str) -> Checkpoint:
        return await self._read(reads.load_checkpoint(execution_id))

    async def get_ledger(self, execution_id: str) -> list[LedgerEntry]:
        return await self._read(reads.get_ledger(execution_id))

    # -- input requests --------------------------------------------------------------

    async def open_input_request(self, request: InputRequest) -> InputRequest:
        result: InputRequest = await self._one(OpenInputRequest(request))
        return result

    async def get_input_request(self, request_id: str) -> InputRequest:
        return await self._read(reads.get_input_request(request_id))

    async def list_input_requests(
        self,
        session_id: str | None = None,
        *,
        execution_id: str | None = None,
        status: str | None = None,
    ) -> list[InputRequest]:
        return await self._read(reads.list_input_requests(session_id, execution_id, status))

    async def resolve_input(
        self,
        request_id: str,
        resolution: Any,
        principal_id: str | None,
        client_id: str | None,
        now: float,
        *,
        actions: Sequence[Mapping[str, Any]] = (),
    ) -> Resolution:
        """First writer wins: ``Won`` re-queues the execution and appends ``actions``
        (to the request's session) in the same commit; everyone else gets ``Lost``
        carrying the winning resolution."""
        op = ResolveInput(
            request_id, resolution, principal_id, client_id, now, normalize_actions(None, actions)
        )
        result: Resolution = await self._one(op)
        return result

    async def expire_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """``open -> expired``, re-queue the execution, append ``actions``; False if not open."""
        result: bool = await self._one(
            CloseInput(request_id, "expired", now, normalize_actions(None, actions))
        )
        return result

    async def cancel_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """``open -> cancelled`` and append ``actions``; False if it was not open."""
        result: bool = await self._one(
            CloseInput(request_id, "cancelled", now, normalize_actions(None, actions))
        )
        return result

    # -- artifacts -------------------------------------------------------------------

    async def put_artifact(self, artifact: Artifact) -> Artifact:
        result: Artifact = await self._one(PutArtifact(artifact))
        return result

    async def get_artifact(self, artifact_id: str) -> Artifact:
        return await self._read(reads.get_artifact(artifact_id))

    async def list_artifacts(self, session_id: str) -> list[Artifact]:
        return await self._read(reads.list_artifacts(session_id))
