"""Schedules: slots, misfire policy, one fire per slot, the trigger on the execution and
the principal it runs as. A fake clock drives the scheduler's ticks (no sleeping)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from opennua.auth import Authority
from opennua.automation import AutomationError, Scheduler, ScheduleSpec, plan, slot_key
from opennua.host import Actor, DeploymentSpec
from opennua.protocol import CreateSession
from opennua.server._automation import _run
from opennua.store import Fenced, MembershipRecord, PrincipalRecord, WriteConflict

from .conftest import World, world

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, a whole minute


def _spec(**kw: object) -> ScheduleSpec:
    base = {"name": "nightly", "cron": "* * * * *", "deployment": "default",
            "prompt": "report for {{ fire_time }}"}  # fmt: skip
    return ScheduleSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_misfire_policies_decide_missed_slots() -> None:
    # Down for ten minutes: five-minute slots at +0 and +5 were missed, +10 is due now.
    late = plan("*/5 * * * *", "UTC", T0, T0 + 600 + 1, "skip")
    assert late.fire is None and late.skipped == 2 and late.next_fire_at == T0 + 600
    assert plan("*/5 * * * *", "UTC", T0 + 600, T0 + 601, "skip").fire == T0 + 600
    assert plan("*/5 * * * *", "UTC", T0, T0 + 599, "skip").fire is None
    once = plan("*/5 * * * *", "UTC", T0, T0 + 599, "run_once")
    assert once.fire == T0 + 300 and once.next_fire_at == T0 + 600
    # Within the grace a late slot still fires, and the next one follows it.
    assert plan("*/5 * * * *", "UTC", T0, T0 + 30, "skip").fire == T0


def test_a_time_zone_moves_the_slots() -> None:
    from opennua.automation import next_slot

    # 09:00 every day in Paris is 08:00 UTC in January.
    assert next_slot("0 9 * * *", "Europe/Paris", T0 - 1) == T0


async def test_each_slot_fires_once_with_its_trigger(any_world: World) -> None:
    w = any_world
    w.clock.now = T0 - 30
    schedule = await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    assert schedule.next_fire_at == T0
    scheduler = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 10)
    assert lease is not None
    assert await scheduler.tick(lease) == 0  # not due yet
    for minute in range(3):
        w.clock.now = T0 + 60 * minute + 0.5
        assert await scheduler.tick(lease) == 1
        assert await scheduler.tick(lease) == 0  # the same slot never twice
    runs = await w.automation.runs(schedule.schedule_id)
    assert [r.fire.fire_at for r in runs] == [T0 + 120, T0 + 60, T0]
    execution = await w.store.get_execution(runs[-1].fire.execution_id)
    assert execution.trigger["kind"] == "automation"
    assert execution.trigger["schedule_id"] == schedule.schedule_id
    assert execution.trigger["fire_time"] == "2027-01-15T08:00:00Z"
    assert execution.principal_id == w.owner_id
    assert execution.input[0]["text"] == "report for 2027-01-15T08:00:00Z"
    # Each fire made its own session, whose log says who caused the turn.
    sessions = {r.fire.session_id for r in runs}
    assert len(sessions) == 3
    started = [
        a for a in await w.store.read(runs[-1].fire.session_id) if a["type"] == "turn.started"
    ]
    assert started[0]["data"]["trigger"]["source"].startswith("schedule:")


async def test_a_retried_fire_writes_nothing(any_world: World) -> None:
    w = any_world
    w.clock.now = T0 - 1
    schedule = await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 10)
    assert lease is not None
    scheduler = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    w.clock.now = T0 + 0.2
    assert await scheduler.tick(lease) == 1
    # The same slot again (a scheduler that crashed after committing, then retried):
    # the slot's fire record voids the whole unit, session included.
    run = await scheduler._run(schedule, lease, T0, T0, T0 + 60, w.clock())
    assert run.key == slot_key(schedule.schedule_id, T0)
    before = len((await w.store.list_session_summaries()).items)
    with pytest.raises(WriteConflict):
        await w.host.start_automated(run)
    (first,) = [r.fire for r in await w.automation.runs(schedule.schedule_id)]
    assert len(await w.store.list_executions(first.session_id)) == 1
    assert len((await w.store.list_session_summaries()).items) == before


async def test_a_stale_scheduler_writes_nothing(any_world: World) -> None:
    w = any_world
    w.clock.now = T0 - 1
    schedule = await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    old = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 5)
    assert old is not None
    w.clock.now = T0 + 6  # sch-a's lease expired; sch-b takes it (epoch + 1)
    new = await w.store.acquire_scheduler_lease("sch-b", w.clock(), 5)
    assert new is not None and new.epoch == old.epoch + 1
    stale = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    with pytest.raises(Fenced):
        await stale.tick(old)
    assert await w.automation.runs(schedule.schedule_id) == []
    fresh = Scheduler(w.store, w.host, scheduler_id="sch-b", clock=w.clock)
    assert await fresh.tick(new) == 1
    assert (await w.automation.runs(schedule.schedule_id))[0].fire.scheduler_id == "sch-b"


async def test_pause_resume_and_misfire_after_downtime(any_world: World) -> None:
    w = any_world
    w.clock.now = T0 - 1
    skip = await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec(name="s"))
    once = await w.automation.create_schedule(
        w.workspace_id, w.owner_id, _spec(name="o", misfire="run_once")
    )
    lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 3600)
    assert lease is not None
    scheduler = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    w.clock.now = T0 + 3600 + 30  # an hour down; the slot at +3600 is 30 s late
    await scheduler.tick(lease)
    assert [r.fire.fire_at for r in await w.automation.runs(skip.schedule_id)] == [T0 + 3600]
    # run_once: the newest missed slot (+3540) once, then the late one (+3600).
    assert [r.fire.fire_at for r in await w.automation.runs(once.schedule_id)] == [
        T0 + 3600,
        T0 + 3540,
    ]
    await w.automation.pause(skip.schedule_id)
    w.clock.now = T0 + 3600 + 150
    await scheduler.tick(lease)
    assert len(await w.automation.runs(skip.schedule_id)) == 1
    resumed = await w.automation.resume(skip.schedule_id)
    assert resumed.next_fire_at == T0 + 3600 + 180  # the next slot after now: no catch-up


async def test_bad_schedules_are_refused(any_world: World) -> None:
    w = any_world
    for spec, code in [
        (_spec(cron="every day"), "invalid_schedule"),
        (_spec(timezone="Mars/Olympus"), "invalid_schedule"),
        (_spec(prompt="{{ payload.x }}"), "invalid_schedule"),
        (_spec(deployment="nope"), "not_found"),
        (_spec(session_id="ses_nope"), "not_found"),
    ]:
        with pytest.raises(AutomationError) as caught:
            await w.automation.create_schedule(w.workspace_id, w.owner_id, spec)
        assert caught.value.code == code
    await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    with pytest.raises(AutomationError) as dup:
        await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    assert dup.value.code == "already_exists"


async def test_the_trigger_cannot_escalate(tmp_path: Path) -> None:
    """The owner makes a schedule on a deployment whose principal is a viewer agent: the
    turn runs as that viewer, and its grant (checked at claim) does not hold."""
    async with world(f"sqlite:///{tmp_path}/nua.db", tmp_path) as w:
        w.clock.now = T0 - 1
        agent = PrincipalRecord(
            principal_id="prn_viewer_bot", kind="agent", name="bot",
            workspace_id=w.workspace_id, created_by=w.owner_id, created_at=w.clock(),
        )  # fmt: skip
        await w.store.create_principal(
            agent,
            memberships=[
                MembershipRecord(
                    workspace_id=w.workspace_id,
                    principal_id=agent.principal_id,
                    role="viewer",
                    created_at=w.clock(),
                )
            ],
        )
        default = await w.store.get_deployment("default")
        spec = DeploymentSpec.model_validate({**default.spec, "principal_id": "prn_viewer_bot"})
        await w.host.registry.deploy("lowly", spec)
        schedule = await w.automation.create_schedule(
            w.workspace_id, w.owner_id, _spec(deployment="lowly")
        )
        lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 10)
        assert lease is not None
        w.clock.now = T0 + 0.1
        await Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock).tick(lease)
        (run,) = await w.automation.runs(schedule.schedule_id)
        execution = await w.store.get_execution(run.fire.execution_id)
        assert execution.principal_id == "prn_viewer_bot"  # not the schedule's creator
        assert execution.trigger["principal_id"] == w.owner_id  # recorded, grants nothing
        authority = Authority(w.store, clock=w.clock)
        assert await authority.grant_problem(execution.execution_id) == "membership_removed"


async def test_a_bound_schedule_continues_its_session(any_world: World) -> None:
    w = any_world
    w.clock.now = T0 - 1
    created = await w.host.submit(
        None,
        CreateSession(intent_id="int_bound", client_id="cli_t", title="daily standup"),
        actor=Actor(w.owner_id, w.workspace_id),
    )
    session_id = created.ids["session_id"]  # type: ignore[union-attr]
    schedule = await w.automation.create_schedule(
        w.workspace_id, w.owner_id, _spec(session_id=session_id)
    )
    lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 600)
    assert lease is not None
    scheduler = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    for minute in range(2):
        w.clock.now = T0 + 60 * minute + 0.1
        assert await scheduler.tick(lease) == 1
    runs = await w.automation.runs(schedule.schedule_id)
    assert {r.fire.session_id for r in runs} == {session_id}
    # The second fire queued behind the first (enqueue), in the one session.
    executions = await w.store.list_executions(session_id)
    assert [e.trigger["fire_time"] for e in executions] == [
        "2027-01-15T08:00:00Z",
        "2027-01-15T08:01:00Z",
    ]


async def test_a_fire_that_cannot_start_is_a_run_with_its_reason(any_world: World) -> None:
    # Its deployment no longer resolves: every fire was refused, `nua schedule runs` said
    # "no runs yet" and the reason was only in the server log (issue 35).
    w = any_world
    w.clock.now = T0 - 1
    made = await w.automation.create_schedule(w.workspace_id, w.owner_id, _spec())
    orphan = dataclasses.replace(
        made, schedule_id="sch_orphan", name="orphan", deployment="gone", next_fire_at=T0
    )
    await w.store.create_schedule(orphan)
    lease = await w.store.acquire_scheduler_lease("sch-a", w.clock(), 3600)
    assert lease is not None
    scheduler = Scheduler(w.store, w.host, scheduler_id="sch-a", clock=w.clock)
    for minute in range(2):
        w.clock.now = T0 + 60 * minute + 0.5
        await scheduler.tick(lease)
    runs = await w.automation.runs("sch_orphan")
    assert [(r.fire.fire_at, r.status, r.fire.refused_code) for r in runs] == [
        (T0 + 60, "refused", "not_found"),
        (T0, "refused", "not_found"),
    ]
    assert runs[0].fire.session_id is None and "'gone'" in (runs[0].fire.refused_detail or "")
    assert (await w.store.get_schedule("sch_orphan")).next_fire_at == T0 + 120
    shown = _run(runs[0])  # what GET /v1/schedules/{id}/runs answers
    assert shown["status"] == "refused" and shown["session_id"] is None
    assert shown["error"]["code"] == "not_found" and "gone" in shown["error"]["message"]
    # The healthy schedule beside it fired both slots.
    assert [r.status for r in await w.automation.runs(made.schedule_id)] == ["queued", "queued"]
