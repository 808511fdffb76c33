"""Session state: what every client holds, built only by the reducer (DESIGN.md §3).

The state is plain JSON data described by TypedDicts: the reducer updates it in place
(cheap per action), canonical JSON is a single `json.dumps`, and the web client's port
holds exactly the same shape. A *timeline* lists item refs of one run in order of first
appearance, so live, reconnect and history show the same order.
"""

from __future__ import annotations

import copy
import json
from typing import Literal

from pydantic import JsonValue, TypeAdapter
from typing_extensions import TypedDict

SessionStatus = Literal["idle", "running", "requires_action", "archived"]
TurnStateName = Literal["queued", "running", "requires_action", "ended"]
TimelineKind = Literal[
    "message", "reasoning", "tool_call", "input_request", "worker", "artifact", "file_change"
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


class Artifact(TypedDict):
    artifact_id: str
    turn_id: str | None
    run_id: str | None
    name: str
    media_type: str
    size: int
    sha256: str
    tool_call_id: str | None


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
    plan: list[PlanEntry]
    usage: Usage
    usage_by_model: dict[str, Usage]


class OpenInputRequest(TypedDict):
    request_id: str
    turn_id: str


class Delivery(TypedDict):
    delivery_id: str
    channel: str
    target: str
    status: str
    attempts: int
    error: ErrorInfo | None


class Anomaly(TypedDict):
    seq: int
    action_id: str
    type: str
    reason: str


class Session(TypedDict):
    session_id: str | None
    seq: int
    title: str
    status: SessionStatus
    workspace_id: str | None
    principal_id: str | None
    plugin: dict[str, JsonValue] | None
    deployment_digest: str | None
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


SESSION_ADAPTER: TypeAdapter[Session] = TypeAdapter(Session)


def empty_usage() -> Usage:
    return {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }


def initial_state() -> Session:
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


def state_to_json(state: Session) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 text (not \\u-escaped).

    The web client produces the same bytes with `JSON.stringify` over key-sorted objects;
    the state holds only strings, integers, booleans, null, lists and objects, so the two
    serialisations agree.
    """
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def state_from_json(raw: str | bytes) -> Session:
    """A state from its canonical JSON (e.g. a snapshot), validated against the schema."""
    return SESSION_ADAPTER.validate_json(raw)


def copy_state(state: Session) -> Session:
    """An independent copy, for callers that must keep a state the reducer will advance."""
    return copy.deepcopy(state)


def find_turn(state: Session, turn_id: str) -> Turn | None:
    # Newest first: nearly every action belongs to the latest turn.
    for turn in reversed(state["turns"]):
        if turn["turn_id"] == turn_id:
            return turn
    return None
