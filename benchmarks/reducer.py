"""Decode + validate + reduce 100,000 realistic actions from JSON lines; print actions/s.

Realistic: 200 turns, each streaming an answer in many deltas around tool calls, with
usage and plan updates. Goal (issue 2): >= 100,000 actions/s on the 2-core machine.
`--js` also runs the same lines through the web UI's reducer (`web/reducer.js`) in Node:
JSON.parse + normalise + reduce, best of 3, so a change to the JS modules is measured too.
Run: python benchmarks/reducer.py [--actions N] [--js]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from opennua.protocol import action_from_json, reduce, state_to_json
from opennua.protocol.state import initial_state

SESSION = "ses_01JBENCH000000000000000000"
REDUCER_JS = Path(__file__).resolve().parent.parent / "src" / "opennua" / "web" / "reducer.js"
# Reads the log from argv[1], replays it three times with the JS reducer, prints one JSON line.
NODE_BENCH = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const { initialState, reduce, stateToJson } = await import(pathToFileURL(process.argv[2]).href);
const lines = readFileSync(process.argv[3], "utf8").split("\\n").filter(Boolean);
let best = 0, state;
for (let round = 0; round < 3; round++) {
  state = initialState();
  const started = performance.now();
  for (const line of lines) state = reduce(state, JSON.parse(line));
  best = Math.max(best, lines.length / ((performance.now() - started) / 1000));
}
if (state.seq !== lines.length || state.anomalies.length) throw new Error("bad replay");
console.log(JSON.stringify({ rate: best, bytes: stateToJson(state).length }));
"""


def make_log(total: int, turns: int = 200) -> list[str]:
    lines: list[str] = []

    def add(type_: str, data: dict[str, Any], turn: str | None = None) -> None:
        n = len(lines)
        lines.append(
            json.dumps(
                {
                    "v": 1,
                    "session_id": SESSION,
                    "seq": n + 1,
                    "id": f"act_{n:08d}",
                    "type": type_,
                    "ts": f"2026-11-29T08:00:{n % 60:02d}.{n % 1000:03d}Z",
                    "turn_id": turn,
                    "run_id": "run_root",
                    "client_id": None,
                    "intent_id": None,
                    "data": data,
                }
            )
        )

    add("session.created", {"title": "bench"})
    per_turn = total // turns
    for t in range(turns):
        turn = f"trn_{t:04d}"
        start = len(lines)
        add(
            "turn.started",
            {
                "execution_id": f"exe_{t}",
                "message_id": f"msg_u{t}",
                "trigger": {"kind": "message", "principal_id": "prn_1"},
                "input": [{"type": "text", "text": "Please do it"}],
                "trace_id": f"tr{t}",
            },
            turn,
        )
        add("turn.state", {"state": "running", "attempt": 1}, turn)
        call = 0
        while len(lines) - start < per_turn - 8:
            message = f"msg_{t}_{call}"
            add("message.started", {"message_id": message, "role": "assistant"}, turn)
            for _ in range(30):
                add("message.delta", {"message_id": message, "delta": "some streamed words "}, turn)
            add(
                "message.completed",
                {"message_id": message, "text": "…", "status": "complete"},
                turn,
            )
            tool = f"call_{t}_{call}"
            add(
                "tool_call.started",
                {
                    "tool_call_id": tool,
                    "name": "read_file",
                    "title": "Read",
                    "kind": "read",
                    "input": {"path": "a.md"},
                },
                turn,
            )
            add("tool_call.updated", {"tool_call_id": tool, "status": "in_progress"}, turn)
            add(
                "tool_call.updated",
                {"tool_call_id": tool, "status": "completed", "output": "x" * 200},
                turn,
            )
            add(
                "usage.recorded",
                {
                    "provider": "openai",
                    "model": "gpt-5",
                    "input_tokens": 900,
                    "output_tokens": 80,
                    "cache_read_input_tokens": 600,
                    "cache_creation_input_tokens": 0,
                    "reasoning_output_tokens": 10,
                },
                turn,
            )
            call += 1
        add(
            "plan.updated",
            {"entries": [{"id": "p", "content": "done", "status": "completed"}]},
            turn,
        )
        add("turn.ended", {"stop_reason": "end_turn"}, turn)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--actions", type=int, default=100_000)
    parser.add_argument("--js", action="store_true", help="also time web/reducer.js in Node")
    args = parser.parse_args()
    lines = make_log(args.actions)
    kinds: dict[str, int] = {}
    for line in lines:
        kind = json.loads(line)["type"]
        kinds[kind] = kinds.get(kind, 0) + 1
    best = 0.0
    for _ in range(3):
        state = initial_state()
        started = time.perf_counter()
        for line in lines:
            state = reduce(state, action_from_json(line))
        elapsed = time.perf_counter() - started
        best = max(best, len(lines) / elapsed)
    assert state["seq"] == len(lines) and not state["anomalies"]
    top = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:4])
    print(f"actions: {len(lines)} ({top}, ...), turns: {len(state['turns'])}")
    print(f"state JSON: {len(state_to_json(state)) / 1e6:.1f} MB")
    print(f"decode+validate+reduce: {best:,.0f} actions/s (best of 3; goal >= 100,000)")
    if args.js:
        print(f"JS reducer (Node): {js_rate(lines):,.0f} actions/s (best of 3)")


def js_rate(lines: list[str]) -> float:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("--js needs node on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp, "log.jsonl")
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        script = Path(tmp, "bench.mjs")
        script.write_text(NODE_BENCH, encoding="utf-8")
        out = subprocess.run(
            [node, str(script), str(REDUCER_JS), str(log)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    rate: float = json.loads(out)["rate"]
    return rate


if __name__ == "__main__":
    main()
