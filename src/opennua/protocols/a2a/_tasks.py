"""A session's turns as A2A tasks: pure functions of the reduced state (no I/O).

A task is one turn's execution (`id` = the execution id, `contextId` = the session id), so
whatever a task shows is the session state the reducer folded from the log: `tasks/get`
after a restart reads the same log and shows the same task.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct, Value

from opennua.protocol.state import SessionState, Turn

#: A turn that ended for want of a right (its grant revoked, a credential missing) asks
#: for authentication: the caller can fix that and send again.
AUTH_CODES = frozenset({"grant_revoked", "secret_missing"})
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: Where a stream stops: the task is done, or waits for its caller.
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


def task_state(turn: Turn) -> TaskState:
    """The A2A state of a turn: it follows the turn's execution and its input requests."""
    state = turn["state"]
    if state == "ended":
        reason = turn["stop_reason"]
        error = turn["error"]
        if reason == "end_turn":
            return TaskState.TASK_STATE_COMPLETED
        if reason == "cancelled":
            return TaskState.TASK_STATE_CANCELED
        if reason == "revoked" or (error is not None and error["code"] in AUTH_CODES):
            return TaskState.TASK_STATE_AUTH_REQUIRED
        return TaskState.TASK_STATE_FAILED
    if state == "requires_action" and open_requests(turn):
        # Answered, the turn waits for its resume only: the task works on.
        return TaskState.TASK_STATE_INPUT_REQUIRED
    if state == "queued" and not turn["attempts"]:
        return TaskState.TASK_STATE_SUBMITTED
    return TaskState.TASK_STATE_WORKING


def find_turn(state: SessionState, execution_id: str) -> Turn | None:
    return next((t for t in state["turns"] if t["execution_id"] == execution_id), None)


def open_requests(turn: Turn) -> list[dict[str, Any]]:
    """The turn's open input requests, oldest first."""
    return [dict(r) for r in turn["input_requests"].values() if r["status"] == "open"]


def _struct(data: Mapping[str, Any]) -> Struct:
    out = Struct()
    out.update(dict(data))
    return out


def _value(data: Any) -> Value:
    out = Value()
    out.struct_value.update({"v": data})
    return out.struct_value.fields["v"]


def agent_message(message_id: str, session_id: str, task_id: str, text: str) -> Message:
    return Message(
        message_id=message_id,
        context_id=session_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def _last_answer(turn: Turn) -> tuple[str, str] | None:
    """The root run's last complete assistant message: (id, text)."""
    for ref in reversed(turn["timeline"]):
        if ref["kind"] == "message":
            message = turn["messages"][ref["id"]]
            if message["role"] == "assistant" and message["status"] == "complete":
                return message["message_id"], message["text"]
    return None


def status_message(session_id: str, turn: Turn, state: TaskState) -> Message | None:
    """What the status says beside its state: the question for input-required (its
    options and schema as a data part), the error of a failed turn, the final answer."""
    task_id = turn["execution_id"]
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        requests = open_requests(turn)
        if not requests:
            return None
        request = requests[0]
        ask = {
            "request_id": request["request_id"],
            "reason": request["reason"],
            "options": request["options"],
            "response_schema": request["response_schema"],
        }
        message = agent_message(request["request_id"], session_id, task_id, request["prompt"])
        message.parts.append(Part(data=_value(ask), media_type="application/json"))
        return message
    error = turn["error"]
    if state != TaskState.TASK_STATE_COMPLETED and error is not None:
        text = f"{error['code']}: {error['message']}"
        return agent_message(f"{task_id}-error", session_id, task_id, text)
    if state in TERMINAL:
        answer = _last_answer(turn)
        if answer is not None:
            return agent_message(answer[0], session_id, task_id, answer[1])
    return None


def task_status(session_id: str, turn: Turn) -> TaskStatus:
    state = task_state(turn)
    status = TaskStatus(state=state)
    message = status_message(session_id, turn, state)
    if message is not None:
        status.message.CopyFrom(message)
    status.timestamp.FromJsonString(turn["ended_at"] or turn["started_at"])
    return status


def _history(session_id: str, turn: Turn) -> list[Message]:
    """The user's input, then the root run's complete assistant messages, in order."""
    task_id = turn["execution_id"]
    out: list[Message] = []
    for ref in turn["timeline"]:
        if ref["kind"] != "message":
            continue
        message = turn["messages"][ref["id"]]
        if message["role"] == "user":
            parts = [_part(p) for p in message["content"] or [{"type": "text", "text": ""}]]
            out.append(
                Message(
                    message_id=message["message_id"],
                    context_id=session_id,
                    task_id=task_id,
                    role=Role.ROLE_USER,
                    parts=parts,
                )
            )
        elif message["status"] == "complete":
            out.append(agent_message(message["message_id"], session_id, task_id, message["text"]))
    return out


def _part(content: Mapping[str, Any]) -> Part:
    if content.get("type") == "text":
        return Part(text=str(content.get("text", "")))
    if content.get("type") == "resource_link":
        return Part(
            url=str(content.get("uri", "")),
            filename=str(content.get("name", "")),
            media_type=str(content.get("media_type") or ""),
        )
    return Part(data=_value(dict(content)))


def artifact_of(record: Mapping[str, Any], base_url: str) -> Artifact:
    """A published artifact: its bytes by a link that re-authorizes every download (the
    caller's own bearer token, as `GET /v1/artifacts/{id}/content` always asks)."""
    artifact_id = record["artifact_id"]
    return Artifact(
        artifact_id=artifact_id,
        name=record["name"],
        parts=[
            Part(
                url=f"{base_url}/v1/artifacts/{artifact_id}/content",
                filename=record["name"],
                media_type=record["media_type"],
            )
        ],
        metadata=_struct({"sha256": record["sha256"], "size": record["size"]}),
    )


def _artifacts(state: SessionState, turn: Turn, base_url: str) -> list[Artifact]:
    out = [
        artifact_of(a, base_url)
        for a in state["artifacts"].values()
        if a["turn_id"] == turn["turn_id"] and a["state"] == "published"
    ]
    if turn["output"] is not None:
        # The structured result (the plugin's `output-schema`) is the task's data artifact.
        out.append(
            Artifact(
                artifact_id=f"{turn['turn_id']}-output",
                name="output",
                parts=[Part(data=_value(turn["output"]), media_type="application/json")],
            )
        )
    return out


def _metadata(turn: Turn) -> Struct:
    """What A2A has no field for, under `opennua`: the turn, usage, trace and sub-agents."""
    workers = [
        {
            "run_id": w["worker_run_id"],
            "name": w["name"],
            "task": w["task"],
            "status": w["status"],
            "summary": w["summary"],
        }
        for w in turn["workers"].values()
    ]
    plan = [{"content": e["content"], "status": e["status"]} for e in turn["plan"]]
    return _struct(
        {
            "opennua": {
                "turn_id": turn["turn_id"],
                "trace_id": turn["trace_id"],
                "usage": dict(turn["usage"]),
                "workers": workers,
                "plan": plan,
            }
        }
    )


def task_of(
    state: SessionState, turn: Turn, base_url: str, *, history_length: int | None = None
) -> Task:
    """The task a turn is, as `tasks/get` shows it."""
    session_id = str(state["session_id"])
    history = _history(session_id, turn)
    if history_length is not None:
        history = history[-history_length:] if history_length else []
    return Task(
        id=turn["execution_id"],
        context_id=session_id,
        status=task_status(session_id, turn),
        artifacts=_artifacts(state, turn, base_url),
        history=history,
        metadata=_metadata(turn),
    )


def with_answer(task: Task, request_id: str, won: bool, resolution: Mapping[str, Any]) -> Task:
    """The task as the answer's sender sees it: whether its answer won (the Host decided:
    first writer wins) and the resolution that stands, under `metadata.opennua.answer`."""
    answered_by = resolution.get("answered_by") or {}
    task.metadata.get_or_create_struct("opennua").update(
        {
            "answer": {
                "request_id": request_id,
                "won": won,
                "outcome": resolution.get("outcome"),
                "option_id": resolution.get("option_id"),
                "answered_by": dict(answered_by),
            }
        }
    )
    return task


@dataclass
class TaskFollower:
    """Turns the actions of one task's session, reduced into `state` by the caller, into
    the A2A events of that task: a status update when its state changes or its agent
    finishes a message, an artifact update when it publishes one."""

    session_id: str
    execution_id: str
    base_url: str
    last: TaskState = TaskState.TASK_STATE_UNSPECIFIED

    def first(self, state: SessionState) -> StreamResponse | None:
        turn = find_turn(state, self.execution_id)
        if turn is None:
            return None
        task = task_of(state, turn, self.base_url)
        self.last = task.status.state
        return StreamResponse(task=task)

    def after(self, state: SessionState, action: Mapping[str, Any]) -> Iterator[StreamResponse]:
        """The events `action` (just reduced into `state`) makes for this task."""
        turn = find_turn(state, self.execution_id)
        if turn is None or action.get("turn_id") != turn["turn_id"]:
            return
        kind, data = action["type"], action.get("data") or {}
        if kind == "artifact.published" or kind == "artifact.updated":
            record = state["artifacts"].get(data.get("artifact_id", ""))
            if record is not None and record["state"] == "published":
                yield StreamResponse(
                    artifact_update=TaskArtifactUpdateEvent(
                        task_id=self.execution_id,
                        context_id=self.session_id,
                        artifact=artifact_of(record, self.base_url),
                        last_chunk=True,
                    )
                )
        now = task_state(turn)
        spoke = (
            kind == "message.completed"
            and action.get("run_id") is not None
            and any(
                ref["kind"] == "message" and ref["id"] == data.get("message_id")
                for ref in turn["timeline"]
            )
            and now == TaskState.TASK_STATE_WORKING
        )
        if now == self.last and not spoke:
            return
        self.last = now
        status = TaskStatus(state=now)
        if spoke:
            message = turn["messages"][data["message_id"]]
            status.message.CopyFrom(
                agent_message(
                    message["message_id"], self.session_id, self.execution_id, message["text"]
                )
            )
        else:
            said = status_message(self.session_id, turn, now)
            if said is not None:
                status.message.CopyFrom(said)
        status.timestamp.FromJsonString(str(action["ts"]))
        yield StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id=self.execution_id, context_id=self.session_id, status=status
            )
        )

    def resumed(self, state: SessionState) -> Iterator[StreamResponse]:
        """After a resync: the task's status again, if it moved while this reader fell
        behind (what it missed in between is in the task, which `GetTask` shows)."""
        turn = find_turn(state, self.execution_id)
        if turn is None or task_state(turn) == self.last:
            return
        self.last = task_state(turn)
        yield StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id=self.execution_id,
                context_id=self.session_id,
                status=task_status(self.session_id, turn),
            )
        )

    @property
    def done(self) -> bool:
        """The task is final or waits for its caller: a stream about it ends here."""
        return self.last in TERMINAL or self.last in INTERRUPTED
