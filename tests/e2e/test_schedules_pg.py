"""A per-second schedule on PostgreSQL with two supervisors (each runs a scheduler), one
killed with SIGKILL midway: every slot fires exactly once, by the fires log and by the
executions (issue 19). The 2-minute version is `benchmarks/automation.py --long`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from opennua.store import open_store
from tests._support.polling import wait_for

from ._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow]

RUN_SECONDS = 20.0


async def _facts(pg_url: str, data: Path, schedule_id: str):  # type: ignore[no-untyped-def]
    store = await open_store(pg_url, data_dir=data)
    try:
        fires = await store.list_fires(schedule_id, limit=10_000)
        lease = await store.get_scheduler_lease()
        executions = []
        for fire in fires:
            executions += await store.list_executions(fire.session_id)
        return fires, lease, executions
    finally:
        await store.close()


def _holder(pg_url: str, data: Path, servers: list[Server]) -> Server:
    async def owner() -> str | None:
        store = await open_store(pg_url, data_dir=data)
        try:
            lease = await store.get_scheduler_lease()
            return lease.owner if lease and lease.expires_at > time.time() else None
        finally:
            await store.close()

    def holding() -> Server | None:
        found = asyncio.run(owner()) or ""
        return next((s for s in servers if s.proc and f"_{s.proc.pid}_" in found), None)

    holder: Server = wait_for(holding, timeout=30)
    return holder


def test_two_schedulers_one_killed_fire_every_slot_once(tmp_path: Path, pg_url: str) -> None:
    host = Server(tmp_path, db=pg_url, role="host").start()
    supervisors = [Server(tmp_path, db=pg_url, role="supervisor").start() for _ in range(2)]
    try:
        with host.client() as http:
            created = http.post(
                "/v1/schedules",
                json={
                    "name": "every-second",
                    "cron": "* * * * * *",
                    "prompt": "tick {{ fire_time }}",
                },
            )
            assert created.status_code == 201, created.text
            schedule_id = created.json()["schedule_id"]
            started = time.monotonic()
            holder = _holder(pg_url, tmp_path, supervisors)
            time.sleep(RUN_SECONDS / 2)
            holder.kill9()  # mid-run: the other scheduler takes over when the lease expires
            survivor = next(s for s in supervisors if s is not holder)
            assert _holder(pg_url, tmp_path, [survivor]) is survivor
            time.sleep(max(0.0, RUN_SECONDS - (time.monotonic() - started)))
            paused = http.post(f"/v1/schedules/{schedule_id}/pause")
            assert paused.status_code == 200, paused.text
            time.sleep(1.5)  # a fire in flight when the pause landed commits or not
            runs = http.get(f"/v1/schedules/{schedule_id}/runs", params={"limit": 500}).json()
        fires, _, executions = asyncio.run(_facts(pg_url, tmp_path, schedule_id))
        slots = sorted(f.fire_at for f in fires)
        assert len(slots) >= RUN_SECONDS - 4, slots
        # Every slot from the first to the last, each once: none lost to the kill.
        assert slots == [slots[0] + i for i in range(len(slots))], slots
        assert {f.scheduler_id for f in fires} == {f.scheduler_id for f in fires} and len(
            {f.scheduler_id for f in fires}
        ) == 2  # both schedulers fired
        # One execution per slot, each naming its own slot as its trigger.
        fired = sorted(e.trigger["fire_time"] for e in executions)
        assert len(fired) == len(set(fired)) == len(slots)
        assert len(runs["runs"]) == len(slots)
    finally:
        for server in (*supervisors, host):
            server.stop()
