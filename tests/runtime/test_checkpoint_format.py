"""Checkpoint format 2: compact tool returns, run indexes, compressed full checkpoints."""

from __future__ import annotations

import json

import pytest
from pydantic_ai.messages import RetryInfo, ToolReturnPart

from opennua.runtime._state import (
    ExecState,
    apply,
    decode,
    decode_part,
    encode_full,
    encode_part,
    encode_step,
)
from opennua.runtime.errors import IncompatibleCheckpoint

DIGEST = "sha256:" + "0" * 64
ROOT = "run_01JD0000000000000000000000"


def _parts() -> list[ToolReturnPart]:
    return [
        ToolReturnPart(tool_name="emit", content="x" * 300, tool_call_id="sc1"),
        ToolReturnPart(tool_name="emit", content="no", tool_call_id="sc2", outcome="denied"),
        ToolReturnPart(
            tool_name="emit",
            content="bad args",
            tool_call_id="sc3",
            outcome="retried",
            retry=RetryInfo("validation_error", attempt=1, max_retries=3),  # type: ignore[arg-type]
        ),
        ToolReturnPart(tool_name="emit", content={"a": 1}, tool_call_id="sc4"),
    ]


def test_tool_returns_round_trip_compact_or_wire() -> None:
    for part in _parts():
        wire = json.loads(json.dumps(encode_part(part)))
        assert decode_part(wire) == part
    plain = encode_part(_parts()[0])
    assert isinstance(plain, list) and len(json.dumps(plain)) < 300 + 60


def _ops() -> list[dict[str, object]]:
    child = "run_01JD0000000000000000000001"
    return [
        {"op": "run", "run": ROOT, "prompt": "go", "instructions": "be brief"},
        {"op": "run", "run": child, "parent": ROOT, "parent_call": "call_1", "prompt": "sub"},
        {"op": "child", "run": ROOT, "child": child},
        {"op": "plan", "run": child, "entries": [{"content": "x"}]},
    ]


def test_steps_name_runs_by_index_and_replay_to_the_same_state() -> None:
    live = ExecState(root_run_id=ROOT, snapshot_digest=DIGEST)
    ops = _ops()
    for op in ops:
        apply(live, op)
    payload = encode_step(live, ops, digest=DIGEST)
    doc = json.loads(payload)
    assert doc["v"] == 2 and [op["run"] for op in doc["ops"][2:]] == [0, 1]
    rebuilt = decode(None, [(1, payload)], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert rebuilt.runs.keys() == live.runs.keys()
    assert rebuilt.runs[ROOT].child == live.runs[ROOT].child
    assert rebuilt.runs["run_01JD0000000000000000000001"].plan == [{"content": "x"}]

    full = encode_full(live)
    assert full[:1] != b"{"  # compressed
    again = decode(full, [], snapshot_digest=DIGEST, root_run_id=ROOT)
    assert again.runs[ROOT].messages == live.runs[ROOT].messages


def test_format_1_is_refused() -> None:
    old = json.dumps({"v": 1, "digest": DIGEST, "ops": []}).encode()
    with pytest.raises(IncompatibleCheckpoint, match="format 1"):
        decode(None, [(1, old)], snapshot_digest=DIGEST, root_run_id=ROOT)
