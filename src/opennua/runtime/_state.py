"""Execution state, and the one function that changes it: `apply(state, op)`.

The state is event-sourced: the loop applies every op live and commits it; a resume applies
the same ops again (`_checkpoint.decode`), so the state a new attempt rebuilds is, by
construction, the state the old one had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, assert_never

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from opennua.runtime._ops import (
    AnswerOp,
    ChildOp,
    EndOp,
    FlushOp,
    IssueOp,
    Op,
    OpenOp,
    PlanOp,
    PromptOp,
    ResponseOp,
    ResultOp,
    RunOp,
    RunStatus,
    StartOp,
    WaitOp,
)

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


@dataclass(frozen=True, slots=True)
class PendingCall:
    call_id: str  # the protocol id (call_…)
    provider_id: str  # the id the model gave the call; tool returns must echo it
    name: str
    args: str | dict[str, Any] | None


@dataclass
class RunState:
    run_id: str
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    name: str = "agent"
    task: str = ""
    agent: str | None = None  # the named sub-agent this run is (None: root or general)
    status: RunStatus = "running"
    messages: list[ModelMessage] = field(default_factory=list)
    #: Model responses this run has committed; a step's ids derive from it.
    step: int = 0
    #: Which try of the current step's model call is in flight (0: none). A call re-issued
    #: after a crash is a new message, so its ids derive from (step, issued).
    issued: int = 0
    #: Whether that try's `message.started` is written: a response's message is started
    #: only once it has text, so a try without text leaves no message to close.
    opened: bool = False
    calls: list[PendingCall] = field(default_factory=list)
    next_call: int = 0
    started: bool = False  # ledger `started` written for calls[next_call]
    waiting: WaitOp | None = None
    answer: AnswerOp | None = None  # for calls[next_call]
    returns: list[ToolReturnPart] = field(default_factory=list)
    child: str | None = None
    plan: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_FIELDS, 0))
    retries: int = 0
    output_retries: int = 0  # final answers sent back for not fitting the output schema
    output: str | None = None
    #: `messages` as JSON, filled lazily by `encode_full`: messages never change once
    #: appended, so each full serializes only the ones added since the last.
    wire: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def current(self) -> PendingCall | None:
        return self.calls[self.next_call] if self.next_call < len(self.calls) else None


@dataclass
class ExecState:
    root_run_id: str
    snapshot_digest: str
    runs: dict[str, RunState] = field(default_factory=dict)
    step_no: int = 0  # checkpoint steps committed
    model_calls: int = 0  # responses across all runs (the max-steps limit counts these)

    def usage_total(self) -> dict[str, int]:
        total = dict.fromkeys(USAGE_FIELDS, 0)
        for run in self.runs.values():
            for k, v in run.usage.items():
                total[k] += v
        return total


def usage_of(response: ModelResponse) -> dict[str, int]:
    """A response's usage under the protocol's names."""
    u = response.usage
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "reasoning_output_tokens": u.output_reasoning_tokens,
    }


def tool_calls(response: ModelResponse) -> list[ToolCallPart]:
    return [p for p in response.parts if isinstance(p, ToolCallPart)]


def _args(part: ToolCallPart) -> str | dict[str, Any] | None:
    args = part.args
    if args is None or isinstance(args, str | dict):
        return args
    return part.args_as_dict()  # a built-in tool's typed arguments; ours never get these


def apply(state: ExecState, op: Op) -> None:
    """Apply one op to the state (live, or replayed from a checkpoint)."""
    if isinstance(op, RunOp):
        run = RunState(
            run_id=op.run,
            parent_run_id=op.parent,
            parent_tool_call_id=op.parent_call,
            name=op.name,
            task=op.task,
            agent=op.agent,
        )
        run.messages.append(
            ModelRequest(parts=[UserPromptPart(op.prompt)], instructions=op.instructions)
        )
        state.runs[run.run_id] = run
        return
    run = state.runs[op.run]
    match op:
        case IssueOp():
            run.issued, run.opened = op.n, op.opened
        case OpenOp():
            run.opened = True
        case ResponseOp():
            parts = tool_calls(op.message)
            run.messages.append(op.message)
            run.step += 1
            run.issued, run.opened = 0, False
            run.calls = [
                PendingCall(call_id, p.tool_call_id, p.tool_name, _args(p))
                for call_id, p in zip(op.calls, parts, strict=True)
            ]
            run.next_call, run.started, run.returns = 0, False, []
            for k, v in usage_of(op.message).items():
                run.usage[k] += v
            state.model_calls += 1
        case StartOp():
            run.started = True
            if run.answer is not None and run.answer.reason == "confirmation":
                # "Run again" authorizes one run: this one. If it dies too, the next
                # attempt must ask again (a new request), not re-run on the old answer.
                run.answer = None
        case WaitOp():
            run.waiting = op
        case AnswerOp():
            run.waiting = None
            run.answer = op
        case ResultOp():
            run.returns.append(op.part)
            run.next_call += 1
            run.started, run.answer, run.child, run.waiting = False, None, None, None
            run.retries = op.retries
        case FlushOp():
            run.messages.append(ModelRequest(parts=list(run.returns)))
            run.calls, run.returns, run.next_call = [], [], 0
        case PromptOp():
            run.messages.append(ModelRequest(parts=[UserPromptPart(op.prompt)]))
            if op.output_retry:
                run.output_retries += 1
        case ChildOp():
            run.child = op.child
        case PlanOp():
            run.plan = list(op.entries)
        case EndOp():
            run.status = op.status
            run.output = op.output
            run.issued, run.opened = 0, False
        case _:
            assert_never(op)
