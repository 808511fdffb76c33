"""AG-UI frontend tools, without a server: `RunAgentInput.tools` become the message's
client tools; a turn parked on a call of one ends the run with the call (not an
interrupt); a `ToolMessage` answers that call's request, keyed by run and call."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent, RunAgentInput

from opennua.protocol import action_from_dict, initial_state, reduce
from opennua.protocol.state import SessionState
from opennua.protocols.agui import InputError, RunStream, client_tools, tool_answer

VECTORS = Path(__file__).parents[1] / "conformance" / "vectors"


def _log(name: str) -> list[dict[str, Any]]:
    actions: list[dict[str, Any]] = json.loads((VECTORS / f"{name}.json").read_text())["actions"]
    return actions


def _state(actions: list[dict[str, Any]]) -> SessionState:
    state = initial_state()
    for action in actions:
        state = reduce(copy.deepcopy(state), action_from_dict(action))
    return state


def _parked(name: str) -> list[dict[str, Any]]:
    """The log up to the turn waiting on its input request."""
    actions = _log(name)
    end = next(i for i, a in enumerate(actions) if a["type"] == "input_request.resolved")
    return actions[:end]


def _types(events: list[BaseEvent]) -> list[str]:
    return [str(e.type.value if hasattr(e.type, "value") else e.type) for e in events]


def _run(state: SessionState) -> list[BaseEvent]:
    stream = RunStream(state, thread_id="t", run_id="r", turn_id="trn_01", reconnect=False)
    events = stream.opening()
    assert stream.done
    return events


def _input(messages: list[dict[str, Any]], **more: Any) -> RunAgentInput:
    body = {
        "threadId": "t",
        "runId": "r1",
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **more,
    }
    return RunAgentInput.model_validate(body)


TOOL_MESSAGE = {"id": "m_result", "role": "tool", "toolCallId": "call_pick", "content": "teal"}


def test_a_turn_parked_on_a_client_tool_ends_the_run_with_the_call() -> None:
    events = _run(_state(_parked("client_tool_answered")))
    types = _types(events)
    assert [t for t in types if t.startswith("TOOL_CALL")] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    start = next(e for e in events if _types([e]) == ["TOOL_CALL_START"])
    assert start.tool_call_id == "call_pick" and start.tool_call_name == "pick_color"  # type: ignore[attr-defined]
    finished = events[-1]
    assert _types([finished]) == ["RUN_FINISHED"]
    assert finished.outcome is not None and finished.outcome.type == "success"  # type: ignore[attr-defined]


def test_a_turn_parked_on_ask_user_still_ends_with_an_interrupt() -> None:
    events = _run(_state(_parked("hitl_answered_payload")))
    finished = events[-1]
    assert finished.outcome.type == "interrupt"  # type: ignore[attr-defined]
    assert [i.id for i in finished.outcome.interrupts] == ["req_01"]  # type: ignore[attr-defined]


def test_a_tool_message_answers_the_calls_request_keyed_by_run_and_call() -> None:
    state = _state(_parked("client_tool_answered"))
    answer = tool_answer("ses_1", _input([TOOL_MESSAGE]), state)
    assert answer is not None
    assert (answer.request_id, answer.payload, answer.client_id) == ("req_01", "teal", "agui")
    again = tool_answer("ses_1", _input([TOOL_MESSAGE]), state)
    assert again is not None and again.intent_id == answer.intent_id  # a re-sent run: one answer
    other = tool_answer("ses_1", _input([TOOL_MESSAGE], runId="r2"), state)
    assert other is not None and other.intent_id != answer.intent_id  # another run: another


def test_a_tool_message_for_an_unknown_call_is_refused() -> None:
    state = _state(_parked("client_tool_answered"))
    unknown = {**TOOL_MESSAGE, "toolCallId": "call_nope"}
    with pytest.raises(InputError, match="call_nope") as caught:
        tool_answer("ses_1", _input([unknown]), state)
    assert caught.value.loc == ["body", "messages", 0, "toolCallId"]
    # A call of the agent's own tool is no client call either.
    ask = _state(_parked("hitl_answered_payload"))
    with pytest.raises(InputError):
        tool_answer("ses_1", _input([{**TOOL_MESSAGE, "toolCallId": "call_ask"}]), ask)


def test_our_own_tool_result_or_no_tool_message_is_no_answer() -> None:
    state = _state(_parked("client_tool_answered"))
    ours = {**TOOL_MESSAGE, "id": "call_pick:result"}
    assert tool_answer("ses_1", _input([ours]), state) is None
    user = {"id": "u1", "role": "user", "content": "hi"}
    assert tool_answer("ses_1", _input([user]), state) is None


def test_frontend_tools_become_client_tools() -> None:
    tools = [
        {"name": "pick_color", "description": "Pick", "parameters": {"type": "object"}},
        {"name": "beep", "description": "Beep", "parameters": None},
    ]
    mapped = client_tools(_input([], tools=tools))
    assert [t.model_dump() for t in mapped] == [
        {"name": "pick_color", "description": "Pick", "parameters": {"type": "object"}},
        {"name": "beep", "description": "Beep", "parameters": {}},
    ]


@pytest.mark.parametrize(
    ("tools", "loc"),
    [
        ([{"name": f"t{i}", "description": ""} for i in range(33)], ["body", "tools"]),
        ([{"name": "bad name", "description": ""}], ["body", "tools", 0, "name"]),
        (
            [{"name": "a", "description": "", "parameters": {"d": "x" * 20000}}],
            ["body", "tools", 0],
        ),
        ([{"name": "a", "description": "", "parameters": {"type": "array"}}], ["body", "tools", 0]),
    ],
)
def test_bad_frontend_tools_are_input_errors(tools: list[dict[str, Any]], loc: list[Any]) -> None:
    with pytest.raises(InputError) as caught:
        client_tools(_input([], tools=tools))
    assert caught.value.loc == loc
