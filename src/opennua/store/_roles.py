"""The store's roles: each caller names the narrowest one it needs (eventsourcing's
recorders: a few methods by role). Each role holds its methods' one definition, run on
a backend's commit and read paths (`Backend`); `Store` inherits every role, and only
composition roots (server/_serve.py, tests) hold a `Store` as such. The Host's and the
Supervisor's roles are here; who may do what, secrets and the gateway in
`_roles_access`; automation in `_roles_automation`. docs/store.md, "Roles"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from . import _executions as executions
from . import _files as files
from . import _inputs as inputs
from . import _log as log
from . import _registry as registry
from ._actions import encode_actions
from ._blobs import BlobStore
from ._errors import InvalidInput
from ._executions import (
    AttemptRecord,
    Checkpoint,
    Claim,
    Claimed,
    CreateExecution,
    EndCollection,
    Execution,
    FenceCollection,
    Heartbeat,
    Lease,
    LedgerEntry,
    Narrate,
    Release,
    RequestCancel,
    SweepDeadlines,
)
from ._files import ArtifactRecord, PutArtifact
from ._inputs import InputRequestRecord, InsertInputRequest
from ._log import (
    DEFAULT_IDEMPOTENCY_TTL,
    Append,
    BeginIdempotency,
    IdempotencyOutcome,
    InsertSession,
    Page,
    PutSnapshot,
    SessionFilter,
    SessionRecord,
    SessionSummary,
    Snapshot,
    UpdateSessionTitle,
)
from ._registry import ChannelMove, DeploymentRecord, PluginVersion
from ._sql import Op, Program
from ._unit import FencedTransaction, Transaction, Unit, UnitScope
from ._watch import Watcher

T = TypeVar("T")
#: Sessions per `Store.snapshots_due` read (a bound on its statement's parameters).
MAX_SNAPSHOTS_DUE = 500


class Backend(Protocol):
    """What every role's methods run on: a backend's commit and read paths (`Store`, which
    the SQLite and PostgreSQL stores complete)."""

    async def _commit(self, unit: Unit) -> list[Any]: ...

    async def _one(self, op: Op) -> Any: ...

    async def _read(self, program: Program[T]) -> T: ...

    async def _scan(self, program: Program[T]) -> T: ...

    def _rights_changed(self, *principal_ids: str) -> None: ...


class LogStore(Backend, Protocol):
    """Sessions, their action log, snapshots and idempotency records: the Host's."""

    def watch(self) -> Watcher: ...

    def transaction(self) -> UnitScope[Transaction]:
        """``async with store.transaction() as tx:`` buffer Host writes; commit at exit."""
        return UnitScope(Transaction(), None, self._commit)

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
    ) -> SessionRecord:
        session = SessionRecord(
            session_id=session_id,
            created_at=created_at,
            workspace_id=workspace_id,
            principal_id=principal_id,
            title=title,
            plugin_digest=plugin_digest,
            deployment_digest=deployment_digest,
            metadata=metadata,
        )
        result: SessionRecord = await self._one(InsertSession(session))
        return result

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self._read(log.get_session(session_id))

    async def list_session_summaries(
        self, *, limit: int = 50, cursor: str | None = None, where: SessionFilter | None = None
    ) -> Page[SessionSummary]:
        """Newest first (pass ``page.next_cursor`` back for the next, older page), with
        status, open input requests and last activity; only those ``where`` admits
        (:class:`SessionFilter`; status as the state says it)."""
        return await self._scan(log.list_session_summaries(limit, cursor, where))

    async def update_session_title(self, session_id: str, title: str | None) -> None:
        await self._one(UpdateSessionTitle(session_id, title))

    async def append(self, session_id: str, actions: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append envelopes atomically; return their seqs (gapless per session).

        An action whose ``id`` is already in the session is not written again: its
        existing seq is returned.
        """
        result: list[int] = await self._one(Append(session_id, encode_actions(session_id, actions)))
        return result

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Actions with ``seq > after`` in seq order, at most ``limit``."""
        return await self._read(log.read_actions(session_id, after, limit))

    async def put_snapshot(self, session_id: str, seq: int, state_json: str) -> None:
        await self._one(PutSnapshot(session_id, seq, state_json))

    async def get_snapshot(self, session_id: str) -> Snapshot | None:
        return await self._read(log.get_snapshot(session_id))

    async def snapshots_due(self, session_ids: Sequence[str], every: int) -> set[str]:
        """Those of the sessions whose log since its stored snapshot (or the start) makes
        a new one due by `snapshot_due`; unknown ones are not. One read for them all (up
        to `MAX_SNAPSHOTS_DUE` of them)."""
        if not session_ids:
            return set()
        if len(session_ids) > MAX_SNAPSHOTS_DUE:
            raise InvalidInput(f"at most {MAX_SNAPSHOTS_DUE} sessions per read")
        return await self._read(log.snapshots_due(session_ids, every))

    async def begin(
        self,
        scope: str,
        key: str,
        request_hash: str,
        now: float,
        *,
        ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    ) -> IdempotencyOutcome:
        """Claim a key ahead of the work, for ``ttl``: ``New`` (yours), ``InFlight``,
        ``Replay`` or ``Mismatch`` (a single-use nonce; a request whose work writes a unit
        claims its key in that unit instead).

        Expired records count as absent. Of concurrent callers with one key, exactly
        one gets ``New``.
        """
        result: IdempotencyOutcome = await self._one(
            BeginIdempotency(scope, key, request_hash, now, ttl)
        )
        return result

    async def lookup_idempotency(
        self, scope: str, key: str, request_hash: str, now: float
    ) -> IdempotencyOutcome:
        """What a key holds now, taking nothing: ``Replay`` (completed), ``Mismatch``
        (another request's), ``InFlight`` (claimed by `begin`), or ``New`` (absent or
        expired: claim it in the unit that does the work, `Transaction.claim_idempotency`)."""
        return await self._read(log.lookup_idempotency(scope, key, request_hash, now))


class ExecutionJournal(Backend, Protocol):
    """Executions, claims, leases and what an attempt journals under its fence: the Supervisor's."""

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

    async def create_execution(self, execution: Execution) -> Execution:
        result: Execution = await self._one(CreateExecution(execution))
        return result

    async def get_execution(self, execution_id: str) -> Execution:
        return await self._read(executions.get_execution(execution_id))

    async def list_executions(self, session_id: str, *, active: bool = False) -> list[Execution]:
        """The session's executions in creation order; `active`: only those queued,
        running or waiting for input."""
        return await self._read(executions.list_executions(session_id, active))

    async def list_attempts(self, execution_id: str) -> list[AttemptRecord]:
        return await self._read(executions.list_attempts(execution_id))

    async def claim(
        self, supervisor_id: str, now: float, ttl: float, *, attempt_id: str | None = None
    ) -> Claimed | None:
        """Take the oldest runnable execution (see docs/store.md for the ordering rule)."""
        result: Claimed | None = await self._one(Claim(supervisor_id, now, ttl, attempt_id))
        return result

    async def fence_collection(
        self, session_id: str, collector: str, now: float, until: float
    ) -> bool:
        """Take the lease a collection of the session's workspace holds (docs/workspace.md,
        "Retention"): refused (False) while the session has an active execution or another
        collector's lease holds. While it holds, no execution of the session is claimed."""
        result: bool = await self._one(FenceCollection(session_id, collector, now, until))
        return result

    async def end_collection(self, session_id: str, collector: str) -> None:
        """Release the collection lease (a claim of the session may go ahead)."""
        await self._one(EndCollection(session_id, collector))

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

    async def sweep_deadlines(
        self, now: float, narrate: Narrate
    ) -> list[tuple[Execution, list[int]]]:
        """End every active execution past its deadline as ``deadline_exceeded``.

        In the same commit its open input requests expire, a call it left ``started``
        becomes ``unknown``, and ``narrate(execution, expired_request_ids)``'s actions
        append to its session. Returns each ended execution with those actions' seqs.
        """
        result: list[tuple[Execution, list[int]]] = await self._one(SweepDeadlines(now, narrate))
        return result

    async def load_checkpoint(self, execution_id: str) -> Checkpoint:
        return await self._read(executions.load_checkpoint(execution_id))

    async def get_ledger(self, execution_id: str) -> list[LedgerEntry]:
        return await self._read(executions.get_ledger(execution_id))


class InputStore(Backend, Protocol):
    """Input requests (answered, expired or cancelled in a `transaction()`)."""

    async def open_input_request(self, request: InputRequestRecord) -> InputRequestRecord:
        result: InputRequestRecord = await self._one(InsertInputRequest(request))
        return result

    async def get_input_request(self, request_id: str) -> InputRequestRecord:
        return await self._read(inputs.get_input_request(request_id))

    async def list_input_requests(
        self,
        session_id: str | None = None,
        *,
        execution_id: str | None = None,
        status: str | None = None,
    ) -> list[InputRequestRecord]:
        return await self._read(inputs.list_input_requests(session_id, execution_id, status))


class FileStore(Backend, Protocol):
    """Blobs and what names them: artifacts, workspace manifests, a workspace's held blobs."""

    @property
    def blobs(self) -> BlobStore: ...

    async def put_artifact(self, artifact: ArtifactRecord) -> ArtifactRecord:
        result: ArtifactRecord = await self._one(PutArtifact(artifact))
        return result

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord:
        return await self._read(files.get_artifact(artifact_id))

    async def list_artifacts(self, session_id: str) -> list[ArtifactRecord]:
        return await self._read(files.list_artifacts(session_id))

    async def last_workspace_manifest(self, session_id: str) -> str | None:
        """The manifest of the session's newest `workspace.committed` or
        `workspace.restored` action that names one (None: never committed)."""
        return await self._read(files.last_workspace_manifest(session_id))

    async def hold_blob(
        self, workspace_id: str, sha256: str, size: int, now: float, *, quota: int | None = None
    ) -> bool:
        """The workspace takes a reference to a blob it uploaded; True if it is new.
        :class:`QuotaExceeded` when it would hold more than ``quota`` bytes in all."""
        result: bool = await self._one(files.HoldBlob(workspace_id, sha256, size, now, quota))
        return result

    async def held_blobs(self, workspace_id: str, sha256s: Sequence[str]) -> dict[str, int]:
        """Which of ``sha256s`` the workspace holds, with their sizes."""
        return await self._read(files.held_blobs(workspace_id, sha256s))

    async def workspace_usage(self, workspace_id: str) -> int:
        """The bytes of the distinct blobs the workspace holds."""
        return await self._read(files.workspace_usage(workspace_id))

    async def all_held_blobs(self) -> set[str]:
        return await self._read(files.all_held_blobs())


class RegistryStore(Backend, Protocol):
    """Published plugin versions, release channels and deployments."""

    @property
    def blobs(self) -> BlobStore:
        """Where a version's files are (a publish checks they are there)."""
        ...

    async def publish_plugin(self, version: PluginVersion) -> tuple[PluginVersion, bool]:
        """Register a version whose files are already in :attr:`blobs`; ``(version, created)``.

        The same name and version again is idempotent when the digest matches (``created``
        False) and :class:`WriteConflict` when it does not. A missing blob is
        :class:`InvalidInput` and nothing is registered.
        """
        for f in version.files:
            if not await self.blobs.exists(f.sha256):
                raise InvalidInput(f"{f.path}: its content (sha256 {f.sha256}) was not uploaded")
        result: tuple[PluginVersion, bool] = await self._one(registry.PublishVersion(version))
        return result

    async def get_plugin_version(self, name: str, version: str) -> PluginVersion:
        return await self._read(registry.get_version(name, version))

    async def list_plugin_versions(self, name: str) -> list[PluginVersion]:
        """In publish order; :class:`NotFound` for a plugin with no version."""
        return await self._read(registry.list_versions(name))

    async def list_plugins(self) -> list[str]:
        return await self._read(registry.list_plugins())

    async def release_plugin(
        self, name: str, channel: str, version: str, now: float
    ) -> ChannelMove:
        """Point ``channel`` at a published ``version`` (a new move; history is kept)."""
        result: ChannelMove = await self._one(registry.MoveChannel(name, channel, version, now))
        return result

    async def rollback_plugin(self, name: str, channel: str, now: float) -> ChannelMove:
        """Move ``channel`` back to its target before the current one, or
        :class:`WriteConflict` when there is none."""
        result: ChannelMove = await self._one(registry.MoveChannel(name, channel, None, now))
        return result

    async def channel_history(self, name: str, channel: str | None = None) -> list[ChannelMove]:
        return await self._read(registry.channel_history(name, channel))

    async def resolve_channel(self, name: str, channel: str) -> str:
        """The version ``channel`` points at now; :class:`NotFound` if never released."""
        return await self._read(registry.resolve_channel(name, channel))

    async def put_deployment(self, deployment: DeploymentRecord) -> DeploymentRecord:
        """Keep a validated configuration under its digest and point its name at it."""
        result: DeploymentRecord = await self._one(registry.PutDeployment(deployment))
        return result

    async def get_deployment(self, name: str) -> DeploymentRecord:
        return await self._read(registry.get_deployment(name))

    async def get_deployment_config(self, digest: str) -> DeploymentRecord:
        """Any configuration a deployment ever had, by digest (sessions keep theirs)."""
        return await self._read(registry.get_deployment_config(digest))

    async def list_deployments(self) -> list[DeploymentRecord]:
        return await self._read(registry.list_deployments())

    async def workspace_versions(self, workspace_id: str) -> list[PluginVersion]:
        """Every version published in the workspace (any visibility) and the server-wide
        ones, in one read."""
        return await self._read(registry.workspace_versions(workspace_id))
