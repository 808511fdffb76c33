"""Human input (first writer wins), idempotency records, artifact metadata."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from opennua.store import (
    ArtifactRecord,
    Claimed,
    InFlight,
    InputRequestRecord,
    Lost,
    Mismatch,
    New,
    NotFound,
    Replay,
    SessionBusy,
    Store,
    Won,
    WriteConflict,
    open_store,
)

from .conftest import FakeClock, action, execution, one

TTL = 30.0


async def _parked(store: Store, clock: FakeClock, *, expires_at: float | None = None) -> None:
    """exe_1 of ses_a asked a question (req_1) and is waiting for the answer."""
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(execution("exe_1", "ses_a", clock.now))
    claimed = await store.claim("sup", clock.now, TTL)
    assert claimed is not None
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.append("ses_a", [action("ses_a", 1, kind="input_request.opened")])
        tx.open_input_request(
            InputRequestRecord(
                request_id="req_1",
                session_id="ses_a",
                execution_id="exe_1",
                turn_id="trn_exe_1",
                tool_call_id="call_1",
                status="open",
                payload={"prompt": "Delete it?", "options": ["allow_once", "reject_once"]},
                created_at=clock.now,
                expires_at=expires_at,
            )
        )
        tx.park_for_input()


async def _asked(store: Store, clock: FakeClock) -> Claimed:
    """exe_1 of ses_a, claimed, has just opened req_1 (its park has not committed)."""
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(execution("exe_1", "ses_a", clock.now))
    claimed = await store.claim("sup", clock.now, TTL)
    assert claimed is not None
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.open_input_request(
            InputRequestRecord(
                request_id="req_1",
                session_id="ses_a",
                execution_id="exe_1",
                turn_id="trn_exe_1",
                tool_call_id="call_1",
                status="open",
                payload={"prompt": "Run it?", "options": ["allow_once"]},
                created_at=clock.now,
            )
        )
    return claimed


async def test_twenty_concurrent_resolvers_exactly_one_wins(store: Store, clock: FakeClock) -> None:
    await _parked(store, clock)

    async def answer(i: int) -> Won | Lost:
        resolved = action("ses_a", 100 + i, kind="input_request.resolved")
        return await one(store).resolve_input(
            "req_1",
            {"outcome": "selected", "option_id": f"opt_{i}"},
            f"prn_{i}",
            f"cli_{i}",
            clock.now,
            actions=[resolved],
        )

    results = await asyncio.gather(*(answer(i) for i in range(20)))
    won = [r for r in results if isinstance(r, Won)]
    lost = [r for r in results if isinstance(r, Lost)]
    assert len(won) == 1 and len(lost) == 19
    assert {(r.status, str(r.resolution)) for r in lost} == {("resolved", str(won[0].resolution))}
    winner = won[0].resolution["option_id"].removeprefix("opt_")
    assert {(r.answered_by_principal, r.answered_by_client) for r in lost} == {
        (f"prn_{winner}", f"cli_{winner}")
    }
    # Exactly one input_request.resolved was appended: the winner's.
    log = await store.read("ses_a")
    assert [a["type"] for a in log] == ["input_request.opened", "input_request.resolved"]
    assert log[1]["id"] == action("ses_a", 100 + int(winner))["id"]
    # Re-queued exactly once, and claimable to resume.
    e = await store.get_execution("exe_1")
    assert (e.status, e.epoch) == ("queued", 1)
    resumed = await store.claim("sup", clock.now, TTL)
    assert resumed is not None and resumed.epoch == 2
    req = await store.get_input_request("req_1")
    assert (req.status, req.answered_by_client, req.tool_call_id) == (
        "resolved",
        f"cli_{winner}",
        "call_1",
    )


async def test_an_answer_that_wins_before_the_park_leaves_the_execution_queued(
    store: Store, clock: FakeClock
) -> None:
    """Found by benchmarks/scale.py (issue 20): a fast client answered between the unit
    that opened the request and the one that parks; the answer's re-queue saw a running
    execution, the park then made it wait for a request already resolved: stuck."""
    claimed = await _asked(store, clock)
    won = await one(store).resolve_input(
        "req_1", {"option_id": "allow_once"}, "prn", "cli", clock.now
    )
    assert isinstance(won, Won)
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.park_for_input()
    assert (await store.get_execution("exe_1")).status == "queued"
    resumed = await store.claim("sup", clock.now, TTL)
    assert resumed is not None and resumed.epoch == claimed.epoch + 1


@pytest.mark.postgres
async def test_an_answer_committed_while_the_park_is_in_flight_queues_the_execution(
    pg_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """Found by benchmarks/scale.py on PostgreSQL: the park unit holds the execution's row
    (its fence) and has already evaluated "any request still open?" when the answer
    resolves the request and re-queues — which found a running execution and did nothing.
    The park then committed `waiting_input` for a resolved request: stuck for good. The
    answer must wait for the park's row lock, then re-queue what it parked."""
    async with await open_store(pg_url, data_dir=tmp_path / "data") as store:
        await _asked(store, clock)
        # The park, by hand so the answer can land between its statement and its COMMIT:
        # the fence's row lock, then the park's own UPDATE (it sees the request open).
        park = await psycopg.AsyncConnection.connect(pg_url)
        try:
            await park.execute("SELECT 1 FROM executions WHERE execution_id = 'exe_1' FOR UPDATE")
            await park.execute(
                "UPDATE executions SET status = CASE WHEN NOT EXISTS (SELECT 1 FROM "
                "input_requests WHERE execution_id = 'exe_1' AND status = 'open') "
                "THEN 'queued' ELSE 'waiting_input' END, owner = NULL, lease_expires_at = NULL "
                "WHERE execution_id = 'exe_1'"
            )
            answer = asyncio.create_task(
                one(store).resolve_input(
                    "req_1", {"option_id": "allow_once"}, "prn", "cli", clock.now
                )
            )
            await asyncio.sleep(0.5)  # the answer is sent and (without the lock) committed
            await park.commit()
        finally:
            await park.close()
        assert isinstance(await asyncio.wait_for(answer, 10), Won)
        assert (await store.get_execution("exe_1")).status == "queued"


async def test_expired_and_cancelled_requests_cannot_be_won(store: Store, clock: FakeClock) -> None:
    await _parked(store, clock, expires_at=clock.now + 60)
    clock.advance(61)
    late = await one(store).resolve_input("req_1", {"outcome": "answered"}, "prn", "cli", clock.now)
    assert isinstance(late, Lost) and late.status == "expired" and late.resolution is None
    expired = action("ses_a", 2, kind="input_request.resolved", outcome="expired")
    assert await one(store).expire_input("req_1", clock.now, actions=[expired]) is True
    assert await one(store).expire_input("req_1", clock.now) is False
    assert (await store.get_execution("exe_1")).status == "queued"  # goes on without an answer
    assert [a["type"] for a in await store.read("ses_a")][-1] == "input_request.resolved"
    assert await one(store).cancel_input("req_1", clock.now) is False
    with pytest.raises(NotFound):
        await one(store).resolve_input("req_nope", {}, "prn", "cli", clock.now)
    listed = await store.list_input_requests("ses_a", status="expired")
    assert [r.request_id for r in listed] == ["req_1"]


async def test_cancel_input_keeps_the_execution_parked(store: Store, clock: FakeClock) -> None:
    await _parked(store, clock)
    assert await one(store).cancel_input("req_1", clock.now) is True
    assert (await store.get_input_request("req_1")).status == "cancelled"
    assert (await store.get_execution("exe_1")).status == "waiting_input"
    lost = await one(store).resolve_input("req_1", {"outcome": "answered"}, "prn", "cli", clock.now)
    assert isinstance(lost, Lost) and lost.status == "cancelled"


async def test_concurrent_begin_with_one_key_gives_one_new(store: Store, clock: FakeClock) -> None:
    results = await asyncio.gather(
        *(store.begin("download_link", "nonce-1", "hash-a", clock.now) for _ in range(10))
    )
    assert sum(isinstance(r, New) for r in results) == 1
    assert sum(isinstance(r, InFlight) for r in results) == 9
    assert isinstance(await store.begin("download_link", "nonce-1", "hash-b", clock.now), Mismatch)
    # Another scope is another key space.
    assert isinstance(await store.begin("POST /other", "nonce-1", "hash-b", clock.now), New)


async def test_a_begun_key_is_held_for_its_whole_ttl(store: Store, clock: FakeClock) -> None:
    """A single-use nonce (a download link) stays used for the ttl it was claimed for;
    a lease of a minute let a used five-minute link be used again after one."""
    assert isinstance(await store.begin("s", "k", "h", clock.now, ttl=600), New)
    clock.advance(599)
    assert isinstance(await store.begin("s", "k", "h", clock.now, ttl=600), InFlight)
    clock.advance(2)
    assert isinstance(await store.begin("s", "k", "h", clock.now, ttl=600), New)


async def test_of_concurrent_units_claiming_one_key_one_commits(
    store: Store, clock: FakeClock
) -> None:
    await store.create_session("ses_a", created_at=clock.now)
    assert isinstance(await store.lookup_idempotency("msg", "k", "h", clock.now), New)

    async def accept(i: int) -> object:
        try:
            async with store.transaction() as tx:
                tx.claim_idempotency("msg", "k", "h", clock.now, {"by": i})
                tx.append("ses_a", [action("ses_a", 100 + i, kind="turn.started")])
        except WriteConflict as exc:
            return exc
        return i

    outcomes = await asyncio.gather(*(accept(i) for i in range(10)))
    winners = [o for o in outcomes if isinstance(o, int)]
    assert len(winners) == 1
    assert all(isinstance(o, WriteConflict) for o in outcomes if o not in winners)
    # A voided unit wrote nothing of its own: one action, the winner's.
    assert [a["seq"] for a in await store.read("ses_a")] == [1]
    assert await store.lookup_idempotency("msg", "k", "h", clock.now) == Replay({"by": winners[0]})
    assert isinstance(await store.lookup_idempotency("msg", "k", "h2", clock.now), Mismatch)
    assert isinstance(await store.lookup_idempotency("other", "k", "h2", clock.now), New)
    # Looking a key up takes nothing; after 24 h the record is as good as absent.
    clock.advance(24 * 3600 + 1)
    assert isinstance(await store.lookup_idempotency("msg", "k", "h2", clock.now), New)
    async with store.transaction() as tx:
        tx.claim_idempotency("msg", "k", "h2", clock.now, {"by": "later"})
    assert await store.lookup_idempotency("msg", "k", "h2", clock.now) == Replay({"by": "later"})


async def test_accepting_a_message_is_one_atomic_unit(store: Store, clock: FakeClock) -> None:
    await store.create_session("ses_a", created_at=clock.now)
    assert isinstance(await store.lookup_idempotency("msg", "intent-1", "h", clock.now), New)
    async with store.transaction() as tx:
        tx.claim_idempotency("msg", "intent-1", "h", clock.now, {"execution_id": "exe_1"})
        tx.create_execution(execution("exe_1", "ses_a", clock.now))
        tx.append("ses_a", [action("ses_a", 1, kind="turn.started")])
    assert tx.seqs == {"ses_a": [1]}
    assert tx.appended("ses_a") == await store.read("ses_a")
    replay = await store.lookup_idempotency("msg", "intent-1", "h", clock.now)
    assert replay == Replay({"execution_id": "exe_1"})
    # The same acceptance replayed by a confused caller changes nothing at all.
    with pytest.raises(WriteConflict):
        async with store.transaction() as tx:
            tx.append("ses_a", [action("ses_a", 2, kind="turn.started")])
            tx.create_execution(execution("exe_1", "ses_a", clock.now))
    assert [a["seq"] for a in await store.read("ses_a")] == [1]


async def test_only_the_winning_answer_claims_its_key_in_the_resolving_commit(
    store: Store, clock: FakeClock
) -> None:
    await _parked(store, clock)
    outcomes = await asyncio.gather(
        *(
            one(store).resolve_input(
                "req_1",
                {"option_id": f"opt_{i}"},
                "prn",
                f"cli_{i}",
                clock.now,
                idempotency=("ans", f"k{i}", "h", {"accepted": i}),
            )
            for i in range(2)
        )
    )
    winner = next(i for i, o in enumerate(outcomes) if isinstance(o, Won))
    loser = 1 - winner
    assert await store.lookup_idempotency("ans", f"k{winner}", "h", clock.now) == Replay(
        {"accepted": winner}
    )
    assert isinstance(await store.lookup_idempotency("ans", f"k{loser}", "h", clock.now), New)


async def test_a_unit_requiring_an_idle_session_fails_whole_when_busy(
    store: Store, clock: FakeClock
) -> None:
    await store.create_session("ses_a", created_at=clock.now)

    async def start(n: int) -> object:
        try:
            async with store.transaction() as tx:
                tx.require_idle("ses_a")
                tx.create_execution(execution(f"exe_{n}", "ses_a", clock.now + n))
                tx.append("ses_a", [action("ses_a", n, kind="turn.started")])
        except SessionBusy as exc:
            return exc
        return n

    # Racing units, all from one caller's view: exactly one finds the session idle.
    outcomes = await asyncio.gather(*(start(n) for n in range(10)))
    assert sum(not isinstance(o, SessionBusy) for o in outcomes) == 1
    assert all(o.session_id == "ses_a" for o in outcomes if isinstance(o, SessionBusy))
    assert len(await store.list_executions("ses_a")) == 1
    assert len(await store.read("ses_a")) == 1
    with pytest.raises(NotFound):
        async with store.transaction() as tx:
            tx.require_idle("ses_nowhere")


async def test_artifact_metadata(store: Store, clock: FakeClock) -> None:
    await store.create_session("ses_a", created_at=clock.now)
    art = ArtifactRecord(
        artifact_id="art_1",
        session_id="ses_a",
        name="report.md",
        media_type="text/markdown",
        size=5,
        sha256="ab" * 32,
        created_at=clock.now,
        turn_id="trn_1",
        tool_call_id="call_1",
    )
    await store.put_artifact(art)
    assert await store.get_artifact("art_1") == art
    assert await store.list_artifacts("ses_a") == [art]
    with pytest.raises(WriteConflict):
        await store.put_artifact(art)
    with pytest.raises(NotFound):
        await store.get_artifact("art_2")
