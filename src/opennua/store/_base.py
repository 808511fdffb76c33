"""The store contract. Each public method is one unit of work (or one read) so that
every write, whichever method made it, goes through the same commit path."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from . import _auth_ops as auth_ops
from . import _automation as automation
from . import _reads as reads
from . import _registry as registry
from . import _secret_ops as secret_ops
from ._actions import encode_actions
from ._auth_ops import AnswerFacts, GrantFacts
from ._automation import (
    DeliveryRecord,
    FireRecord,
    HookRecord,
    ScheduleRecord,
    SchedulerLease,
)
from ._blobs import BlobStore
from ._errors import InvalidInput
from ._exec_ops import (
    Claim,
    CloseInput,
    CreateExecution,
    Heartbeat,
    InsertInputRequest,
    Narrate,
    Release,
    RequestCancel,
    ResolveInput,
    SweepDeadlines,
)
from ._log_ops import (
    DEFAULT_IDEMPOTENCY_TTL,
    AbandonIdempotency,
    Append,
    BeginIdempotency,
    CompleteIdempotency,
    InsertSession,
    PutArtifact,
    PutSnapshot,
    UpdateSessionTitle,
)
from ._records import (
    ArtifactRecord,
    AttemptRecord,
    Checkpoint,
    Claimed,
    Execution,
    GrantRecord,
    IdempotencyOutcome,
    InputRequestRecord,
    Lease,
    LedgerEntry,
    MembershipRecord,
    Page,
    PrincipalRecord,
    Resolution,
    SessionRecord,
    SessionSummary,
    Snapshot,
    TokenRecord,
    UsageRow,
    WorkspaceRecord,
)
from ._registry import ChannelMove, DeploymentRecord, PluginVersion
from ._secret_ops import AuditRecord, GatewayFacts, KeyCheck, SealedSecret
from ._sql import Op, Program
from ._unit import FencedTransaction, Transaction, Unit, UnitScope
from ._watch import Watcher

T = TypeVar("T")
#: Sessions per `Store.snapshots_due` read (a bound on its statement's parameters).
MAX_SNAPSHOTS_DUE = 500


class Store(abc.ABC):
    """Every durable fact of opennua. Use as ``async with await open_store(...) as store``."""

    #: How long :meth:`check_writable` waits for the write path before it says no.
    check_writable_timeout: float = 5.0

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs

    # -- backend hooks ---------------------------------------------------------------

    @abc.abstractmethod
    async def _commit(self, unit: Unit) -> list[Any]:
        """Commit one unit; return its ops' results, or raise the error that voided it."""

    @abc.abstractmethod
    async def _read(self, program: Program[T]) -> T:
        """Run a read program on a reader connection."""

    async def _scan(self, program: Program[T]) -> T:
        """Run a read that may visit many rows (an aggregate, a filtered listing): where a
        backend runs point reads inline, this one goes where it cannot hold others up."""
        return await self._read(program)

    @abc.abstractmethod
    def watch(self) -> Watcher:
        """Wake-ups ``(session_id, seq)`` for appends committed after this call.

        A wake-up only: re-read from your last seq. Close it (``async with``) when done.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish queued writes, then release connections and threads. Idempotent."""

    @abc.abstractmethod
    async def check_writable(self) -> None:
        """Prove that a write transaction can start and finish now, or raise
        :class:`Unavailable` within about :attr:`check_writable_timeout` seconds.

        For readiness probes: cheap enough to call every few seconds, and it stores
        nothing (SQLite: an empty unit through the writer thread, whose ``BEGIN
        IMMEDIATE``/``COMMIT`` writes no page; PostgreSQL: a short read-write
        transaction on a pooled connection).
        """

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
        return await self._read(reads.get_session(session_id))

    async def list_session_summaries(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        workspace_id: str | None = None,
        status: str | None = None,
        deployment: str | None = None,
    ) -> Page[SessionSummary]:
        """Newest first (pass ``page.next_cursor`` back for the next, older page), with
        status, open input requests and last activity; filtered by ``workspace_id``,
        ``status`` (idle, running, requires_action; as the state says) and ``deployment``."""
        return await self._scan(
            reads.list_session_summaries(
                limit, cursor, workspace_id=workspace_id, status=status, deployment=deployment
            )
        )

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
        return await self._read(reads.read_actions(session_id, after, limit))

    async def put_snapshot(self, session_id: str, seq: int, state_json: str) -> None:
        await self._one(PutSnapshot(session_id, seq, state_json))

    async def get_snapshot(self, session_id: str) -> Snapshot | None:
        return await self._read(reads.get_snapshot(session_id))

    async def last_workspace_manifest(self, session_id: str) -> str | None:
        """The manifest of the session's newest `workspace.committed` or
        `workspace.restored` action that names one (None: never committed)."""
        return await self._read(reads.last_workspace_manifest(session_id))

    async def snapshots_due(self, session_ids: Sequence[str], every: int) -> set[str]:
        """Those of the sessions whose log since its stored snapshot (or the start) makes
        a new one due by `snapshot_due`; unknown ones are not. One read for them all (up
        to `MAX_SNAPSHOTS_DUE` of them)."""
        if not session_ids:
            return set()
        if len(session_ids) > MAX_SNAPSHOTS_DUE:
            raise InvalidInput(f"at most {MAX_SNAPSHOTS_DUE} sessions per read")
        return await self._read(reads.snapshots_due(session_ids, every))

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

    async def list_executions(self, session_id: str, *, active: bool = False) -> list[Execution]:
        """The session's executions in creation order; `active`: only those queued,
        running or waiting for input."""
        return await self._read(reads.list_executions(session_id, active))

    async def list_attempts(self, execution_id: str) -> list[AttemptRecord]:
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

    # -- checkpoints and the tool-effect ledger (written via fenced()) -----------------

    async def load_checkpoint(self, execution_id: str) -> Checkpoint:
        return await self._read(reads.load_checkpoint(execution_id))

    async def get_ledger(self, execution_id: str) -> list[LedgerEntry]:
        return await self._read(reads.get_ledger(execution_id))

    # -- input requests --------------------------------------------------------------

    async def open_input_request(self, request: InputRequestRecord) -> InputRequestRecord:
        result: InputRequestRecord = await self._one(InsertInputRequest(request))
        return result

    async def get_input_request(self, request_id: str) -> InputRequestRecord:
        return await self._read(reads.get_input_request(request_id))

    async def list_input_requests(
        self,
        session_id: str | None = None,
        *,
        execution_id: str | None = None,
        status: str | None = None,
    ) -> list[InputRequestRecord]:
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
        idempotency: tuple[str, str, Any] | None = None,
    ) -> Resolution:
        """First writer wins: ``Won`` re-queues the execution, appends ``actions`` (to the
        request's session) and completes ``idempotency`` ``(scope, key, response)`` in
        the same commit; everyone else gets ``Lost`` carrying the winning resolution
        (and their key is left as it was)."""
        complete = None if idempotency is None else CompleteIdempotency(*idempotency)
        op = ResolveInput(
            request_id,
            resolution,
            principal_id,
            client_id,
            now,
            encode_actions(None, actions),
            complete,
        )
        result: Resolution = await self._one(op)
        return result

    async def expire_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """``open -> expired``, re-queue the execution, append ``actions``; False if not open."""
        result: bool = await self._one(
            CloseInput(request_id, "expired", now, encode_actions(None, actions))
        )
        return result

    async def cancel_input(
        self, request_id: str, now: float, *, actions: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """``open -> cancelled`` and append ``actions``; False if it was not open."""
        result: bool = await self._one(
            CloseInput(request_id, "cancelled", now, encode_actions(None, actions))
        )
        return result

    # -- artifacts -------------------------------------------------------------------

    async def put_artifact(self, artifact: ArtifactRecord) -> ArtifactRecord:
        result: ArtifactRecord = await self._one(PutArtifact(artifact))
        return result

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord:
        return await self._read(reads.get_artifact(artifact_id))

    async def list_artifacts(self, session_id: str) -> list[ArtifactRecord]:
        return await self._read(reads.list_artifacts(session_id))

    # -- the plugin registry (docs/plugins.md) -----------------------------------------

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

    # -- who may do what (opennua.auth decides with these) ------------------------------

    async def create_workspace(self, workspace: WorkspaceRecord) -> WorkspaceRecord:
        result: WorkspaceRecord = await self._one(auth_ops.InsertWorkspace(workspace))
        return result

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord:
        return await self._read(auth_ops.get_workspace(workspace_id))

    async def list_workspaces(self) -> list[WorkspaceRecord]:
        return await self._read(auth_ops.list_workspaces())

    async def create_principal(
        self, principal: PrincipalRecord, *, memberships: Sequence[MembershipRecord] = ()
    ) -> PrincipalRecord:
        """A new principal and its first memberships, in one unit."""
        ops: list[Op] = [auth_ops.InsertPrincipal(principal)]
        ops += [auth_ops.SetMembership(m) for m in memberships]
        results = await self._commit(Unit(None, tuple(ops)))
        created: PrincipalRecord = results[0]
        return created

    async def get_principal(self, principal_id: str) -> PrincipalRecord:
        return await self._read(auth_ops.get_principal(principal_id))

    async def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]:
        return await self._read(auth_ops.list_principals(kind))

    async def disable_principal(self, principal_id: str, now: float) -> None:
        await self._one(auth_ops.DisablePrincipal(principal_id, now))

    async def set_membership(self, membership: MembershipRecord) -> MembershipRecord:
        result: MembershipRecord = await self._one(auth_ops.SetMembership(membership))
        return result

    async def remove_membership(self, workspace_id: str, principal_id: str) -> bool:
        result: bool = await self._one(auth_ops.RemoveMembership(workspace_id, principal_id))
        return result

    async def list_memberships(
        self, *, workspace_id: str | None = None, principal_id: str | None = None
    ) -> list[MembershipRecord]:
        return await self._read(auth_ops.list_memberships(workspace_id, principal_id))

    async def create_token(self, token: TokenRecord) -> TokenRecord:
        result: TokenRecord = await self._one(auth_ops.InsertToken(token))
        return result

    async def get_token(self, token_id: str) -> TokenRecord:
        return await self._read(auth_ops.get_token(token_id))

    async def list_tokens(self, principal_id: str) -> list[TokenRecord]:
        return await self._read(auth_ops.list_tokens(principal_id))

    async def revoke_token(self, token_id: str, now: float) -> None:
        await self._one(auth_ops.RevokeToken(token_id, now))

    async def adopt_orphans(self, workspace_id: str, principal_id: str) -> int:
        """Sessions without a workspace (from before workspaces) join this one."""
        result: int = await self._one(auth_ops.AdoptOrphans(workspace_id, principal_id))
        return result

    async def put_grant(self, grant: GrantRecord) -> GrantRecord:
        result: GrantRecord = await self._one(auth_ops.PutGrant(grant))
        return result

    async def get_grant(self, execution_id: str) -> GrantRecord | None:
        return await self._read(auth_ops.get_grant(execution_id))

    async def grant_facts(self, execution_id: str) -> GrantFacts | None:
        """The grant, its principal, their role in its workspace and its token, or None."""
        return await self._read(auth_ops.grant_facts(execution_id))

    async def answer_facts(self, request_id: str) -> AnswerFacts:
        """An input request, its execution and that execution's `grant_facts`, read in one
        query; NotFound for an unknown request."""
        return await self._read(auth_ops.answer_facts(request_id))

    async def renew_grant(self, execution_id: str, expires_at: float) -> bool:
        result: bool = await self._one(auth_ops.RenewGrant(execution_id, expires_at))
        return result

    async def revoke_grant(self, execution_id: str, now: float, reason: str) -> None:
        await self._one(auth_ops.RevokeGrant(execution_id, now, reason))

    async def end_unowned(
        self,
        execution_id: str,
        status: str,
        *,
        error: Any,
        now: float,
        actions: Sequence[Mapping[str, Any]],
    ) -> Execution | None:
        """End a parked or queued execution nobody runs (see ``EndUnowned``)."""
        result: Execution | None = await self._one(
            auth_ops.EndUnowned(execution_id, status, error, now, encode_actions(None, actions))
        )
        return result

    async def usage(self, workspace_ids: Sequence[str], since: float | None) -> list[UsageRow]:
        return await self._scan(auth_ops.usage_rows(list(workspace_ids), since))

    # -- automation: schedules, webhooks, the scheduler lease (docs/automation.md) -----------

    async def create_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """:class:`WriteConflict` when the workspace has a schedule of that name."""
        result: ScheduleRecord = await self._one(automation.InsertSchedule(schedule))
        return result

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        return await self._read(automation.get_schedule(schedule_id))

    async def list_schedules(self, workspace_id: str | None = None) -> list[ScheduleRecord]:
        return await self._read(automation.list_schedules(workspace_id))

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, *, next_fire_at: float | None = None
    ) -> ScheduleRecord:
        """Pause (the next slot is kept), or resume at ``next_fire_at``."""
        result: ScheduleRecord = await self._one(
            automation.SetSchedulePaused(schedule_id, paused, next_fire_at)
        )
        return result

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._one(automation.DeleteSchedule(schedule_id))

    async def due_schedules(self, now: float, *, limit: int = 100) -> list[ScheduleRecord]:
        """Active schedules whose next slot is at or before ``now``, earliest first."""
        return await self._read(automation.due_schedules(now, limit))

    async def skip_slots(
        self, schedule_id: str, expected: float, next_fire_at: float | None, lease: SchedulerLease
    ) -> bool:
        """Move a schedule past slots it will not fire (misfires), fenced by ``lease``;
        False when the schedule moved on meanwhile."""
        results = await self._commit(
            Unit(
                None,
                (
                    automation.CheckSchedulerLease(lease.owner, lease.epoch),
                    automation.AdvanceSchedule(schedule_id, expected, next_fire_at),
                ),
            )
        )
        moved: bool = results[1]
        return moved

    async def list_fires(self, schedule_id: str, *, limit: int = 20) -> list[FireRecord]:
        """Newest first."""
        return await self._read(automation.list_fires(schedule_id, limit))

    async def acquire_scheduler_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None:
        """Take (epoch + 1) or renew the one scheduler lease; None while another holds it."""
        result: SchedulerLease | None = await self._one(
            automation.AcquireSchedulerLease(owner, now, ttl)
        )
        return result

    async def release_scheduler_lease(self, lease: SchedulerLease) -> None:
        await self._one(automation.ReleaseSchedulerLease(lease.owner, lease.epoch))

    async def get_scheduler_lease(self) -> SchedulerLease | None:
        return await self._read(automation.get_scheduler_lease())

    async def create_hook(self, hook: HookRecord) -> HookRecord:
        result: HookRecord = await self._one(automation.InsertHook(hook))
        return result

    async def get_hook(self, hook_id: str) -> HookRecord:
        return await self._read(automation.get_hook(hook_id))

    async def list_hooks(self, workspace_id: str | None = None) -> list[HookRecord]:
        return await self._read(automation.list_hooks(workspace_id))

    async def delete_hook(self, hook_id: str) -> None:
        await self._one(automation.DeleteHook(hook_id))

    async def get_delivery(self, hook_id: str, delivery_id: str) -> DeliveryRecord | None:
        return await self._read(automation.get_delivery(hook_id, delivery_id))

    async def list_deliveries(self, hook_id: str, *, limit: int = 20) -> list[DeliveryRecord]:
        """Newest first."""
        return await self._read(automation.list_deliveries(hook_id, limit))

    # -- sealed secrets and the gateway's audit (opennua.secrets seals and opens) --------

    async def put_secret(self, secret: SealedSecret) -> SealedSecret:
        """Insert or replace; a replaced secret keeps its ``created_at``."""
        result: SealedSecret = await self._one(secret_ops.PutSecret(secret))
        return result

    async def get_secret(self, workspace_id: str, name: str) -> SealedSecret:
        return await self._read(secret_ops.get_secret(workspace_id, name))

    async def list_secrets(self, workspace_id: str | None = None) -> list[SealedSecret]:
        """A workspace's secrets by name, or (None) every workspace's."""
        return await self._read(secret_ops.list_secrets(workspace_id))

    async def existing_secrets(self, workspace_id: str, names: Sequence[str]) -> set[str]:
        return await self._read(secret_ops.secret_names(workspace_id, list(names)))

    async def delete_secret(self, workspace_id: str, name: str) -> bool:
        result: bool = await self._one(secret_ops.DeleteSecret(workspace_id, name))
        return result

    async def touch_secret(self, workspace_id: str, name: str, now: float) -> None:
        await self._one(secret_ops.TouchSecret(workspace_id, name, now))

    async def get_key_check(self) -> KeyCheck | None:
        return await self._read(secret_ops.get_key_check())

    async def init_key_check(self, check: KeyCheck) -> KeyCheck:
        """Record the first key's check unless one exists; the check in force."""
        result: KeyCheck = await self._one(secret_ops.InitKeyCheck(check))
        return result

    async def rewrap_secrets(
        self, old_key_id: str, check: KeyCheck, secrets: Sequence[SealedSecret]
    ) -> int:
        """Every secret re-sealed and the new key's check, in one unit; WriteConflict if
        the key moved or the secrets changed since they were read."""
        result: int = await self._one(secret_ops.Rewrap(old_key_id, check, tuple(secrets)))
        return result

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Write gateway audit records (an id written twice stays the first)."""
        if records:
            await self._one(secret_ops.AppendAudit(tuple(records)))

    async def put_gateway_ticket(
        self, execution_id: str, epoch: int, secret_hash: str, now: float
    ) -> None:
        """The current attempt's gateway ticket (its hash), replacing an earlier one."""
        await self._one(secret_ops.PutTicket(execution_id, epoch, secret_hash, now))

    async def get_gateway_ticket(self, execution_id: str) -> tuple[int, str] | None:
        return await self._read(secret_ops.get_ticket(execution_id))

    async def gateway_facts(
        self, execution_id: str, secret_names: Sequence[str] = ()
    ) -> GatewayFacts:
        """The execution, its grant's facts and the named sealed secrets, in one read:
        the gateway's check of every call (:class:`NotFound` for no such execution)."""
        return await self._read(secret_ops.gateway_facts(execution_id, list(secret_names)))

    async def list_audit(
        self,
        *,
        workspace_id: str | None = None,
        execution_id: str | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Newest first."""
        return await self._read(secret_ops.list_audit(workspace_id, execution_id, limit))
