"""Runtime overhead: a 200-step scripted tool loop, ours vs plain `pydantic_ai.Agent.run`.

Same scripted model (one tool call per response, then a final answer) and the same tool.
Ours runs on the in-memory journal and on the SQLite durable journal (one fenced store
transaction per step). Goals: in-memory ≤ 1.3×, durable ≤ 2.0× the plain agent's wall time.

    python benchmarks/runtime_overhead.py [--steps 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._durable import claimed_journal
from pydantic_ai import Agent, UsageLimits

from opennua.runtime import (
    AgentLoop,
    DerivedIds,
    InMemoryJournal,
    Limits,
    RunEnv,
    ScriptedModel,
    ScriptStep,
    call,
    default_agent,
    tool,
)


def script(steps: int) -> ScriptedModel:
    def step(messages: list[Any]) -> ScriptStep:
        n = sum(1 for m in messages if m.kind == "response")
        if n >= steps:
            return ScriptStep(text="done")
        return ScriptStep(calls=(call("lookup", i=n),))

    return ScriptedModel(step)


def lookup(i: int) -> str:
    """Return item i."""
    return f"item {i}"


async def ours(steps: int, journal: Any, workspace: Path) -> float:
    agent = dataclasses.replace(
        default_agent("scripted:bench"), tools=(tool("lookup", idempotent=True)(lookup),)
    )
    env = RunEnv(
        execution_id="exe_bench",
        root_run_id="run_01JD0000000000000000000000",
        workspace=workspace,
        ids=DerivedIds("bench", ms=1_764_403_200_000),
    )
    loop = AgentLoop(agent, journal, env, model=script(steps), limits=Limits(max_steps=steps + 5))
    t0 = time.perf_counter()
    outcome = await loop.run("go")
    elapsed = time.perf_counter() - t0
    assert type(outcome).__name__ == "Completed", outcome
    return elapsed


async def plain(steps: int) -> float:
    agent = Agent(script(steps))
    agent.tool_plain(lookup)
    t0 = time.perf_counter()
    result = await agent.run("go", usage_limits=UsageLimits(request_limit=steps + 5))
    elapsed = time.perf_counter() - t0
    assert result.output == "done"
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {
        "plain Agent.run": [],
        "ours, in-memory": [],
        "ours, SQLite": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        await plain(5)  # warm imports and caches
        for r in range(args.repeat):
            rows["plain Agent.run"].append(await plain(args.steps))
            rows["ours, in-memory"].append(await ours(args.steps, InMemoryJournal(), ws))
            store, journal, _ = await claimed_journal(f"sqlite:///{tmp}/bench{r}.db")
            try:
                rows["ours, SQLite"].append(await ours(args.steps, journal, ws))
            finally:
                await store.close()
    base = statistics.median(rows["plain Agent.run"])
    print(f"{args.steps}-step scripted tool loop, median of {args.repeat} runs")
    for name, times in rows.items():
        med = statistics.median(times)
        print(
            f"  {name:18s} {med * 1000:8.1f} ms  {args.steps / med:8.0f} steps/s"
            f"  {med / base:5.2f}x"
        )
    print("goals: in-memory <= 1.30x, SQLite durable <= 2.00x")


if __name__ == "__main__":
    asyncio.run(main())
