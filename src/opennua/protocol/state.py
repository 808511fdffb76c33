"""Session state: what every client holds, built only by the reducer (docs/architecture.md §3).

The state is plain JSON data described by TypedDicts: the reducer updates it in place
(cheap per action), canonical JSON is a single `json.dumps`, and the web client's port
holds exactly the same shape. A *timeline* lists item refs of one run in order of first
appearance, so live, reconnect and history show the same order.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Literal

from pydantic import ConfigDict, JsonValue, TypeAdapter, with_config
from typing_extensions import TypedDict

__all__ = [
    "SESSION_ADAPTER",
    "USAGE_FIELDS",
    "Anomaly",
    "AnsweredBy",
    "Artifact",
    "Attempt",
    "ClientTool",
    "Delivery",
    "DeliveryChange",
    "ErrorInfo",
    "FileChange",
    "InputRequest",
    "Message",
    "ModelRetry",
    "OpenInputRequest",
    "PlanEntry",
    "Reasoning",
    "SessionState",
    "SessionStatus",
    "TimelineItem",
    "TimelineKind",
    "ToolCall",
    "Trigger",
    "Turn",
    "TurnStateName",
    "UnavailableServer",
    "Usage",
    "Worker",
    "Workspace",
    "WorkspaceRestore",
    "canonical_json",
    "copy_state",
    "empty_usage",
    "find_turn",
    "initial_state",
    "js_number",
    "state_from_json",
    "state_to_json",
]

#: Attribute docstrings reach the JSON Schema (docs/schema/state.schema.json) as descriptions.
_DOCUMENTED = ConfigDict(use_attribute_docstrings=True)

SessionStatus = Literal["idle", "running", "requires_action", "archived"]
TurnStateName = Literal["queued", "running", "requires_action", "ended"]
TimelineKind = Literal[
    "message",
    "reasoning",
    "tool_call",
    "input_request",
    "worker",
    "artifact",
    "file_change",
    "workspace_restore",
    "mcp_unavailable",
]


@with_config(_DOCUMENTED)
class Usage(TypedDict):
    input_tokens: int
    """Tokens read, cache reads and writes excluded."""
    output_tokens: int
    """Tokens written, reasoning included."""
    cache_read_input_tokens: int
    """Input tokens read from the provider's prompt cache."""
    cache_creation_input_tokens: int
    """Input tokens written to the provider's prompt cache."""
    reasoning_output_tokens: int
    """Of `output_tokens`, those spent on reasoning."""


USAGE_FIELDS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


@with_config(_DOCUMENTED)
class TimelineItem(TypedDict):
    kind: TimelineKind
    """Which map of the turn holds the item (`message` → `messages`, …)."""
    id: str
    """The item's key in that map."""


@with_config(_DOCUMENTED)
class Message(TypedDict):
    message_id: str
    """The message's id."""
    role: Literal["user", "assistant"]
    """Who wrote it."""
    run_id: str | None
    """The run that wrote it (null: the user's input)."""
    text: str
    """Its text so far (all of it once `complete`)."""
    status: Literal["streaming", "complete", "interrupted"]
    """`streaming` while deltas arrive; `interrupted` if the turn ended first."""
    content: list[dict[str, JsonValue]] | None
    """Its content parts, for a message added whole (a user's input)."""


@with_config(_DOCUMENTED)
class Reasoning(TypedDict):
    message_id: str
    """The reasoning block's id."""
    run_id: str | None
    """The run that reasoned."""
    text: str
    """Its text so far."""
    status: Literal["streaming", "complete", "interrupted"]
    """`streaming`, `complete`, or `interrupted` if the turn ended first."""


@with_config(_DOCUMENTED)
class ErrorInfo(TypedDict):
    code: str
    """A stable machine-readable code."""
    message: str
    """A one-line human-readable explanation."""


@with_config(_DOCUMENTED)
class ClientTool(TypedDict):
    name: str
    """The tool's name."""
    description: str
    """What it does, for the model."""
    parameters: dict[str, JsonValue]
    """The JSON Schema of its arguments."""


@with_config(_DOCUMENTED)
class ToolCall(TypedDict):
    tool_call_id: str
    """The call's id."""
    run_id: str | None
    """The run that made it."""
    name: str
    """The tool's name."""
    title: str
    """A short description of this call."""
    kind: str
    """What sort of tool it is (ACP's tool kinds)."""
    input: JsonValue
    """The arguments the model gave."""
    status: str
    """pending, in_progress, completed, failed, cancelled, unknown or rejected."""
    output: str | None
    """Its output inline, up to 8 KiB (a preview when `output_ref` is set)."""
    output_ref: str | None
    """The whole output by reference (`sha256:<hex>`)."""
    error: ErrorInfo | None
    """Why it failed, was rejected or is unknown."""


@with_config(_DOCUMENTED)
class ModelRetry(TypedDict):
    attempt: int
    """Which retry this is, from 1."""
    retry_at: str
    """When the next request goes out."""
    error: ErrorInfo
    """What the provider answered last."""


@with_config(_DOCUMENTED)
class AnsweredBy(TypedDict):
    client_id: str | None
    """The client that sent the winning answer."""
    principal_id: str | None
    """The principal it acted as."""
    on_behalf_of: str | None
    """The person it answered for, in its own naming (a claim)."""


@with_config(_DOCUMENTED)
class InputRequest(TypedDict):
    request_id: str
    """The request's id."""
    run_id: str | None
    """The run that asked."""
    reason: str
    """tool_call (an approval), input_required (a question) or confirmation."""
    tool_call_id: str | None
    """The call awaiting approval."""
    prompt: str
    """What to ask the person."""
    options: list[dict[str, JsonValue]] | None
    """The choices offered."""
    response_schema: dict[str, JsonValue] | None
    """The JSON Schema a free-form answer must satisfy."""
    expires_at: str | None
    """When it expires unanswered, if it does."""
    status: Literal["open", "resolved"]
    """`open` until the first valid answer, a cancel or expiry resolves it."""
    outcome: str | None
    """selected, answered, cancelled or expired, once resolved."""
    option_id: str | None
    """The option selected."""
    payload: JsonValue
    """The answer given."""
    answered_by: AnsweredBy | None
    """Who answered."""


@with_config(_DOCUMENTED)
class PlanEntry(TypedDict):
    id: str
    """Stable across updates of the plan."""
    content: str
    """What the step is."""
    status: str
    """pending, in_progress or completed."""
    priority: str
    """high, medium or low."""


@with_config(_DOCUMENTED)
class Worker(TypedDict):
    worker_run_id: str
    """The sub-agent's run."""
    parent_run_id: str
    """The run that started it."""
    parent_tool_call_id: str
    """The parent's tool call that runs it."""
    name: str
    """The sub-agent's name."""
    task: str
    """What the parent asked it to do."""
    status: Literal["running", "completed", "failed", "cancelled"]
    """running, then completed, failed or cancelled."""
    summary: str | None
    """What it reported back."""
    timeline: list[TimelineItem]
    """Its own items in order of first appearance."""
    plan: list[PlanEntry]
    """Its own plan."""
    usage: Usage
    """The tokens its model requests used."""


@with_config(_DOCUMENTED)
class Attempt(TypedDict):
    attempt: int
    """The attempt's number, from 1."""
    attempt_id: str
    """The attempt's id."""
    supervisor_id: str
    """The supervisor process that ran it."""
    resumed_from_checkpoint: bool
    """True when it continued from a checkpoint."""
    started_at: str
    """When it started."""


@with_config(_DOCUMENTED)
class FileChange(TypedDict):
    id: str
    """The change's id (the action that reported it)."""
    run_id: str | None
    """The run whose tool changed the file."""
    path: str
    """The file's path, relative to the session's directory."""
    change: str
    """created, modified or deleted."""
    tool_call_id: str | None
    """The tool call that changed it."""
    diff_ref: str | None
    """The unified diff by reference, when larger than 8 KiB."""
    diff: str | None
    """The unified diff inline, up to 8 KiB."""
    size: int | None
    """Its size in bytes after the change."""
    sha256: str | None
    """The SHA-256 of its bytes after the change."""
    binary: bool
    """True for a binary file: no diff."""


@with_config(_DOCUMENTED)
class Workspace(TypedDict):
    """The turn's last committed workspace manifest (None until its first commit)."""

    manifest: str | None
    """The manifest's blob (hex SHA-256), or null before the first commit."""
    files: int
    """How many files it holds."""
    bytes: int
    """Their total size in bytes."""


@with_config(_DOCUMENTED)
class WorkspaceRestore(TypedDict):
    id: str
    """The restore's id (the action that reported it)."""
    attempt: int
    """The attempt that restored."""
    manifest: str | None
    """The manifest restored, or null when nothing had been committed."""
    files: int
    """How many files it holds."""
    lost_paths: list[str]
    """Files whose uncommitted changes are gone (at most 100)."""
    lost_more: int
    """How many more were lost than `lost_paths` names."""
    lost_tool_call_ids: list[str]
    """Calls that were running when the last attempt stopped."""


@with_config(_DOCUMENTED)
class UnavailableServer(TypedDict):
    id: str
    """The report's id (the `mcp_server.unavailable` action)."""
    server: str
    """The MCP server's name, as `.mcp.json` spells it."""
    code: str
    """Why, as a code (`mcp_unavailable`, `mcp_unconfigured`, `upstream_unreachable`, …)."""
    message: str
    """Why, for a person: the server's last stderr lines (redacted, bounded) or the
    gateway's reason."""


@with_config(_DOCUMENTED)
class Artifact(TypedDict):
    artifact_id: str
    """The artifact's id."""
    turn_id: str | None
    """The turn that published it."""
    run_id: str | None
    """The run that published it."""
    name: str
    """Its file name."""
    media_type: str
    """Its MIME type."""
    size: int
    """Its size in bytes."""
    sha256: str
    """The SHA-256 of its bytes."""
    tool_call_id: str | None
    """The tool call that published it."""
    state: str
    """pending, published (downloadable) or failed."""
    error: ErrorInfo | None
    """Why its upload failed."""


@with_config(_DOCUMENTED)
class Trigger(TypedDict):
    kind: str
    """message, automation, retry or api."""
    principal_id: str
    """The principal the turn runs as."""
    client_id: str | None
    """The client whose intent started it."""
    source: str | None
    """For automation: the schedule slot or the webhook delivery."""


@with_config(_DOCUMENTED)
class Turn(TypedDict):
    turn_id: str
    """The turn's id."""
    execution_id: str
    """The execution that carries it."""
    state: TurnStateName
    """queued, running, requires_action (someone must answer) or ended."""
    stop_reason: str | None
    """Why it ended (`end_turn` is success); null while it runs."""
    error: ErrorInfo | None
    """What went wrong, when it failed."""
    trigger: Trigger
    """What started it and on whose authority."""
    trace_id: str
    """The W3C trace id of its spans."""
    retry_of: str | None
    """The execution it retries."""
    model_retry: ModelRetry | None
    """Set while the runtime waits to retry a failed model request."""
    output: JsonValue
    """The structured result: the final answer as JSON that fits the plugin's
    `output-schema` (from `turn.ended`); null without a schema or when the turn failed."""
    user_message_id: str
    """The message holding its input."""
    client_tools: list[ClientTool]
    """The tools the client that sent it runs itself: a call to one waits as an input
    request the client answers with the result."""
    started_at: str
    """When it started."""
    ended_at: str | None
    """When it ended."""
    attempts: list[Attempt]
    """Every attempt at its execution, in order."""
    timeline: list[TimelineItem]
    """The root run's items in order of first appearance."""
    messages: dict[str, Message]
    """Messages by id."""
    reasoning: dict[str, Reasoning]
    """Reasoning blocks by id."""
    tool_calls: dict[str, ToolCall]
    """Tool calls by id."""
    input_requests: dict[str, InputRequest]
    """Input requests by id."""
    workers: dict[str, Worker]
    """Sub-agent runs by run id."""
    file_changes: dict[str, FileChange]
    """File changes by id."""
    workspace: Workspace
    """The turn's last committed file manifest."""
    workspace_restores: dict[str, WorkspaceRestore]
    """Each restore that changed or lost something, by id."""
    unavailable_servers: dict[str, UnavailableServer]
    """MCP servers the turn went on without, by report id."""
    plan: list[PlanEntry]
    """The root run's plan."""
    usage: Usage
    """The tokens of every model request of the turn."""
    usage_by_model: dict[str, Usage]
    """The same, per `provider:model`."""


@with_config(_DOCUMENTED)
class OpenInputRequest(TypedDict):
    request_id: str
    """The open request."""
    turn_id: str
    """The turn it belongs to."""


@with_config(_DOCUMENTED)
class DeliveryChange(TypedDict):
    seq: int
    """The action that reported the change."""
    ts: str
    """When."""
    status: str
    """The delivery's state after it."""
    attempts: int
    """How many tries so far."""
    error: ErrorInfo | None
    """The error of that try, if any."""


@with_config(_DOCUMENTED)
class Delivery(TypedDict):
    delivery_id: str
    """The delivery's own id."""
    channel: str
    """The platform (`matrix`)."""
    target: str
    """Where on it (a room id)."""
    status: str
    """Its latest state."""
    attempts: int
    """How many tries so far."""
    error: ErrorInfo | None
    """The last error."""
    kind: str | None
    """What is delivered (message, edit, reaction, upload)."""
    event_id: str | None
    """The platform's id of what it delivered, once sent."""
    next_attempt_at: str | None
    """When a `retrying` delivery is tried again."""
    history: list[DeliveryChange]
    """Every change in order: the attempts a person can read back."""


@with_config(_DOCUMENTED)
class Anomaly(TypedDict):
    seq: int
    """The action that changed nothing."""
    action_id: str
    """Its id."""
    type: str
    """Its type."""
    reason: str
    """Why it changed nothing (an unknown entity, a settled turn, …)."""


@with_config(_DOCUMENTED)
class SessionState(TypedDict):
    session_id: str | None
    """The session's id (null before `session.created`)."""
    seq: int
    """The seq of the last action folded in: resume a stream after it."""
    title: str
    """The session's title."""
    status: SessionStatus
    """idle, running, requires_action (someone must answer) or archived."""
    workspace_id: str | None
    """The workspace (tenant) that owns it."""
    principal_id: str | None
    """Who created it."""
    plugin: dict[str, JsonValue] | None
    """The plugin version it is pinned to (`{name, version, digest}`)."""
    deployment_digest: str | None
    """The digest of the deployment it was created from."""
    deployment: str | None
    """The deployment's name."""
    model: str | None
    """The model every execution uses (`provider:model`)."""
    snapshot_digest: str | None
    """The digest of its execution snapshot."""
    metadata: dict[str, JsonValue]
    """Free-form JSON its creator attached."""
    created_at: str | None
    """When it was created."""
    last_activity_at: str | None
    """The time of the last action folded in."""
    turns: list[Turn]
    """Every turn, oldest first."""
    artifacts: dict[str, Artifact]
    """Published artifacts by id."""
    open_input_requests: list[OpenInputRequest]
    """The requests waiting for a person, oldest first."""
    deliveries: dict[str, Delivery]
    """External deliveries (chat messages…) by id, with their history."""
    usage: Usage
    """The tokens of every model request of the session."""
    usage_by_model: dict[str, Usage]
    """The same, per `provider:model`."""
    anomalies: list[Anomaly]
    """Actions that named something unknown and changed nothing."""


SESSION_ADAPTER: TypeAdapter[SessionState] = TypeAdapter(SessionState)


def empty_usage() -> Usage:
    return {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }


def initial_state() -> SessionState:
    """The state before the first action (seq 0)."""
    return {
        "session_id": None,
        "seq": 0,
        "title": "",
        "status": "idle",
        "workspace_id": None,
        "principal_id": None,
        "plugin": None,
        "deployment_digest": None,
        "deployment": None,
        "model": None,
        "snapshot_digest": None,
        "metadata": {},
        "created_at": None,
        "last_activity_at": None,
        "turns": [],
        "artifacts": {},
        "open_input_requests": [],
        "deliveries": {},
        "usage": empty_usage(),
        "usage_by_model": {},
        "anomalies": [],
    }


def state_to_json(state: SessionState) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 text (not \\u-escaped).

    The web client produces the same bytes with `JSON.stringify` over key-sorted objects.
    Free-form values (tool input, answers, metadata) may hold floats, which Python and
    JavaScript print differently (`1.0` / `1`, `1e-05` / `0.00001`); those are written the
    way JavaScript writes numbers, so the two serialisations agree.
    """
    return canonical_json(state)


def canonical_json(value: object) -> str:
    # The C encoder is three times faster; it is right whenever no float is present.
    return "".join(_write(value)) if _has_float(value) else _dumps(value)


def _has_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    return False


_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_encode_string = json.encoder.encode_basestring


def _write(value: object) -> Iterator[str]:
    if value is None:
        yield "null"
    elif value is True:
        yield "true"
    elif value is False:
        yield "false"
    elif isinstance(value, str):
        yield _encode_string(value)
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        yield js_number(value)
    elif isinstance(value, list):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _write(item)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for index, key in enumerate(sorted(value)):
            if index:
                yield ","
            yield _encode_string(key)
            yield ":"
            yield from _write(value[key])
        yield "}"
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def js_number(number: float) -> str:
    """`number` as ECMAScript's Number::toString writes it (shortest round-trip digits)."""
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"not a JSON number: {number}")
    if number == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(number)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    exponent = int(exponent) + len(digits) - len(text)
    k = len(text)
    n = k + exponent  # the value is 0.<text> × 10^n
    prefix = "-" if sign else ""
    if k <= n <= 21:
        return prefix + text + "0" * (n - k)
    if 0 < n <= 21:
        return prefix + text[:n] + "." + text[n:]
    if -6 < n <= 0:
        return prefix + "0." + "0" * -n + text
    power = n - 1
    mantissa = text if k == 1 else text[0] + "." + text[1:]
    return f"{prefix}{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def state_from_json(raw: str | bytes) -> SessionState:
    """A state from its canonical JSON (e.g. a snapshot), validated against the schema."""
    return SESSION_ADAPTER.validate_json(raw)


def copy_state(state: SessionState) -> SessionState:
    """An independent copy, for callers that must keep a state the reducer will advance."""
    return copy.deepcopy(state)


def find_turn(state: SessionState, turn_id: str) -> Turn | None:
    # Newest first: nearly every action belongs to the latest turn.
    for turn in reversed(state["turns"]):
        if turn["turn_id"] == turn_id:
            return turn
    return None
