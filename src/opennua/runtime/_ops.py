"""Checkpoint ops: every change to an execution's state, as a frozen value with a tag.

The loop applies an op to its state and queues it for the next commit; a resume decodes the
same ops (`_checkpoint.decode_op`, the one decoder) and applies them again, so the rebuilt
state is the state. `op` is the tag on the wire; `run` names the run an op changes (the
wire form names it by its creation index, see `_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue
from pydantic_ai.messages import ModelResponse, ToolReturnPart

RunStatus = Literal["running", "completed", "failed", "cancelled"]
WaitReason = Literal["tool_call", "confirmation", "input_required"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOp:
    """A run starts: the root, or a sub-agent of `parent`'s call `parent_call`."""

    op: Literal["run"] = "run"
    run: str
    prompt: str
    instructions: str | None = None
    parent: str | None = None
    parent_call: str | None = None
    name: str = "agent"
    task: str = ""
    agent: str | None = None  # the plugin's sub-agent this run is; None: root or general


@dataclass(frozen=True, slots=True, kw_only=True)
class IssueOp:
    """Try `n` of the run's next model call is issued (its message id derives from n).
    `opened`: its `message.started` was written with it (checkpoints of format 3 and
    before); since format 4 a message is started only when it has text (`OpenOp`)."""

    op: Literal["issue"] = "issue"
    run: str
    n: int
    opened: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenOp:
    """The current try's message is started: its text begins (docs/runtime.md, "A
    response without text is no message")."""

    op: Literal["open"] = "open"
    run: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseOp:
    """The model answered; `calls` are the protocol ids of its tool calls, in order (the
    rest of each call, and the usage, are in `message`)."""

    op: Literal["response"] = "response"
    run: str
    message: ModelResponse
    calls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StartOp:
    """The ledger `started` of the run's current call is (about to be) durable."""

    op: Literal["start"] = "start"
    run: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitOp:
    """The run waits for a person: request `request_id` about its current call."""

    op: Literal["wait"] = "wait"
    run: str
    request_id: str
    reason: WaitReason
    call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerOp:
    """The Host accepted an answer to the run's request; its current call goes on with it."""

    op: Literal["answer"] = "answer"
    run: str
    reason: WaitReason
    option_id: str | None = None
    payload: JsonValue = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultOp:
    """The run's current call ended: what goes back to the model. `retries` counts the
    invalid calls in a row this one makes (0: it was valid)."""

    op: Literal["result"] = "result"
    run: str
    part: ToolReturnPart
    retries: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushOp:
    """Every call of the last response has a result: they become the next request."""

    op: Literal["flush"] = "flush"
    run: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptOp:
    """The run goes on with a new user prompt: a Stop hook's reason to keep working, or
    (`output_retry`) the errors of a final answer that does not fit the output schema."""

    op: Literal["prompt"] = "prompt"
    run: str
    prompt: str
    output_retry: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOp:
    """The run's current call (`task`) runs as the sub-agent run `child`."""

    op: Literal["child"] = "child"
    run: str
    child: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOp:
    """The run's TODO list, as the protocol's plan entries."""

    op: Literal["plan"] = "plan"
    run: str
    entries: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndOp:
    op: Literal["end"] = "end"
    run: str
    status: RunStatus
    output: str | None = None


Op = (
    RunOp
    | IssueOp
    | OpenOp
    | ResponseOp
    | StartOp
    | WaitOp
    | AnswerOp
    | ResultOp
    | FlushOp
    | PromptOp
    | ChildOp
    | PlanOp
    | EndOp
)
