"""The action envelope and every v1 action type (docs/architecture.md §3).

An action is one fact in a session's ordered log. Each type is a frozen model whose `type`
tag selects its `data` payload; `Action` is the one discriminated union at the JSON edge.
Types this version does not know load as `UnknownAction` (forward compatibility: the
reducer advances `seq` and ignores them), and unknown fields are ignored, so a newer
producer's log still loads here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Discriminator, Field, JsonValue, Tag, TypeAdapter

__all__ = [
    "ACTION_ADAPTER",
    "ACTION_CLASSES",
    "ACTION_TYPES",
    "INLINE_OUTPUT_LIMIT",
    "LOST_PATHS_LIMIT",
    "PROTOCOL_VERSION",
    "TYPE_OF_DATA",
    "Action",
    "AnsweredBy",
    "ArtifactPublished",
    "ArtifactPublishedAction",
    "ArtifactState",
    "ArtifactUpdated",
    "ArtifactUpdatedAction",
    "AttemptStarted",
    "AttemptStartedAction",
    "ContentPart",
    "Count",
    "DeliveryUpdated",
    "DeliveryUpdatedAction",
    "ErrorInfo",
    "FileChanged",
    "FileChangedAction",
    "Id",
    "InputRequestOpened",
    "InputRequestOpenedAction",
    "InputRequestResolved",
    "InputRequestResolvedAction",
    "KnownAction",
    "MessageAdded",
    "MessageAddedAction",
    "MessageCompleted",
    "MessageCompletedAction",
    "MessageDelta",
    "MessageDeltaAction",
    "MessageStarted",
    "MessageStartedAction",
    "ModelRetry",
    "OtherPart",
    "PermissionOption",
    "PlanEntry",
    "PlanUpdated",
    "PlanUpdatedAction",
    "PluginRef",
    "ReasoningCompleted",
    "ReasoningCompletedAction",
    "ReasoningDelta",
    "ReasoningDeltaAction",
    "ResourceLinkPart",
    "SessionCreated",
    "SessionCreatedAction",
    "SessionUpdated",
    "SessionUpdatedAction",
    "TextPart",
    "Timestamp",
    "ToolCallStarted",
    "ToolCallStartedAction",
    "ToolCallStatus",
    "ToolCallUpdated",
    "ToolCallUpdatedAction",
    "ToolKind",
    "Trigger",
    "TurnEnded",
    "TurnEndedAction",
    "TurnStarted",
    "TurnStartedAction",
    "TurnState",
    "TurnStateAction",
    "TurnStopReason",
    "UnknownAction",
    "UsageRecorded",
    "UsageRecordedAction",
    "WorkerEnded",
    "WorkerEndedAction",
    "WorkerStarted",
    "WorkerStartedAction",
    "WorkspaceCommitted",
    "WorkspaceCommittedAction",
    "WorkspaceRestored",
    "WorkspaceRestoredAction",
    "action_from_dict",
    "action_from_json",
    "action_to_dict",
    "action_to_json",
]

PROTOCOL_VERSION: Literal[1] = 1

Id = Annotated[str, Field(min_length=1, max_length=128)]
Timestamp = Annotated[
    str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
]
Count = Annotated[int, Field(ge=0)]
INLINE_OUTPUT_LIMIT = 8192


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


# -- shared payload parts -------------------------------------------------------------------


class TextPart(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ResourceLinkPart(_Frozen):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    media_type: str | None = None


class OtherPart(_Frozen):
    """A content part of a type this version does not know, kept as it came."""

    model_config = ConfigDict(frozen=True, extra="allow")
    type: str


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("text", "resource_link") else "other"


ContentPart = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ResourceLinkPart, Tag("resource_link")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]


class PluginRef(_Frozen):
    name: str
    version: str
    digest: str


class Trigger(_Frozen):
    kind: Literal["message", "automation", "retry", "api"]
    principal_id: Id
    client_id: Id | None = None
    source: str | None = None


class ErrorInfo(_Frozen):
    code: str
    message: str


class ModelRetry(_Frozen):
    """The model provider refused or failed a request; the runtime tries again at `retry_at`."""

    attempt: Annotated[int, Field(ge=1)]
    retry_at: Timestamp
    error: ErrorInfo


class PermissionOption(_Frozen):
    option_id: Id
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class AnsweredBy(_Frozen):
    client_id: Id | None = None
    principal_id: Id | None = None


class PlanEntry(_Frozen):
    id: Id
    content: str
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"] = "medium"


TurnStopReason = Literal[
    "end_turn", "cancelled", "failed", "deadline_exceeded", "max_steps", "revoked"
]
ToolCallStatus = Literal[
    "pending", "in_progress", "completed", "failed", "cancelled", "unknown", "rejected"
]
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]


# -- payloads, one per action type ----------------------------------------------------------


class SessionCreated(_Frozen):
    title: str = ""
    workspace_id: Id | None = None
    principal_id: Id | None = None
    plugin: PluginRef | None = None
    deployment_digest: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    #: The execution snapshot the session is bound to, with `plugin` and
    #: `deployment_digest`: the deployment's name, the model, and the snapshot's digest.
    deployment: str | None = None
    model: str | None = None
    snapshot_digest: str | None = None


class SessionUpdated(_Frozen):
    title: str | None = None
    metadata: dict[str, JsonValue] | None = None


class TurnStarted(_Frozen):
    execution_id: Id
    trigger: Trigger
    input: list[ContentPart]
    message_id: Id
    retry_of: Id | None = None
    trace_id: str


class TurnState(_Frozen):
    state: Literal["queued", "running", "requires_action"]
    attempt: int | None = None
    #: Set while the runtime waits to retry a failed model request; null clears it.
    model_retry: ModelRetry | None = None


class TurnEnded(_Frozen):
    stop_reason: TurnStopReason
    error: ErrorInfo | None = None


class AttemptStarted(_Frozen):
    execution_id: Id
    attempt: Annotated[int, Field(ge=1)]
    attempt_id: Id
    supervisor_id: str
    resumed_from_checkpoint: bool


class MessageAdded(_Frozen):
    message_id: Id
    role: Literal["user", "assistant"]
    content: list[ContentPart]


class MessageStarted(_Frozen):
    message_id: Id
    role: Literal["user", "assistant"]


class MessageDelta(_Frozen):
    message_id: Id
    delta: str


class MessageCompleted(_Frozen):
    message_id: Id
    text: str
    status: Literal["complete", "interrupted"]


class ReasoningDelta(_Frozen):
    message_id: Id
    delta: str


class ReasoningCompleted(_Frozen):
    message_id: Id
    text: str


class ToolCallStarted(_Frozen):
    tool_call_id: Id
    name: str
    title: str
    kind: ToolKind
    input: JsonValue = None


class ToolCallUpdated(_Frozen):
    tool_call_id: Id
    status: ToolCallStatus
    output: Annotated[str, Field(max_length=INLINE_OUTPUT_LIMIT)] | None = None
    output_ref: str | None = None
    error: ErrorInfo | None = None


class InputRequestOpened(_Frozen):
    request_id: Id
    reason: Literal["tool_call", "input_required", "confirmation"]
    tool_call_id: Id | None = None
    prompt: str
    options: list[PermissionOption] | None = None
    response_schema: dict[str, JsonValue] | None = None
    expires_at: Timestamp | None = None


class InputRequestResolved(_Frozen):
    request_id: Id
    outcome: Literal["selected", "answered", "cancelled", "expired"]
    option_id: Id | None = None
    payload: JsonValue = None
    answered_by: AnsweredBy | None = None


class PlanUpdated(_Frozen):
    entries: list[PlanEntry]


class WorkerStarted(_Frozen):
    worker_run_id: Id
    parent_run_id: Id
    parent_tool_call_id: Id
    name: str
    task: str


class WorkerEnded(_Frozen):
    worker_run_id: Id
    status: Literal["completed", "failed", "cancelled"]
    summary: str | None = None


ArtifactState = Literal["pending", "published", "failed"]


class ArtifactPublished(_Frozen):
    artifact_id: Id
    name: str
    media_type: str
    size: Count
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    tool_call_id: Id | None = None
    #: Whether its bytes are durable in the blob store (downloadable). Apart from the turn's
    #: status: a turn may complete while the upload of what it published failed.
    state: ArtifactState = "published"
    error: ErrorInfo | None = None


class ArtifactUpdated(_Frozen):
    """A published artifact's state moved: a retry started (`pending`), then ended."""

    artifact_id: Id
    state: ArtifactState
    error: ErrorInfo | None = None


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class FileChanged(_Frozen):
    """A file a tool changed. Text: a unified diff, inline up to 8 KiB, else by reference
    (`diff_ref`: `sha256:<hex>`, the diff's blob). Binary: size and sha256 only."""

    path: str
    change: Literal["created", "modified", "deleted"]
    tool_call_id: Id | None = None
    diff_ref: str | None = None
    diff: str | None = None
    size: Count | None = None
    sha256: Sha256 | None = None
    binary: bool = False


#: How many lost paths a `workspace.restored` names; the rest are counted.
LOST_PATHS_LIMIT = 100


class WorkspaceCommitted(_Frozen):
    """The execution's workspace files as of this commit: a content-addressed manifest."""

    execution_id: Id
    manifest: Sha256
    files: Count
    bytes: Count


class WorkspaceRestored(_Frozen):
    """A resumed attempt restored the last committed manifest (None: there was none).

    What was written after that commit is gone: `lost_paths` names files whose local copy
    differed from the manifest (only the machine that wrote them can know), and
    `lost_tool_call_ids` the calls that were running when the last attempt stopped."""

    execution_id: Id
    attempt: Annotated[int, Field(ge=1)]
    files: Count
    bytes: Count
    manifest: Sha256 | None = None
    lost_paths: list[str] = Field(default_factory=list, max_length=LOST_PATHS_LIMIT)
    lost_more: Count = 0
    lost_tool_call_ids: list[Id] = Field(default_factory=list)


class UsageRecorded(_Frozen):
    provider: str
    model: str
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_read_input_tokens: Count = 0
    cache_creation_input_tokens: Count = 0
    reasoning_output_tokens: Count = 0


class DeliveryUpdated(_Frozen):
    """One change of an external delivery's state (a chat message, an edit, an upload).

    `pending → sent | retrying → … → sent | failed` is what the chat bridge reports;
    `accepted`, `delivered` and `abandoned` are the first vocabulary, still read. `error` is
    the last error; `next_attempt_at` says when a `retrying` delivery is tried again.
    """

    delivery_id: Id
    channel: str
    target: str
    status: Literal["pending", "sent", "retrying", "failed", "accepted", "delivered", "abandoned"]
    attempts: Count = 0
    error: ErrorInfo | None = None
    #: What is delivered: message, edit, reaction, upload (the channel's vocabulary).
    kind: str | None = None
    #: The platform's id of what it delivered (a Matrix event id), once sent.
    event_id: str | None = None
    next_attempt_at: Timestamp | None = None


# -- the envelope ---------------------------------------------------------------------------


class _Envelope(_Frozen):
    v: Literal[1] = PROTOCOL_VERSION
    session_id: Id
    #: Assigned by the Host when the action is appended; None only before that.
    seq: Annotated[int, Field(ge=1)] | None = None
    id: Id
    ts: Timestamp
    turn_id: Id | None = None
    run_id: Id | None = None
    client_id: Id | None = None
    intent_id: Id | None = None


class SessionCreatedAction(_Envelope):
    type: Literal["session.created"] = "session.created"
    data: SessionCreated


class SessionUpdatedAction(_Envelope):
    type: Literal["session.updated"] = "session.updated"
    data: SessionUpdated


class TurnStartedAction(_Envelope):
    type: Literal["turn.started"] = "turn.started"
    data: TurnStarted


class TurnStateAction(_Envelope):
    type: Literal["turn.state"] = "turn.state"
    data: TurnState


class TurnEndedAction(_Envelope):
    type: Literal["turn.ended"] = "turn.ended"
    data: TurnEnded


class AttemptStartedAction(_Envelope):
    type: Literal["execution.attempt_started"] = "execution.attempt_started"
    data: AttemptStarted


class MessageAddedAction(_Envelope):
    type: Literal["message.added"] = "message.added"
    data: MessageAdded


class MessageStartedAction(_Envelope):
    type: Literal["message.started"] = "message.started"
    data: MessageStarted


class MessageDeltaAction(_Envelope):
    type: Literal["message.delta"] = "message.delta"
    data: MessageDelta


class MessageCompletedAction(_Envelope):
    type: Literal["message.completed"] = "message.completed"
    data: MessageCompleted


class ReasoningDeltaAction(_Envelope):
    type: Literal["reasoning.delta"] = "reasoning.delta"
    data: ReasoningDelta


class ReasoningCompletedAction(_Envelope):
    type: Literal["reasoning.completed"] = "reasoning.completed"
    data: ReasoningCompleted


class ToolCallStartedAction(_Envelope):
    type: Literal["tool_call.started"] = "tool_call.started"
    data: ToolCallStarted


class ToolCallUpdatedAction(_Envelope):
    type: Literal["tool_call.updated"] = "tool_call.updated"
    data: ToolCallUpdated


class InputRequestOpenedAction(_Envelope):
    type: Literal["input_request.opened"] = "input_request.opened"
    data: InputRequestOpened


class InputRequestResolvedAction(_Envelope):
    type: Literal["input_request.resolved"] = "input_request.resolved"
    data: InputRequestResolved


class PlanUpdatedAction(_Envelope):
    type: Literal["plan.updated"] = "plan.updated"
    data: PlanUpdated


class WorkerStartedAction(_Envelope):
    type: Literal["worker.started"] = "worker.started"
    data: WorkerStarted


class WorkerEndedAction(_Envelope):
    type: Literal["worker.ended"] = "worker.ended"
    data: WorkerEnded


class ArtifactPublishedAction(_Envelope):
    type: Literal["artifact.published"] = "artifact.published"
    data: ArtifactPublished


class ArtifactUpdatedAction(_Envelope):
    type: Literal["artifact.updated"] = "artifact.updated"
    data: ArtifactUpdated


class FileChangedAction(_Envelope):
    type: Literal["file.changed"] = "file.changed"
    data: FileChanged


class UsageRecordedAction(_Envelope):
    type: Literal["usage.recorded"] = "usage.recorded"
    data: UsageRecorded


class DeliveryUpdatedAction(_Envelope):
    type: Literal["delivery.updated"] = "delivery.updated"
    data: DeliveryUpdated


class WorkspaceCommittedAction(_Envelope):
    type: Literal["workspace.committed"] = "workspace.committed"
    data: WorkspaceCommitted


class WorkspaceRestoredAction(_Envelope):
    type: Literal["workspace.restored"] = "workspace.restored"
    data: WorkspaceRestored


class UnknownAction(_Envelope):
    """An action of a type this version does not know: kept, and skipped by the reducer."""

    type: str
    data: dict[str, JsonValue] = Field(default_factory=dict)


KnownAction: TypeAlias = (
    SessionCreatedAction
    | SessionUpdatedAction
    | TurnStartedAction
    | TurnStateAction
    | TurnEndedAction
    | AttemptStartedAction
    | MessageAddedAction
    | MessageStartedAction
    | MessageDeltaAction
    | MessageCompletedAction
    | ReasoningDeltaAction
    | ReasoningCompletedAction
    | ToolCallStartedAction
    | ToolCallUpdatedAction
    | InputRequestOpenedAction
    | InputRequestResolvedAction
    | PlanUpdatedAction
    | WorkerStartedAction
    | WorkerEndedAction
    | ArtifactPublishedAction
    | ArtifactUpdatedAction
    | FileChangedAction
    | UsageRecordedAction
    | DeliveryUpdatedAction
    | WorkspaceCommittedAction
    | WorkspaceRestoredAction
)

ACTION_CLASSES: dict[str, type[_Envelope]] = {
    "session.created": SessionCreatedAction,
    "session.updated": SessionUpdatedAction,
    "turn.started": TurnStartedAction,
    "turn.state": TurnStateAction,
    "turn.ended": TurnEndedAction,
    "execution.attempt_started": AttemptStartedAction,
    "message.added": MessageAddedAction,
    "message.started": MessageStartedAction,
    "message.delta": MessageDeltaAction,
    "message.completed": MessageCompletedAction,
    "reasoning.delta": ReasoningDeltaAction,
    "reasoning.completed": ReasoningCompletedAction,
    "tool_call.started": ToolCallStartedAction,
    "tool_call.updated": ToolCallUpdatedAction,
    "input_request.opened": InputRequestOpenedAction,
    "input_request.resolved": InputRequestResolvedAction,
    "plan.updated": PlanUpdatedAction,
    "worker.started": WorkerStartedAction,
    "worker.ended": WorkerEndedAction,
    "artifact.published": ArtifactPublishedAction,
    "artifact.updated": ArtifactUpdatedAction,
    "file.changed": FileChangedAction,
    "usage.recorded": UsageRecordedAction,
    "delivery.updated": DeliveryUpdatedAction,
    "workspace.committed": WorkspaceCommittedAction,
    "workspace.restored": WorkspaceRestoredAction,
}
ACTION_TYPES: frozenset[str] = frozenset(ACTION_CLASSES)


def _tag_of(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in ACTION_TYPES else "unknown"


Action = Annotated[
    Annotated[SessionCreatedAction, Tag("session.created")]
    | Annotated[SessionUpdatedAction, Tag("session.updated")]
    | Annotated[TurnStartedAction, Tag("turn.started")]
    | Annotated[TurnStateAction, Tag("turn.state")]
    | Annotated[TurnEndedAction, Tag("turn.ended")]
    | Annotated[AttemptStartedAction, Tag("execution.attempt_started")]
    | Annotated[MessageAddedAction, Tag("message.added")]
    | Annotated[MessageStartedAction, Tag("message.started")]
    | Annotated[MessageDeltaAction, Tag("message.delta")]
    | Annotated[MessageCompletedAction, Tag("message.completed")]
    | Annotated[ReasoningDeltaAction, Tag("reasoning.delta")]
    | Annotated[ReasoningCompletedAction, Tag("reasoning.completed")]
    | Annotated[ToolCallStartedAction, Tag("tool_call.started")]
    | Annotated[ToolCallUpdatedAction, Tag("tool_call.updated")]
    | Annotated[InputRequestOpenedAction, Tag("input_request.opened")]
    | Annotated[InputRequestResolvedAction, Tag("input_request.resolved")]
    | Annotated[PlanUpdatedAction, Tag("plan.updated")]
    | Annotated[WorkerStartedAction, Tag("worker.started")]
    | Annotated[WorkerEndedAction, Tag("worker.ended")]
    | Annotated[ArtifactPublishedAction, Tag("artifact.published")]
    | Annotated[ArtifactUpdatedAction, Tag("artifact.updated")]
    | Annotated[FileChangedAction, Tag("file.changed")]
    | Annotated[UsageRecordedAction, Tag("usage.recorded")]
    | Annotated[DeliveryUpdatedAction, Tag("delivery.updated")]
    | Annotated[WorkspaceCommittedAction, Tag("workspace.committed")]
    | Annotated[WorkspaceRestoredAction, Tag("workspace.restored")]
    | Annotated[UnknownAction, Tag("unknown")],
    Discriminator(_tag_of),
]
"""Any action, known or not; the one union every JSON edge validates against."""

ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)


def action_from_json(raw: str | bytes) -> Action:
    """Decode and validate one action; raises pydantic.ValidationError naming the field."""
    return ACTION_ADAPTER.validate_json(raw)


def action_from_dict(raw: dict[str, Any]) -> Action:
    return ACTION_ADAPTER.validate_python(raw)


def action_to_dict(action: Action) -> dict[str, Any]:
    return action.model_dump(mode="json")


def action_to_json(action: Action) -> str:
    return action.model_dump_json()


#: The action type each payload class belongs to, for producers that build payloads first.
TYPE_OF_DATA: dict[type[BaseModel], str] = {
    cls.model_fields["data"].annotation: name  # type: ignore[misc]
    for name, cls in ACTION_CLASSES.items()
}
