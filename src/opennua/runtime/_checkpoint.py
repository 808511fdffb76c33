"""The checkpoint format: ops and states as stored bytes, and back.

A checkpoint step stores the ops of one commit (what that step adds: one model response or
one tool result, plus O(1) counters); a full checkpoint is the whole state, written now and
then so a resume replays a bounded tail. This module is the only place that knows the wire
form: `encode_op` and `decode_op` are the one encoder and the one decoder.

The step is small, since one is written per tool call: ops name their run by its index
(runs are created in the same order on replay), a plain tool return is stored as
`[tool_name, content, provider_call_id, timestamp(, outcome)]` instead of pydantic-ai's wire
JSON (whose serializer was also the loop's biggest CPU cost), a response stores only its
calls' protocol ids beside the message (names, arguments and usage are in the message), and
the full checkpoint is zlib-compressed, since it repeats what the steps spelled out.

Format 4 reads formats 2 (whose response op also repeated each call and the usage) and 3
(whose issue op wrote the message's `message.started` with it: format 4 starts a message
only once it has text, with an `open` op); anything else is an `IncompatibleCheckpoint`,
never a silent resume.
"""

from __future__ import annotations

import zlib
from datetime import datetime
from typing import Any, NamedTuple, assert_never

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolReturnPart,
)

from opennua._common import json_text, json_value
from opennua.runtime._errors import IncompatibleCheckpoint
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
    StartOp,
    WaitOp,
)
from opennua.runtime._state import ExecState, PendingCall, RunState, apply

#: Bumped whenever the meaning of an op or of the full state changes.
FORMAT_VERSION = 4
#: Older formats this one still reads (each with an upgrade in `_upgrade`).
READABLE = (2, 3, FORMAT_VERSION)

Wire = dict[str, Any]


def dump_message(message: ModelMessage) -> dict[str, Any]:
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python(
        [message], mode="json", exclude_none=True
    )[0]
    return dumped


def _load_messages(raw: list[dict[str, Any]]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(raw)


# -- ops ------------------------------------------------------------------------------------


def encode_op(op: Op, index: dict[str, int]) -> Wire:
    """`op` as stored; `index` maps run ids to their creation index."""
    if isinstance(op, RunOp):
        wire: Wire = {
            "op": "run",
            "run": op.run,
            "parent": op.parent,
            "parent_call": op.parent_call,
            "name": op.name,
            "task": op.task,
            "prompt": op.prompt,
            "instructions": op.instructions,
        }
        if op.agent is not None:  # absent before plugins: old checkpoints read unchanged
            wire["agent"] = op.agent
        return wire
    run = index[op.run]
    match op:
        case IssueOp():
            if op.opened:  # only an upgraded op of format 3 is: never written again
                return {"op": "issue", "run": run, "n": op.n, "opened": True}
            return {"op": "issue", "run": run, "n": op.n}
        case OpenOp():
            return {"op": "open", "run": run}
        case ResponseOp():
            return {
                "op": "response",
                "run": run,
                "message": dump_message(op.message),
                "calls": list(op.calls),
            }
        case StartOp():
            return {"op": "start", "run": run}
        case WaitOp():
            return {
                "op": "wait",
                "run": run,
                "request_id": op.request_id,
                "reason": op.reason,
                "call_id": op.call_id,
            }
        case AnswerOp():
            answer = {"reason": op.reason, "option_id": op.option_id, "payload": op.payload}
            return {"op": "answer", "run": run, "answer": answer}
        case ResultOp():
            wire = {"op": "result", "run": run, "part": encode_part(op.part)}
            if op.retries:
                wire["retries"] = op.retries
            return wire
        case FlushOp():
            return {"op": "flush", "run": run}
        case PromptOp():
            wire = {"op": "prompt", "run": run, "prompt": op.prompt}
            if op.output_retry:
                wire["output_retry"] = True
            return wire
        case ChildOp():
            return {"op": "child", "run": run, "child": op.child}
        case PlanOp():
            return {"op": "plan", "run": run, "entries": list(op.entries)}
        case EndOp():
            return {"op": "end", "run": run, "status": op.status, "output": op.output}
        case _:
            assert_never(op)


def decode_op(wire: Wire, run_ids: list[str]) -> Op:
    """The op `wire` stores (format 3); `run_ids` are the runs created so far, in order."""
    try:
        return _decode_op(wire, run_ids)
    except (KeyError, IndexError, TypeError, ValueError, AssertionError) as exc:
        raise IncompatibleCheckpoint(f"unreadable checkpoint op {str(wire)[:80]}: {exc!r}") from exc


def _decode_op(wire: Wire, run_ids: list[str]) -> Op:
    kind = wire["op"]
    if kind not in _KINDS:
        raise IncompatibleCheckpoint(f"unknown checkpoint op {kind!r}")
    if kind == "run":
        return RunOp(
            run=wire["run"],
            prompt=wire["prompt"],
            instructions=wire.get("instructions"),
            parent=wire.get("parent"),
            parent_call=wire.get("parent_call"),
            name=wire.get("name", "agent"),
            task=wire.get("task", ""),
            agent=wire.get("agent"),
        )
    run = run_ids[wire["run"]]
    if kind == "issue":
        return IssueOp(run=run, n=wire["n"], opened=wire.get("opened", False))
    if kind == "open":
        return OpenOp(run=run)
    if kind == "response":
        message = _load_messages([wire["message"]])[0]
        assert isinstance(message, ModelResponse)
        return ResponseOp(run=run, message=message, calls=tuple(wire["calls"]))
    if kind == "start":
        return StartOp(run=run)
    if kind == "wait":
        return WaitOp(
            run=run, request_id=wire["request_id"], reason=wire["reason"], call_id=wire["call_id"]
        )
    if kind == "answer":
        answer = wire["answer"]
        return AnswerOp(
            run=run,
            reason=answer["reason"],
            option_id=answer.get("option_id"),
            payload=answer.get("payload"),
        )
    if kind == "result":
        return ResultOp(run=run, part=decode_part(wire["part"]), retries=wire.get("retries", 0))
    if kind == "flush":
        return FlushOp(run=run)
    if kind == "prompt":
        return PromptOp(
            run=run, prompt=wire["prompt"], output_retry=wire.get("output_retry", False)
        )
    if kind == "child":
        return ChildOp(run=run, child=wire["child"])
    if kind == "plan":
        return PlanOp(run=run, entries=tuple(wire["entries"]))
    assert kind == "end"
    return EndOp(run=run, status=wire["status"], output=wire.get("output"))


_KINDS = frozenset(
    [
        "run",
        "issue",
        "open",
        "response",
        "start",
        "wait",
        "answer",
        "result",
        "flush",
        "prompt",
        "child",
        "plan",
        "end",
    ]
)


def _upgrade(version: int, wire: Wire) -> Wire:
    """A stored op of an older format, as format 4 reads it."""
    if version == 2 and wire["op"] == "response":
        # Format 2 repeated each call ({call_id, provider_id, name, args}) and the usage.
        return {**wire, "calls": [c["call_id"] for c in wire["calls"]]}
    if version < 4 and wire["op"] == "issue":
        # Up to format 3 the try's `message.started` was written with its issue op.
        return {**wire, "opened": True}
    return wire


# -- tool returns ---------------------------------------------------------------------------


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
    request = _load_messages([{"kind": "request", "parts": [wire]}])[0]
    part = request.parts[0]
    assert isinstance(part, ToolReturnPart)
    return part


# -- step records ---------------------------------------------------------------------------


#: Ops whose content the state keeps as written (a run's prompt, a response, a tool
#: return, a prompt, a run's output): a resume that replays them rebuilds what a full
#: checkpoint would hold, at about the cost of loading it. The others (counters, a call's
#: start, a wait, an answer, a child, a plan) are replaced by later ones.
_KEPT = (RunOp, ResponseOp, ResultOp, PromptOp, EndOp)


class EncodedStep(NamedTuple):
    payload: bytes
    #: Bytes of ops the state does not keep as written: what a full checkpoint would save
    #: a resume from replaying (`StepWriter` decides from it when one is due).
    replaced: int


def encode_step(state: ExecState, ops: list[Op], *, digest: str | None = None) -> EncodedStep:
    """One commit's ops. The first step also pins the snapshot digest, so a resume checks
    it even before the first full checkpoint exists."""
    index = {run_id: i for i, run_id in enumerate(state.runs)}
    head: dict[str, Any] = {"v": FORMAT_VERSION}
    if digest is not None:
        head["digest"] = digest
    texts = [_json(encode_op(op, index)) for op in ops]
    replaced = sum(len(t) for op, t in zip(ops, texts, strict=True) if not isinstance(op, _KEPT))
    # The text `_json` writes for the whole document, spelled from its parts.
    payload = f'{_json(head)[:-1]},"ops":[{",".join(texts)}]}}'
    return EncodedStep(payload.encode(), replaced)


_OPS = b'"ops":['


def join_steps(payloads: list[bytes]) -> bytes:
    """One step record holding the ops of several, in order (they committed together)."""
    if len(payloads) == 1:
        return payloads[0]
    head = payloads[0]
    start = head.index(_OPS) + len(_OPS)
    bodies = [head[start:-2]] + [p[p.index(_OPS) + len(_OPS) : -2] for p in payloads[1:]]
    return head[:start] + b",".join(b for b in bodies if b) + b"]}"


# Never edit: records tagged 1 decode only against exactly these bytes. A step record is a
# few hundred bytes when it holds one tool result, too short for DEFLATE to learn its keys
# from itself: primed with them, such a record shrinks by another ~23 % (309 -> 235 bytes
# for `peers.py`'s side-effecting step). DEFLATE codes a nearer match in fewer bits, so
# the most common text comes last.
_STEP_DICT_1 = (
    b'{"op":"wait","run":0,"request_id":"req_01","reason":"tool_call","call_id":"call_01"}'
    b'{"op":"answer","run":0,"reason":"tool_call","option_id":"allow_once","payload":null}'
    b'{"op":"plan","run":0,"entries":[{"content":"","status":"pending","priority":"medium"},'
    b'{"op":"end","run":0,"status":"completed","output":"'
    b'{"op":"child","run":0,"child":"run_01'
    b'{"op":"prompt","run":0,"prompt":"'
    b'{"op":"open","run":0}'
    b'{"content":"","part_kind":"text"},{"content":"","part_kind":"thinking"},'
    b'"usage":{"input_tokens":0,"cache_write_tokens":0,"cache_write_1h_tokens":0,'
    b'"cache_read_tokens":0,"output_tokens":0,"output_reasoning_tokens":0,'
    b'"input_audio_tokens":0,"cache_audio_read_tokens":0,"output_audio_tokens":0,'
    b'"audio_seconds":0.0,"details":{}},"model_name":"","timestamp":"2026-01-01T00:00:00.000000Z",'
    b'"kind":"response","provider_name":"","finish_reason":"tool_call","state":"complete"},'
    b'"calls":["call_01'
    b'{"op":"response","run":0,"message":{"parts":[{"tool_name":"","args":"{\\"":"",'
    b'"tool_call_id":"","part_kind":"tool-call"},'
    b'{"v":4,"ops":[{"op":"issue","run":0,"n":1},{"op":"flush","run":0},'
    b'{"op":"result","run":0,"part":["","","","2026-01-01T00:00:00.000000+00:00"]},'
    b'{"op":"start","run":0}]}'
)
#: The first byte of a record packed against `_STEP_DICT_1`: neither `{` (a record stored
#: as is) nor a zlib header's first byte (records packed before, and full checkpoints).
_STEP_TAG_1 = 1
# An 8 KiB window and a small hash table: copying this primed compressor per record costs
# a few microseconds, one with zlib's defaults several times that, for the same bytes.
_STEP_WBITS = -13
_PACK_STEP_1 = zlib.compressobj(
    1, zlib.DEFLATED, _STEP_WBITS, 5, zlib.Z_DEFAULT_STRATEGY, _STEP_DICT_1
)


def pack_step(payload: bytes) -> bytes:
    """A step record as stored: deflated against a dictionary of the ops' keys when that is
    smaller (a tool result's text and the ops' repeated keys usually are), else as is;
    `unpack` reads both, and the zlib form records had before."""
    c = _PACK_STEP_1.copy()
    packed = bytes((_STEP_TAG_1,)) + c.compress(payload) + c.flush()
    return packed if len(packed) < len(payload) else payload


# -- full checkpoints -----------------------------------------------------------------------


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
            "opened": r.opened,
            "calls": [
                {"call_id": c.call_id, "provider_id": c.provider_id, "name": c.name, "args": c.args}
                for c in r.calls
            ],
            "next_call": r.next_call,
            "started": r.started,
            "waiting": (
                {"request_id": w.request_id, "reason": w.reason, "call_id": w.call_id}
                if (w := r.waiting) is not None
                else None
            ),
            "answer": (
                {"reason": a.reason, "option_id": a.option_id, "payload": a.payload}
                if (a := r.answer) is not None
                else None
            ),
            "returns": [encode_part(p) for p in r.returns],
            "child": r.child,
            "plan": r.plan,
            "usage": r.usage,
            "retries": r.retries,
            "output": r.output,
        }
        if r.agent is not None:
            run["agent"] = r.agent
        if r.output_retries:
            run["output_retries"] = r.output_retries
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


def _decode_run(r: Wire) -> RunState:
    run_id = r["run_id"]
    waiting, answer = r["waiting"], r["answer"]
    return RunState(
        run_id=run_id,
        parent_run_id=r["parent_run_id"],
        parent_tool_call_id=r["parent_tool_call_id"],
        name=r["name"],
        task=r["task"],
        agent=r.get("agent"),
        status=r["status"],
        messages=_load_messages(r["messages"]),
        step=r["step"],
        issued=r["issued"],
        # Up to format 3 every issued try had its message started.
        opened=r.get("opened", r["issued"] > 0),
        calls=[
            PendingCall(c["call_id"], c["provider_id"], c["name"], c["args"]) for c in r["calls"]
        ],
        next_call=r["next_call"],
        started=r["started"],
        waiting=WaitOp(run=run_id, **waiting) if waiting is not None else None,
        answer=(
            AnswerOp(
                run=run_id,
                reason=answer["reason"],
                option_id=answer.get("option_id"),
                payload=answer.get("payload"),
            )
            if answer is not None
            else None
        ),
        returns=[decode_part(p) for p in r["returns"]],
        child=r["child"],
        plan=r["plan"],
        usage=r["usage"],
        retries=r["retries"],
        output_retries=r.get("output_retries", 0),
        output=r["output"],
    )


def _json(value: Any) -> str:
    # orjson (the standard library for what it refuses): every step's record goes through
    # here, and the standard library's encoder was ~2 % of a busy server's Python time
    # (py-spy, `benchmarks/peers_server.py` at N = 10). The values are pydantic's JSON
    # dumps and the log's own payloads, where NaN is already null.
    return json_text(value)


def _messages_json(run: RunState) -> str:
    wire = run.wire
    if len(wire) < len(run.messages):
        new = ModelMessagesTypeAdapter.dump_python(
            run.messages[len(wire) :], mode="json", exclude_none=True
        )
        wire.extend(_json(m) for m in new)
    return f"[{','.join(wire)}]"


# -- resume ---------------------------------------------------------------------------------


def unpack(payload: bytes) -> bytes:
    """The JSON text of a stored step record or full checkpoint, whichever way it was
    packed (as is, against the step dictionary, or zlib)."""
    if payload[:1] == b"{":
        return payload
    try:
        if payload[:1] == bytes((_STEP_TAG_1,)):
            inflater = zlib.decompressobj(_STEP_WBITS, _STEP_DICT_1)
            text = inflater.decompress(payload[1:])
            if not inflater.eof or inflater.unused_data:
                raise zlib.error("a truncated or overlong step record")
            return text
        return zlib.decompress(payload)
    except zlib.error as exc:
        raise IncompatibleCheckpoint(f"unreadable checkpoint: {exc}") from exc


def decode(
    full: bytes | None,
    steps: list[tuple[int, bytes]],
    *,
    snapshot_digest: str,
    root_run_id: str,
    equivalent: frozenset[str] = frozenset(),
) -> ExecState:
    """Rebuild the state from a full checkpoint and the steps after it, checking that it was
    written by a format this one reads and by this agent definition (``snapshot_digest``,
    or one of the ``equivalent`` digests the same definition had before)."""
    accepted = equivalent | {snapshot_digest}
    if full is not None:
        doc = json_value(unpack(full))
        _check(doc.get("v"), doc.get("snapshot_digest"), accepted, snapshot_digest)
        state = ExecState(root_run_id=doc["root_run_id"], snapshot_digest=snapshot_digest)
        state.step_no, state.model_calls = doc["step_no"], doc["model_calls"]
        for r in doc["runs"]:
            run = _decode_run(r)
            state.runs[run.run_id] = run
    else:
        state = ExecState(root_run_id=root_run_id, snapshot_digest=snapshot_digest)
    run_ids = list(state.runs)
    for step_no, payload in steps:
        doc = json_value(unpack(payload))
        version = doc.get("v")
        _check(version, doc.get("digest", snapshot_digest), accepted, snapshot_digest)
        for wire in doc["ops"]:
            op = decode_op(_upgrade(version, wire), run_ids)
            if isinstance(op, RunOp):
                run_ids.append(op.run)
            apply(state, op)
        state.step_no = step_no
    return state


def _check(version: Any, digest: Any, accepted: frozenset[str], expected_digest: str) -> None:
    if version not in READABLE:
        raise IncompatibleCheckpoint(
            f"checkpoint format {version!r} cannot be resumed by format {FORMAT_VERSION}"
        )
    if digest not in accepted:
        raise IncompatibleCheckpoint(
            f"checkpoint was written for agent snapshot {str(digest)[:19]}…, "
            f"this attempt runs {expected_digest[:19]}…"
        )
