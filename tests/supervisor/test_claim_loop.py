"""The claim loop survives a claim that fails or whose outcome is unknown (found by the
simulation, issue 20: one lost COMMIT acknowledgement ended `Supervisor.run`)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from opennua.runtime import AgentDefinition, Sandbox
from opennua.runtime.testing import ScriptedModel, say
from opennua.store import open_store
from opennua.store._executions import TERMINAL_STATUSES, Claim
from tests._support.supervisor import make_supervisor
from tests.store.conftest import execution


async def test_a_claim_whose_outcome_is_unknown_does_not_end_the_claim_loop(
    tmp_path: Path,
) -> None:
    store: Any = await open_store("memory:", data_dir=tmp_path)
    async with store:
        lost: list[object] = []

        def faults(unit: Any) -> str | None:
            if not lost and any(isinstance(op, Claim) for op in unit.ops):
                lost.append(unit)
                return "unknown"  # it commits; the supervisor is never told
            return None

        store.faults = faults
        now = time.time()
        await store.create_session("ses_a", created_at=now)
        await store.create_execution(execution("exe_1", "ses_a", now, deadline_at=now + 60))
        agent = AgentDefinition(name="t", instructions="", model="scripted:t", tools=())
        supervisor = make_supervisor(
            store,
            tmp_path,
            agent,
            ttl=0.3,
            model=ScriptedModel([say("done")]),
            sandbox=Sandbox("none"),
        )
        runner = asyncio.create_task(supervisor.run())
        try:
            async with asyncio.timeout(10):
                # The lost claim's lease runs out; the same loop claims the execution again.
                while len(await store.list_attempts("exe_1")) < 2:
                    assert not runner.done(), runner  # the loop must not have ended
                    await asyncio.sleep(0.05)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        assert lost, "the fault never fired"
        assert [a.attempt for a in await store.list_attempts("exe_1")] == [1, 2]


async def test_an_attempt_that_loses_the_store_stops_and_a_later_one_finishes(
    tmp_path: Path,
) -> None:
    """Found by the chaos run (issue 20): a PostgreSQL restart under a running attempt
    ended its execution `failed: internal_error`. The store being unavailable is not the
    execution's failure: the attempt stops, its lease lapses, the next attempt finishes."""
    store: Any = await open_store("memory:", data_dir=tmp_path)
    async with store:
        failed: list[object] = []

        def faults(unit: Any) -> str | None:
            if not failed and unit.fence is not None:  # the attempt's first fenced write
                failed.append(unit)
                return "unavailable"
            return None

        store.faults = faults
        now = time.time()
        await store.create_session("ses_a", created_at=now)
        # No snapshot: the supervisor runs its base agent (a session made in the store).
        queued = execution("exe_1", "ses_a", now, deadline_at=now + 60)
        await store.create_execution(dataclasses.replace(queued, snapshot_digest=None))
        agent = AgentDefinition(name="t", instructions="", model="scripted:t", tools=())
        supervisor = make_supervisor(
            store,
            tmp_path,
            agent,
            ttl=0.3,
            model=ScriptedModel([say("done")]),
            sandbox=Sandbox("none"),
        )
        runner = asyncio.create_task(supervisor.run())
        try:
            async with asyncio.timeout(10):
                while (await store.get_execution("exe_1")).status not in TERMINAL_STATUSES:
                    await asyncio.sleep(0.05)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        assert failed, "the fault never fired"
        final = await store.get_execution("exe_1")
        assert final.status == "completed", final
        assert [a.attempt for a in await store.list_attempts("exe_1")] == [1, 2]
