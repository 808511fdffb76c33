"""Supervisors that share a data directory share each session's workspace on disk, and
fencing protects only the store. An attempt paused past its lease between reading the
last manifest and restoring it must not, when it wakes, restore that stale manifest over
the files the next attempt wrote and committed (the chaos run's `checks.log has 0 runs,
the log 1 completed`, issue 20)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from opennua.runtime import default_agent
from opennua.store import Claimed, Store, Won, open_store
from opennua.supervisor import AttemptConfig, AttemptRunner, execution_dir
from opennua.supervisor._workspace import WorkspaceLock
from tests._support.supervisor import EID, SID, accept, action, session_state


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")


def _runner(store: Store, claimed: Claimed, data: Path, ttl: float) -> AttemptRunner:
    config = AttemptConfig(
        supervisor_id=claimed.execution.owner or "sup", ttl=ttl, data_dir=data, clock=time.time
    )
    return AttemptRunner(store, default_agent("scripted:demo"), claimed, config)


async def _claim(store: Store, supervisor_id: str, now: float, ttl: float) -> Claimed:
    claimed = await store.claim(supervisor_id, now, ttl)
    assert claimed is not None and claimed.execution.execution_id == EID
    return claimed


async def _approve(store: Store) -> None:
    (request,) = await store.list_input_requests(SID, status="open")
    answer = {"outcome": "selected", "option_id": "allow_once"}
    resolved = action(
        "input_request.resolved",
        {**answer, "request_id": request.request_id, "answered_by": {"client_id": "cli_t"}},
        "answer",
    )
    async with store.transaction() as tx:
        resolving = tx.resolve_input(
            request.request_id, answer, "prn_o", "cli_t", time.time(), actions=[resolved]
        )
    won = resolving.value
    assert isinstance(won, Won)


def _paused(
    restore: Callable[[str], Awaitable[Any]], wake: asyncio.Event, at: asyncio.Event
) -> Any:
    """The restore of an attempt frozen (SIGSTOP) after it read which manifest to restore."""

    async def frozen(manifest: str) -> Any:
        at.set()
        await wake.wait()
        return await restore(manifest)

    return frozen


async def test_an_attempt_paused_past_its_lease_leaves_the_next_attempts_files(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        # Attempt 1 writes notes.md, commits it and parks on the shell command's approval.
        first = _runner(store, await _claim(store, "sup_a", time.time(), 5), tmp_path, 5)
        await first.run()
        assert (await store.get_execution(EID)).status == "waiting_input"
        await _approve(store)

        # Attempt 2 claims with a short lease, reads the last manifest, and freezes.
        zombie = _runner(store, await _claim(store, "sup_z", time.time(), 0.3), tmp_path, 0.3)
        wake, frozen = asyncio.Event(), asyncio.Event()
        zombie.workspace.restore = _paused(zombie.workspace.restore, wake, frozen)  # type: ignore[method-assign]
        zombie_run = asyncio.create_task(zombie.run())
        await asyncio.wait_for(frozen.wait(), 10)

        # Its lease lapses; attempt 3 claims. It may run the approved command and finish
        # the turn only once the frozen attempt can no longer touch the files.
        await asyncio.sleep(0.5)
        later = _runner(store, await _claim(store, "sup_b", time.time(), 5), tmp_path, 5)
        later_run = asyncio.create_task(later.run())
        await asyncio.wait({later_run}, timeout=2)
        wake.set()  # the frozen attempt wakes (SIGCONT)
        await asyncio.wait_for(asyncio.gather(zombie_run, later_run), 30)

        assert zombie.fenced
        execution = await store.get_execution(EID)
        assert execution.status == "completed" and execution.epoch == 3
        turn = (await session_state(store))["turns"][0]
        shell = next(c for c in turn["tool_calls"].values() if c["name"] == "shell")
        assert shell["status"] == "completed"
        # The approved command ran once, and its effect is still on the disk.
        checks = execution_dir(tmp_path, execution) / "checks.log"
        assert checks.read_text().splitlines() == ["5 lines"]


async def test_an_attempt_fenced_once_it_holds_the_workspace_lets_go_of_it(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        stale = _runner(store, await _claim(store, "sup_z", time.time(), 0.3), tmp_path, 0.3)
        await asyncio.sleep(0.5)
        later = await _claim(store, "sup_b", time.time(), 5)  # the stale lease lapsed
        await stale.run()  # takes the lock, finds itself fenced, stops
        assert stale.fenced
        # Were the lock still held, the live attempt would wait for it for ever.
        assert WorkspaceLock(tmp_path / "workspace-index" / f"{SID}.lock").try_acquire()
        assert later.epoch == stale.claimed.epoch + 1


async def test_an_attempt_frozen_past_its_lease_does_not_start_the_side_effect(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        first = _runner(store, await _claim(store, "sup_a", time.time(), 5), tmp_path, 5)
        await first.run()
        await _approve(store)
        resumed = _runner(store, await _claim(store, "sup_z", time.time(), 5), tmp_path, 5)
        # Frozen (SIGSTOP) past its lease while the commit that starts the approved
        # command was in flight: its clock jumps by a minute there.
        jump = [0.0]
        resumed.config.monotonic = lambda: time.monotonic() + jump[0]
        commit = resumed.journal.commit

        async def frozen_at_start(events: Any, checkpoints: Any, ledger: Any = ()) -> None:
            if any(op.op == "start" for op in ledger):
                jump[0] = 60.0
            await commit(events, checkpoints, ledger)

        resumed.journal.commit = frozen_at_start  # type: ignore[method-assign]
        await resumed.run()
        assert resumed.fenced
        (entry,) = [e for e in await store.get_ledger(EID) if e.status != "completed"]
        assert entry.status == "started"  # the next attempt reports it `unknown`
        checks = execution_dir(tmp_path, await store.get_execution(EID)) / "checks.log"
        assert not checks.exists(), "the command ran after the lease may have lapsed"
