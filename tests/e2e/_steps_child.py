"""One attempt of a many-step execution on a real SQLite store, for the group-commit crash
test: `python -m tests.e2e._steps_child DB WORKDIR` runs it in a process the test kills.

Every third call is a side-effecting `charge`, the others an idempotent `emit`; each tool
appends its call id to a log file (the effects a test counts) and sleeps a moment, so a kill
lands mid-run with several idempotent steps group-committed behind a busy disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from opennua.protocol.ids import new_id
from opennua.runtime import (
    AgentLoop,
    Answer,
    DerivedIds,
    Limits,
    Outcome,
    RunEnv,
    ToolContext,
    default_agent,
    tool,
)
from opennua.runtime.testing import ScriptedModel, ScriptStep, call
from opennua.store import Execution, NotFound, open_store
from opennua.supervisor import StoreJournal

CALLS = 240
BATCH = 40
MS = 1_764_403_200_000
SESSION = new_id("session", ms=MS, entropy=b"crash-ses1")
EXECUTION = new_id("execution", ms=MS, entropy=b"crash-exe1")
TURN = new_id("turn", ms=MS, entropy=b"crash-trn1")
ROOT = new_id("run", ms=MS, entropy=b"crash-run1")


def _effect(path: Path, ctx: ToolContext) -> None:
    with path.open("a") as f:
        f.write(ctx.tool_call_id + "\n")
    time.sleep(0.002)


def agent(work: Path) -> Any:
    @tool("emit", idempotent=True)
    def emit(ctx: ToolContext, i: int) -> str:
        _effect(work / "emits.log", ctx)
        return f"emitted {i}"

    @tool("charge")
    def charge(ctx: ToolContext, i: int) -> str:
        _effect(work / "charges.log", ctx)
        return f"charged {i}"

    return dataclasses.replace(default_agent("scripted:crash"), tools=(emit, charge))


def _step(messages: list[Any]) -> ScriptStep:
    done = min(len(messages) // 2 * BATCH, CALLS)
    if done >= CALLS:
        return ScriptStep(text="done")
    names = ["charge" if i % 3 == 0 else "emit" for i in range(done, done + BATCH)]
    return ScriptStep(calls=tuple(call(name, i=done + k) for k, name in enumerate(names)))


async def run_once(db: Path, work: Path, now: float, answers: dict[str, Answer]) -> Outcome:
    """Claim the execution at `now` (creating it the first time) and run it."""
    store = await open_store(f"sqlite:///{db}", data_dir=work / "data")
    try:
        try:
            await store.get_execution(EXECUTION)
        except NotFound:
            await store.create_session(SESSION, created_at=now)
            await store.create_execution(
                Execution(
                    execution_id=EXECUTION,
                    session_id=SESSION,
                    turn_id=TURN,
                    status="queued",
                    created_at=now,
                )
            )
        claimed = await store.claim("crash-test", now, 60.0)
        assert claimed is not None, "the execution could not be claimed"
        journal = StoreJournal(store, claimed, owner="crash-test", clock=time.time)
        env = RunEnv(
            execution_id=EXECUTION,
            root_run_id=ROOT,
            workdir=work,
            ids=DerivedIds(EXECUTION, ms=MS),
        )
        loop = AgentLoop(
            agent(work), journal, env, model=ScriptedModel(_step), limits=Limits(max_steps=20)
        )
        return await loop.run("go", answers=answers)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(run_once(Path(sys.argv[1]), Path(sys.argv[2]), time.time(), {}))
