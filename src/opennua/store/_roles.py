"""The store's roles: each caller names the narrowest one it needs (eventsourcing's
recorders: a few methods by role). `Store` implements them all; only composition roots
(server/_serve.py, tests) hold a `Store` as such. docs/store.md, "Roles"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

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
from ._executions import (
    AttemptRecord,
    Checkpoint,
    Claimed,
    Execution,
    Lease,
    LedgerEntry,
    Narrate,
)
from ._files import ArtifactRecord
from ._inputs import InputRequestRecord
from ._log import (
    DEFAULT_IDEMPOTENCY_TTL,
    IdempotencyOutcome,
    Page,
    SessionFilter,
    SessionRecord,
    SessionSummary,
    Snapshot,
)
from ._registry import ChannelMove, DeploymentRecord, PluginVersion
from ._secrets import AuditKind, AuditRecord, GatewayFacts, KeyCheck, SealedSecret
from ._subscriptions import BehindSession, DeliveryState, EventDelivery, SubscriptionRecord
from ._unit import FencedTransaction, Transaction, UnitScope
from ._watch import Watcher


class LogStore(Protocol):
    """Sessions, their action log, snapshots and idempotency records: the Host's."""

    def watch(self) -> Watcher: ...

    def transaction(self) -> UnitScope[Transaction]: ...

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
    ) -> SessionRecord: ...

    async def get_session(self, session_id: str) -> SessionRecord: ...

    async def list_session_summaries(
        self, *, limit: int = 50, cursor: str | None = None, where: SessionFilter | None = None
    ) -> Page[SessionSummary]: ...

    async def update_session_title(self, session_id: str, title: str | None) -> None: ...

    async def append(self, session_id: str, actions: Sequence[Mapping[str, Any]]) -> list[int]: ...

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    async def put_snapshot(self, session_id: str, seq: int, state_json: str) -> None: ...

    async def get_snapshot(self, session_id: str) -> Snapshot | None: ...

    async def snapshots_due(self, session_ids: Sequence[str], every: int) -> set[str]: ...

    async def begin(
        self,
        scope: str,
        key: str,
        request_hash: str,
        now: float,
        *,
        ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    ) -> IdempotencyOutcome: ...

    async def lookup_idempotency(
        self, scope: str, key: str, request_hash: str, now: float
    ) -> IdempotencyOutcome: ...


class ExecutionJournal(Protocol):
    """Executions, claims, leases and what an attempt journals under its fence: the Supervisor's."""

    def fenced(
        self, execution_id: str, epoch: int, *, owner: str | None = None
    ) -> UnitScope[FencedTransaction]: ...

    async def create_execution(self, execution: Execution) -> Execution: ...

    async def get_execution(self, execution_id: str) -> Execution: ...

    async def list_executions(
        self, session_id: str, *, active: bool = False
    ) -> list[Execution]: ...

    async def list_attempts(self, execution_id: str) -> list[AttemptRecord]: ...

    async def claim(
        self, supervisor_id: str, now: float, ttl: float, *, attempt_id: str | None = None
    ) -> Claimed | None: ...

    async def fence_collection(
        self, session_id: str, collector: str, now: float, until: float
    ) -> bool: ...

    async def end_collection(self, session_id: str, collector: str) -> None: ...

    async def heartbeat(self, execution_id: str, epoch: int, now: float, ttl: float) -> Lease: ...

    async def release(self, execution_id: str, epoch: int) -> None: ...

    async def request_cancel(self, execution_id: str) -> Execution: ...

    async def sweep_deadlines(
        self, now: float, narrate: Narrate
    ) -> list[tuple[Execution, list[int]]]: ...

    async def load_checkpoint(self, execution_id: str) -> Checkpoint: ...

    async def get_ledger(self, execution_id: str) -> list[LedgerEntry]: ...


class InputStore(Protocol):
    """Input requests (answered, expired or cancelled in a `transaction()`)."""

    async def open_input_request(self, request: InputRequestRecord) -> InputRequestRecord: ...

    async def get_input_request(self, request_id: str) -> InputRequestRecord: ...

    async def list_input_requests(
        self,
        session_id: str | None = None,
        *,
        execution_id: str | None = None,
        status: str | None = None,
    ) -> list[InputRequestRecord]: ...


class FileStore(Protocol):
    """Blobs and what names them: artifacts, workspace manifests, a workspace's held blobs."""

    @property
    def blobs(self) -> BlobStore: ...

    async def put_artifact(self, artifact: ArtifactRecord) -> ArtifactRecord: ...

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord: ...

    async def list_artifacts(self, session_id: str) -> list[ArtifactRecord]: ...

    async def last_workspace_manifest(self, session_id: str) -> str | None: ...

    async def hold_blob(
        self, workspace_id: str, sha256: str, size: int, now: float, *, quota: int | None = None
    ) -> bool: ...

    async def held_blobs(self, workspace_id: str, sha256s: Sequence[str]) -> dict[str, int]: ...

    async def workspace_usage(self, workspace_id: str) -> int: ...

    async def all_held_blobs(self) -> set[str]: ...


class RegistryStore(Protocol):
    """Published plugin versions, release channels and deployments."""

    async def publish_plugin(self, version: PluginVersion) -> tuple[PluginVersion, bool]: ...

    async def get_plugin_version(self, name: str, version: str) -> PluginVersion: ...

    async def list_plugin_versions(self, name: str) -> list[PluginVersion]: ...

    async def list_plugins(self) -> list[str]: ...

    async def release_plugin(
        self, name: str, channel: str, version: str, now: float
    ) -> ChannelMove: ...

    async def rollback_plugin(self, name: str, channel: str, now: float) -> ChannelMove: ...

    async def channel_history(self, name: str, channel: str | None = None) -> list[ChannelMove]: ...

    async def resolve_channel(self, name: str, channel: str) -> str: ...

    async def put_deployment(self, deployment: DeploymentRecord) -> DeploymentRecord: ...

    async def get_deployment(self, name: str) -> DeploymentRecord: ...

    async def get_deployment_config(self, digest: str) -> DeploymentRecord: ...

    async def list_deployments(self) -> list[DeploymentRecord]: ...

    async def workspace_versions(self, workspace_id: str) -> list[PluginVersion]: ...


class AuthStore(Protocol):
    """Who may do what: workspaces, principals, memberships, tokens and grants (what
    `opennua.auth` decides with)."""

    def watch_rights(self) -> Watcher: ...

    async def create_workspace(self, workspace: WorkspaceRecord) -> WorkspaceRecord: ...

    async def get_workspace(self, workspace_id: str) -> WorkspaceRecord: ...

    async def list_workspaces(self) -> list[WorkspaceRecord]: ...

    async def create_principal(
        self, principal: PrincipalRecord, *, memberships: Sequence[MembershipRecord] = ()
    ) -> PrincipalRecord: ...

    async def get_principal(self, principal_id: str) -> PrincipalRecord: ...

    async def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]: ...

    async def disable_principal(self, principal_id: str, now: float) -> None: ...

    async def set_server_admin(self, principal_id: str, since: float | None) -> None: ...

    async def set_membership(self, membership: MembershipRecord) -> MembershipRecord: ...

    async def remove_membership(self, workspace_id: str, principal_id: str) -> bool: ...

    async def list_memberships(
        self,
        *,
        workspace_id: str | None = None,
        principal_id: str | None = None,
        opened_by: str | None = None,
    ) -> list[MembershipRecord]: ...

    async def create_token(self, token: TokenRecord) -> TokenRecord: ...

    async def get_token(self, token_id: str) -> TokenRecord: ...

    async def list_tokens(self, principal_id: str) -> list[TokenRecord]: ...

    async def revoke_token(self, token_id: str, now: float) -> None: ...

    async def revoke_token_in(
        self, token_id: str, workspace_id: str, now: float, *, revoked_by: str | None = None
    ) -> None: ...

    async def workspace_tokens(
        self, workspace_id: str
    ) -> list[tuple[TokenRecord, float | None]]: ...

    async def adopt_orphans(self, workspace_id: str, principal_id: str) -> int: ...

    async def put_grant(self, grant: GrantRecord) -> GrantRecord: ...

    async def get_grant(self, execution_id: str) -> GrantRecord | None: ...

    async def grant_facts(self, execution_id: str) -> GrantFacts | None: ...

    async def answer_facts(self, request_id: str) -> AnswerFacts: ...

    async def renew_grant(self, execution_id: str, expires_at: float) -> bool: ...

    async def revoke_grant(self, execution_id: str, now: float, reason: str) -> None: ...

    async def unowned_with_grants(
        self, principal_ids: Sequence[str]
    ) -> list[tuple[Execution, GrantFacts | None]]: ...

    async def usage(self, workspace_ids: Sequence[str], since: float | None) -> list[UsageRow]: ...


class AutomationStore(Protocol):
    """Schedules and their fires, webhooks and their deliveries, the scheduler lease."""

    async def create_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord: ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord: ...

    async def list_schedules(self, workspace_id: str | None = None) -> list[ScheduleRecord]: ...

    async def set_schedule_paused(
        self, schedule_id: str, paused: bool, *, next_fire_at: float | None = None
    ) -> ScheduleRecord: ...

    async def delete_schedule(self, schedule_id: str) -> None: ...

    async def due_schedules(self, now: float, *, limit: int = 100) -> list[ScheduleRecord]: ...

    async def skip_slots(
        self, schedule_id: str, expected: float, next_fire_at: float | None, lease: SchedulerLease
    ) -> bool: ...

    async def record_refused_fire(
        self, fire: FireRecord, *, expected: float, next_fire_at: float | None
    ) -> None: ...

    async def list_fires(self, schedule_id: str, *, limit: int = 20) -> list[FireRecord]: ...

    async def acquire_scheduler_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None: ...

    async def release_scheduler_lease(self, lease: SchedulerLease) -> None: ...

    async def get_scheduler_lease(self) -> SchedulerLease | None: ...

    async def create_hook(self, hook: HookRecord) -> HookRecord: ...

    async def get_hook(self, hook_id: str) -> HookRecord: ...

    async def list_hooks(self, workspace_id: str | None = None) -> list[HookRecord]: ...

    async def delete_hook(self, hook_id: str) -> None: ...

    async def record_refusal(self, refusal: RefusalRecord) -> None: ...

    async def list_refusals(self, hook_id: str, *, limit: int = 20) -> list[RefusalRecord]: ...

    async def get_delivery(self, hook_id: str, delivery_id: str) -> DeliveryRecord | None: ...

    async def list_deliveries(self, hook_id: str, *, limit: int = 20) -> list[DeliveryRecord]: ...


class SubscriptionStore(Protocol):
    """Event subscriptions, the cursors the deliverer follows the logs with, their
    deliveries and the deliverer's lease (docs/subscriptions.md)."""

    async def create_subscription(self, subscription: SubscriptionRecord) -> SubscriptionRecord: ...

    async def get_subscription(self, subscription_id: str) -> SubscriptionRecord: ...

    async def list_subscriptions(
        self, workspace_id: str | None = None
    ) -> list[SubscriptionRecord]: ...

    async def delete_subscription(self, subscription_id: str) -> None: ...

    async def sessions_behind(
        self, subscription: SubscriptionRecord, *, limit: int = 100
    ) -> list[BehindSession]: ...

    async def record_scan(
        self,
        lease: SchedulerLease,
        subscription_id: str,
        session_id: str,
        *,
        expected: int | None,
        seq: int,
        deliveries: Sequence[EventDelivery],
    ) -> None: ...

    async def due_deliveries(self, now: float, *, limit: int = 100) -> list[EventDelivery]: ...

    async def claim_tries(
        self, lease: SchedulerLease, deliveries: Sequence[EventDelivery], until: float
    ) -> None: ...

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
    ) -> None: ...

    async def list_event_deliveries(
        self, subscription_id: str, *, limit: int = 20
    ) -> list[EventDelivery]: ...

    async def get_event_delivery(self, subscription_id: str, event_id: str) -> EventDelivery: ...

    async def replay_event(self, subscription_id: str, event_id: str, now: float) -> None: ...

    async def replay_from(self, subscription_id: str, session_id: str, seq: int) -> None: ...

    async def acquire_delivery_lease(
        self, owner: str, now: float, ttl: float
    ) -> SchedulerLease | None: ...

    async def release_delivery_lease(self, lease: SchedulerLease) -> None: ...


class SealedSecretStore(Protocol):
    """Sealed secrets and the key check (`opennua.secrets` seals and opens them)."""

    async def put_secret(self, secret: SealedSecret) -> SealedSecret: ...

    async def get_secret(self, workspace_id: str, name: str) -> SealedSecret: ...

    async def list_secrets(self, workspace_id: str | None = None) -> list[SealedSecret]: ...

    async def existing_secrets(self, workspace_id: str, names: Sequence[str]) -> set[str]: ...

    async def delete_secret(self, workspace_id: str, name: str) -> bool: ...

    async def touch_secret(self, workspace_id: str, name: str, now: float) -> None: ...

    async def get_key_check(self) -> KeyCheck | None: ...

    async def init_key_check(self, check: KeyCheck) -> KeyCheck: ...

    async def rewrap_secrets(
        self, old_key_id: str, check: KeyCheck, secrets: Sequence[SealedSecret]
    ) -> int: ...


class GatewayStore(Protocol):
    """What the gateway checks each call against and records: tickets, facts, audit."""

    async def gateway_facts(
        self, execution_id: str, secret_names: Sequence[str] = ()
    ) -> GatewayFacts: ...

    async def put_gateway_ticket(
        self, execution_id: str, epoch: int, secret_hash: str, now: float
    ) -> None: ...

    async def get_gateway_ticket(self, execution_id: str) -> tuple[int, str] | None: ...

    async def append_audit(self, records: Sequence[AuditRecord]) -> None: ...

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
    ) -> list[AuditRecord]: ...
