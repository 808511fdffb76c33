"""The supervisor on a real store: the demo task runs, suspends for approval, resumes after
an answer in a new attempt, completes; the log replays to a consistent state."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from opennua.runtime import default_agent
from opennua.store import Won, open_store
from tests._support.polling import until
from tests._support.supervisor import EID, SID, accept, action, make_supervisor, session_state, stop


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")


@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
async def test_demo_suspends_resumes_after_answer_and_completes(
    tmp_path: Path, option: str
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path)
        runner = asyncio.create_task(supervisor.run())
        try:
            requests = await until(lambda: store.list_input_requests(SID, status="open"))

            async def parked() -> bool:
                # The request opens with its step; the park (after the workspace commit)
                # is the attempt's next unit.
                return (await store.get_execution(EID)).status == "waiting_input"

            await until(parked)
            request = requests[0]
            state = await session_state(store)
            assert state["status"] == "requires_action"
            resolved = action(
                "input_request.resolved",
                {
                    "request_id": request.request_id,
                    "outcome": "selected",
                    "option_id": option,
                    "answered_by": {"client_id": "cli_t", "principal_id": "prn_o"},
                },
                "answer",
            )
            async with store.transaction() as tx:
                resolving = tx.resolve_input(
                    request.request_id,
                    {"outcome": "selected", "option_id": option},
                    "prn_o",
                    "cli_t",
                    time.time(),
                    actions=[resolved],
                )
            outcome = resolving.value
            assert isinstance(outcome, Won)
            supervisor.nudge()

            async def finished() -> bool:
                return (await store.get_execution(EID)).status == "completed"

            await until(finished)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        state = await session_state(store)
        turn = state["turns"][0]
        assert state["anomalies"] == []
        assert turn["state"] == "ended" and turn["stop_reason"] == "end_turn"
        assert [a["attempt"] for a in turn["attempts"]] == [1, 2]
        assert turn["attempts"][1]["resumed_from_checkpoint"] is True
        # Each attempt's start says the turn runs; a `turn.state` says only the wait.
        log = await store.read(SID, 0, 10_000)
        states = [a["data"]["state"] for a in log if a["type"] == "turn.state"]
        assert states == ["requires_action"]
        assert len(turn["workers"]) == 1
        assert [a["name"] for a in state["artifacts"].values()] == ["report.md"]
        shell = next(c for c in turn["tool_calls"].values() if c["name"] == "shell")
        assert shell["status"] == ("completed" if option == "allow_once" else "rejected")
        others = [c for c in turn["tool_calls"].values() if c["name"] != "shell"]
        assert all(c["status"] == "completed" for c in others)
        assert turn["usage"]["cache_read_input_tokens"] > 0
        artifact = next(iter(state["artifacts"].values()))
        assert b"report" in (await store.blobs.read(artifact["sha256"])).lower()
        # Every tool call but the sub-agent's `task` has a completed ledger entry, keyed by
        # its call id, which is also its idempotency key: the entry does not store it twice.
        ledger = await store.get_ledger(EID)
        # A rejected call never started, so it has no entry at all.
        ran = {"task"} if option == "allow_once" else {"task", "shell"}
        calls = {i for i, c in turn["tool_calls"].items() if c["name"] not in ran}
        assert {e.tool_call_id for e in ledger} == calls
        assert {(e.status, e.idempotency_key) for e in ledger} == {("completed", None)}


async def test_deadline_passing_while_waiting_ends_the_turn(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        clock = [time.time()]
        await accept(store, clock[0], deadline=60)
        supervisor = make_supervisor(store, tmp_path, clock=lambda: clock[0])
        runner = asyncio.create_task(supervisor.run())
        try:
            await until(lambda: store.list_input_requests(SID, status="open"))
            clock[0] += 61
            await supervisor.sweep_deadlines()
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        assert (await store.get_execution(EID)).status == "deadline_exceeded"
        state = await session_state(store)
        assert state["anomalies"] == []
        assert state["turns"][0]["stop_reason"] == "deadline_exceeded"
        assert state["open_input_requests"] == []
        requests = list(state["turns"][0]["input_requests"].values())
        assert [r["outcome"] for r in requests] == ["expired"]
        assert state["status"] == "idle"


async def test_cancel_reaches_a_running_attempt_within_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.3")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path, ttl=0.6)
        runner = asyncio.create_task(supervisor.run())
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await until(running)
            await store.request_cancel(EID)
            cancelled_at = time.monotonic()

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "cancelled"

            await until(ended, timeout=5)
            # One heartbeat is TTL/3 = 0.2 s; allow for the step in flight to wind down.
            assert time.monotonic() - cancelled_at < 2.0
        finally:
            await stop(supervisor, runner)
        state = await session_state(store)
        turn = state["turns"][0]
        assert turn["stop_reason"] == "cancelled"
        assert state["status"] == "idle"
        assert all(c["status"] != "in_progress" for c in turn["tool_calls"].values())


async def test_a_cancel_the_attempt_has_not_seen_when_it_parks_still_ends_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lease this long means no heartbeat before the approval: the attempt parks without
    # having seen the cancel, which must then not leave the turn waiting for ever.
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.05")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path, ttl=120)
        runner = asyncio.create_task(supervisor.run())
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await until(running)
            assert not await store.list_input_requests(SID, status="open")
            await store.request_cancel(EID)

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "cancelled"

            await until(ended, timeout=15)
        finally:
            await stop(supervisor, runner)
        state = await session_state(store)
        turn = state["turns"][0]
        assert turn["stop_reason"] == "cancelled"
        assert list(turn["input_requests"]), "the attempt did reach its approval"
        assert state["open_input_requests"] == []
        assert state["status"] == "idle"


async def test_graceful_shutdown_hands_the_execution_over_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.2")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        agent = default_agent("scripted:demo")
        first = make_supervisor(store, tmp_path, agent, ttl=30)
        runner = asyncio.create_task(first.run())

        async def claimed_by(owner: str) -> bool:
            return (await store.get_execution(EID)).owner == owner

        await until(lambda: claimed_by("sup_a"))
        await stop(first, runner)
        assert (await store.get_execution(EID)).status == "queued"
        second = make_supervisor(store, tmp_path, agent, supervisor_id="sup_b", ttl=30)
        runner = asyncio.create_task(second.run())
        try:
            started = time.monotonic()
            # Far sooner than the 30 s lease: the first supervisor released it.
            await until(lambda: claimed_by("sup_b"), timeout=5)
            assert time.monotonic() - started < 5
            await until(lambda: store.list_input_requests(SID, status="open"))
        finally:
            await stop(second, runner)
        attempts = (await session_state(store))["turns"][0]["attempts"]
        assert [a["supervisor_id"] for a in attempts] == ["sup_a", "sup_b"]


async def test_deadline_passing_while_running_ends_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.3")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        clock = [time.time()]
        await accept(store, clock[0], deadline=60)
        supervisor = make_supervisor(store, tmp_path, ttl=0.6, clock=lambda: clock[0])
        runner = asyncio.create_task(supervisor.run())
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await until(running)
            clock[0] += 61  # the absolute deadline passes mid-run

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "deadline_exceeded"

            await until(ended, timeout=5)
        finally:
            await stop(supervisor, runner)
        turn = (await session_state(store))["turns"][0]
        assert turn["stop_reason"] == "deadline_exceeded"


async def test_a_grant_that_no_longer_holds_ends_the_run_revoked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grant is checked at claim and on every heartbeat; the first "no" stops it."""
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.3")
    verdict: dict[str, str | None] = {"now": None}
    checks: list[str] = []

    async def grant_check(execution_id: str) -> str | None:
        checks.append(execution_id)
        return verdict["now"]

    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path, ttl=0.6, grant_check=grant_check)
        runner = asyncio.create_task(supervisor.run())
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await until(running)
            verdict["now"] = "membership_removed"
            revoked_at = time.monotonic()

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "revoked"

            await until(ended, timeout=5)
            assert time.monotonic() - revoked_at < 2.0
        finally:
            await stop(supervisor, runner)
        assert checks and set(checks) == {EID}
        execution = await store.get_execution(EID)
        assert execution.error["code"] == "grant_revoked"
        assert "membership_removed" in execution.error["message"]
        turn = (await session_state(store))["turns"][0]
        assert turn["stop_reason"] == "revoked" and turn["error"]["code"] == "grant_revoked"


@pytest.mark.parametrize("concurrency", [0, -1])
async def test_a_supervisor_that_could_run_no_execution_is_refused(
    tmp_path: Path, concurrency: int
) -> None:
    # With no slot, every claimed execution would wait for one forever.
    store = await open_store(f"sqlite:///{tmp_path}/nua.db")
    try:
        with pytest.raises(ValueError, match="at least 1"):
            make_supervisor(store, tmp_path, concurrency=concurrency)
    finally:
        await store.close()
