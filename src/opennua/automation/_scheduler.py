"""The scheduler: fires due schedules while it holds the one scheduler lease.

Runs beside the supervisor (every `nua serve` role that executes). Several may run on one
PostgreSQL; only the lease holder fires, and every fire is written in one unit with the
execution it starts, fenced by the lease's epoch and keyed by its slot: a scheduler that
lost the lease (paused, partitioned, killed) writes nothing, and a slot fires once even
if two schedulers overlap. A killed holder is replaced when its lease expires; the slots
it missed meanwhile are late, not missed, and still fire (see `_cron.plan`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from opennua.host import AutomatedRun, SessionHost
from opennua.protocol import Accepted, Rejected
from opennua.store import (
    AuthStore,
    AutomationStore,
    Fenced,
    FireRecord,
    RegistryStore,
    ScheduleRecord,
    SchedulerLease,
    StoreError,
    Transaction,
    WriteConflict,
)

from . import _cron, _runs
from ._template import TemplateError, render


class SchedulerStore(RegistryStore, AuthStore, AutomationStore, Protocol):
    """What the scheduler fires with: schedules and its lease, and whom a run runs as."""


log = logging.getLogger("opennua.automation")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slot_key(schedule_id: str, fire_at: float) -> str:
    """The idempotency key of a slot: the same for every scheduler, restart and retry."""
    return f"{schedule_id}@{fire_at:.0f}"


class Scheduler:
    def __init__(
        self,
        store: SchedulerStore,
        host: SessionHost,
        *,
        scheduler_id: str,
        ttl: float = 10.0,
        poll_interval: float = 0.1,
        grace: float = _cron.DEFAULT_GRACE,
        clock: Callable[[], float] = time.time,
        on_fire: Callable[[float], None] = lambda lag: None,
    ) -> None:
        self.store = store
        self.host = host
        self.scheduler_id = scheduler_id
        self.ttl = ttl
        self.poll = poll_interval
        self.grace = grace
        self.clock = clock
        self._on_fire = on_fire
        self._stopping = asyncio.Event()
        self.lease: SchedulerLease | None = None
        self.fired = 0

    async def run(self) -> None:
        """Until `shutdown()`: hold (or wait for) the lease and fire what is due."""
        while not self._stopping.is_set():
            try:
                self.lease = await self.store.acquire_scheduler_lease(
                    self.scheduler_id, self.clock(), self.ttl
                )
                if self.lease is not None:
                    await self.tick(self.lease)
            except Fenced:
                log.info("scheduler %s lost the lease", self.scheduler_id)
                self.lease = None
            except StoreError:
                log.warning("scheduler tick failed; retrying", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.poll)
        if self.lease is not None:
            with contextlib.suppress(StoreError):
                await self.store.release_scheduler_lease(self.lease)

    async def shutdown(self) -> None:
        """Stop after the current tick and hand the lease over at once. Idempotent."""
        self._stopping.set()

    async def tick(self, lease: SchedulerLease) -> int:
        """Decide every due slot once (a schedule late by several slots steps through
        them in order); returns how many fired. Raises `Fenced` once the lease is lost."""
        fired = 0
        for _ in range(_cron.MAX_CATCH_UP):
            now = self.clock()
            due = await self.store.due_schedules(now)
            if not due:
                break
            for schedule in due:
                fired += await self._step(schedule, lease, now)
        return fired

    async def _step(self, schedule: ScheduleRecord, lease: SchedulerLease, now: float) -> int:
        assert schedule.next_fire_at is not None
        due = schedule.next_fire_at
        try:
            plan = _cron.plan(schedule.cron, schedule.timezone, due, now, schedule.misfire)  # type: ignore[arg-type]
        except _cron.CronError as exc:
            log.warning("schedule %s: its cron no longer parses", schedule.schedule_id)
            await self._refuse(schedule, lease, due, due, None, "invalid_cron", str(exc))
            return 0
        if plan.fire is None:
            log.info("schedule %s: %d missed slots skipped", schedule.schedule_id, plan.skipped)
            await self.store.skip_slots(schedule.schedule_id, due, plan.next_fire_at, lease)
            return 0
        fire_at = plan.fire
        try:
            run = await self._run(schedule, lease, fire_at, due, plan.next_fire_at, now)
        except _runs.Unrunnable as exc:
            await self._refuse(
                schedule, lease, fire_at, due, plan.next_fire_at, exc.code, exc.detail
            )
            return 0
        except TemplateError as exc:
            await self._refuse(
                schedule, lease, fire_at, due, plan.next_fire_at, "template_error", str(exc)
            )
            return 0
        try:
            result = await self.host.start_automated(run)
        except WriteConflict:
            return 0  # the slot fired already (another scheduler's unit won): re-read
        if isinstance(result, Accepted):
            self.fired += 1
            self._on_fire(self.clock() - fire_at)
            return 1
        detail = result.message if isinstance(result, Rejected) else "refused by the Host"
        await self._refuse(schedule, lease, fire_at, due, plan.next_fire_at, result.code, detail)
        return 0

    async def _refuse(
        self,
        schedule: ScheduleRecord,
        lease: SchedulerLease,
        fire_at: float,
        due: float,
        next_fire_at: float | None,
        code: str,
        detail: str,
    ) -> None:
        """A slot that started nothing is a run with its reason (`nua schedule runs`
        shows it; it was only in the server log), and the schedule moves on."""
        log.warning("schedule %s: fire refused: %s: %s", schedule.schedule_id, code, detail)
        fire = self._fire(schedule, lease, fire_at, None, refused_code=code, refused_detail=detail)
        with contextlib.suppress(WriteConflict):  # the slot was decided meanwhile
            await self.store.record_refused_fire(fire, expected=due, next_fire_at=next_fire_at)

    def _fire(
        self,
        schedule: ScheduleRecord,
        lease: SchedulerLease,
        fire_at: float,
        started: tuple[str, str, str] | None,
        *,
        refused_code: str | None = None,
        refused_detail: str | None = None,
    ) -> FireRecord:
        """The record of a decided slot: the (session, turn, execution) it `started`, or
        None and why it was refused."""
        session_id, turn_id, execution_id = started or (None, None, None)
        return FireRecord(
            schedule_id=schedule.schedule_id,
            fire_at=fire_at,
            fired_at=self.clock(),
            session_id=session_id,
            turn_id=turn_id,
            execution_id=execution_id,
            scheduler_id=lease.owner,
            epoch=lease.epoch,
            refused_code=refused_code,
            refused_detail=refused_detail,
        )

    async def _run(
        self,
        schedule: ScheduleRecord,
        lease: SchedulerLease,
        fire_at: float,
        due: float,
        next_fire_at: float | None,
        now: float,
    ) -> AutomatedRun:
        principal_id, deployment = await _runs.resolve(
            self.store, schedule.workspace_id, schedule.deployment
        )
        fire_time = iso(fire_at)
        prompt = render(
            schedule.prompt,
            {
                "schedule": schedule.name,
                "fire_time": fire_time,
                "schedule_id": schedule.schedule_id,
            },
        )

        def record(tx: Transaction, session_id: str, turn_id: str, execution_id: str) -> None:
            fire = self._fire(schedule, lease, fire_at, (session_id, turn_id, execution_id))
            tx.record_fire(fire, expected=due, next_fire_at=next_fire_at)

        return AutomatedRun(
            key=slot_key(schedule.schedule_id, fire_at),
            client_id=schedule.schedule_id,
            workspace_id=schedule.workspace_id,
            deployment=schedule.deployment,
            principal_id=principal_id,
            trigger={
                "kind": "automation",
                "source": f"schedule:{schedule.schedule_id}@{fire_time}",
                "principal_id": schedule.created_by,
                "schedule_id": schedule.schedule_id,
                "fire_time": fire_time,
            },
            prompt=prompt,
            title=f"{schedule.name} · {fire_time}",
            session_id=schedule.session_id,
            grant=_runs.grant(principal_id, schedule.workspace_id, now),
            record=record,
            deployment_record=deployment,
        )
