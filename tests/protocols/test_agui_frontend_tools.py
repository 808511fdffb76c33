"""AG-UI frontend tools end to end: `@ag-ui/client`'s HttpAgent under Node against a real
`nua serve` (scripted:demo calls the client's first tool when the turn has one). The
frontend defines a tool, the run ends with the call, the frontend runs it and sends the
result in a new run, and the turn finishes using it — also across a server restart
between the call and the result. Bad input is problem JSON, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance._host import Host
from tests.e2e._proc import Server
from tests.protocols._agui import Agents, require_node

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color",
    "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_node()
    started = Server(tmp_path_factory.mktemp("agui_tools"), step_delay="0.02").start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def agents() -> Iterator[Agents]:
    require_node()
    running = Agents()
    try:
        yield running
    finally:
        running.close()


def _url(server: Server) -> str:
    return f"{server.url}/v1/agui/default"


def _types(result: dict[str, Any]) -> list[str]:
    return [e["type"] for e in result["events"]]


def _session_of(result: dict[str, Any]) -> str:
    started = next(e for e in result["events"] if e["type"] == "RUN_STARTED")
    sid: str = started["metadata"]["opennua"]["session_id"]
    return sid


def _called(agents: Agents, server: Server, thread: str) -> tuple[str, dict[str, Any]]:
    """A frontend with one tool sends a message; the run ends with the call of it."""
    agents.agent("a", _url(server), server.token, thread)
    first = agents.run_to_end("a", message="Pick a color", tools=[PICK])
    assert first["error"] is None, first["error"]
    assert first["outcome"] == "success" and first["interrupts"] == []
    types = _types(first)
    assert "TOOL_CALL_RESULT" not in types and types[-1] == "RUN_FINISHED"
    [start] = [e for e in first["events"] if e["type"] == "TOOL_CALL_START"]
    assert start["toolCallName"] == "pick_color"
    args = next(e for e in first["events"] if e["type"] == "TOOL_CALL_ARGS")
    assert args["toolCallId"] == start["toolCallId"] and args["delta"] == '{"hint":"demo"}'
    return _session_of(first), start


def _parked_on(state: dict[str, Any], call_id: str) -> dict[str, Any]:
    turn = state["turns"][-1]
    assert turn["state"] == "requires_action"
    assert [t["name"] for t in turn["client_tools"]] == ["pick_color"]
    [request] = [r for r in turn["input_requests"].values() if r["status"] == "open"]
    assert request["reason"] == "input_required" and request["tool_call_id"] == call_id
    assert "pick_color" in request["prompt"] and request["response_schema"] is None
    return request


def _finished_with(result: dict[str, Any], state: dict[str, Any], call_id: str) -> None:
    assert result["error"] is None, result["error"]
    assert result["outcome"] == "success"
    [tool_result] = [e for e in result["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert tool_result["toolCallId"] == call_id and tool_result["content"] == "teal"
    turn = state["turns"][-1]
    assert turn["stop_reason"] == "end_turn" and len(state["turns"]) == 1
    assert turn["tool_calls"][call_id]["status"] == "completed"
    assert turn["tool_calls"][call_id]["output"] == "teal"
    # The model's next step saw the frontend's result.
    said = [m["text"] for m in turn["messages"].values() if m["role"] == "assistant"]
    assert "The client tool `pick_color` returned: teal" in said, said


def test_a_frontend_tool_is_called_on_the_client_and_its_result_finishes_the_turn(
    server: Server, agents: Agents
) -> None:
    sid, start = _called(agents, server, "thread-frontend-tool")
    call_id = start["toolCallId"]
    host = Host(server)
    request = _parked_on(host.state(sid), call_id)

    second = agents.run_to_end("a", toolResult="teal", runId="run-result")
    state = host.state(sid)
    _finished_with(second, state, call_id)
    resolved = state["turns"][-1]["input_requests"][request["request_id"]]
    assert resolved["payload"] == "teal" and resolved["answered_by"]["client_id"] == "agui"
    assert _types(second)[1] == "MESSAGES_SNAPSHOT", "the result's run follows the turn"

    # The same run sent again (a lost response) is the one answer, not a second one...
    result = {"id": "frontend-result", "role": "tool", "toolCallId": call_id, "content": "teal"}
    body = {"threadId": "thread-frontend-tool", "messages": [result]}
    with server.client() as http:
        again = http.post("/v1/agui/default", json={**body, "runId": "run-result"})
        assert again.status_code == 200, again.text
        # ...and another client's later result for the same call is told who won.
        late = http.post("/v1/agui/default", json={**body, "runId": "run-late"})
    assert late.status_code == 409, late.text
    assert late.json()["code"] == "input_request_resolved"
    assert late.json()["resolution"]["payload"] == "teal"


def test_a_frontend_tool_result_after_a_server_restart_resumes_the_parked_turn(
    tmp_path: Path, agents: Agents
) -> None:
    server = Server(tmp_path, step_delay="0.02").start()
    try:
        sid, start = _called(agents, server, "thread-frontend-restart")
        _parked_on(Host(server).state(sid), start["toolCallId"])
        server.kill9()
        server.start()
        _parked_on(Host(server).state(sid), start["toolCallId"])  # rebuilt from the log
        result = agents.run_to_end("a", toolResult="teal")
        state = Host(server).state(sid)
        _finished_with(result, state, start["toolCallId"])
        assert len(state["turns"][-1]["attempts"]) >= 2, "resumed in a new attempt"
    finally:
        server.stop()


def _post(server: Server, body: dict[str, Any]) -> httpx.Response:
    with server.client() as http:
        return http.post("/v1/agui/default", json=body)


def _message(thread: str, **more: Any) -> dict[str, Any]:
    user = {"id": f"m-{thread}", "role": "user", "content": "Pick a color"}
    return {"threadId": thread, "runId": "r1", "messages": [user], **more}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (  # a result for a call that does not exist
            {
                "threadId": "t-bad-tools",
                "runId": "r1",
                "messages": [
                    {"id": "m1", "role": "tool", "toolCallId": "call_nope", "content": "x"}
                ],
            },
            422,
            "validation_error",
        ),
        (_message("t-bad-1", tools=[{**PICK, "name": "pick color"}]), 422, "validation_error"),
        (
            _message("t-bad-2", tools=[{**PICK, "name": f"t{i}"} for i in range(33)]),
            422,
            "validation_error",
        ),
        (
            _message("t-bad-3", tools=[{**PICK, "parameters": {"d": "x" * 20000}}]),
            422,
            "validation_error",
        ),
        (
            _message("t-bad-4", tools=[{**PICK, "parameters": {"type": "string"}}]),
            422,
            "validation_error",
        ),
        (_message("t-bad-5", tools=[PICK, PICK]), 422, "validation_error"),
        (_message("t-bad-6", tools=[{**PICK, "name": "shell"}]), 422, "client_tool_conflict"),
    ],
)
def test_bad_frontend_tools_and_results_are_problems(
    server: Server, body: dict[str, Any], status: int, code: str
) -> None:
    response = _post(server, body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code
