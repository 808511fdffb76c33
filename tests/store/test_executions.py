"""Executions: claims, leases, fencing, ordering, deadlines, cancellation, checkpoints
and the tool-effect ledger. Time is a fake clock: nothing here sleeps."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from opennua.store import (
    Claimed,
    Execution,
    Fenced,
    InputRequestRecord,
    InvalidInput,
    Store,
    WriteConflict,
    open_store,
)

from .conftest import FakeClock, action, execution, one

TTL = 30.0


def SILENT(execution: Execution, expired: list[str]) -> list[dict[str, object]]:
    return []


async def _queued(store: Store, clock: FakeClock, *ids: str, session: str = "ses_a") -> None:
    await store.create_session(session, created_at=clock.now)
    for i, eid in enumerate(ids):
        await store.create_execution(execution(eid, session, clock.now + i))


async def test_claim_takes_the_oldest_and_records_an_attempt(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    claimed = await store.claim("sup_a", clock.now, TTL)
    assert isinstance(claimed, Claimed)
    assert (claimed.epoch, claimed.attempt) == (1, 1)
    assert claimed.attempt_id.startswith("att_")
    e = claimed.execution
    assert (e.status, e.owner, e.lease_expires_at) == ("running", "sup_a", clock.now + TTL)
    assert e.trigger == {"kind": "message", "principal_id": "prn_owner"}
    assert e.input == {"content": [{"type": "text", "text": "hello"}]}
    assert await store.claim("sup_b", clock.now, TTL) is None
    (attempt,) = await store.list_attempts("exe_1")
    assert (attempt.attempt_id, attempt.supervisor_id, attempt.epoch) == (
        claimed.attempt_id,
        "sup_a",
        1,
    )


async def test_an_executions_client_tools_are_what_every_claim_reads(
    store: Store, clock: FakeClock
) -> None:
    tools = [{"name": "pick_color", "description": "", "parameters": {"type": "object"}}]
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(
        replace(execution("exe_1", "ses_a", clock.now), client_tools=tools)
    )
    await store.create_execution(execution("exe_2", "ses_a", clock.now + 1))
    assert (await store.get_execution("exe_1")).client_tools == tools
    assert (await store.get_execution("exe_2")).client_tools is None
    claimed = await store.claim("sup_a", clock.now, TTL)
    assert claimed is not None and claimed.execution.client_tools == tools


async def test_two_claimers_one_wins(store: Store, clock: FakeClock) -> None:
    await _queued(store, clock, "exe_1")
    results = await asyncio.gather(*(store.claim(f"sup_{i}", clock.now, TTL) for i in range(2)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert len(await store.list_attempts("exe_1")) == 1


@pytest.mark.postgres
async def test_two_claiming_processes_one_wins(pg_url: str, clock: FakeClock) -> None:
    async with await open_store(pg_url) as a, await open_store(pg_url) as b:
        await _queued(a, clock, "exe_1")
        results = await asyncio.gather(
            *(s.claim(f"sup_{i}", clock.now, TTL) for i, s in enumerate([a, b, a, b]))
        )
        assert len([r for r in results if r is not None]) == 1


async def test_expired_lease_is_reclaimed_with_a_new_epoch_and_the_old_one_is_fenced(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    first = await store.claim("sup_a", clock.now, TTL)
    assert first is not None
    clock.advance(TTL / 3)
    lease = await store.heartbeat("exe_1", first.epoch, clock.now, TTL)
    assert lease.expires_at == clock.now + TTL and not lease.cancel_requested
    clock.advance(TTL - 1)
    assert await store.claim("sup_b", clock.now, TTL) is None  # renewed: still owned
    clock.advance(2)  # now past the renewed lease
    second = await store.claim("sup_b", clock.now, TTL)
    assert second is not None and (second.epoch, second.attempt) == (2, 2)
    with pytest.raises(Fenced) as caught:
        await store.heartbeat("exe_1", first.epoch, clock.now, TTL)
    assert (caught.value.epoch, caught.value.current_epoch) == (1, 2)
    assert [a.supervisor_id for a in await store.list_attempts("exe_1")] == ["sup_a", "sup_b"]


async def test_a_stale_epochs_fenced_unit_leaves_nothing_behind(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    stale = await store.claim("sup_a", clock.now, TTL)
    assert stale is not None
    clock.advance(TTL + 1)
    fresh = await store.claim("sup_b", clock.now, TTL)
    assert fresh is not None
    with pytest.raises(Fenced) as caught:
        async with store.fenced("exe_1", stale.epoch) as tx:
            tx.append("ses_a", [action("ses_a", 1)])
            tx.put_checkpoint_step(1, b"step one")
            tx.put_full_checkpoint(1, b"full")
            tx.ledger_start("call_1", idempotency_key="k1", now=clock.now)
            tx.finish("completed", now=clock.now)
    assert caught.value.current_epoch == fresh.epoch
    assert await store.read("ses_a") == []
    ckpt = await store.load_checkpoint("exe_1")
    assert ckpt.full is None and ckpt.steps == []
    assert await store.get_ledger("exe_1") == []
    assert (await store.get_execution("exe_1")).status == "running"
    # The current owner writes fine, and all of it lands together.
    async with store.fenced("exe_1", fresh.epoch, owner="sup_b") as tx:
        tx.append("ses_a", [action("ses_a", 1)])
        tx.put_checkpoint_step(1, b"step one")
    assert tx.seqs == {"ses_a": [1]}
    assert [s.payload for s in (await store.load_checkpoint("exe_1")).steps] == [b"step one"]


async def test_fence_checks_owner_and_status(store: Store, clock: FakeClock) -> None:
    await _queued(store, clock, "exe_1")
    claimed = await store.claim("sup_a", clock.now, TTL)
    assert claimed is not None
    with pytest.raises(Fenced):
        async with store.fenced("exe_1", claimed.epoch, owner="sup_impostor") as tx:
            tx.put_checkpoint_step(1, b"x")
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.finish("completed", result={"ok": True}, now=clock.now)
    done = await store.get_execution("exe_1")
    assert (done.status, done.result, done.owner, done.finished_at) == (
        "completed",
        {"ok": True},
        None,
        clock.now,
    )
    with pytest.raises(Fenced) as caught:  # a finished execution takes no more writes
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.put_checkpoint_step(2, b"late")
    assert caught.value.status == "completed"
    with pytest.raises(InvalidInput):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.finish("running")


async def test_release_requeues_for_an_immediate_claim(store: Store, clock: FakeClock) -> None:
    await _queued(store, clock, "exe_1")
    first = await store.claim("sup_a", clock.now, TTL)
    assert first is not None
    await store.release("exe_1", first.epoch)
    second = await store.claim("sup_b", clock.now, TTL)  # no waiting for the lease
    assert second is not None and second.epoch == 2
    with pytest.raises(Fenced):
        await store.release("exe_1", first.epoch)


async def test_a_session_runs_its_turns_one_at_a_time_in_order(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1", "exe_2", session="ses_a")
    await _queued(store, clock, "exe_3", session="ses_b")
    one = await store.claim("sup", clock.now, TTL)
    other = await store.claim("sup", clock.now, TTL)
    assert one and other
    assert (one.execution.execution_id, other.execution.execution_id) == ("exe_1", "exe_3")
    assert await store.claim("sup", clock.now, TTL) is None  # exe_2 waits behind exe_1
    # Waiting for input still blocks the turn behind it.
    async with store.fenced("exe_1", one.epoch) as tx:
        tx.park_for_input()
    assert (await store.get_execution("exe_1")).status == "waiting_input"
    assert await store.claim("sup", clock.now, TTL) is None

    async def active() -> list[str]:
        return [e.execution_id for e in await store.list_executions("ses_a", active=True)]

    assert await active() == ["exe_1", "exe_2"]  # waiting and queued, in order
    # Cancelling re-queues the parked execution so a supervisor can wind it down.
    cancelled = await store.request_cancel("exe_1")
    assert (cancelled.status, cancelled.cancel_requested) == ("queued", True)
    again = await store.claim("sup", clock.now, TTL)
    assert again and again.execution.execution_id == "exe_1" and again.execution.cancel_requested
    lease = await store.heartbeat("exe_1", again.epoch, clock.now, TTL)
    assert lease.cancel_requested
    async with store.fenced("exe_1", again.epoch) as tx:
        tx.finish("cancelled", now=clock.now)
    nxt = await store.claim("sup", clock.now, TTL)
    assert nxt and nxt.execution.execution_id == "exe_2"
    assert [e.execution_id for e in await store.list_executions("ses_a")] == ["exe_1", "exe_2"]
    assert await active() == ["exe_2"]  # exe_1 ended
    async with store.fenced("exe_2", nxt.epoch) as tx:
        tx.finish("completed", now=clock.now)
    assert await active() == []
    assert len(await store.list_executions("ses_a")) == 2


async def test_a_cancel_requested_while_running_is_not_stranded_by_parking(
    store: Store, clock: FakeClock
) -> None:
    # The cancel lands between two heartbeats; the attempt then opens a request and parks
    # before it sees the flag. Parked, nobody would run it: it is queued to be wound down.
    await _queued(store, clock, "exe_1", session="ses_a")
    one = await store.claim("sup", clock.now, TTL)
    assert one
    running = await store.request_cancel("exe_1")
    assert (running.status, running.cancel_requested) == ("running", True)
    async with store.fenced("exe_1", one.epoch) as tx:
        tx.park_for_input()
    assert (await store.get_execution("exe_1")).status == "queued"
    again = await store.claim("sup", clock.now, TTL)
    assert again and again.execution.execution_id == "exe_1" and again.execution.cancel_requested


async def test_deadline_sweep_ends_queued_running_and_waiting_executions(
    store: Store, clock: FakeClock
) -> None:
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_session("ses_b", created_at=clock.now)
    await store.create_session("ses_c", created_at=clock.now)
    await store.create_execution(
        execution("exe_run", "ses_a", clock.now, deadline_at=clock.now + 60)
    )
    await store.create_execution(
        execution("exe_wait", "ses_b", clock.now + 1, deadline_at=clock.now + 60)
    )
    await store.create_execution(
        execution("exe_late", "ses_c", clock.now + 2, deadline_at=clock.now + 5)
    )
    run = await store.claim("sup", clock.now, TTL)
    wait = await store.claim("sup", clock.now, TTL)
    assert run and wait and wait.execution.execution_id == "exe_wait"
    async with store.fenced("exe_wait", wait.epoch) as tx:
        tx.open_input_request(
            InputRequestRecord(
                request_id="req_1",
                session_id="ses_b",
                execution_id="exe_wait",
                turn_id="trn_exe_wait",
                status="open",
                payload={"prompt": "ok?"},
                created_at=clock.now,
            )
        )
        tx.park_for_input()
    clock.advance(10)
    # Past its deadline, exe_late is never handed out as runnable...
    assert await store.claim("sup", clock.now, TTL) is None
    # ...the sweeper ends it, and nothing else yet.
    swept = await store.sweep_deadlines(clock.now, SILENT)
    assert [e.execution_id for e, _ in swept] == ["exe_late"]
    clock.advance(60)
    ended = await store.sweep_deadlines(clock.now, SILENT)
    assert [(e.execution_id, e.status) for e, _ in ended] == [
        ("exe_run", "deadline_exceeded"),
        ("exe_wait", "deadline_exceeded"),
    ]
    assert (await store.get_input_request("req_1")).status == "expired"
    with pytest.raises(Fenced):
        await store.heartbeat("exe_run", run.epoch, clock.now, TTL)
    assert await store.sweep_deadlines(clock.now, SILENT) == []


async def _claimed_with_a_deadline(store: Store, clock: FakeClock) -> Claimed:
    """exe_1 of ses_a, due 5 s from now, claimed by `sup`."""
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(execution("exe_1", "ses_a", clock.now, deadline_at=clock.now + 5))
    claimed = await store.claim("sup", clock.now, TTL)
    assert claimed is not None
    return claimed


async def test_the_sweep_commits_the_end_with_what_it_tells_the_session(
    store: Store, clock: FakeClock
) -> None:
    claimed = await _claimed_with_a_deadline(store, clock)
    async with store.fenced("exe_1", claimed.epoch) as tx:
        for n in (2, 1):
            tx.open_input_request(
                InputRequestRecord(
                    request_id=f"req_{n}",
                    session_id="ses_a",
                    execution_id="exe_1",
                    turn_id="trn_exe_1",
                    status="open",
                    payload={"prompt": "ok?"},
                    created_at=clock.now + 2 - n,
                )
            )
        tx.park_for_input()
    clock.advance(10)
    told: list[list[str]] = []

    def broken(e: Execution, expired: list[str]) -> list[dict[str, object]]:
        told.append(expired)
        return [{"id": "", "type": "turn.ended"}]

    # What the session is told cannot be written: the execution does not end either.
    with pytest.raises(InvalidInput):
        await store.sweep_deadlines(clock.now, broken)
    assert (await store.get_execution("exe_1")).status == "waiting_input"
    assert (await store.get_input_request("req_1")).status == "open"

    def narrate(e: Execution, expired: list[str]) -> list[dict[str, object]]:
        told.append(expired)
        return [action(e.session_id, 1, kind="turn.ended")]

    swept = await store.sweep_deadlines(clock.now, narrate)
    assert told == [["req_2", "req_1"], ["req_2", "req_1"]]
    [(ended, seqs)] = swept
    assert ended.status == "deadline_exceeded"
    assert [(a["seq"], a["id"]) for a in await store.read("ses_a")] == [
        (seqs[0], "act_ses_a_000001")
    ]


async def test_the_sweep_leaves_a_live_attempt_to_stop_itself(
    store: Store, clock: FakeClock
) -> None:
    claimed = await _claimed_with_a_deadline(store, clock)
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.ledger_start("call_1", now=clock.now)
    clock.advance(10)
    # Past the deadline but the lease holds: the attempt's heartbeat winds it down and
    # records its running call; the sweep must not end it behind its back.
    assert await store.sweep_deadlines(clock.now, SILENT) == []
    await store.heartbeat("exe_1", claimed.epoch, clock.now, TTL)
    clock.advance(TTL + 1)
    # The attempt died: now the sweep ends it, and the call it started is `unknown`.
    swept = await store.sweep_deadlines(clock.now, SILENT)
    assert [e.execution_id for e, _ in swept] == ["exe_1"]
    assert [(e.tool_call_id, e.status) for e in await store.get_ledger("exe_1")] == [
        ("call_1", "unknown")
    ]


async def test_an_execution_ended_with_a_call_still_started_reports_it_unknown(
    store: Store, clock: FakeClock
) -> None:
    """Found by the simulation (issue 20, a revoked grant): an attempt began a call and
    died; the next one found the grant revoked at claim and ended the turn without running
    it, leaving the call `started` for ever. Every way an execution ends says `unknown`."""
    await store.create_session("ses_a", created_at=clock.now)
    for name in ("exe_fin", "exe_parked"):
        await store.create_execution(execution(name, "ses_a", clock.now))
        claimed = await store.claim("sup", clock.now, TTL)
        assert claimed is not None and claimed.execution.execution_id == name
        async with store.fenced(name, claimed.epoch) as tx:
            tx.ledger_start("call_a", now=clock.now)
            tx.ledger_start("call_b", now=clock.now)
            tx.ledger_complete("call_b", result="done", now=clock.now)
            if name == "exe_parked":
                tx.park_for_input()
        if name == "exe_fin":
            async with store.fenced(name, claimed.epoch) as tx:
                tx.finish("revoked", error={"code": "grant_revoked"}, now=clock.now)
        else:
            ended = await one(store).end_unowned(
                name, "revoked", error=None, now=clock.now, actions=[]
            )
            assert ended is not None
        ledger = {(e.tool_call_id, e.status) for e in await store.get_ledger(name)}
        assert ledger == {("call_a", "unknown"), ("call_b", "completed")}, name


async def test_checkpoints_are_append_only_and_load_from_the_latest_full_one(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    claimed = await store.claim("sup", clock.now, TTL)
    assert claimed is not None
    for step in range(1, 6):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.put_checkpoint_step(step, f"step {step}".encode())
            if step == 3:
                tx.put_full_checkpoint(3, b"state after 3")
    loaded = await store.load_checkpoint("exe_1")
    assert loaded.full is not None and loaded.full.payload == b"state after 3"
    assert [(s.step_no, s.payload) for s in loaded.steps] == [(4, b"step 4"), (5, b"step 5")]
    with pytest.raises(WriteConflict):  # history is never rewritten
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.put_checkpoint_step(5, b"other")
    assert (await store.load_checkpoint("exe_1")).steps[-1].payload == b"step 5"


async def _stored_checkpoints(url: str, execution_id: str) -> tuple[list[int], list[int]]:
    """(full step numbers, step-record numbers) as rows in the database, behind the API."""
    queries = [
        f"SELECT step_no FROM {table} WHERE execution_id = '{execution_id}' ORDER BY step_no"
        for table in ("checkpoints", "checkpoint_steps")
    ]
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            fulls, steps = ([r[0] for r in db.execute(q)] for q in queries)
        return fulls, steps
    async with await psycopg.AsyncConnection.connect(url) as conn:
        out = []
        for q in queries:
            cur = await conn.execute(q)  # type: ignore[arg-type]
            out.append([r[0] for r in await cur.fetchall()])
        return out[0], out[1]


@pytest.mark.on_disk
async def test_a_full_checkpoint_prunes_what_it_supersedes(
    store: Store, store_url: str, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    claimed = await store.claim("sup", clock.now, TTL)
    assert claimed is not None
    for step in range(1, 8):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.put_checkpoint_step(step, f"step {step}".encode())
            if step in (3, 6):
                tx.put_full_checkpoint(step, f"state after {step}".encode())
                tx.prune_checkpoints(step)
    assert await _stored_checkpoints(store_url, "exe_1") == ([6], [7])
    loaded = await store.load_checkpoint("exe_1")
    assert loaded.full is not None and loaded.full.payload == b"state after 6"
    assert [(s.step_no, s.payload) for s in loaded.steps] == [(7, b"step 7")]
    # A stale attempt prunes nothing: the unit is fenced like any other.
    newer = await store.claim("sup2", clock.advance(TTL + 1), TTL)
    assert newer is not None
    with pytest.raises(Fenced):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.put_full_checkpoint(8, b"stale")
            tx.prune_checkpoints(8)
    assert await _stored_checkpoints(store_url, "exe_1") == ([6], [7])


async def test_tool_ledger_moves_started_completed_unknown(store: Store, clock: FakeClock) -> None:
    await _queued(store, clock, "exe_1")
    c = await store.claim("sup", clock.now, TTL)
    assert c is not None
    async with store.fenced("exe_1", c.epoch) as tx:
        tx.ledger_start("call_a", idempotency_key="idem_a", now=clock.now)
        tx.ledger_start("call_b", now=clock.now)
    async with store.fenced("exe_1", c.epoch) as tx:
        tx.ledger_complete("call_a", result={"rows": 3}, now=clock.now)
        tx.ledger_mark_unknown("call_b", now=clock.now)
    ledger = {e.tool_call_id: e for e in await store.get_ledger("exe_1")}
    assert (ledger["call_a"].status, ledger["call_a"].result) == ("completed", {"rows": 3})
    assert ledger["call_a"].idempotency_key == "idem_a"
    assert ledger["call_b"].status == "unknown"
    with pytest.raises(WriteConflict):  # a completed side effect is never restarted
        async with store.fenced("exe_1", c.epoch) as tx:
            tx.ledger_start("call_a", now=clock.now)
    async with store.fenced("exe_1", c.epoch) as tx:  # an idempotent re-run may restart
        tx.ledger_start("call_b", idempotency_key="idem_b", now=clock.now)
    assert {e.tool_call_id: e.status for e in await store.get_ledger("exe_1")} == {
        "call_a": "completed",
        "call_b": "started",
    }


async def test_a_call_that_ran_within_one_unit_is_recorded_completed_at_once(
    store: Store, clock: FakeClock
) -> None:
    await _queued(store, clock, "exe_1")
    c = await store.claim("sup", clock.now, TTL)
    assert c is not None
    async with store.fenced("exe_1", c.epoch) as tx:
        tx.ledger_ran("call_a", now=clock.now)
        tx.ledger_start("call_b", now=clock.now)
    async with store.fenced("exe_1", c.epoch) as tx:  # a started call re-run after a resume
        tx.ledger_ran("call_b", now=clock.now)
    assert {e.tool_call_id: e.status for e in await store.get_ledger("exe_1")} == {
        "call_a": "completed",
        "call_b": "completed",
    }
    for call in ("call_a", "call_b"):  # a completed side effect never runs again
        with pytest.raises(WriteConflict):
            async with store.fenced("exe_1", c.epoch) as tx:
                tx.ledger_ran(call, now=clock.now)


async def test_store_survives_reopen(tmp_path: Path, clock: FakeClock) -> None:
    url = f"sqlite:///{tmp_path}/nua.db"
    async with await open_store(url) as s:
        await _queued(s, clock, "exe_1")
        await s.append("ses_a", [action("ses_a", 1)])
    async with await open_store(url) as s:
        assert [a["seq"] for a in await s.read("ses_a")] == [1]
        assert (await s.get_execution("exe_1")).status == "queued"


async def test_a_failing_unit_in_a_busy_batch_rolls_back_alone(
    store: Store, clock: FakeClock
) -> None:
    # Under load the SQLite writer commits many callers' units in one transaction; a
    # unit that is fenced or conflicts must vanish without taking its neighbours along.
    await _queued(store, clock, "exe_1")
    stale = await store.claim("sup_a", clock.now, TTL)
    assert stale is not None
    clock.advance(TTL + 1)
    assert await store.claim("sup_b", clock.now, TTL) is not None

    async def good(k: int) -> list[int]:
        return await store.append("ses_a", [action("ses_a", k)])

    async def fenced_out() -> None:
        async with store.fenced("exe_1", stale.epoch) as tx:
            tx.append("ses_a", [action("ses_a", 999)])
            tx.put_checkpoint_step(1, b"stale")

    async def conflicting() -> None:
        async with store.transaction() as tx:
            tx.append("ses_a", [action("ses_a", 998)])
            tx.create_execution(execution("exe_1", "ses_a", clock.now))

    jobs = (
        [good(k) for k in range(20)]
        + [fenced_out(), conflicting()]
        + [good(k) for k in range(20, 40)]
    )
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(results[20], Fenced) and isinstance(results[21], WriteConflict)
    log = await store.read("ses_a")
    assert sorted(a["id"] for a in log) == sorted(action("ses_a", k)["id"] for k in range(40))
    assert [a["seq"] for a in log] == list(range(1, 41))
    assert (await store.load_checkpoint("exe_1")).steps == []
