"""What an AG-UI client holds, derived from our folded session state: its shared state
(`STATE_SNAPSHOT`) and its messages (`MESSAGES_SNAPSHOT`). Pure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Interrupt,
    Message,
    ReasoningMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from opennua.protocol.state import InputRequest, SessionState, Turn
from opennua.protocol.state import ToolCall as OurToolCall

#: Tool-call states after which the call has a result to show.
FINISHED_CALLS = frozenset({"completed", "failed", "cancelled", "unknown"})


def find_turn(state: SessionState, turn_id: str | None) -> Turn | None:
    return next((t for t in state["turns"] if t["turn_id"] == turn_id), None)


def shared_state(state: SessionState, turn_id: str | None) -> dict[str, Any]:
    """The AG-UI shared state: the session, and the TODO, sub-agents and usage of the turn
    the run follows; the session's artifacts and open input requests; every turn's state,
    trace id and usage."""
    turn = find_turn(state, turn_id)
    subagents = []
    if turn is not None:
        for worker in turn["workers"].values():
            subagents.append(
                {
                    "id": worker["worker_run_id"],
                    "name": worker["name"],
                    "task": worker["task"],
                    "status": worker["status"],
                    "summary": worker["summary"],
                    "parent_tool_call_id": worker["parent_tool_call_id"],
                    "plan": [dict(entry) for entry in worker["plan"]],
                }
            )
    return {
        "session_id": state["session_id"],
        "title": state["title"],
        "status": state["status"],
        "turn_id": turn_id,
        "plan": [dict(entry) for entry in turn["plan"]] if turn is not None else [],
        "subagents": subagents,
        "artifacts": [dict(artifact) for artifact in state["artifacts"].values()],
        "input_requests": [
            _request(state, entry["turn_id"], entry["request_id"])
            for entry in state["open_input_requests"]
        ],
        "usage": dict(turn["usage"]) if turn is not None else None,
        "turns": [
            {
                "turn_id": t["turn_id"],
                "state": t["state"],
                "stop_reason": t["stop_reason"],
                "trace_id": t["trace_id"],
                "usage": dict(t["usage"]),
            }
            for t in state["turns"]
        ],
    }


def _request(state: SessionState, turn_id: str, request_id: str) -> dict[str, Any]:
    turn = find_turn(state, turn_id)
    request = turn["input_requests"].get(request_id) if turn is not None else None
    if request is None:
        return {"request_id": request_id}
    return {
        "request_id": request_id,
        "turn_id": turn_id,
        "reason": request["reason"],
        "prompt": request["prompt"],
        "tool_call_id": request["tool_call_id"],
        "options": request["options"],
    }


def items(turn: Turn) -> Iterator[tuple[str, str, str | None]]:
    """`(kind, id, subagent run id)` of every item of `turn` in the order a client shows
    them: its root run's timeline, each sub-agent's own items right after its card."""

    def walk(timeline: list[Any], owner: str | None) -> Iterator[tuple[str, str, str | None]]:
        for ref in timeline:
            yield ref["kind"], ref["id"], owner
            if ref["kind"] == "worker" and ref["id"] in turn["workers"]:
                yield from walk(turn["workers"][ref["id"]]["timeline"], ref["id"])

    return walk(turn["timeline"], None)


def arguments(call: OurToolCall) -> str:
    return json.dumps(call["input"], separators=(",", ":"), ensure_ascii=False)


def tool_result(call: OurToolCall) -> str:
    """A finished call's result as the text AG-UI carries."""
    if call["error"] is not None:
        return f"{call['error']['code']}: {call['error']['message']}"
    if call["output"] is not None:
        return call["output"]
    return call["status"] if call["output_ref"] is None else f"(output {call['output_ref']})"


def reasoning_id(message_id: str) -> str:
    """The id of a message's reasoning (ours shares the message's id; AG-UI's may not)."""
    return f"{message_id}:reasoning"


def result_id(tool_call_id: str) -> str:
    """The id of the tool message that carries a call's result."""
    return f"{tool_call_id}:result"


def messages(state: SessionState, *, live: bool = False) -> list[Message]:
    """Every message of the session as AG-UI messages. With `live`, items still streaming
    are left out: the run re-opens them as live streams."""
    out: list[Message] = []
    for turn in state["turns"]:
        for kind, item_id, owner in items(turn):
            if kind == "message":
                message = turn["messages"][item_id]
                if message["role"] == "user":
                    out.append(UserMessage(id=item_id, content=message["text"]))
                elif not (live and message["status"] == "streaming"):
                    out.append(
                        AssistantMessage(id=item_id, content=message["text"], subagent_run_id=owner)
                    )
            elif kind == "reasoning":
                reasoning = turn["reasoning"][item_id]
                if not (live and reasoning["status"] == "streaming"):
                    out.append(
                        ReasoningMessage(
                            id=reasoning_id(item_id),
                            content=reasoning["text"],
                            subagent_run_id=owner,
                        )
                    )
            elif kind == "tool_call":
                call = turn["tool_calls"][item_id]
                function = FunctionCall(name=call["name"], arguments=arguments(call))
                out.append(
                    AssistantMessage(
                        id=item_id,
                        tool_calls=[ToolCall(id=item_id, function=function)],
                        subagent_run_id=owner,
                    )
                )
                if call["status"] in FINISHED_CALLS:
                    out.append(
                        ToolMessage(
                            id=result_id(item_id),
                            tool_call_id=item_id,
                            content=tool_result(call),
                            subagent_run_id=owner,
                        )
                    )
    return out


def client_call(turn: Turn, request: InputRequest) -> bool:
    """Whether `request` waits for the client to run one of its own tools (the call of a
    tool the turn's client defined): the run ends with the call, not an interrupt."""
    call = turn["tool_calls"].get(request["tool_call_id"] or "")
    names = {tool["name"] for tool in turn.get("client_tools", [])}  # older snapshots: none
    return request["reason"] == "input_required" and call is not None and call["name"] in names


def interrupt(turn: Turn, request: InputRequest) -> Interrupt:
    """An open input request as the interrupt a run ends with."""
    options = request["options"]
    schema = request["response_schema"]
    if schema is None and options:
        ids = [option["option_id"] for option in options]
        schema = {
            "type": "object",
            "required": ["option_id"],
            "properties": {"option_id": {"enum": ids}},
            "additionalProperties": False,
        }
    owner = request["run_id"] if request["run_id"] in turn["workers"] else None
    return Interrupt(
        id=request["request_id"],
        reason=request["reason"],
        message=request["prompt"],
        tool_call_id=request["tool_call_id"],
        response_schema=schema,
        expires_at=request["expires_at"],
        subagent_run_id=owner,
        metadata={"opennua": {"turn_id": turn["turn_id"], "options": options}},
    )


def token_usage(turn: Turn) -> list[TokenUsage] | None:
    """The turn's usage per model, sub-agents included, in AG-UI's accounting."""
    out = []
    for name, usage in turn["usage_by_model"].items():
        provider, _, model = name.partition(":")
        out.append(
            TokenUsage(
                provider=provider or None,
                model=model or name,
                input_tokens=usage["input_tokens"],
                output_tokens=usage["output_tokens"],
                total_tokens=usage["input_tokens"] + usage["output_tokens"],
                reasoning_tokens=usage["reasoning_output_tokens"],
                cached_input_tokens=usage["cache_read_input_tokens"],
                cache_write_input_tokens=usage["cache_creation_input_tokens"],
            )
        )
    return out or None
