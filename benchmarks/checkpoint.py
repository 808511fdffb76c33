"""What an execution's checkpoint costs: bytes written and kept, and a resume's decode time.

One execution of N model responses, each asking for tool calls, run by the agent loop
against the in-memory journal (the runtime's checkpoint policy alone, no store). Two
flows: `results` (one call returning 300 bytes, as `peers.py` steps do) and `plans` (a
40-entry plan rewritten at every step beside that call: ops the state replaces). Prints
per flow and N: the checkpoint bytes written (of which full checkpoints), the bytes a
resume reads (the last full and the steps after it), and the time to rebuild the state
from them (`_checkpoint.decode`, best of 5).

    python benchmarks/checkpoint.py [--steps 2000 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opennua.runtime import AgentLoop, DerivedIds, Limits, RunEnv, ToolContext, default_agent, tool
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._checkpoint import decode
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call

ROOT_RUN = "run_01JD0000000000000000000000"
PLAN = [{"content": f"step {k} of a long plan, said in full"} for k in range(40)]


@tool("emit", idempotent=True)
def emit(ctx: ToolContext, i: int) -> str:
    return (f"{i:08d}" + secrets.token_hex(150))[:300]


def script(plans: bool) -> Callable[[list[Any]], ScriptStep]:
    def step(messages: list[Any]) -> ScriptStep:
        n = len(messages) // 2
        calls = [call("emit", i=n)]
        if plans:
            entries = [
                {**e, "status": "completed" if k < n % 40 else "pending"}
                for k, e in enumerate(PLAN)
            ]
            calls.insert(0, call("plan", entries=entries))
        return ScriptStep(calls=tuple(calls))

    return step


async def run(steps: int, plans: bool, workdir: Path) -> dict[str, float]:
    plan = next(t for t in BUILTIN_TOOLS if t.name == "plan")
    agent = dataclasses.replace(default_agent("scripted:bench"), tools=(emit, plan))
    journal = InMemoryJournal()
    env = RunEnv(
        execution_id="exe_01JD0000000000000000000000",
        root_run_id=ROOT_RUN,
        workdir=workdir,
        ids=DerivedIds("bench", ms=1_764_403_200_000),
    )
    loop = AgentLoop(
        agent, journal, env, model=ScriptedModel(script(plans)), limits=Limits(max_steps=steps)
    )
    await loop.run("go")
    stored = await journal.restarted().load()
    assert stored is not None
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        state = decode(
            stored.full, stored.steps, snapshot_digest=agent.digest, root_run_id=ROOT_RUN
        )
        best = min(best, time.perf_counter() - t0)
    assert state.runs[ROOT_RUN].step == steps
    return {
        "written": journal.bytes_written,
        # (getattr: the benchmark also runs against a tree from before it was counted)
        "fulls": getattr(journal, "full_bytes_written", float("nan")),
        "read": journal.stored_bytes,
        "decode_ms": best * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, nargs="+", default=[2000, 10000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for plans in (False, True):
            flow = "plans" if plans else "results"
            for n in args.steps:
                r = asyncio.run(run(n, plans, Path(tmp)))
                print(
                    f"{flow:8s} {n:6d} steps: written {r['written'] / n:6.0f} B/step"
                    f" (fulls {r['fulls'] / n:5.0f}), a resume reads {r['read'] / 1e6:6.2f} MB"
                    f" and decodes it in {r['decode_ms']:7.1f} ms"
                )


if __name__ == "__main__":
    main()
