"""The store contract. Each public method is one unit of work (or one read) so that
every write, whichever method made it, goes through the same commit path."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from . import _auth as auth
from . import _automation as automation
from . import _executions as executions
from . import _files as files
from . import _inputs as inputs
from . import _log as log
from . import _registry as registry
from . import _secrets as secrets
from . import _subscriptions as subscriptions
from ._actions import encode_actions
from ._auth import (
    AnswerFacts,
    GrantFacts,
    GrantRecord,
    MembershipRecord,
    PrincipalRecord,
    TokenRecord,
    UsageRow,
    WorkspaceRecord,
)
from ._automation import (
    DeliveryRecord,
    FireRecord,
    HookRecord,
    RefusalRecord,
    ScheduleRecord,
    SchedulerLease,
)
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
from ._roles import (
    AuthStore,
    AutomationStore,
    ExecutionJournal,
    FileStore,
    GatewayStore,
    InputStore,
    LogStore,
    RegistryStore,
    SealedSecretStore,
    SubscriptionStore,
)
from ._secrets import AuditKind, AuditRecord, GatewayFacts, KeyCheck, Rewrap, SealedSecret
from ._sql import Op, Program
from ._subscriptions import BehindSession, DeliveryState, EventDelivery, SubscriptionRecord
from ._unit import FencedTransaction, Transaction, Unit, UnitScope
from ._watch import Watcher, WatchHub

T = TypeVar("T")
#: Sessions per `Store.snapshots_due` read (a bound on its statement's parameters).
MAX_SNAPSHOTS_DUE = 500


class Store(
    LogStore,
    ExecutionJournal,
    InputStore,
    FileStore,
    RegistryStore,
    AuthStore,
    AutomationStore,
    SubscriptionStore,
    SealedSecretStore,
    GatewayStore,
    abc.ABC,
):
    """Every durable fact of opennua, every role in one object. Use as ``async with await
    open_store(...) as store`` where the process is put together, and hand each part the
    role it needs (`_roles`)."""

    #: How long :meth:`check_writable` waits for the write path before it says no.
    check_writable_timeout: float = 5.0

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs
        #: In-process fan-out of `watch_rights` (PostgreSQL feeds it from NOTIFY).
        self._rights = WatchHub()

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

    def watch_rights(self) -> Watcher:
        """Wake-ups ``(principal_id, 1)`` after a committed change that may have taken
        rights away from that principal: a token revoked (everywhere or for a workspace),
        a membership removed or changed, a principal disabled, a server admin demoted. On
        PostgreSQL from every process on the database (NOTIFY), else from this one.

        A wake-up only: re-read what the principal may do. Close it when done.
        """
        return self._rights.subscribe()

    def _rights_changed(self, *principal_ids: str) -> None:
        """After such a change committed: wake this process's `watch_rights` watchers.
        (PostgreSQL's ops NOTIFY in their transaction instead, which reaches all.)"""
        self._rights.publish(dict.fromkeys(principal_ids, 1))

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

    async def __aexit__(self, *exc: object) -> None:
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

    async def last_workspace_manifest(self, session_id: str) -> str | None:
        """The manifest of the session's newest `workspace.committed` or
        `workspace.restored` action that names one (None: never committed)."""
        return await self._read(files.last_workspace_manifest(session_id))

    async def snapshots_due(self, session_ids: Sequence[str], every: int) -> set[str]:
        """Those of the sessions whose log since its stored snapshot (or the start) makes
        a new one due by `snapshot_due`; unknown ones are not. One read for them all (up
        to `MAX_SNAPSHOTS_DUE` of them)."""
        if not session_ids:
            return set()
        if len(session_ids) > MAX_SNAPSHOTS_DUE:
            raise InvalidInput(f"at most {MAX_SNAPSHOTS_DUE} sessions per read")
        return await self._read(log.snapshots_due(session_ids, every))

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

    # -- executions ------------------------------------------------------------------

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

    # -- checkpoints and the tool-effect ledger (written via fenced()) -----------------

    async def load_checkpoint(self, execution_id: str) -> Checkpoint:
        return await self._read(executions.load_checkpoint(execution_id))

    async def get_ledger(self, execution_id: str) -> list[LedgerEntry]:
        return await self._read(executions.get_ledger(execution_id))

    # -- input requests --------------------------------------------------------------

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

    # -- artifacts -------------------------------------------------------------------

    async def put_artifact(self, artifact: ArtifactRecord) -> ArtifactRecord:
        result: ArtifactRecord = await self._one(PutArtifact(artifact))
        return result

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord:
        return await self._read(files.get_artifact(artifact_id))

    async def list_artifacts(self, session_id: str) -> list[ArtifactRecord]:
        return await self._read(files.list_artifacts(session_id))

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

    async def workspace_versions(self, workspace_id: str) -> list[PluginVersion]:
        """Every version published in the workspace (any visibility) and the server-wide
        ones, in one read."""
        return await self._read(registry.workspace_versions(workspace_id))

    # -- which blobs a workspace may name (docs/store.md "Blobs") ----------------------

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

    # -- who may do what (opennua.auth decides with these) ------------------------------

    async def create_workspace(self, workspace: WorkspaceRecord) -> WorkspaceRecord:
        result: WorkspaceRecord = await self._one(auth.InsertWorkspace(workspace))
        return result

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord:
        return await self._read(auth.get_workspace(workspace_id))

    async def list_workspaces(self) -> list[WorkspaceRecord]:
        return await self._read(auth.list_workspaces())

    async def create_principal(
        self, principal: PrincipalRecord, *, memberships: Sequence[MembershipRecord] = ()
    ) -> PrincipalRecord:
        """A new principal and its first memberships, in one unit."""
        ops: list[Op] = [auth.InsertPrincipal(principal)]
        ops += [auth.SetMembership(m) for m in memberships]
        results = await self._commit(Unit(None, tuple(ops)))
        created: PrincipalRecord = results[0]
        return created

    async def get_principal(self, principal_id: str) -> PrincipalRecord:
        return await self._read(auth.get_principal(principal_id))

    async def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]:
        return await self._read(auth.list_principals(kind))

    async def disable_principal(self, principal_id: str, now: float) -> None:
        await self._one(auth.DisablePrincipal(principal_id, now))
        self._rights_changed(principal_id)

    async def set_server_admin(self, principal_id: str, since: float | None) -> None:
        """Make a user a server admin (since `since`) or, with None, no longer one:
        NotFound for what is not a user, WriteConflict for the last server admin."""
        await self._one(auth.SetServerAdmin(principal_id, since))
        self._rights_changed(principal_id)

    async def set_membership(self, membership: MembershipRecord) -> MembershipRecord:
        result: MembershipRecord = await self._one(auth.SetMembership(membership))
        self._rights_changed(membership.principal_id)
        return result

    async def remove_membership(self, workspace_id: str, principal_id: str) -> bool:
        result: bool = await self._one(auth.RemoveMembership(workspace_id, principal_id))
        if result:
            self._rights_changed(principal_id)
        return result

    async def list_memberships(
        self,
        *,
        workspace_id: str | None = None,
        principal_id: str | None = None,
        opened_by: str | None = None,
    ) -> list[MembershipRecord]:
        """`opened_by`: only the workspaces that token was not revoked for."""
        return await self._read(auth.list_memberships(workspace_id, principal_id, opened_by))

    async def create_token(self, token: TokenRecord) -> TokenRecord:
        result: TokenRecord = await self._one(auth.InsertToken(token))
        return result

    async def get_token(self, token_id: str) -> TokenRecord:
        return await self._read(auth.get_token(token_id))

    async def list_tokens(self, principal_id: str) -> list[TokenRecord]:
        return await self._read(auth.list_tokens(principal_id))

    async def revoke_token(self, token_id: str, now: float) -> None:
        """Revoke a token everywhere (NotFound for an unknown one)."""
        principal_id: str = await self._one(auth.RevokeToken(token_id, now))
        self._rights_changed(principal_id)

    async def revoke_token_in(
        self, token_id: str, workspace_id: str, now: float, *, revoked_by: str | None = None
    ) -> None:
        """Revoke a token for one workspace's work: it opens nothing there any more, and
        grants it started there no longer hold (NotFound for an unknown token)."""
        principal_id: str = await self._one(
            auth.RevokeTokenIn(token_id, workspace_id, now, revoked_by)
        )
        self._rights_changed(principal_id)

    async def workspace_tokens(self, workspace_id: str) -> list[tuple[TokenRecord, float | None]]:
        """The tokens of a workspace's members, each with when it was revoked for it."""
        return await self._read(auth.workspace_tokens(workspace_id))

    async def adopt_orphans(self, workspace_id: str, principal_id: str) -> int:
        """Sessions without a workspace (from before workspaces) join this one."""
        result: int = await self._one(auth.AdoptOrphans(workspace_id, principal_id))
        return result

    async def put_grant(self, grant: GrantRecord) -> GrantRecord:
        result: GrantRecord = await self._one(auth.PutGrant(grant))
        return result

    async def get_grant(self, execution_id: str) -> GrantRecord | None:
        return await self._read(auth.get_grant(execution_id))

    async def grant_facts(self, execution_id: str) -> GrantFacts | None:
        """The grant, its principal, their role in its workspace and its token, or None."""
        return await self._read(auth.grant_facts(execution_id))

    async def answer_facts(self, request_id: str) -> AnswerFacts:
        """An input request, its execution and that execution's `grant_facts`, read in one
        query; NotFound for an unknown request."""
        return await self._read(auth.answer_facts(request_id))

    async def renew_grant(self, execution_id: str, expires_at: float) -> bool:
        result: bool = await self._one(auth.RenewGrant(execution_id, expires_at))
        return result

    async def revoke_grant(self, execution_id: str, now: float, reason: str) -> None:
        await self._one(auth.RevokeGrant(execution_id, now, reason))

    async def unowned_with_grants(
        self, principal_ids: Sequence[str]
    ) -> list[tuple[Execution, GrantFacts | None]]:
        """Queued or parked executions nobody runs whose live grant is one of these
        principals', with the grant's facts (see ``auth.unowned_with_grants``)."""
        return await self._read(auth.unowned_with_grants(list(principal_ids)))

    async def usage(self, workspace_ids: Sequence[str], since: float | None) -> list[UsageRow]:
        return await self._scan(auth.usage_rows(list(workspace_ids), since))

    # -- event subscriptions (docs/subscriptions.md) -----------------------------------

    async def create_subscription(self, subscription: SubscriptionRecord) -> SubscriptionRecord:
        """The subscription, following its scope's sessions from their current end."""
        result: SubscriptionRecord = await self._one(subscriptions.InsertSubscription(subscription))
        return result

    async def get_subscription(self, subscription_id: str) -> SubscriptionRecord:
        return await self._read(subscriptions.get_subscription(subscription_id))

    async def list_subscriptions(self, workspace_id: str | None = None) -> list[SubscriptionRecord]:
        """A workspace's subscriptions; None: every active one (what the deliverer follows)."""
        return await self._read(subscriptions.list_subscriptions(workspace_id))

    async def delete_subscription(self, subscription_id: str) -> None:
        await self._one(subscriptions.DeleteSubscription(subscription_id))

    async def sessions_behind(
        self, subscription: SubscriptionRecord, *, limit: int = 100
    ) -> list[BehindSession]:
        """Sessions in the subscription's scope with actions past its cursor."""
        return await self._scan(subscriptions.sessions_behind(subscription, limit))

    async def record_scan(
        self,
        lease: SchedulerLease,
        subscription_id: str,
        session_id: str,
        *,
        expected: int | None,
        seq: int,
        deliveries: Sequence[EventDelivery],
    ) -> None:
        """Deliveries found in a session's log and its cursor moved from ``expected`` to
        ``seq``, in one unit fenced by the deliverer's lease (``Fenced`` once it is lost;
        ``WriteConflict`` if the cursor moved meanwhile)."""
        found = tuple(deliveries)
        scan = subscriptions.RecordScan(subscription_id, session_id, expected, seq, found)
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, scan)))

    async def due_deliveries(self, now: float, *, limit: int = 100) -> list[EventDelivery]:
        return await self._read(subscriptions.due_deliveries(now, limit))

    async def claim_tries(
        self, lease: SchedulerLease, deliveries: Sequence[EventDelivery], until: float
    ) -> None:
        """Tries are starting for ``deliveries``: none is due again before ``until``; one
        unit fenced by the deliverer's lease."""
        keys = tuple((v.subscription_id, v.event_id) for v in deliveries)
        claim = subscriptions.ClaimTries(keys, until)
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, claim)))

    async def record_attempt(
        self,
        lease: SchedulerLease,
        delivery: EventDelivery,
        *,
        state: DeliveryState,
        next_at: float,
        status: int | None,
        error: str | None,
        now: float,
        disable: str | None = None,
    ) -> None:
        """How a try of ``delivery`` ended, fenced by the deliverer's lease."""
        attempt = subscriptions.RecordAttempt(
            delivery.subscription_id, delivery.event_id, state, next_at, status, error, now, disable
        )
        await self._commit(Unit(None, subscriptions.fenced(lease.owner, lease.epoch, attempt)))

    async def list_event_deliveries(
        self, subscription_id: str, *, limit: int = 20
    ) -> list[EventDelivery]:
        """Newest first."""
        return await self._read(subscriptions.list_event_deliveries(subscription_id, limit))

    async def get_event_delivery(self, subscription_id: str, event_id: str) -> EventDelivery:
        return await self._read(subscriptions.get_event_delivery(subscription_id, event_id))

    async def replay_event(self, subscription_id: str, event_id: str, now: float) -> None:
        await self._one(subscriptions.ReplayEvent(subscription_id, event_id, now))

    async def replay_from(self, subscription_id: str, session_id: str, seq: int) -> None:
        await self._one(subscriptions.ReplayFrom(subscription_id, session_id, seq))

    async def acquire_delivery_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None:
        """Take (epoch + 1) or renew the one deliverer lease; None while another holds it."""
        result: SchedulerLease | None = await self._one(
            automation.AcquireSchedulerLease(owner, now, ttl, subscriptions.DELIVERY_LEASE)
        )
        return result

    async def release_delivery_lease(self, lease: SchedulerLease) -> None:
        await self._one(
            automation.ReleaseSchedulerLease(lease.owner, lease.epoch, subscriptions.DELIVERY_LEASE)
        )

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

    async def record_refused_fire(
        self, fire: FireRecord, *, expected: float, next_fire_at: float | None
    ) -> None:
        """A slot that started nothing (``fire.refused_code`` says why) is a run too:
        recorded once, fenced by the scheduler lease it names, and the schedule moved on
        from ``expected`` in the same unit. ``WriteConflict`` if the slot was decided."""
        await self._commit(
            Unit(
                None,
                (
                    automation.CheckSchedulerLease(fire.scheduler_id, fire.epoch),
                    automation.InsertFire(fire),
                    automation.AdvanceSchedule(fire.schedule_id, expected, next_fire_at),
                ),
            )
        )

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

    async def record_refusal(self, refusal: RefusalRecord) -> None:
        """A delivery the hook refused (the hook's newest MAX_REFUSALS are kept)."""
        await self._one(automation.InsertRefusal(refusal))

    async def list_refusals(self, hook_id: str, *, limit: int = 20) -> list[RefusalRecord]:
        """Newest first."""
        return await self._read(automation.list_refusals(hook_id, limit))

    async def get_delivery(self, hook_id: str, delivery_id: str) -> DeliveryRecord | None:
        return await self._read(automation.get_delivery(hook_id, delivery_id))

    async def list_deliveries(self, hook_id: str, *, limit: int = 20) -> list[DeliveryRecord]:
        """Newest first."""
        return await self._read(automation.list_deliveries(hook_id, limit))

    # -- sealed secrets and the gateway's audit (opennua.secrets seals and opens) --------

    async def put_secret(self, secret: SealedSecret) -> SealedSecret:
        """Insert or replace; a replaced secret keeps its ``created_at``."""
        result: SealedSecret = await self._one(secrets.PutSecret(secret))
        return result

    async def get_secret(self, workspace_id: str, name: str) -> SealedSecret:
        return await self._read(secrets.get_secret(workspace_id, name))

    async def list_secrets(self, workspace_id: str | None = None) -> list[SealedSecret]:
        """A workspace's secrets by name, or (None) every workspace's."""
        return await self._read(secrets.list_secrets(workspace_id))

    async def existing_secrets(self, workspace_id: str, names: Sequence[str]) -> set[str]:
        return await self._read(secrets.secret_names(workspace_id, list(names)))

    async def delete_secret(self, workspace_id: str, name: str) -> bool:
        result: bool = await self._one(secrets.DeleteSecret(workspace_id, name))
        return result

    async def touch_secret(self, workspace_id: str, name: str, now: float) -> None:
        await self._one(secrets.TouchSecret(workspace_id, name, now))

    async def get_key_check(self) -> KeyCheck | None:
        return await self._read(secrets.get_key_check())

    async def init_key_check(self, check: KeyCheck) -> KeyCheck:
        """Record the first key's check unless one exists; the check in force."""
        result: KeyCheck = await self._one(secrets.InitKeyCheck(check))
        return result

    async def rewrap_secrets(
        self, old_key_id: str, check: KeyCheck, secrets: Sequence[SealedSecret]
    ) -> int:
        """Every secret re-sealed and the new key's check, in one unit; WriteConflict if
        the key moved or the secrets changed since they were read."""
        result: int = await self._one(Rewrap(old_key_id, check, tuple(secrets)))
        return result

    async def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Write gateway audit records (an id written twice stays the first)."""
        if records:
            await self._one(secrets.AppendAudit(tuple(records)))

    async def put_gateway_ticket(
        self, execution_id: str, epoch: int, secret_hash: str, now: float
    ) -> None:
        """The current attempt's gateway ticket (its hash), replacing an earlier one."""
        await self._one(secrets.PutTicket(execution_id, epoch, secret_hash, now))

    async def get_gateway_ticket(self, execution_id: str) -> tuple[int, str] | None:
        return await self._read(secrets.get_ticket(execution_id))

    async def gateway_facts(
        self, execution_id: str, secret_names: Sequence[str] = ()
    ) -> GatewayFacts:
        """The execution, its grant's facts and the named sealed secrets, in one read:
        the gateway's check of every call (:class:`NotFound` for no such execution)."""
        return await self._read(secrets.gateway_facts(execution_id, list(secret_names)))

    async def list_audit(
        self,
        *,
        workspace_id: str | None = None,
        execution_id: str | None = None,
        principal_id: str | None = None,
        server: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        kind: AuditKind | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Newest first; every filter given must hold (``since``/``until``: unix seconds
        of ``at``, ``until`` exclusive)."""
        where = secrets.AuditFilter(
            workspace_id=workspace_id,
            execution_id=execution_id,
            principal_id=principal_id,
            server=server,
            tool=tool,
            outcome=outcome,
            kind=kind,
            since=since,
            until=until,
        )
        return await self._read(secrets.list_audit(where, limit))
