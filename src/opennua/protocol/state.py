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

from pydantic import JsonValue, TypeAdapter
from typing_extensions import TypedDict

__all__ = [
    "SESSION_ADAPTER",
    "USAGE_FIELDS",
    "Anomaly",
    "AnsweredBy",
    "Artifact",
    "Attempt",
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
]


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reasoning_output_tokens: int


USAGE_FIELDS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


class TimelineItem(TypedDict):
    kind: TimelineKind
    id: str


class Message(TypedDict):
    message_id: str
    role: Literal["user", "assistant"]
    run_id: str | None
    text: str
    status: Literal["streaming", "complete", "interrupted"]
    content: list[dict[str, JsonValue]] | None


class Reasoning(TypedDict):
    message_id: str
    run_id: str | None
    text: str
    status: Literal["streaming", "complete"]


class ErrorInfo(TypedDict):
    code: str
    message: str


class ToolCall(TypedDict):
    tool_call_id: str
    run_id: str | None
    name: str
    title: str
    kind: str
    input: JsonValue
    status: str
    output: str | None
    output_ref: str | None
    error: ErrorInfo | None


class ModelRetry(TypedDict):
    attempt: int
    retry_at: str
    error: ErrorInfo


class AnsweredBy(TypedDict):
    client_id: str | None
    principal_id: str | None


class InputRequest(TypedDict):
    request_id: str
    run_id: str | None
    reason: str
    tool_call_id: str | None
    prompt: str
    options: list[dict[str, JsonValue]] | None
    response_schema: dict[str, JsonValue] | None
    expires_at: str | None
    status: Literal["open", "resolved"]
    outcome: str | None
    option_id: str | None
    payload: JsonValue
    answered_by: AnsweredBy | None


class PlanEntry(TypedDict):
    id: str
    content: str
    status: str
    priority: str


class Worker(TypedDict):
    worker_run_id: str
    parent_run_id: str
    parent_tool_call_id: str
    name: str
    task: str
    status: Literal["running", "completed", "failed", "cancelled"]
    summary: str | None
    timeline: list[TimelineItem]
    plan: list[PlanEntry]
    usage: Usage


class Attempt(TypedDict):
    attempt: int
    attempt_id: str
    supervisor_id: str
    resumed_from_checkpoint: bool
    started_at: str


class FileChange(TypedDict):
    id: str
    run_id: str | None
    path: str
    change: str
    tool_call_id: str | None
    diff_ref: str | None
    diff: str | None
    size: int | None
    sha256: str | None
    binary: bool


class Workspace(TypedDict):
    """The turn's last committed workspace manifest (None until its first commit)."""

    manifest: str | None
    files: int
    bytes: int


class WorkspaceRestore(TypedDict):
    id: str
    attempt: int
    manifest: str | None
    files: int
    lost_paths: list[str]
    lost_more: int
    lost_tool_call_ids: list[str]


class Artifact(TypedDict):
    artifact_id: str
    turn_id: str | None
    run_id: str | None
    name: str
    media_type: str
    size: int
    sha256: str
    tool_call_id: str | None
    state: str
    error: ErrorInfo | None


class Trigger(TypedDict):
    kind: str
    principal_id: str
    client_id: str | None
    source: str | None


class Turn(TypedDict):
    turn_id: str
    execution_id: str
    state: TurnStateName
    stop_reason: str | None
    error: ErrorInfo | None
    trigger: Trigger
    trace_id: str
    retry_of: str | None
    model_retry: ModelRetry | None
    user_message_id: str
    started_at: str
    ended_at: str | None
    attempts: list[Attempt]
    timeline: list[TimelineItem]
    messages: dict[str, Message]
    reasoning: dict[str, Reasoning]
    tool_calls: dict[str, ToolCall]
    input_requests: dict[str, InputRequest]
    workers: dict[str, Worker]
    file_changes: dict[str, FileChange]
    workspace: Workspace
    workspace_restores: dict[str, WorkspaceRestore]
    plan: list[PlanEntry]
    usage: Usage
    usage_by_model: dict[str, Usage]


class OpenInputRequest(TypedDict):
    request_id: str
    turn_id: str


class DeliveryChange(TypedDict):
    seq: int
    ts: str
    status: str
    attempts: int
    error: ErrorInfo | None


class Delivery(TypedDict):
    delivery_id: str
    channel: str
    target: str
    status: str
    attempts: int
    error: ErrorInfo | None
    kind: str | None
    event_id: str | None
    next_attempt_at: str | None
    #: Every change in order: the attempts a person can read back.
    history: list[DeliveryChange]


class Anomaly(TypedDict):
    seq: int
    action_id: str
    type: str
    reason: str


class SessionState(TypedDict):
    session_id: str | None
    seq: int
    title: str
    status: SessionStatus
    workspace_id: str | None
    principal_id: str | None
    plugin: dict[str, JsonValue] | None
    deployment_digest: str | None
    deployment: str | None
    model: str | None
    snapshot_digest: str | None
    metadata: dict[str, JsonValue]
    created_at: str | None
    last_activity_at: str | None
    turns: list[Turn]
    artifacts: dict[str, Artifact]
    open_input_requests: list[OpenInputRequest]
    deliveries: dict[str, Delivery]
    usage: Usage
    usage_by_model: dict[str, Usage]
    anomalies: list[Anomaly]


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
