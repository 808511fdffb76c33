"""`previous state + ordered action = next state` (docs/architecture.md §3).

Rules: an action at or below the state's seq is a duplicate and changes nothing; one
beyond seq + 1 raises `SequenceGap` (the client resyncs); an unknown type only advances
seq; an action naming an entity the state does not have is recorded in `anomalies` and
changes nothing else. Every handler checks before it writes, so a rejected action never
leaves a partial change.

`reduce` takes ownership of the state it is given and returns it advanced (in place, so
one action costs O(1) rather than a copy of the session); keep a `copy_state` if you need
the previous one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, cast

from opennua.protocol import actions as a
from opennua.protocol.state import (
    USAGE_FIELDS,
    Message,
    SessionState,
    TimelineItem,
    TimelineKind,
    Turn,
    Usage,
    Worker,
    empty_usage,
    find_turn,
    initial_state,
)


class SequenceGap(Exception):
    """An action arrived past a hole in the log; the client must resync from `expected`."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"expected seq {expected}, got {got}")
        self.expected = expected
        self.got = got


class InvalidAction(ValueError):
    """An action that cannot be applied at all (it has no seq): the state is unchanged."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class _Anomaly(Exception):
    """Raised by a handler before it writes anything; becomes an entry in `anomalies`."""


def reduce(state: SessionState, action: a.Action) -> SessionState:
    """Apply one action. See the module docstring for the rules and ownership."""
    seq = action.seq
    if seq is None:
        raise InvalidAction("seq", "an action must be appended (have a seq) to be reduced")
    if seq <= state["seq"]:
        return state
    if seq != state["seq"] + 1:
        raise SequenceGap(expected=state["seq"] + 1, got=seq)
    handler = _HANDLERS.get(action.type)
    foreign = state["session_id"] is not None and action.session_id != state["session_id"]
    if handler is not None or foreign:
        try:
            if foreign:
                raise _Anomaly(f"action belongs to session {action.session_id}")
            assert handler is not None
            handler(state, action)
        except _Anomaly as anomaly:
            state["anomalies"].append(
                {"seq": seq, "action_id": action.id, "type": action.type, "reason": str(anomaly)}
            )
        else:
            state["last_activity_at"] = action.ts
    state["seq"] = seq
    return state


def replay(actions: Iterable[a.Action], state: SessionState | None = None) -> SessionState:
    """Reduce `actions` in order, from `state` (default: the initial state)."""
    current = initial_state() if state is None else state
    for action in actions:
        current = reduce(current, action)
    return current


# -- lookups that raise _Anomaly instead of KeyError ----------------------------------------


def _turn(state: SessionState, action: a.Action) -> Turn:
    if action.turn_id is None:
        raise _Anomaly("action has no turn_id")
    turn = find_turn(state, action.turn_id)
    if turn is None:
        raise _Anomaly(f"unknown turn {action.turn_id}")
    return turn


def _container(turn: Turn, run_id: str | None) -> Turn | Worker:
    """The run an item belongs to: a worker's run, or else the turn's root run."""
    if run_id is not None:
        worker = turn["workers"].get(run_id)
        if worker is not None:
            return worker
    return turn


def _place(turn: Turn, run_id: str | None, kind: TimelineKind, item_id: str) -> None:
    item: TimelineItem = {"kind": kind, "id": item_id}
    _container(turn, run_id)["timeline"].append(item)


def _add_usage(total: Usage, data: a.UsageRecorded) -> None:
    for field in USAGE_FIELDS:
        total[field] += getattr(data, field)  # type: ignore[literal-required]


def _derive_status(state: SessionState) -> None:
    if state["status"] == "archived":
        return
    states = {turn["state"] for turn in state["turns"]}
    if state["open_input_requests"] or "requires_action" in states:
        state["status"] = "requires_action"
    elif "running" in states or "queued" in states:
        state["status"] = "running"
    else:
        state["status"] = "idle"


def _json(model: Any) -> Any:
    return model.model_dump(mode="json") if model is not None else None


# -- handlers, one per known type -----------------------------------------------------------


def _session_created(state: SessionState, action: a.SessionCreatedAction) -> None:
    if state["created_at"] is not None:
        raise _Anomaly("session already created")
    d = action.data
    state["session_id"] = action.session_id
    state["title"] = d.title
    state["workspace_id"] = d.workspace_id
    state["principal_id"] = d.principal_id
    state["plugin"] = _json(d.plugin)
    state["deployment_digest"] = d.deployment_digest
    state["deployment"] = d.deployment
    state["model"] = d.model
    state["snapshot_digest"] = d.snapshot_digest
    state["metadata"] = dict(d.metadata)
    state["created_at"] = action.ts


def _session_updated(state: SessionState, action: a.SessionUpdatedAction) -> None:
    if action.data.title is not None:
        state["title"] = action.data.title
    if action.data.metadata is not None:
        state["metadata"] = dict(action.data.metadata)


def _turn_started(state: SessionState, action: a.TurnStartedAction) -> None:
    d = action.data
    if action.turn_id is None:
        raise _Anomaly("action has no turn_id")
    if find_turn(state, action.turn_id) is not None:
        raise _Anomaly(f"turn {action.turn_id} already started")
    parts = [part.model_dump(mode="json") for part in d.input]
    text = "".join(part.text for part in d.input if isinstance(part, a.TextPart))
    state["turns"].append(
        {
            "turn_id": action.turn_id,
            "execution_id": d.execution_id,
            "state": "queued",
            "stop_reason": None,
            "error": None,
            "trigger": cast(Any, d.trigger.model_dump(mode="json")),
            "trace_id": d.trace_id,
            "retry_of": d.retry_of,
            "model_retry": None,
            "output": None,
            "user_message_id": d.message_id,
            "client_tools": cast(Any, [t.model_dump(mode="json") for t in d.client_tools]),
            "started_at": action.ts,
            "ended_at": None,
            "attempts": [],
            "timeline": [{"kind": "message", "id": d.message_id}],
            "messages": {
                d.message_id: {
                    "message_id": d.message_id,
                    "role": "user",
                    "run_id": None,
                    "text": text,
                    "status": "complete",
                    "content": parts,
                }
            },
            "reasoning": {},
            "tool_calls": {},
            "input_requests": {},
            "workers": {},
            "file_changes": {},
            "workspace": {"manifest": None, "files": 0, "bytes": 0},
            "workspace_restores": {},
            "unavailable_servers": {},
            "plan": [],
            "usage": empty_usage(),
            "usage_by_model": {},
        }
    )
    _derive_status(state)


def _turn_state(state: SessionState, action: a.TurnStateAction) -> None:
    turn = _turn(state, action)
    if turn["state"] == "ended":
        raise _Anomaly(f"turn {turn['turn_id']} has already ended")
    turn["state"] = action.data.state
    turn["model_retry"] = cast(Any, _json(action.data.model_retry))
    _derive_status(state)


def _turn_ended(state: SessionState, action: a.TurnEndedAction) -> None:
    turn = _turn(state, action)
    if turn["state"] == "ended":
        raise _Anomaly(f"turn {turn['turn_id']} has already ended")
    turn["state"] = "ended"
    turn["model_retry"] = None
    turn["stop_reason"] = action.data.stop_reason
    turn["error"] = cast(Any, _json(action.data.error))
    turn["output"] = action.data.output
    turn["ended_at"] = action.ts
    _settle(turn)
    state["open_input_requests"] = [
        entry for entry in state["open_input_requests"] if entry["turn_id"] != turn["turn_id"]
    ]
    _derive_status(state)


def _settle(turn: Turn) -> None:
    """Whatever the turn left open ends with it (docs/protocol.md, "An ended turn is
    settled"), whichever way it ended and whoever appended its `turn.ended`: no client
    shows a finished turn as still thinking, running a call or waiting for input."""
    for request in turn["input_requests"].values():
        if request["status"] == "open":
            request["status"] = "resolved"
            request["outcome"] = "cancelled"
    for call in turn["tool_calls"].values():
        if call["status"] == "pending":
            call["status"] = "cancelled"  # it never ran
        elif call["status"] == "in_progress":
            call["status"] = "unknown"  # it started: it may have taken effect
    for message in turn["messages"].values():
        if message["status"] == "streaming":
            message["status"] = "interrupted"
    for reasoning in turn["reasoning"].values():
        if reasoning["status"] == "streaming":
            reasoning["status"] = "interrupted"
    plans = [turn["plan"]]
    for worker in turn["workers"].values():
        plans.append(worker["plan"])
        if worker["status"] == "running":
            worker["status"] = "cancelled"
    for plan in plans:
        for entry in plan:
            if entry["status"] == "in_progress":
                entry["status"] = "pending"  # not done, and nobody is doing it


def _still_open(turn: Turn) -> None:
    """An ended turn takes no item that would be open again: it stays settled."""
    if turn["state"] == "ended":
        raise _Anomaly(f"turn {turn['turn_id']} has already ended")


def _attempt_started(state: SessionState, action: a.AttemptStartedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    turn["attempts"].append(
        {
            "attempt": d.attempt,
            "attempt_id": d.attempt_id,
            "supervisor_id": d.supervisor_id,
            "resumed_from_checkpoint": d.resumed_from_checkpoint,
            "started_at": action.ts,
        }
    )
    if turn["state"] != "ended":
        # An attempt runs its turn: no `turn.state running` says so again (logs written
        # before that hold both, and fold the same).
        turn["state"] = "running"
        turn["model_retry"] = None
        _derive_status(state)


def _new_message(state: SessionState, action: a.Action, message: Message) -> None:
    """A message of the action's turn, placed in its run's timeline; ids never repeat."""
    turn = _turn(state, action)
    if message["message_id"] in turn["messages"]:
        raise _Anomaly(f"message {message['message_id']} already exists")
    turn["messages"][message["message_id"]] = message
    _place(turn, action.run_id, "message", message["message_id"])


def _message_added(state: SessionState, action: a.MessageAddedAction) -> None:
    d = action.data
    text = "".join(part.text for part in d.content if isinstance(part, a.TextPart))
    content = [part.model_dump(mode="json") for part in d.content]
    _new_message(
        state,
        action,
        {
            "message_id": d.message_id,
            "role": d.role,
            "run_id": action.run_id,
            "text": text,
            "status": "complete",
            "content": content,
        },
    )


def _message_started(state: SessionState, action: a.MessageStartedAction) -> None:
    d = action.data
    _still_open(_turn(state, action))
    _new_message(
        state,
        action,
        {
            "message_id": d.message_id,
            "role": d.role,
            "run_id": action.run_id,
            "text": "",
            "status": "streaming",
            "content": None,
        },
    )


def _streaming_message(turn: Turn, message_id: str) -> Message:
    message = turn["messages"].get(message_id)
    if message is None:
        raise _Anomaly(f"unknown message {message_id}")
    if message["status"] != "streaming":
        raise _Anomaly(f"message {message_id} is not streaming")
    return message


def _message_delta(state: SessionState, action: a.MessageDeltaAction) -> None:
    _streaming_message(_turn(state, action), action.data.message_id)["text"] += action.data.delta


def _message_completed(state: SessionState, action: a.MessageCompletedAction) -> None:
    message = _streaming_message(_turn(state, action), action.data.message_id)
    message["text"] = action.data.text
    message["status"] = action.data.status


def _reasoning(
    state: SessionState, action: a.Action, message_id: str, text: str, *, complete: bool
) -> None:
    """A reasoning delta (`complete=False`) or its completion: either may come first."""
    turn = _turn(state, action)
    if not complete:
        _still_open(turn)
    reasoning = turn["reasoning"].get(message_id)
    status: Literal["streaming", "complete"] = "complete" if complete else "streaming"
    if reasoning is None:
        turn["reasoning"][message_id] = {
            "message_id": message_id,
            "run_id": action.run_id,
            "text": text,
            "status": status,
        }
        _place(turn, action.run_id, "reasoning", message_id)
        return
    if reasoning["status"] != "streaming":
        raise _Anomaly(f"reasoning of {message_id} is already complete")
    reasoning["text"] = text if complete else reasoning["text"] + text
    reasoning["status"] = status


def _reasoning_delta(state: SessionState, action: a.ReasoningDeltaAction) -> None:
    _reasoning(state, action, action.data.message_id, action.data.delta, complete=False)


def _reasoning_completed(state: SessionState, action: a.ReasoningCompletedAction) -> None:
    _reasoning(state, action, action.data.message_id, action.data.text, complete=True)


def _tool_call_started(state: SessionState, action: a.ToolCallStartedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    if d.tool_call_id in turn["tool_calls"]:
        raise _Anomaly(f"tool call {d.tool_call_id} already exists")
    _still_open(turn)
    turn["tool_calls"][d.tool_call_id] = {
        "tool_call_id": d.tool_call_id,
        "run_id": action.run_id,
        "name": d.name,
        "title": d.title,
        "kind": d.kind,
        "input": d.input,
        "status": "pending",
        "output": None,
        "output_ref": None,
        "error": None,
    }
    _place(turn, action.run_id, "tool_call", d.tool_call_id)


def _tool_call_updated(state: SessionState, action: a.ToolCallUpdatedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    call = turn["tool_calls"].get(d.tool_call_id)
    if call is None:
        raise _Anomaly(f"unknown tool call {d.tool_call_id}")
    if d.status in ("pending", "in_progress"):
        _still_open(turn)
    call["status"] = d.status
    if d.output is not None:
        call["output"] = d.output
    if d.output_ref is not None:
        call["output_ref"] = d.output_ref
    if d.error is not None:
        call["error"] = cast(Any, _json(d.error))


def _input_request_opened(state: SessionState, action: a.InputRequestOpenedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    if d.request_id in turn["input_requests"]:
        raise _Anomaly(f"input request {d.request_id} already exists")
    _still_open(turn)
    turn["input_requests"][d.request_id] = {
        "request_id": d.request_id,
        "run_id": action.run_id,
        "reason": d.reason,
        "tool_call_id": d.tool_call_id,
        "prompt": d.prompt,
        "options": [option.model_dump(mode="json") for option in d.options]
        if d.options is not None
        else None,
        "response_schema": d.response_schema,
        "expires_at": d.expires_at,
        "status": "open",
        "outcome": None,
        "option_id": None,
        "payload": None,
        "answered_by": None,
    }
    _place(turn, action.run_id, "input_request", d.request_id)
    state["open_input_requests"].append({"request_id": d.request_id, "turn_id": turn["turn_id"]})
    _derive_status(state)


def _input_request_resolved(state: SessionState, action: a.InputRequestResolvedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    request = turn["input_requests"].get(d.request_id)
    if request is None:
        raise _Anomaly(f"unknown input request {d.request_id}")
    if request["status"] != "open":
        raise _Anomaly(f"input request {d.request_id} is already resolved")
    request["status"] = "resolved"
    request["outcome"] = d.outcome
    request["option_id"] = d.option_id
    request["payload"] = d.payload
    request["answered_by"] = cast(Any, _json(d.answered_by))
    state["open_input_requests"] = [
        entry for entry in state["open_input_requests"] if entry["request_id"] != d.request_id
    ]
    _derive_status(state)


def _plan_updated(state: SessionState, action: a.PlanUpdatedAction) -> None:
    turn = _turn(state, action)
    if any(entry.status == "in_progress" for entry in action.data.entries):
        _still_open(turn)
    entries = [cast(Any, entry.model_dump(mode="json")) for entry in action.data.entries]
    _container(turn, action.run_id)["plan"] = entries


def _worker_started(state: SessionState, action: a.WorkerStartedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    if d.worker_run_id in turn["workers"]:
        raise _Anomaly(f"worker {d.worker_run_id} already exists")
    _still_open(turn)
    # The card goes where the parent run shows its items: placed before registering the
    # worker, so a worker never lands in its own timeline.
    _place(turn, action.run_id, "worker", d.worker_run_id)
    turn["workers"][d.worker_run_id] = {
        "worker_run_id": d.worker_run_id,
        "parent_run_id": d.parent_run_id,
        "parent_tool_call_id": d.parent_tool_call_id,
        "name": d.name,
        "task": d.task,
        "status": "running",
        "summary": None,
        "timeline": [],
        "plan": [],
        "usage": empty_usage(),
    }


def _worker_ended(state: SessionState, action: a.WorkerEndedAction) -> None:
    turn = _turn(state, action)
    worker = turn["workers"].get(action.data.worker_run_id)
    if worker is None:
        raise _Anomaly(f"unknown worker {action.data.worker_run_id}")
    worker["status"] = action.data.status
    worker["summary"] = action.data.summary


def _artifact_published(state: SessionState, action: a.ArtifactPublishedAction) -> None:
    d = action.data
    if d.artifact_id in state["artifacts"]:
        raise _Anomaly(f"artifact {d.artifact_id} already published")
    turn = _turn(state, action) if action.turn_id is not None else None
    state["artifacts"][d.artifact_id] = {
        "artifact_id": d.artifact_id,
        "turn_id": action.turn_id,
        "run_id": action.run_id,
        "name": d.name,
        "media_type": d.media_type,
        "size": d.size,
        "sha256": d.sha256,
        "tool_call_id": d.tool_call_id,
        "state": d.state,
        "error": cast(Any, _json(d.error)),
    }
    if turn is not None:
        _place(turn, action.run_id, "artifact", d.artifact_id)


def _artifact_updated(state: SessionState, action: a.ArtifactUpdatedAction) -> None:
    d = action.data
    artifact = state["artifacts"].get(d.artifact_id)
    if artifact is None:
        raise _Anomaly(f"unknown artifact {d.artifact_id}")
    artifact["state"] = d.state
    artifact["error"] = cast(Any, _json(d.error))


def _file_changed(state: SessionState, action: a.FileChangedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    # A file change has no id of its own; the id of the action that reported it is stable.
    turn["file_changes"][action.id] = {
        "id": action.id,
        "run_id": action.run_id,
        "path": d.path,
        "change": d.change,
        "tool_call_id": d.tool_call_id,
        "diff_ref": d.diff_ref,
        "diff": d.diff,
        "size": d.size,
        "sha256": d.sha256,
        "binary": d.binary,
    }
    _place(turn, action.run_id, "file_change", action.id)


def _workspace_committed(state: SessionState, action: a.WorkspaceCommittedAction) -> None:
    d = action.data
    _turn(state, action)["workspace"] = {"manifest": d.manifest, "files": d.files, "bytes": d.bytes}


def _workspace_restored(state: SessionState, action: a.WorkspaceRestoredAction) -> None:
    turn = _turn(state, action)
    d = action.data
    turn["workspace"] = {"manifest": d.manifest, "files": d.files, "bytes": d.bytes}
    turn["workspace_restores"][action.id] = {
        "id": action.id,
        "attempt": d.attempt,
        "manifest": d.manifest,
        "files": d.files,
        "lost_paths": list(d.lost_paths),
        "lost_more": d.lost_more,
        "lost_tool_call_ids": list(d.lost_tool_call_ids),
    }
    _place(turn, action.run_id, "workspace_restore", action.id)


def _mcp_server_unavailable(state: SessionState, action: a.McpServerUnavailableAction) -> None:
    turn = _turn(state, action)
    d = action.data
    # A turn from a state saved before this field has none yet.
    turn.setdefault("unavailable_servers", {})[action.id] = {
        "id": action.id,
        "server": d.server,
        "code": d.code,
        "message": d.message,
    }
    _place(turn, action.run_id, "mcp_unavailable", action.id)


def _usage_recorded(state: SessionState, action: a.UsageRecordedAction) -> None:
    turn = _turn(state, action)
    d = action.data
    model_key = f"{d.provider}:{d.model}"
    for by_model in (turn["usage_by_model"], state["usage_by_model"]):
        if model_key not in by_model:
            by_model[model_key] = empty_usage()
        _add_usage(by_model[model_key], d)
    _add_usage(turn["usage"], d)
    _add_usage(state["usage"], d)
    # A worker's usage includes that of the workers it started. `seen` stops at a
    # parent_run_id cycle, which only a corrupt log can contain.
    seen: set[str] = set()
    worker = turn["workers"].get(action.run_id) if action.run_id is not None else None
    while worker is not None and worker["worker_run_id"] not in seen:
        seen.add(worker["worker_run_id"])
        _add_usage(worker["usage"], d)
        worker = turn["workers"].get(worker["parent_run_id"])


def _delivery_updated(state: SessionState, action: a.DeliveryUpdatedAction) -> None:
    d = action.data
    before = state["deliveries"].get(d.delivery_id)
    history = before["history"] if before is not None else []
    error = cast(Any, _json(d.error))
    # An update without the event id (a later report) keeps the one already known.
    event_id = d.event_id if d.event_id is not None or before is None else before["event_id"]
    history.append(
        {
            "seq": cast(int, action.seq),
            "ts": action.ts,
            "status": d.status,
            "attempts": d.attempts,
            "error": error,
        }
    )
    state["deliveries"][d.delivery_id] = {
        "delivery_id": d.delivery_id,
        "channel": d.channel,
        "target": d.target,
        "status": d.status,
        "attempts": d.attempts,
        "error": error,
        "kind": d.kind,
        "event_id": event_id,
        "next_attempt_at": d.next_attempt_at,
        "history": history,
    }


_HANDLERS: dict[str, Callable[[SessionState, Any], None]] = {
    "session.created": _session_created,
    "session.updated": _session_updated,
    "turn.started": _turn_started,
    "turn.state": _turn_state,
    "turn.ended": _turn_ended,
    "execution.attempt_started": _attempt_started,
    "message.added": _message_added,
    "message.started": _message_started,
    "message.delta": _message_delta,
    "message.completed": _message_completed,
    "reasoning.delta": _reasoning_delta,
    "reasoning.completed": _reasoning_completed,
    "tool_call.started": _tool_call_started,
    "tool_call.updated": _tool_call_updated,
    "input_request.opened": _input_request_opened,
    "input_request.resolved": _input_request_resolved,
    "plan.updated": _plan_updated,
    "worker.started": _worker_started,
    "worker.ended": _worker_ended,
    "artifact.published": _artifact_published,
    "artifact.updated": _artifact_updated,
    "file.changed": _file_changed,
    "usage.recorded": _usage_recorded,
    "delivery.updated": _delivery_updated,
    "workspace.committed": _workspace_committed,
    "workspace.restored": _workspace_restored,
    "mcp_server.unavailable": _mcp_server_unavailable,
}
assert set(_HANDLERS) == a.ACTION_TYPES, "every known action type needs a handler"
