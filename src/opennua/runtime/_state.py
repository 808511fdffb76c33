"""Execution state and its checkpoint format.

The state is event-sourced: every change is a small JSON op, applied by `apply` both live
and when a checkpoint is loaded, so the state a new attempt rebuilds is, by construction,
the state the old one had. A checkpoint step stores the ops of one commit (what that step
adds: one model response or one tool result, plus O(1) counters); a full checkpoint is the
whole state, written now and then so a resume replays a bounded tail.

Format 2 keeps the step small, since one is written per tool call: ops name their run by
its index (runs are created in the same order on replay), a plain tool return is stored as
`[tool_name, content, provider_call_id, timestamp(, outcome)]` instead of pydantic-ai's
wire JSON (whose serializer was also the loop's biggest CPU cost), and the full checkpoint
is zlib-compressed, since it repeats the history the steps already spelled out.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)

from opennua.runtime.errors import IncompatibleCheckpoint

#: Bumped whenever the meaning of an op or of the full state changes.
FORMAT_VERSION = 2

Op = dict[str, Any]
RunStatus = Literal["running", "completed", "failed", "cancelled"]
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)


@dataclass
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
    status: RunStatus = "running"
    messages: list[ModelMessage] = field(default_factory=list)
    #: Model responses this run has committed; a step's ids derive from it.
    step: int = 0
    #: Which try of the current step's model call is in flight (0: none). A call re-issued
    #: after a crash is a new message, so its ids derive from (step, issued).
    issued: int = 0
    calls: list[PendingCall] = field(default_factory=list)
    next_call: int = 0
    started: bool = False  # ledger `started` written for calls[next_call]
    waiting: dict[str, Any] | None = None  # {request_id, reason, call_id}
    answer: dict[str, Any] | None = None  # {option_id?, payload?} for calls[next_call]
    returns: list[ToolReturnPart] = field(default_factory=list)
    child: str | None = None
    plan: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_FIELDS, 0))
    retries: int = 0
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


def dump_message(message: ModelMessage) -> dict[str, Any]:
    return ModelMessagesTypeAdapter.dump_python([message], mode="json", exclude_none=True)[0]  # type: ignore[no-any-return]


def _load_messages(raw: list[dict[str, Any]]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(raw)


def apply(state: ExecState, op: Op, live: Any = None) -> None:
    """Apply one op. `live` is the decoded object an op carries (a message, a return part)
    when the caller already has it, which spares decoding the JSON it was just dumped to."""
    kind = op["op"]
    if kind == "run":
        run = RunState(
            run_id=op["run"],
            parent_run_id=op.get("parent"),
            parent_tool_call_id=op.get("parent_call"),
            name=op.get("name", "agent"),
            task=op.get("task", ""),
        )
        run.messages.append(
            live
            if live is not None
            else ModelRequest(
                parts=[UserPromptPart(op["prompt"])], instructions=op.get("instructions")
            )
        )
        state.runs[run.run_id] = run
        return
    run = state.runs[op["run"]]
    if kind == "issue":
        run.issued = op["n"]
    elif kind == "response":
        run.messages.append(live if live is not None else _load_messages([op["message"]])[0])
        run.step += 1
        run.issued = 0
        run.calls = [PendingCall(**c) for c in op["calls"]]
        run.next_call, run.started, run.returns = 0, False, []
        for k, v in op["usage"].items():
            run.usage[k] += v
        state.model_calls += 1
    elif kind == "start":
        run.started = True
    elif kind == "wait":
        run.waiting = {k: op[k] for k in ("request_id", "reason", "call_id")}
    elif kind == "answer":
        run.waiting = None
        run.answer = op["answer"]
    elif kind == "result":
        part = live if live is not None else decode_part(op["part"])
        run.returns.append(part)  # type: ignore[arg-type]
        run.next_call += 1
        run.started, run.answer, run.child, run.waiting = False, None, None, None
        run.retries = op.get("retries", 0)
    elif kind == "flush":
        run.messages.append(ModelRequest(parts=list(run.returns)))
        run.calls, run.returns, run.next_call = [], [], 0
    elif kind == "child":
        run.child = op["child"]
    elif kind == "plan":
        run.plan = op["entries"]
    elif kind == "end":
        run.status = op["status"]
        run.output = op.get("output")
        run.issued = 0
    else:  # pragma: no cover - a format_version bump guards against unknown ops
        raise IncompatibleCheckpoint(f"unknown checkpoint op {kind!r}")


# -- the two record kinds ---------------------------------------------------------------------


def encode_part(part: ToolReturnPart) -> Any:
    """A tool return, compact when it is a plain one (the common case), else pydantic-ai's
    wire JSON."""
    if (
        isinstance(part.content, str)
        and part.tool_kind is None
        and part.metadata is None
        and part.retry is None
    ):
        wire = [part.tool_name, part.content, part.tool_call_id, part.timestamp.isoformat()]
        if part.outcome != "success":
            wire.append(part.outcome)
        return wire
    return dump_message(ModelRequest(parts=[part]))["parts"][0]


def decode_part(wire: Any) -> ToolReturnPart:
    if isinstance(wire, list):
        name, content, call_id, ts, *outcome = wire
        return ToolReturnPart(
            tool_name=name,
            content=content,
            tool_call_id=call_id,
            timestamp=datetime.fromisoformat(ts),
            outcome=outcome[0] if outcome else "success",
        )
    return _load_messages([{"kind": "request", "parts": [wire]}])[0].parts[0]  # type: ignore[return-value]


def _compact(state: ExecState, ops: list[Op]) -> list[Op]:
    index = {run_id: i for i, run_id in enumerate(state.runs)}
    out = []
    for op in ops:
        if op["op"] != "run":
            op = {**op, "run": index[op["run"]]}
        out.append(op)
    return out


def encode_step(state: ExecState, ops: list[Op], *, digest: str | None = None) -> bytes:
    """One commit's ops. The first step also pins the snapshot digest, so a resume checks
    it even before the first full checkpoint exists."""
    doc: dict[str, Any] = {"v": FORMAT_VERSION}
    if digest is not None:
        doc["digest"] = digest
    doc["ops"] = _compact(state, ops)
    return _json(doc).encode()


_OPS = b'"ops":['


def join_steps(payloads: list[bytes]) -> bytes:
    """One step record holding the ops of several, in order (they committed together)."""
    if len(payloads) == 1:
        return payloads[0]
    head = payloads[0]
    start = head.index(_OPS) + len(_OPS)
    bodies = [head[start:-2]] + [p[p.index(_OPS) + len(_OPS) : -2] for p in payloads[1:]]
    return head[:start] + b",".join(b for b in bodies if b) + b"]}"


def pack_step(payload: bytes) -> bytes:
    """A step record as stored: zlib-compressed when that is smaller (a tool result's text
    and the ops' repeated keys usually are), else as is; `decode` reads both."""
    packed = zlib.compress(payload, 1)
    return packed if len(packed) < len(payload) else payload


def encode_full(state: ExecState) -> bytes:
    """The whole state, compressed: it repeats what the steps before it spelled out."""
    runs = []
    for r in state.runs.values():
        run = {
            "run_id": r.run_id,
            "parent_run_id": r.parent_run_id,
            "parent_tool_call_id": r.parent_tool_call_id,
            "name": r.name,
            "task": r.task,
            "status": r.status,
            "step": r.step,
            "issued": r.issued,
            "calls": [c.__dict__ for c in r.calls],
            "next_call": r.next_call,
            "started": r.started,
            "waiting": r.waiting,
            "answer": r.answer,
            "returns": [encode_part(p) for p in r.returns],
            "child": r.child,
            "plan": r.plan,
            "usage": r.usage,
            "retries": r.retries,
            "output": r.output,
        }
        runs.append(f'{_json(run)[:-1]},"messages":{_messages_json(r)}}}')
    doc = {
        "v": FORMAT_VERSION,
        "snapshot_digest": state.snapshot_digest,
        "root_run_id": state.root_run_id,
        "step_no": state.step_no,
        "model_calls": state.model_calls,
    }
    text = f'{_json(doc)[:-1]},"runs":[{",".join(runs)}]}}'
    # Level 1: a full is written once per ~2x growth of the history, on the loop's path;
    # level 6 cost several times the CPU for ~10% fewer bytes.
    return zlib.compress(text.encode(), 1)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _messages_json(run: RunState) -> str:
    wire = run.wire
    if len(wire) < len(run.messages):
        new = ModelMessagesTypeAdapter.dump_python(
            run.messages[len(wire) :], mode="json", exclude_none=True
        )
        wire.extend(_json(m) for m in new)
    return f"[{','.join(wire)}]"


def _inflate(payload: bytes) -> bytes:
    if payload[:1] == b"{":
        return payload
    try:
        return zlib.decompress(payload)
    except zlib.error as exc:
        raise IncompatibleCheckpoint(f"unreadable checkpoint: {exc}") from exc


def decode(
    full: bytes | None, steps: list[tuple[int, bytes]], *, snapshot_digest: str, root_run_id: str
) -> ExecState:
    """Rebuild the state from a full checkpoint and the steps after it, checking that it was
    written by this checkpoint format and this agent definition."""
    if full is not None:
        doc = json.loads(_inflate(full))
        _check(doc.get("v"), doc.get("snapshot_digest"), snapshot_digest)
        state = ExecState(root_run_id=doc["root_run_id"], snapshot_digest=snapshot_digest)
        state.step_no, state.model_calls = doc["step_no"], doc["model_calls"]
        for r in doc["runs"]:
            run = RunState(
                run_id=r["run_id"],
                parent_run_id=r["parent_run_id"],
                parent_tool_call_id=r["parent_tool_call_id"],
                name=r["name"],
                task=r["task"],
                status=r["status"],
                messages=_load_messages(r["messages"]),
                step=r["step"],
                issued=r["issued"],
                calls=[PendingCall(**c) for c in r["calls"]],
                next_call=r["next_call"],
                started=r["started"],
                waiting=r["waiting"],
                answer=r["answer"],
                returns=[decode_part(p) for p in r["returns"]],
                child=r["child"],
                plan=r["plan"],
                usage=r["usage"],
                retries=r["retries"],
                output=r["output"],
            )
            state.runs[run.run_id] = run
    else:
        state = ExecState(root_run_id=root_run_id, snapshot_digest=snapshot_digest)
    run_ids = list(state.runs)
    for step_no, payload in steps:
        doc = json.loads(_inflate(payload))
        _check(doc.get("v"), doc.get("digest", snapshot_digest), snapshot_digest)
        for op in doc["ops"]:
            if op["op"] == "run":
                run_ids.append(op["run"])
            else:
                op["run"] = run_ids[op["run"]]
            apply(state, op)
        state.step_no = step_no
    return state


def _check(version: Any, digest: Any, expected_digest: str) -> None:
    if version != FORMAT_VERSION:
        raise IncompatibleCheckpoint(
            f"checkpoint format {version!r} cannot be resumed by format {FORMAT_VERSION}"
        )
    if digest != expected_digest:
        raise IncompatibleCheckpoint(
            f"checkpoint was written for agent snapshot {str(digest)[:19]}…, "
            f"this attempt runs {expected_digest[:19]}…"
        )
