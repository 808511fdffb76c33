"""AG-UI end to end: `@ag-ui/client`'s HttpAgent under Node against a real `nua serve`
(the scripted demo: plan, tools, an approval, a sub-agent, an artifact).

The client verifies the event stream itself (`verifyEvents`: order, open and closed
messages, tool calls and sub-agents, nothing after the run's end) and applies the state
deltas with its own JSON Patch; a violation fails the run, which fails the test. The
Host's state is the truth every assertion compares with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.protocols.agui import shared_state
from tests._support.polling import wait_for
from tests.conformance._host import DEMO, Host
from tests.e2e._proc import Server
from tests.protocols._agui import Agents, require_node

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

ALLOW = {"*": {"option_id": "allow_once"}}
LONG = "r" * 300
#: An image sent inline: we take media by URL only.
INLINE = {"type": "image", "source": {"type": "data", "value": "aGk=", "mimeType": "image/png"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_node()
    started = Server(tmp_path_factory.mktemp("agui"), step_delay="0.02").start()
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


def _url(server: Server, deployment: str = "default") -> str:
    return f"{server.url}/v1/agui/{deployment}"


def _session_of(result: dict[str, Any]) -> str:
    started = next(e for e in result["events"] if e["type"] == "RUN_STARTED")
    sid: str = started["metadata"]["opennua"]["session_id"]
    return sid


def _types(result: dict[str, Any]) -> list[str]:
    return [e["type"] for e in result["events"]]


def _turn(state: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = state["turns"][-1]
    return turn


def test_a_run_streams_the_turn_pauses_on_approval_and_resumes(
    server: Server, agents: Agents
) -> None:
    agents.agent("a", _url(server), server.token, "thread-approval")
    first = agents.run_to_end("a", message=DEMO)
    assert first["error"] is None, first["error"]
    types = _types(first)
    assert types[0] == "RUN_STARTED" and types[1] == "STATE_SNAPSHOT"
    assert "MESSAGES_SNAPSHOT" not in types, "a new turn streams from its first event"
    for kind in ("REASONING_MESSAGE_CONTENT", "TOOL_CALL_RESULT"):
        assert kind in types, f"no {kind}"
    # Until the approval the agent only thinks and calls tools: no (empty) text message.
    assert "TEXT_MESSAGE_START" not in types
    assert "STATE_DELTA" in types and "STEP_STARTED" in types
    # The approval is the run's end: an interrupt carrying our input request.
    assert first["outcome"] == "interrupt" and types[-1] == "RUN_FINISHED"
    sid = _session_of(first)
    host = Host(server)
    state = host.state(sid)
    [request] = [r for r in _turn(state)["input_requests"].values() if r["status"] == "open"]
    [interrupt] = first["interrupts"]
    assert interrupt["id"] == request["request_id"]
    assert interrupt["toolCallId"] == request["tool_call_id"]
    assert interrupt["message"] == request["prompt"]
    assert interrupt["responseSchema"]["properties"]["option_id"]["enum"] == [
        o["option_id"] for o in request["options"]
    ]
    view = agents.view("a")
    assert view["state"]["input_requests"][0]["request_id"] == request["request_id"]

    second = agents.run_to_end("a", resume=ALLOW)
    assert second["error"] is None, second["error"]
    assert second["outcome"] == "success"
    state = host.state(sid)
    turn = _turn(state)
    assert turn["stop_reason"] == "end_turn" and len(state["turns"]) == 1
    assert turn["input_requests"][request["request_id"]]["option_id"] == "allow_once"
    # The shared state the client holds (snapshot + its own application of our deltas)
    # is the Host's plan, sub-agent and artifact.
    shared = agents.view("a")["state"]
    assert [e["status"] for e in shared["plan"]] == ["completed"] * 4
    [worker] = turn["workers"].values()
    assert shared["subagents"][0]["id"] == worker["worker_run_id"]
    assert shared["subagents"][0]["status"] == "completed"
    assert [a["artifact_id"] for a in shared["artifacts"]] == list(state["artifacts"])
    assert shared["input_requests"] == [] and shared["status"] == "idle"
    # All of it: the client's snapshot with its own application of every delta (the
    # client's JSON Patch) is exactly the projection of the Host's state.
    assert shared == shared_state(state, turn["turn_id"])  # type: ignore[arg-type]
    types = _types(second)
    assert "SUBAGENT_STARTED" in types and "SUBAGENT_FINISHED" in types
    assert "TEXT_MESSAGE_START" in types and "TEXT_MESSAGE_CONTENT" in types
    finished = second["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and finished["usage"], "usage on the run's end"
    # Every assistant message and tool call of the turn is in the client's messages.
    ids = {m["id"] for m in agents.view("a")["messages"]}
    assert set(turn["tool_calls"]) <= ids
    assert {m for m, v in turn["messages"].items() if v["role"] == "assistant"} <= ids


def test_the_same_thread_id_is_the_same_session(server: Server, agents: Agents) -> None:
    agents.agent("a", _url(server), server.token, "thread-shared")
    first = agents.run_to_end("a", message=DEMO)
    sid = _session_of(first)
    # Another frontend (another agent object) on the same thread id: no message, so it
    # reconnects to the session's latest turn and is given the whole history first.
    agents.agent("b", _url(server), server.token, "thread-shared")
    other = agents.run_to_end("b")
    assert _session_of(other) == sid
    assert _types(other)[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert other["outcome"] == "interrupt", "the turn still waits for its approval"
    # And our own session id as the thread continues the session too.
    agents.agent("c", _url(server), server.token, sid)
    assert _session_of(agents.run_to_end("c")) == sid
    assert len(Host(server).state(sid)["turns"]) == 1, "nobody started a second turn"


def test_a_second_client_that_answers_later_is_told_who_won(server: Server, agents: Agents) -> None:
    agents.agent("a", _url(server), server.token, "thread-race")
    sid = _session_of(agents.run_to_end("a", message=DEMO))
    agents.agent("b", _url(server), server.token, "thread-race")
    agents.run_to_end("b")  # b sees the same interrupt
    won = agents.run_to_end("a", resume={"*": {"option_id": "reject_once"}})
    assert won["error"] is None
    lost = agents.run_to_end("b", resume=ALLOW)
    assert lost["error"]["code"] == "http_409", lost["error"]
    # HttpAgent hands a non-2xx body over as text unless it is `application/json`.
    problem = json.loads(lost["error"]["payload"])
    assert problem["code"] == "input_request_resolved"
    assert problem["resolution"]["option_id"] == "reject_once", "the loser is told what won"
    resolutions = [a for a in Host(server).history(sid) if a["type"] == "input_request.resolved"]
    assert len(resolutions) == 1


def test_a_client_that_leaves_mid_run_reconnects_to_the_live_tail(
    server: Server, agents: Agents
) -> None:
    agents.agent("a", _url(server), server.token, "thread-reconnect")
    agents.run("a", message=DEMO, slow=40)  # a slow reader
    sid = wait_for(lambda: _started(agents, "a"), timeout=30)
    agents.abort("a")  # gone, mid-run
    # The agent goes on: someone else approves meanwhile.
    host = Host(server)
    rid = host.open_request(sid)
    assert host.answer(sid, rid).status_code == 200
    agents.agent("back", _url(server), server.token, "thread-reconnect")
    result = agents.run_to_end("back")
    assert result["error"] is None, result["error"]
    assert _types(result)[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert result["outcome"] == "success"
    state = host.state(sid)
    assert len(state["turns"]) == 1 and _turn(state)["stop_reason"] == "end_turn"
    _assert_shows(agents.view("back"), state)


def _started(agents: Agents, name: str) -> str | None:
    view = agents.view(name)
    session = view["state"].get("session_id") if isinstance(view["state"], dict) else None
    return session if session and len(view["messages"]) > 2 else None


def _assert_shows(view: dict[str, Any], state: dict[str, Any]) -> None:
    """The client holds every message of the Host's turn, once, and the Host's TODO."""
    ids = [m["id"] for m in view["messages"]]
    assert len(ids) == len(set(ids)), "a message is shown twice"
    turn = _turn(state)
    assert set(turn["tool_calls"]) <= set(ids)
    assert set(turn["messages"]) <= set(ids)
    assert view["state"]["plan"] == turn["plan"]


def test_a_turn_running_when_the_server_restarts_finishes_and_a_client_sees_it(
    tmp_path: Path, agents: Agents
) -> None:
    server = Server(tmp_path, step_delay="0.2").start()
    try:
        agents.agent("a", _url(server), server.token, "thread-restart")
        agents.run("a", message=DEMO, messageId="m-restart")
        sid = wait_for(lambda: _started(agents, "a"), timeout=60)
        server.kill9()  # mid-run, mid-stream
        agents.wait("a")
        server.start()
        # The frontend re-sends its run (same thread, same message id): it joins the turn
        # the first one started instead of starting another.
        agents.agent("b", _url(server), server.token, "thread-restart")
        result = agents.run_to_end("b", message=DEMO, messageId="m-restart")
        assert result["error"] is None, result["error"]
        assert result["outcome"] == "interrupt"
        assert _types(result)[1] == "MESSAGES_SNAPSHOT", "a re-sent message is a reconnect"
        done = agents.run_to_end("b", resume=ALLOW)
        assert done["outcome"] == "success", done["error"]
        state = Host(server).state(sid)
        assert len(state["turns"]) == 1 and _turn(state)["stop_reason"] == "end_turn"
        assert len(_turn(state)["attempts"]) >= 2, "the turn went on in a new attempt"
        _assert_shows(agents.view("b"), state)
    finally:
        server.stop()


def _post(server: Server, path: str, **kwargs: Any) -> httpx.Response:
    with server.client() as http:
        return http.post(path, **kwargs)


def _body(thread: str = "t-bad", **more: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": "r1", "messages": [], **more}


@pytest.mark.parametrize(
    ("path", "kwargs", "status", "code"),
    [
        (
            "/v1/agui/default",
            {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
            422,
            "validation_error",
        ),
        ("/v1/agui/default", {"json": {"threadId": "t"}}, 422, "validation_error"),
        ("/v1/agui/nope", {"json": _body()}, 404, "not_found"),
        ("/v1/agui/Bad%20Name", {"json": _body()}, 422, "validation_error"),
        ("/v1/agui/default", {"json": _body("x" * 300)}, 422, "validation_error"),
        (
            "/v1/agui/default",
            {
                "content": b'{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user",'
                b'"content":"\\ud800"}]}',
                "headers": {"Content-Type": "application/json"},
            },
            422,
            "validation_error",
        ),
        (
            "/v1/agui/default",
            {"json": _body(messages=[{"id": "m", "role": "user", "content": "x" * (2 << 20)}])},
            413,
            "payload_too_large",
        ),
        ("/v1/agui/default", {"json": _body("ses_01NOPE")}, 404, "not_found"),
        (
            "/v1/agui/default",
            {"json": _body(messages=[{"id": "m", "role": "user", "content": [INLINE]}])},
            422,
            "validation_error",
        ),
        ("/v1/agui/sessions/ses_01NOPE", {"json": _body()}, 404, "not_found"),
        (
            "/v1/agui/default",
            {"json": _body(resume=[{"interruptId": "req_01NOPE", "status": "resolved"}])},
            422,
            "validation_error",
        ),
        (
            "/v1/agui/default",
            {"json": _body(resume=[{"interruptId": "req_01NOPE", "status": "cancelled"}])},
            422,
            "validation_error",
        ),
        (
            "/v1/agui/default",
            {"json": _body(resume=[{"interruptId": LONG, "status": "resolved", "payload": 2}])},
            422,
            "validation_error",
        ),
    ],
)
def test_bad_input_is_a_problem_never_a_500(
    server: Server, path: str, kwargs: dict[str, Any], status: int, code: str
) -> None:
    response = _post(server, path, **kwargs)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code


def test_an_answer_to_an_unknown_interrupt_is_a_problem(server: Server) -> None:
    body = _body(resume=[{"interruptId": "req_01NOPE", "status": "resolved", "payload": "x"}])
    response = _post(server, "/v1/agui/default", json=body)
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_another_workspaces_session_is_not_found(server: Server) -> None:
    with server.client() as http:
        sid = http.post("/v1/sessions", json={}).json()["session_id"]
        ws = http.post("/v1/workspaces", json={"name": "other"}).json()["workspace_id"]
        # The caller's other workspace: the session is not there, by either route's rule.
        response = http.post(f"/v1/agui/default?workspace_id={ws}", json=_body(sid))
    assert response.status_code == 404 and response.json()["code"] == "not_found"
