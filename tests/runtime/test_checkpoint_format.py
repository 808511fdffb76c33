"""Checkpoint format 3: typed ops with one decoder, compact tool returns, run indexes,
compressed full checkpoints; format 2 still read."""

from __future__ import annotations

import json
import zlib

import pytest
from pydantic_ai.messages import ModelResponse, RetryInfo, ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RequestUsage

from opennua.runtime import IncompatibleCheckpoint
from opennua.runtime._checkpoint import (
    FORMAT_VERSION,
    decode,
    decode_op,
    decode_part,
    encode_full,
    encode_op,
    encode_part,
    encode_step,
    pack_step,
    unpack,
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
    StartOp,
    WaitOp,
)
from opennua.runtime._state import ExecState, apply

DIGEST = "sha256:" + "0" * 64
ROOT = "run_01JD0000000000000000000000"
CHILD = "run_01JD0000000000000000000001"


def _parts() -> list[ToolReturnPart]:
    return [
        ToolReturnPart(tool_name="emit", content="x" * 300, tool_call_id="sc1"),
        ToolReturnPart(tool_name="emit", content="no", tool_call_id="sc2", outcome="denied"),
        ToolReturnPart(
            tool_name="emit",
            content="bad args",
            tool_call_id="sc3",
            outcome="retried",
            retry=RetryInfo("validation_error", attempt=1, max_retries=3),
        ),
        ToolReturnPart(tool_name="emit", content={"a": 1}, tool_call_id="sc4"),
    ]


def test_tool_returns_round_trip_compact_or_wire() -> None:
    for part in _parts():
        wire = json.loads(json.dumps(encode_part(part)))
        assert decode_part(wire) == part
    plain = encode_part(_parts()[0])
    assert isinstance(plain, list) and len(json.dumps(plain)) < 300 + 60


def _response() -> ModelResponse:
    return ModelResponse(
        parts=[
            ToolCallPart("task", '{"name": "w", "task": "sub"}', tool_call_id="sc0"),
            ToolCallPart("emit", {"i": 1}, tool_call_id="sc1"),
        ],
        usage=RequestUsage(input_tokens=10, output_tokens=3, cache_read_tokens=4),
        model_name="m",
    )


def _ops() -> list[Op]:
    """One of each kind, in an order a loop could have applied them."""
    return [
        RunOp(run=ROOT, prompt="go", instructions="be brief"),
        IssueOp(run=ROOT, n=1),
        ResponseOp(run=ROOT, message=_response(), calls=("call_1", "call_2")),
        RunOp(run=CHILD, parent=ROOT, parent_call="call_1", name="w", task="sub", prompt="sub"),
        ChildOp(run=ROOT, child=CHILD),
        PlanOp(run=CHILD, entries=({"id": "1", "content": "x", "status": "pending"},)),
        EndOp(run=CHILD, status="completed", output="done"),
        ResultOp(run=ROOT, part=_parts()[0]),
        StartOp(run=ROOT),
        WaitOp(run=ROOT, request_id="req_1", reason="tool_call", call_id="call_2"),
        AnswerOp(run=ROOT, reason="tool_call", option_id="allow_once"),
        ResultOp(run=ROOT, part=_parts()[2], retries=1),
        FlushOp(run=ROOT),
        PromptOp(run=ROOT, prompt="a Stop hook says: run the tests first"),
        PromptOp(run=ROOT, prompt="the answer does not fit the schema", output_retry=True),
        IssueOp(run=ROOT, n=1),
        OpenOp(run=ROOT),  # its text began
    ]


def test_every_op_round_trips_through_the_one_decoder() -> None:
    ops = _ops()
    assert {type(op) for op in ops} == set(Op.__args__)  # type: ignore[attr-defined]
    index, run_ids = {ROOT: 0, CHILD: 1}, [ROOT, CHILD]
    for op in ops:
        wire = json.loads(json.dumps(encode_op(op, index)))
        assert wire["op"] == op.op
        assert decode_op(wire, run_ids) == op


def test_steps_name_runs_by_index_and_replay_to_the_same_state() -> None:
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    ops = _ops()
    for op in ops:
        apply(live, op)
    payload = encode_step(live, ops, digest=DIGEST).payload
    doc = json.loads(payload)
    assert doc["v"] == FORMAT_VERSION == 4
    assert [op["run"] for op in doc["ops"] if op["op"] != "run"][:3] == [0, 0, 0]
    assert doc["ops"][4]["run"] == 0 and doc["ops"][5]["run"] == 1
    # A response stores its calls' ids only: names, arguments and usage are in the message.
    assert doc["ops"][2]["calls"] == ["call_1", "call_2"] and "usage" not in doc["ops"][2]
    rebuilt = decode(None, [(1, payload)], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert rebuilt.runs.keys() == live.runs.keys()
    for run_id in live.runs:
        got, want = rebuilt.runs[run_id], live.runs[run_id]
        assert (got.child, got.plan, got.status, got.output) == (
            want.child,
            want.plan,
            want.status,
            want.output,
        )
        assert (got.usage, got.step, got.retries, got.calls, got.output_retries) == (
            want.usage,
            want.step,
            want.retries,
            want.calls,
            want.output_retries,
        )
    assert rebuilt.runs[ROOT].usage["cache_read_input_tokens"] == 4
    assert [c.name for c in rebuilt.runs[ROOT].calls] == []  # flushed
    assert rebuilt.model_calls == 1

    full = encode_full(live)
    assert full[:1] != b"{"  # compressed
    again = decode(full, [], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert again.runs[ROOT].messages == live.runs[ROOT].messages
    assert again.runs[CHILD].plan == live.runs[CHILD].plan
    # Only the schema retry counts: the Stop hook's prompt is not one.
    assert again.runs[ROOT].output_retries == live.runs[ROOT].output_retries == 1


def test_step_records_keep_text_as_utf_8_and_what_orjson_refuses_still_round_trips() -> None:
    """Records are written by orjson: text outside ASCII as UTF-8, not `\\u` escapes (two
    or three bytes a character instead of six). What orjson refuses (a lone surrogate, an
    integer past 64 bits) goes to the standard library and reads back the same."""
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    text = "Résumé du rapport trimestriel: 完成"
    ops: list[Op] = [
        RunOp(run=ROOT, prompt=text, instructions="be brief"),
        IssueOp(run=ROOT, n=1),
        ResponseOp(run=ROOT, message=_response(), calls=("call_1", "call_2")),
        ResultOp(run=ROOT, part=ToolReturnPart(tool_name="emit", content=text, tool_call_id="a")),
    ]
    for op in ops:
        apply(live, op)
    payload = encode_step(live, ops).payload
    assert text.encode() in payload
    assert decode_op(json.loads(payload)["ops"][0], [ROOT]) == ops[0]

    odd = [
        ResultOp(
            run=ROOT, part=ToolReturnPart(tool_name="emit", content="\ud800", tool_call_id="b")
        ),
        AnswerOp(run=ROOT, reason="ask_user", payload={"n": 2**70}),
    ]
    wire = json.loads(encode_step(live, odd).payload)["ops"]
    assert [decode_op(w, [ROOT]) for w in wire] == odd


def test_a_step_record_is_packed_against_the_ops_dictionary_and_older_forms_still_read() -> None:
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    ops: list[Op] = [RunOp(run=ROOT, prompt="go"), IssueOp(run=ROOT, n=1)]
    for op in ops:
        apply(live, op)
    first = encode_step(live, ops, digest=DIGEST).payload
    hexed = "0123456789abcdef" * 19
    result = [
        ResultOp(
            run=ROOT, part=ToolReturnPart(tool_name="emit", content=hexed, tool_call_id="sc1")
        ),
        StartOp(run=ROOT),
    ]
    for op in result:
        apply(live, op)
    record = encode_step(live, result).payload
    packed = pack_step(record)
    # One tool result: the dictionary of the ops' keys saves what zlib alone cannot learn.
    assert packed[0] == 1 and len(packed) < len(zlib.compress(record, 1)) - 15
    assert unpack(packed) == record
    # Every stored form decodes to the same state: packed, zlib (records written before
    # the dictionary), as is (a record that would not shrink).
    for form in (packed, zlib.compress(record, 1), record):
        state = decode(
            None, [(1, pack_step(first)), (2, form)], snapshot_digest=DIGEST, root_run_id=ROOT
        )
        assert state.runs[ROOT].returns[0].content == hexed
    assert pack_step(b"{}") == b"{}"  # nothing to gain: stored as is
    with pytest.raises(IncompatibleCheckpoint, match="unreadable"):
        unpack(packed[:-4])  # a truncated record is never read as a shorter one


def test_a_full_checkpoint_keeps_a_waiting_run_and_its_answer() -> None:
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    for op in _ops()[:10]:  # up to the wait
        apply(live, op)
    waiting = decode(encode_full(live), [], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert waiting.runs[ROOT].waiting == live.runs[ROOT].waiting
    assert waiting.runs[ROOT].started and waiting.runs[ROOT].calls == live.runs[ROOT].calls
    apply(live, _ops()[10])
    answered = decode(encode_full(live), [], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert answered.runs[ROOT].answer == AnswerOp(
        run=ROOT, reason="tool_call", option_id="allow_once"
    )


def test_format_2_response_ops_are_read() -> None:
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    ops = _ops()[:3]
    wire = [encode_op(op, {ROOT: 0}) for op in ops]
    # Format 2 spelled each call out and repeated the usage beside the message.
    wire[2]["calls"] = [
        {"call_id": "call_1", "provider_id": "sc0", "name": "task", "args": "{}"},
        {"call_id": "call_2", "provider_id": "sc1", "name": "emit", "args": {"i": 1}},
    ]
    wire[2]["usage"] = {"input_tokens": 10}
    old = json.dumps({"v": 2, "digest": DIGEST, "ops": wire}).encode()
    for op in ops:
        apply(live, op)
    state = decode(None, [(1, old)], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert state.runs[ROOT].calls == live.runs[ROOT].calls
    assert state.runs[ROOT].usage == live.runs[ROOT].usage


def test_format_3_issued_calls_had_their_message_started() -> None:
    """Up to format 3 an issue op wrote the try's `message.started`: a resume from such a
    checkpoint must close that message, so its issued try reads as opened, from a step and
    from a full checkpoint; format 4 opens a try only with an `open` op."""
    ops = _ops()[:2]  # the run, its first model call issued
    wire = [encode_op(op, {ROOT: 0}) for op in ops]
    assert wire[1] == {"op": "issue", "run": 0, "n": 1}
    for version, opened in ((3, True), (4, False)):
        step = json.dumps({"v": version, "digest": DIGEST, "ops": wire}).encode()
        state = decode(None, [(1, step)], snapshot_digest=DIGEST, root_run_id=ROOT)
        assert state.runs[ROOT].issued == 1 and state.runs[ROOT].opened is opened
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    for op in ops:
        apply(live, op)
    doc = json.loads(zlib.decompress(encode_full(live)))
    assert doc["runs"][0].pop("opened") is False
    doc["v"] = 3
    old = zlib.compress(json.dumps(doc).encode())
    assert decode(old, [], snapshot_digest=DIGEST, root_run_id=ROOT).runs[ROOT].opened
    apply(live, OpenOp(run=ROOT))
    again = decode(encode_full(live), [], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert again.runs[ROOT].opened and again.runs[ROOT].issued == 1


def test_format_1_and_unknown_ops_are_refused() -> None:
    old = json.dumps({"v": 1, "digest": DIGEST, "ops": []}).encode()
    with pytest.raises(IncompatibleCheckpoint, match="format 1"):
        decode(None, [(1, old)], snapshot_digest=DIGEST, root_run_id=ROOT)
    odd = json.dumps({"v": 3, "digest": DIGEST, "ops": [{"op": "teleport", "run": 0}]}).encode()
    with pytest.raises(IncompatibleCheckpoint, match="teleport"):
        decode(None, [(1, odd)], snapshot_digest=DIGEST, root_run_id=ROOT)
