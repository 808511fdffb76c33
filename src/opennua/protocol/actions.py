"""The action envelope and every v1 action type (docs/architecture.md §3).

An action is one fact in a session's ordered log. Each type is a frozen model whose `type`
tag selects its `data` payload; `Action` is the one discriminated union at the JSON edge.
Types this version does not know load as `UnknownAction` (forward compatibility: the
reducer advances `seq` and ignores them), and unknown fields are ignored, so a newer
producer's log still loads here.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Self, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    TypeAdapter,
    model_validator,
)

__all__ = [
    "ACTION_ADAPTER",
    "ACTION_CLASSES",
    "ACTION_TYPES",
    "INLINE_OUTPUT_LIMIT",
    "LOST_PATHS_LIMIT",
    "MAX_CLIENT_TOOLS",
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
    "ClientTool",
    "ClientTools",
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
    "McpServerUnavailable",
    "McpServerUnavailableAction",
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
    # Attribute docstrings become each field's `description` in the JSON Schema
    # (docs/schema/), where people writing a client read the protocol.
    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)


def _tag(value: str) -> Any:
    """The `type` field of one model of a discriminated union, documented once."""
    return Field(value, description=f'Always "{value}": selects this model in the union.')


# -- shared payload parts -------------------------------------------------------------------


class TextPart(_Frozen):
    """Plain text in a message or an input."""

    type: Literal["text"] = _tag("text")
    text: str
    """The text, as written (Markdown is the client's to render or not)."""


class ResourceLinkPart(_Frozen):
    """A reference to a resource (a file, an artifact, a URL) instead of its bytes."""

    type: Literal["resource_link"] = _tag("resource_link")
    uri: str
    """Where the resource is: a URL or a `sha256:<hex>` blob reference."""
    name: str
    """The name to show for it (a file name)."""
    media_type: str | None = None
    """Its MIME type, when known."""


class OtherPart(_Frozen):
    """A content part of a type this version does not know, kept as it came."""

    model_config = ConfigDict(frozen=True, extra="allow", use_attribute_docstrings=True)
    type: str
    """The part's type, unknown to this version; its other fields are kept as they came."""


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
    """One published plugin version (docs/plugins.md)."""

    name: str
    """The plugin's name."""
    version: str
    """The published version (semver)."""
    digest: str
    """The digest over the version's files: what a checkpoint is checked against."""


class Trigger(_Frozen):
    """What started a turn and on whose authority."""

    kind: Literal["message", "automation", "retry", "api"]
    """A person's message, a schedule or webhook, an explicit retry, or an API call."""
    principal_id: Id
    """The principal the turn runs as (`prn_…`)."""
    client_id: Id | None = None
    """The client whose intent started it, when a client did."""
    source: str | None = None
    """For automation: `schedule:<id>@<slot>` or `webhook:<id>/<delivery>`."""


#: At most this many client tools per turn, and this many bytes of one tool's JSON.
MAX_CLIENT_TOOLS = 32
MAX_CLIENT_TOOL_BYTES = 16384


class ClientTool(_Frozen):
    """A tool the client defines and runs itself (an AG-UI frontend tool). The model is
    offered it for the turn; calling it opens an input request (`input_required`, naming
    the call), and the answer's payload is the tool's result."""

    name: Annotated[
        str, Field(min_length=1, max_length=64, pattern=r"^_?(?:[a-zA-Z0-9-]+_)*[a-zA-Z0-9-]*$")
    ]
    """The tool's name as models accept one (letters, digits, `_`, `-`; 64 at most), with
    no `__` (MCP tools' form). One of the agent's own tools' names is refused (422)."""
    description: Annotated[str, Field(max_length=4096)] = ""
    """What the tool does, for the model."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    """The JSON Schema of its arguments: an object schema (`{}`: no arguments)."""

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if self.parameters.get("type", "object") != "object":
            raise ValueError("a client tool's parameters must be an object schema")
        size = len(json.dumps(self.model_dump(mode="json"), ensure_ascii=False).encode())
        if size > MAX_CLIENT_TOOL_BYTES:
            raise ValueError(f"a client tool is {MAX_CLIENT_TOOL_BYTES} bytes of JSON at most")
        return self


def check_client_tools(tools: list[ClientTool]) -> list[ClientTool]:
    """At most `MAX_CLIENT_TOOLS`, each name once."""
    if len(tools) > MAX_CLIENT_TOOLS:
        raise ValueError(f"at most {MAX_CLIENT_TOOLS} client tools")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError("client tool names must be unique")
    return tools


ClientTools = Annotated[list[ClientTool], AfterValidator(check_client_tools)]


class ErrorInfo(_Frozen):
    """An error as clients show it."""

    code: str
    """A stable machine-readable code (`tool_failed`, `deadline_exceeded`, …)."""
    message: str
    """A one-line human-readable explanation."""


class ModelRetry(_Frozen):
    """The model provider refused or failed a request; the runtime tries again at `retry_at`."""

    attempt: Annotated[int, Field(ge=1)]
    """Which retry this is, from 1."""
    retry_at: Timestamp
    """When the next request goes out (RFC 3339, UTC)."""
    error: ErrorInfo
    """What the provider answered last."""


class PermissionOption(_Frozen):
    """One choice offered by an input request (ACP's permission options)."""

    option_id: Id
    """What an answer names to select this option."""
    name: str
    """The label to show."""
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]
    """What choosing it means, so a client can style and shortcut it."""


class AnsweredBy(_Frozen):
    """Who answered: the client, the principal it acted as and, when that client answered
    for someone it knows by another name (a chat bridge for its chat user, e.g.
    `@alice:example.org`), that person. `on_behalf_of` is the principal's claim: it is
    recorded and shown, and grants nothing."""

    client_id: Id | None = None
    """The client that sent the winning answer."""
    principal_id: Id | None = None
    """The principal that client acted as."""
    on_behalf_of: Annotated[str, Field(max_length=255)] | None = None
    """The person the client answered for, in the client's own naming (a claim)."""


class PlanEntry(_Frozen):
    """One step of the agent's plan (a TODO list, not an activity)."""

    id: Id
    """Stable across updates of the plan."""
    content: str
    """What the step is, in the agent's words."""
    status: Literal["pending", "in_progress", "completed"]
    """Where the step is; an ended turn leaves no step `in_progress`."""
    priority: Literal["high", "medium", "low"] = "medium"
    """How much the step matters, by the agent's account."""


TurnStopReason = Literal[
    "end_turn", "cancelled", "failed", "deadline_exceeded", "max_steps", "revoked"
]
ToolCallStatus = Literal[
    "pending", "in_progress", "completed", "failed", "cancelled", "unknown", "rejected"
]
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]


# -- payloads, one per action type ----------------------------------------------------------


class SessionCreated(_Frozen):
    """A session began; the first action of every log."""

    title: str = ""
    """The session's title ("" until someone names it)."""
    workspace_id: Id | None = None
    """The workspace (tenant) that owns the session."""
    principal_id: Id | None = None
    """The principal who created it."""
    plugin: PluginRef | None = None
    """The plugin version the session is pinned to, when it runs one."""
    deployment_digest: str | None = None
    """The digest of the deployment it was created from."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form JSON the creator attached; the protocol does not read it."""
    deployment: str | None = None
    """The name of the deployment the session's execution snapshot came from."""
    model: str | None = None
    """The model every execution of the session uses (`provider:model`)."""
    snapshot_digest: str | None = None
    """The digest of the execution snapshot (plugin, version, digests, model) it is bound
    to; every checkpoint is checked against it."""


class SessionUpdated(_Frozen):
    """The session's title or metadata changed; an absent field is unchanged."""

    title: str | None = None
    """The new title, or null to keep it."""
    metadata: dict[str, JsonValue] | None = None
    """The new metadata (replacing the old), or null to keep it."""


class TurnStarted(_Frozen):
    """A turn began, `queued`: an accepted execution and the input it answers."""

    execution_id: Id
    """The execution that carries the turn (`exe_…`)."""
    trigger: Trigger
    """What started it and on whose authority."""
    input: list[ContentPart]
    """What the turn answers: the user's message or the automation's rendered input."""
    message_id: Id
    """The id of the user message holding `input`."""
    retry_of: Id | None = None
    """The execution this one retries, for an explicit retry."""
    trace_id: str
    """The W3C trace id the turn's spans belong to (32 hex digits)."""
    client_tools: ClientTools = Field(default_factory=list)
    """The tools the client that sent the message runs itself (absent: none)."""


class TurnState(_Frozen):
    """The turn waits for a person (`requires_action`), or runs again after a model
    retry's wait. A turn is `queued` from `turn.started` and `running` from each
    `execution.attempt_started`; no `turn.state` repeats those."""

    state: Literal["queued", "running", "requires_action"]
    """Where the execution is; `requires_action`: an input request is open."""
    attempt: int | None = None
    """The attempt now running it, from 1."""
    model_retry: ModelRetry | None = None
    """Set while the runtime waits to retry a failed model request; null clears it."""


class TurnEnded(_Frozen):
    """The turn ended; everything still open in it is settled (docs/protocol.md)."""

    stop_reason: TurnStopReason
    """Why it ended: `end_turn` is success; the others name what stopped it."""
    error: ErrorInfo | None = None
    """What went wrong, when it failed."""
    output: JsonValue = None
    """The structured result: the final answer as JSON that fits the plugin's
    `output-schema` (on `end_turn` only; absent when the plugin declares none)."""


class AttemptStarted(_Frozen):
    """A supervisor claimed the execution and started an attempt (first, after a loss, or
    after an answer): the turn is `running` from here."""

    execution_id: Id
    """The execution attempted."""
    attempt: Annotated[int, Field(ge=1)]
    """The attempt's number, from 1; a new attempt also raises the execution's epoch."""
    attempt_id: Id
    """The attempt's own id (`att_…`)."""
    supervisor_id: str
    """The supervisor process that holds the lease."""
    resumed_from_checkpoint: bool
    """True when it continues from a checkpoint rather than from the start."""


class MessageAdded(_Frozen):
    """A whole message, added at once (a user's input)."""

    message_id: Id
    """The message's id (`msg_…`)."""
    role: Literal["user", "assistant"]
    """Who wrote it."""
    content: list[ContentPart]
    """Its content parts, in order."""


class MessageStarted(_Frozen):
    """A streamed message began; `message.delta` actions follow."""

    message_id: Id
    """The message's id; its deltas and completion name it."""
    role: Literal["user", "assistant"]
    """Who writes it."""


class MessageDelta(_Frozen):
    """More text of a streaming message."""

    message_id: Id
    """The streaming message."""
    delta: str
    """Text to append."""


class MessageCompleted(_Frozen):
    """A streamed message ended, with its whole text."""

    message_id: Id
    """The message that ended."""
    text: str
    """Its whole text (what the deltas add up to, or more if some were coalesced)."""
    status: Literal["complete", "interrupted"]
    """`interrupted`: the turn stopped while the message streamed; the text is kept."""


class ReasoningDelta(_Frozen):
    """More of the model's reasoning (thinking) text."""

    message_id: Id
    """The reasoning block's id."""
    delta: str
    """Text to append."""


class ReasoningCompleted(_Frozen):
    """A reasoning block ended, with its whole text."""

    message_id: Id
    """The reasoning block that ended."""
    text: str
    """Its whole text."""


class ToolCallStarted(_Frozen):
    """The model asked for a tool call (it runs after any approval it needs)."""

    tool_call_id: Id
    """The call's id; updates, input requests and file changes name it."""
    name: str
    """The tool's name as the model called it."""
    title: str
    """A short human-readable description of this call."""
    kind: ToolKind
    """What sort of tool it is (ACP's tool kinds), so a client can pick an icon."""
    input: JsonValue = None
    """The arguments the model gave, as JSON."""


class ToolCallUpdated(_Frozen):
    """A tool call's status moved, with its output once it has one."""

    tool_call_id: Id
    """The call updated."""
    status: ToolCallStatus
    """Its new status; `unknown`: it started and may have taken effect, nobody knows."""
    output: Annotated[str, Field(max_length=INLINE_OUTPUT_LIMIT)] | None = None
    """Its output inline, up to 8 KiB (a preview when `output_ref` is set)."""
    output_ref: str | None = None
    """The whole output by reference (`sha256:<hex>`) when it is larger than 8 KiB."""
    error: ErrorInfo | None = None
    """Why it failed, was rejected or is unknown."""


class InputRequestOpened(_Frozen):
    """The agent waits for a person: an approval, an answer or a confirmation."""

    request_id: Id
    """The request's id (`req_…`); answers name it."""
    reason: Literal["tool_call", "input_required", "confirmation"]
    """An approval of a tool call, a question the agent asks, or a confirmation."""
    tool_call_id: Id | None = None
    """The call awaiting approval, for `tool_call`."""
    prompt: str
    """What to ask the person."""
    options: list[PermissionOption] | None = None
    """The choices offered; an answer selects one."""
    response_schema: dict[str, JsonValue] | None = None
    """A JSON Schema a free-form answer's payload must satisfy."""
    expires_at: Timestamp | None = None
    """When the request expires unanswered, if it does."""


class InputRequestResolved(_Frozen):
    """An input request closed: the first valid answer won, or it was cancelled or expired."""

    request_id: Id
    """The request closed."""
    outcome: Literal["selected", "answered", "cancelled", "expired"]
    """An option was selected, a payload answered, or nobody answered."""
    option_id: Id | None = None
    """The option selected, for `selected`."""
    payload: JsonValue = None
    """The answer given, for `answered`."""
    answered_by: AnsweredBy | None = None
    """Who answered (every other answer got a 409 naming this one)."""
    reason: Annotated[str, Field(max_length=64)] | None = None
    """Why a request closed without an answer, when something other than time did it:
    `revoked` (the grant its execution ran on no longer holds; the turn ends `revoked`)."""


class PlanUpdated(_Frozen):
    """The agent's plan, whole (each update replaces the last)."""

    entries: list[PlanEntry]
    """Every step of the plan, in order."""


class WorkerStarted(_Frozen):
    """A sub-agent run began, started by a tool call of its parent run."""

    worker_run_id: Id
    """The sub-agent's run (`run_…`); its actions carry it as `run_id`."""
    parent_run_id: Id
    """The run that started it."""
    parent_tool_call_id: Id
    """The parent's tool call (`task`) that runs it."""
    name: str
    """The sub-agent's name (as defined by the plugin)."""
    task: str
    """What the parent asked it to do."""


class WorkerEnded(_Frozen):
    """A sub-agent run ended."""

    worker_run_id: Id
    """The sub-agent's run."""
    status: Literal["completed", "failed", "cancelled"]
    """How it ended."""
    summary: str | None = None
    """What it reported back to its parent."""


ArtifactState = Literal["pending", "published", "failed"]


class ArtifactPublished(_Frozen):
    """The agent published a deliverable (docs/workspace.md "Artifacts")."""

    artifact_id: Id
    """The artifact's id (`art_…`); downloads and updates name it."""
    name: str
    """Its file name."""
    media_type: str
    """Its MIME type."""
    size: Count
    """Its size in bytes."""
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """The SHA-256 of its bytes (hex): their blob's address."""
    tool_call_id: Id | None = None
    """The tool call that published it."""
    state: ArtifactState = "published"
    """Whether its bytes are durable in the blob store (downloadable). Apart from the turn's
    status: a turn may complete while the upload of what it published failed."""
    error: ErrorInfo | None = None
    """Why its upload failed, for `failed`."""


class ArtifactUpdated(_Frozen):
    """A published artifact's state moved: a retry started (`pending`), then ended."""

    artifact_id: Id
    """The artifact."""
    state: ArtifactState
    """Its new state."""
    error: ErrorInfo | None = None
    """Why it failed, for `failed`."""


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class FileChanged(_Frozen):
    """A file a tool changed. Text: a unified diff, inline up to 8 KiB, else by reference
    (`diff_ref`: `sha256:<hex>`, the diff's blob). Binary: size and sha256 only."""

    path: str
    """The file's path, relative to the session's directory."""
    change: Literal["created", "modified", "deleted"]
    """What happened to it."""
    tool_call_id: Id | None = None
    """The tool call that changed it."""
    diff_ref: str | None = None
    """The unified diff by reference (`sha256:<hex>`) when it exceeds 8 KiB."""
    diff: str | None = None
    """The unified diff inline, up to 8 KiB."""
    size: Count | None = None
    """The file's size in bytes after the change."""
    sha256: Sha256 | None = None
    """The SHA-256 of its bytes after the change (hex)."""
    binary: bool = False
    """True for a binary file: no diff, only size and sha256."""


#: How many lost paths a `workspace.restored` names; the rest are counted.
LOST_PATHS_LIMIT = 100


class WorkspaceCommitted(_Frozen):
    """The execution's workspace files as of this commit: a content-addressed manifest."""

    execution_id: Id
    """The execution that committed them."""
    manifest: Sha256
    """The manifest's blob (hex SHA-256): every path with its content hash."""
    files: Count
    """How many files it holds."""
    bytes: Count
    """Their total size in bytes."""


class WorkspaceRestored(_Frozen):
    """A resumed attempt restored the last committed manifest (None: there was none).

    What was written after that commit is gone: `lost_paths` names files whose local copy
    differed from the manifest (only the machine that wrote them can know), and
    `lost_tool_call_ids` the calls that were running when the last attempt stopped."""

    execution_id: Id
    """The execution resumed."""
    attempt: Annotated[int, Field(ge=1)]
    """The attempt that restored it."""
    files: Count
    """How many files the restored manifest holds."""
    bytes: Count
    """Their total size in bytes."""
    manifest: Sha256 | None = None
    """The manifest restored, or null when nothing had been committed."""
    lost_paths: list[str] = Field(default_factory=list, max_length=LOST_PATHS_LIMIT)
    """Files whose uncommitted changes are gone (at most 100; `lost_more` counts the rest)."""
    lost_more: Count = 0
    """How many more lost paths there were than `lost_paths` names."""
    lost_tool_call_ids: list[Id] = Field(default_factory=list)
    """Calls that were running when the last attempt stopped: their effects may be gone."""


class McpServerUnavailable(_Frozen):
    """An MCP server the agent has did not start or answer; the turn goes on without its
    tools (a server the deployment marks `required` fails the turn instead). `message`
    says why: the server's last stderr lines (secrets redacted), or the gateway's reason."""

    server: Annotated[str, Field(min_length=1, max_length=200)]
    """The server's name, as `.mcp.json` spells it."""
    code: Id
    """Why, as a code: `mcp_unavailable`, `mcp_unconfigured`, `upstream_unreachable`, …"""
    message: Annotated[str, Field(max_length=4096)]
    """Why, for a person (bounded; secrets redacted)."""


class UsageRecorded(_Frozen):
    """Tokens one model request used (the turn's usage is their sum)."""

    provider: str
    """The model provider (`anthropic`, `openai`, `scripted`, …)."""
    model: str
    """The model's name at that provider."""
    input_tokens: Count = 0
    """Tokens read, cache reads and writes excluded."""
    output_tokens: Count = 0
    """Tokens written, reasoning included."""
    cache_read_input_tokens: Count = 0
    """Input tokens read from the provider's prompt cache."""
    cache_creation_input_tokens: Count = 0
    """Input tokens written to the provider's prompt cache."""
    reasoning_output_tokens: Count = 0
    """Of `output_tokens`, those spent on reasoning."""


class DeliveryUpdated(_Frozen):
    """One change of an external delivery's state (a chat message, an edit, an upload).

    `pending → sent | retrying → … → sent | failed` is what the chat bridge reports;
    `accepted`, `delivered` and `abandoned` are the first vocabulary, still read. `error` is
    the last error; `next_attempt_at` says when a `retrying` delivery is tried again.
    """

    delivery_id: Id
    """The delivery's own id, chosen by the reporter and kept across its retries."""
    channel: str
    """The platform it goes to (`matrix`)."""
    target: str
    """Where on that platform (a room id)."""
    status: Literal["pending", "sent", "retrying", "failed", "accepted", "delivered", "abandoned"]
    """Its state after this change."""
    attempts: Count = 0
    """How many times it was tried so far."""
    error: ErrorInfo | None = None
    """The last error, if any."""
    kind: str | None = None
    """What is delivered: message, edit, reaction, upload (the channel's vocabulary)."""
    event_id: str | None = None
    """The platform's id of what it delivered (a Matrix event id), once sent."""
    next_attempt_at: Timestamp | None = None
    """When a `retrying` delivery is tried again."""


# -- the envelope ---------------------------------------------------------------------------


class _Envelope(_Frozen):
    v: Literal[1] = PROTOCOL_VERSION
    """The protocol version (1)."""
    session_id: Id
    """The session whose log holds the action (`ses_…`)."""
    seq: Annotated[int, Field(ge=1)] | None = None
    """The action's place in the session's log, from 1, gapless. Assigned by the Host when
    the action is appended; null only before that."""
    id: Id
    """The action's id (`act_…`), derived from what produced it, so a fact re-emitted after
    a resume lands once."""
    ts: Timestamp
    """When the fact happened (RFC 3339)."""
    turn_id: Id | None = None
    """The turn it belongs to (`trn_…`), if any."""
    run_id: Id | None = None
    """The agent run that produced it (`run_…`): the root run or a sub-agent's."""
    client_id: Id | None = None
    """The client whose intent caused it, so that client can drop its optimistic overlay."""
    intent_id: Id | None = None
    """The intent that caused it."""


class SessionCreatedAction(_Envelope):
    type: Literal["session.created"] = _tag("session.created")
    data: SessionCreated
    """The `session.created` payload (described by its model)."""


class SessionUpdatedAction(_Envelope):
    type: Literal["session.updated"] = _tag("session.updated")
    data: SessionUpdated
    """The `session.updated` payload (described by its model)."""


class TurnStartedAction(_Envelope):
    type: Literal["turn.started"] = _tag("turn.started")
    data: TurnStarted
    """The `turn.started` payload (described by its model)."""


class TurnStateAction(_Envelope):
    type: Literal["turn.state"] = _tag("turn.state")
    data: TurnState
    """The `turn.state` payload (described by its model)."""


class TurnEndedAction(_Envelope):
    type: Literal["turn.ended"] = _tag("turn.ended")
    data: TurnEnded
    """The `turn.ended` payload (described by its model)."""


class AttemptStartedAction(_Envelope):
    type: Literal["execution.attempt_started"] = _tag("execution.attempt_started")
    data: AttemptStarted
    """The `execution.attempt_started` payload (described by its model)."""


class MessageAddedAction(_Envelope):
    type: Literal["message.added"] = _tag("message.added")
    data: MessageAdded
    """The `message.added` payload (described by its model)."""


class MessageStartedAction(_Envelope):
    type: Literal["message.started"] = _tag("message.started")
    data: MessageStarted
    """The `message.started` payload (described by its model)."""


class MessageDeltaAction(_Envelope):
    type: Literal["message.delta"] = _tag("message.delta")
    data: MessageDelta
    """The `message.delta` payload (described by its model)."""


class MessageCompletedAction(_Envelope):
    type: Literal["message.completed"] = _tag("message.completed")
    data: MessageCompleted
    """The `message.completed` payload (described by its model)."""


class ReasoningDeltaAction(_Envelope):
    type: Literal["reasoning.delta"] = _tag("reasoning.delta")
    data: ReasoningDelta
    """The `reasoning.delta` payload (described by its model)."""


class ReasoningCompletedAction(_Envelope):
    type: Literal["reasoning.completed"] = _tag("reasoning.completed")
    data: ReasoningCompleted
    """The `reasoning.completed` payload (described by its model)."""


class ToolCallStartedAction(_Envelope):
    type: Literal["tool_call.started"] = _tag("tool_call.started")
    data: ToolCallStarted
    """The `tool_call.started` payload (described by its model)."""


class ToolCallUpdatedAction(_Envelope):
    type: Literal["tool_call.updated"] = _tag("tool_call.updated")
    data: ToolCallUpdated
    """The `tool_call.updated` payload (described by its model)."""


class InputRequestOpenedAction(_Envelope):
    type: Literal["input_request.opened"] = _tag("input_request.opened")
    data: InputRequestOpened
    """The `input_request.opened` payload (described by its model)."""


class InputRequestResolvedAction(_Envelope):
    type: Literal["input_request.resolved"] = _tag("input_request.resolved")
    data: InputRequestResolved
    """The `input_request.resolved` payload (described by its model)."""


class PlanUpdatedAction(_Envelope):
    type: Literal["plan.updated"] = _tag("plan.updated")
    data: PlanUpdated
    """The `plan.updated` payload (described by its model)."""


class WorkerStartedAction(_Envelope):
    type: Literal["worker.started"] = _tag("worker.started")
    data: WorkerStarted
    """The `worker.started` payload (described by its model)."""


class WorkerEndedAction(_Envelope):
    type: Literal["worker.ended"] = _tag("worker.ended")
    data: WorkerEnded
    """The `worker.ended` payload (described by its model)."""


class ArtifactPublishedAction(_Envelope):
    type: Literal["artifact.published"] = _tag("artifact.published")
    data: ArtifactPublished
    """The `artifact.published` payload (described by its model)."""


class ArtifactUpdatedAction(_Envelope):
    type: Literal["artifact.updated"] = _tag("artifact.updated")
    data: ArtifactUpdated
    """The `artifact.updated` payload (described by its model)."""


class FileChangedAction(_Envelope):
    type: Literal["file.changed"] = _tag("file.changed")
    data: FileChanged
    """The `file.changed` payload (described by its model)."""


class UsageRecordedAction(_Envelope):
    type: Literal["usage.recorded"] = _tag("usage.recorded")
    data: UsageRecorded
    """The `usage.recorded` payload (described by its model)."""


class DeliveryUpdatedAction(_Envelope):
    type: Literal["delivery.updated"] = _tag("delivery.updated")
    data: DeliveryUpdated
    """The `delivery.updated` payload (described by its model)."""


class WorkspaceCommittedAction(_Envelope):
    type: Literal["workspace.committed"] = _tag("workspace.committed")
    data: WorkspaceCommitted
    """The `workspace.committed` payload (described by its model)."""


class WorkspaceRestoredAction(_Envelope):
    type: Literal["workspace.restored"] = _tag("workspace.restored")
    data: WorkspaceRestored
    """The `workspace.restored` payload (described by its model)."""


class McpServerUnavailableAction(_Envelope):
    type: Literal["mcp_server.unavailable"] = _tag("mcp_server.unavailable")
    data: McpServerUnavailable
    """The `mcp_server.unavailable` payload (described by its model)."""


class UnknownAction(_Envelope):
    """An action of a type this version does not know: kept, and skipped by the reducer."""

    type: str
    """A type this version does not know."""
    data: dict[str, JsonValue] = Field(default_factory=dict)
    """Its payload, kept as it came."""


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
    | McpServerUnavailableAction
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
    "mcp_server.unavailable": McpServerUnavailableAction,
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
    | Annotated[McpServerUnavailableAction, Tag("mcp_server.unavailable")]
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
