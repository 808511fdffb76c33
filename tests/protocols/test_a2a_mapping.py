"""The A2A mapping on its own (`opennua.protocols.a2a`, pure): a turn's states as task
states, a recorded demo log folded into the task's events, messages into intents."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message, Part, Role, StreamResponse, TaskState

from opennua.protocol import action_from_dict, initial_state, reduce
from opennua.protocol.state import SessionState
from opennua.protocols import a2a

VECTORS = Path(__file__).resolve().parents[1] / "conformance" / "vectors"
S = TaskState


def _demo() -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = json.loads((VECTORS / "demo_shape.json").read_text())["actions"]
    return actions


def _fold(actions: list[dict[str, Any]]) -> SessionState:
    state = initial_state()
    for action in actions:
        state = reduce(state, action_from_dict(action))
    return state


def _turn(**changes: Any) -> Any:
    state = _fold(_demo())
    turn = copy.deepcopy(state["turns"][0])
    turn.update(changes)
    return turn


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"state": "ended", "stop_reason": "end_turn"}, S.TASK_STATE_COMPLETED),
        ({"state": "ended", "stop_reason": "cancelled"}, S.TASK_STATE_CANCELED),
        ({"state": "ended", "stop_reason": "failed"}, S.TASK_STATE_FAILED),
        ({"state": "ended", "stop_reason": "deadline_exceeded"}, S.TASK_STATE_FAILED),
        ({"state": "ended", "stop_reason": "max_steps"}, S.TASK_STATE_FAILED),
        ({"state": "ended", "stop_reason": "revoked"}, S.TASK_STATE_AUTH_REQUIRED),
        (
            {
                "state": "ended",
                "stop_reason": "failed",
                "error": {"code": "secret_missing", "message": "m"},
            },
            S.TASK_STATE_AUTH_REQUIRED,
        ),
        ({"state": "queued", "attempts": []}, S.TASK_STATE_SUBMITTED),
        ({"state": "running"}, S.TASK_STATE_WORKING),
        # Answered: the turn still waits to be resumed, but nobody has to do anything.
        ({"state": "requires_action"}, S.TASK_STATE_WORKING),
    ],
)
def test_a_turn_state_is_a_task_state(changes: dict[str, Any], expected: int) -> None:
    assert a2a.task_state(_turn(**changes)) == expected


def test_an_open_request_is_input_required() -> None:
    turn = _turn(state="requires_action")
    [request] = turn["input_requests"].values()
    request["status"] = "open"
    assert a2a.task_state(turn) == S.TASK_STATE_INPUT_REQUIRED


def _kind(event: StreamResponse) -> str:
    if event.HasField("task"):
        return f"task:{S.Name(event.task.status.state)}"
    if event.HasField("artifact_update"):
        return "artifact"
    status = event.status_update.status
    said = "+message" if status.message.parts else ""
    return f"status:{S.Name(status.state)}{said}"


def test_the_demo_log_folds_into_the_tasks_events_in_order() -> None:
    actions = _demo()
    started = next(i for i, a in enumerate(actions) if a["type"] == "turn.started") + 1
    state = _fold(actions[:started])
    execution_id = state["turns"][0]["execution_id"]
    follower = a2a.TaskFollower(str(state["session_id"]), execution_id, "http://h")
    first = follower.first(state)
    assert first is not None and first.task.id == execution_id
    events = [_kind(first)]
    for action in actions[started:]:
        state = reduce(state, action_from_dict(action))
        events += [_kind(e) for e in follower.after(state, action)]
    assert events == [
        "task:TASK_STATE_SUBMITTED",
        "status:TASK_STATE_WORKING",
        "status:TASK_STATE_INPUT_REQUIRED+message",
        "status:TASK_STATE_WORKING",
        "artifact",
        "status:TASK_STATE_WORKING+message",
        "status:TASK_STATE_COMPLETED+message",
    ]
    assert follower.done
    task = a2a.task_of(state, state["turns"][0], "http://h")
    [artifact] = task.artifacts
    assert artifact.parts[0].url == f"http://h/v1/artifacts/{artifact.artifact_id}/content"
    assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]


def test_a_push_is_the_whole_task_after_each_change_of_its_stream() -> None:
    actions = _demo()
    started = next(i for i, a in enumerate(actions) if a["type"] == "turn.started") + 1
    state = _fold(actions[:started])
    execution_id = state["turns"][0]["execution_id"]
    step = a2a.push_step(str(state["session_id"]), execution_id, "http://h", state)
    pushed = []
    for action in actions[started:]:
        state = reduce(state, action_from_dict(action))
        if action["type"] in a2a.PUSH_EVENTS and (body := step(state, action)) is not None:
            pushed.append(json.loads(body)["task"])
    assert {t["id"] for t in pushed} == {execution_id}
    states = [t["status"]["state"] for t in pushed]
    assert states == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",  # the artifact
        "TASK_STATE_WORKING",  # the agent spoke
        "TASK_STATE_COMPLETED",
    ]
    assert pushed[-1]["artifacts"] and pushed[-1]["status"]["message"]["parts"]
    shown = a2a.push_config("sub_1", execution_id, "https://r.example/hook")
    assert not shown.token, "a token is never shown back"


def _message(*parts: Part) -> Message:
    return Message(message_id="m", role=Role.ROLE_USER, parts=list(parts))


def _data(value: Any) -> Part:
    part = Part()
    part.data.struct_value.update({"v": value})
    part.data.CopyFrom(part.data.struct_value.fields["v"])
    return part


REQUEST = {
    "request_id": "req_1",
    "options": [
        {"option_id": "allow_once", "name": "Allow"},
        {"option_id": "reject_once", "name": "Reject"},
    ],
    "response_schema": None,
}


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([Part(text="allow_once")], {"option_id": "allow_once"}),
        ([Part(text=" reject ")], {"option_id": "reject_once"}),
        (
            [_data({"option_id": "reject_once", "request_id": "req_1"})],
            {"option_id": "reject_once"},
        ),
    ],
)
def test_an_answer_selects_an_option(parts: list[Part], expected: dict[str, Any]) -> None:
    assert a2a.answer_of(_message(*parts), REQUEST) == expected


def test_an_answer_that_names_no_option_is_refused() -> None:
    with pytest.raises(a2a.BadMessage, match="allow_once"):
        a2a.answer_of(_message(Part(text="maybe")), REQUEST)


def test_a_free_answer_is_a_payload() -> None:
    free = {"request_id": "req_2", "options": None, "response_schema": None}
    assert a2a.answer_of(_message(Part(text="blue")), free) == {"payload": "blue"}
    assert a2a.answer_of(_message(_data({"colour": "blue"})), free) == {
        "payload": {"colour": "blue"}
    }


def test_a_message_is_content_and_its_id_an_intent_key() -> None:
    content = a2a.content_of(
        _message(
            Part(text="read this"),
            Part(url="https://example.org/a.pdf", media_type="application/pdf"),
        )
    )
    assert [p.type for p in content] == ["text", "resource_link"]
    assert a2a.intent_key("message", "prn_a", "default", "m1") == a2a.intent_key(
        "message", "prn_a", "default", "m1"
    )
    assert a2a.intent_key("message", "prn_a", "default", "m1") != a2a.intent_key(
        "message", "prn_b", "default", "m1"
    ), "two callers' message ids never meet"
    with pytest.raises(a2a.BadMessage):
        a2a.content_of(_message(Part(raw=b"bytes")))


def test_the_server_starts_without_the_a2a_sdk() -> None:
    # Start-up time (issue 35): the app is built, and the SDK is not imported until an
    # A2A request needs it.
    code = (
        "import sys; import opennua.server, opennua.cli; "
        "assert not [m for m in sys.modules if m == 'a2a' or m.startswith('a2a.')], 'a2a'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
