"""One seed, start to verdict (shared by the test and benchmarks/sim.py)."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import shutil
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from opennua.runtime import AgentDefinition
from opennua.supervisor import _attempt
from opennua.supervisor._snapshot import Bound

from . import _loop
from ._invariants import check
from ._world import FAULTS, World

__all__ = ["FAULTS", "SeedResult", "fingerprint", "run_seed"]


@dataclass
class SeedResult:
    seed: int
    problems: list[str]
    fired: Counter[str]
    logs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    virtual_seconds: float = 0.0


def run_seed(seed: int, data_dir: Path, *, verbose: bool = False) -> SeedResult:
    """Run the world of `seed` and check it; never raises for what the world did."""
    quiet = logging.getLogger("opennua")
    level = quiet.level
    if not verbose:
        quiet.setLevel(logging.CRITICAL)  # crashes and fences are the point, not news
    # A world starts from nothing: files an earlier run of the seed left (workspaces, the
    # plugin cache) would change what this one does.
    shutil.rmtree(data_dir / f"seed{seed}", ignore_errors=True)
    world = World(seed, data_dir / f"seed{seed}")
    result = SeedResult(seed, [], world.fired)

    async def main() -> None:
        try:
            await world.run()
        finally:
            result.virtual_seconds = _loop_time()
        result.problems = await check(world)
        for session_id in world.sessions:
            result.logs[session_id] = await world.db.read(session_id, 0, 1_000_000)
        await world.db.close()

    # The cyclic collector runs when allocation counts say so, which differ between the
    # first run in a process (lazy imports, cold caches) and later ones; what it frees
    # (an async generator left by `break`, a weakref's callback) schedules callbacks, so
    # a collection mid-run would reorder the world. Collect before, not during. Freezing
    # what survives keeps the next collection to this seed's leftovers: a full collection
    # of every module and model in the process was half of each seed's time.
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        with mock.patch.object(_attempt, "agent_for", _the_worlds_agent):
            _loop.run(seed, main)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result.problems.append(f"the run raised {exc!r}")
        if verbose:
            traceback.print_exc()
    finally:
        gc.enable()
        quiet.setLevel(level)
    if verbose:
        print(f"seed {seed}: {world.config}")
        print(f"  faults fired: {dict(world.fired)}")
        for session_id, log in result.logs.items():
            print(f"  {session_id}: {len(log)} actions")
            for action in log:
                print(f"    {action['seq']:4} {action['type']} {action.get('intent_id') or ''}")
        for problem in result.problems:
            print(f"  PROBLEM: {problem}")
    return result


def fingerprint(seed: int, data_dir: Path) -> str:
    """What the world of `seed` did (its logs and its faults), as one digest."""
    result = run_seed(seed, data_dir)
    text = json.dumps([result.logs, sorted(result.fired.items())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


async def _the_worlds_agent(store: Any, base: AgentDefinition, *args: Any, **kwargs: Any) -> Bound:
    """The sim's one substitution: its supervisors run the world's agent (its `charge`
    tool is the side effect the invariants count) where a real one would build the
    session's plugin; sessions still resolve the built-in deployment through the Host.
    Without it every `charge` failed as an unknown tool: no approval was ever asked, so
    no answer raced and no deadline expired while a turn waited."""
    return Bound(base)


def _loop_time() -> float:
    import asyncio

    return asyncio.get_running_loop().time()
