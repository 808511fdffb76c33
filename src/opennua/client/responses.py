"""What the server answers, as the client returns it: plain JSON objects with their shape
written down (TypedDicts), so a caller's type checker knows the keys.

The client may import only the protocol (docs/architecture.md §9), so these mirror the
server's response models; `tests/client/test_responses.py` holds the two to the same keys.
Import them from here: `from opennua.client.responses import ExecutionDoc`.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

__all__ = [
    "ActionPage",
    "Answered",
    "AnsweredByDoc",
    "ArtifactDoc",
    "ArtifactStateDoc",
    "AttemptDoc",
    "AuditDoc",
    "DeploymentDoc",
    "DownloadLinkDoc",
    "ErrorDoc",
    "EventDeliveryDoc",
    "ExecutionDoc",
    "FileDoc",
    "HookCreated",
    "HookDoc",
    "MemberDoc",
    "MemberTokenDoc",
    "MoveDoc",
    "PluginDoc",
    "PluginProblemDoc",
    "PluginSummary",
    "PrincipalDoc",
    "PublishedVersion",
    "Resolution",
    "RunDoc",
    "ScheduleDoc",
    "ScheduleWithRuns",
    "SecretDoc",
    "ServerDoc",
    "SessionItem",
    "SubscriptionCreated",
    "SubscriptionDoc",
    "TokenCreated",
    "TokenDoc",
    "UsageDoc",
    "UsageItem",
    "UserCreated",
    "VersionDoc",
    "WhoAmI",
    "WorkloadDoc",
    "WorkspaceDoc",
]


class ExecutionDoc(TypedDict):
    execution_id: str
    session_id: str
    turn_id: str
    status: str
    retry_of: str | None
    attempt: int
    epoch: int
    owner: str | None
    cancel_requested: bool
    created_at: str
    deadline_at: str | None
    lease_expires_at: str | None
    finished_at: str | None
    snapshot_digest: str | None
    error: Any
    attempts: list[AttemptDoc]
    principal_id: str | None
    trigger: Any
    workload: WorkloadDoc
    traceparent: str | None


class AttemptDoc(TypedDict):
    attempt_id: str
    attempt: int
    epoch: int
    supervisor_id: str
    claimed_at: str


class WorkloadDoc(TypedDict):
    """What ran it: the pinned snapshot and deployment digests, and the supervisor
    instance and attempt of the latest attempt (None before the first claim)."""

    snapshot_digest: str | None
    deployment_digest: str | None
    supervisor_id: str | None
    attempt: int | None
    attempt_id: str | None


class ArtifactDoc(TypedDict):
    artifact_id: str
    session_id: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: str
    turn_id: str | None
    tool_call_id: str | None


class ArtifactStateDoc(TypedDict):
    artifact_id: str
    state: str
    error: dict[str, str] | None


class DownloadLinkDoc(TypedDict):
    url: str
    expires_at: str


class VersionDoc(TypedDict):
    name: str
    version: str
    digest: str
    description: str
    published_at: str
    workspace_id: str | None
    publisher_id: str | None
    visibility: Literal["workspace", "private"]
    size: int
    files: list[FileDoc]
    problems: list[PluginProblemDoc]
    servers: list[ServerDoc]
    egress_requested: list[str] | None
    commands: list[dict[str, str]] | None
    hooks: list[dict[str, str | None]] | None


class PluginProblemDoc(TypedDict):
    """One finding of the plugin format (docs/plugins.md, "Problems")."""

    severity: Literal["error", "warning", "ignored"]
    message: str
    file: str | None
    line: int | None


class ServerDoc(TypedDict):
    """One MCP server of the plugin: its tools are named `<prefix>__<tool>`; one not
    `configured` (a placeholder URL) runs only once a deployment supplies its URL."""

    name: str
    prefix: str
    transport: Literal["stdio", "http", "sse", "a2a"]
    configured: bool


class FileDoc(TypedDict):
    path: str
    sha256: str
    size: int
    executable: bool


class PluginDoc(TypedDict):
    name: str
    channels: dict[str, str]
    versions: list[VersionDoc]
    history: list[MoveDoc]


class MoveDoc(TypedDict):
    channel: str
    seq: int
    kind: str
    version: str
    moved_at: str


class DeploymentDoc(TypedDict):
    name: str
    digest: str
    created_at: str
    workspace_id: str | None
    spec: dict[str, Any]
    egress_requested: list[str] | None
    #: From a save or a single deployment's read: what it leaves its plugin without.
    problems: list[PluginProblemDoc] | None


class SessionItem(TypedDict):
    session_id: str
    title: str
    created_at: str
    last_seq: int
    metadata: dict[str, Any]
    status: Literal["idle", "running", "requires_action"]
    last_activity_at: str
    open_input_requests: int
    plugin: str | None
    deployment: str | None
    snapshot_digest: str | None
    principal_id: str | None


class WhoAmI(TypedDict):
    principal_id: str
    kind: Literal["user", "agent"]
    name: str
    token_id: str
    server_admin: bool
    workspaces: list[WorkspaceDoc]


class WorkspaceDoc(TypedDict):
    workspace_id: str
    name: str
    role: Literal["owner", "admin", "member", "viewer"] | None


class MemberDoc(TypedDict):
    workspace_id: str
    principal_id: str
    role: Literal["owner", "admin", "member", "viewer"]
    permissions: list[Literal["read", "act", "manage", "own"]]


class PrincipalDoc(TypedDict):
    principal_id: str
    kind: Literal["user", "agent"]
    name: str
    workspace_id: str | None
    created_by: str | None
    created_at: str
    disabled: bool
    server_admin: bool


class UserCreated(PrincipalDoc):
    """A new user, with their first token (shown this once only)."""

    token: str


class TokenDoc(TypedDict):
    token_id: str
    principal_id: str
    name: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None


class TokenCreated(TokenDoc):
    """A new token, with its secret (shown this once only)."""

    token: str


class MemberTokenDoc(TokenDoc):
    """A member's token as an admin of the workspace sees it."""

    workspace_id: str
    revoked_here_at: str | None


class SecretDoc(TypedDict):
    name: str
    created_at: str
    updated_at: str
    last_used_at: str | None


class AuditDoc(TypedDict):
    audit_id: str
    at: str
    kind: Literal["tool_call", "egress"]
    principal_id: str | None
    execution_id: str | None
    server: str
    tool: str | None
    host: str | None
    credential: str | None
    outcome: str
    code: str | None
    latency_ms: float
    port: int | None
    bytes_up: int | None
    bytes_down: int | None


class UsageDoc(TypedDict):
    by: str
    since: str | None
    items: list[UsageItem]


class UsageItem(TypedDict):
    key: str | None
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reasoning_output_tokens: int
    responses: int
    cost_usd: str
    unpriced_responses: int


class PublishedVersion(VersionDoc):
    """A publish's answer: the version, and whether this publish created it."""

    created: bool


class PluginSummary(TypedDict):
    name: str
    latest: str
    channels: dict[str, str]


class ActionPage(TypedDict):
    """Raw actions as the Host stored them (validate with `opennua.protocol`)."""

    actions: list[dict[str, Any]]
    next_after: int
    more: bool


class AnsweredByDoc(TypedDict):
    client_id: str | None
    principal_id: str | None
    on_behalf_of: str | None


class Resolution(TypedDict):
    """How an input request was resolved (the winner's answer, also in a 409's body)."""

    request_id: str
    outcome: Literal["selected", "answered"]
    option_id: str | None
    payload: Any
    answered_by: AnsweredByDoc


class Answered(TypedDict):
    resolution: Resolution


class ErrorDoc(TypedDict):
    code: str
    message: str


class RunDoc(TypedDict):
    """One fire of a schedule and how its turn stands."""

    fire_time: str
    fired_at: str
    lag_seconds: float
    session_id: str | None
    turn_id: str | None
    execution_id: str | None
    status: str | None
    scheduler_id: str
    error: ErrorDoc | None


class ScheduleDoc(TypedDict):
    schedule_id: str
    workspace_id: str
    name: str
    cron: str
    timezone: str
    deployment: str
    prompt: str
    misfire: str
    session_id: str | None
    paused: bool
    next_fire_time: str | None
    created_by: str | None
    created_at: str


class ScheduleWithRuns(ScheduleDoc):
    """A schedule as created or listed: with its most recent runs, newest first."""

    recent_runs: list[RunDoc]


class HookDoc(TypedDict):
    hook_id: str
    workspace_id: str
    name: str
    deployment: str
    prompt: str
    max_bytes: int
    url: str
    created_by: str | None
    created_at: str


class HookCreated(HookDoc):
    """A new hook, with its signing secret (shown this once only)."""

    secret: str


class SubscriptionDoc(TypedDict):
    """An event subscription (docs/subscriptions.md)."""

    subscription_id: str
    workspace_id: str
    url: str
    events: list[str]
    deployment: str | None
    session_id: str | None
    format: str
    execution_id: str | None
    state: Literal["active", "disabled"]
    disabled_at: str | None
    disabled_reason: str | None
    created_by: str
    created_at: str


class SubscriptionCreated(SubscriptionDoc):
    """A new subscription, with its `whsec_` signing secret (shown this once only)."""

    secret: str


class EventDeliveryDoc(TypedDict):
    """One event owed to a subscription and how sending it stands."""

    event_id: str
    event_type: str
    session_id: str
    seq: int
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    next_attempt_at: str | None
    last_status: int | None
    last_error: str | None
    created_at: str
    updated_at: str
