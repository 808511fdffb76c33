"""The supervisor on a real store: the demo task runs, suspends for approval, resumes after
an answer in a new attempt, completes; the log replays to a consistent state."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from opennua.protocol import action_from_dict, replay
from opennua.protocol.ids import action_id
from opennua.runtime import default_agent
from opennua.store import Execution, SessionRecord, Store, Won, open_store
from opennua.supervisor import Supervisor

SID, TID, EID = "ses_01JSUP000000000000000000", "trn_01JSUP000000000000000000", "exe_01JSUP0000"


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")


def _action(type_: str, data: dict[str, Any], key: str) -> dict[str, Any]:
    return {
        "v": 1,
        "session_id": SID,
        "id": action_id("test", key),
        "type": type_,
        "ts": "2026-11-29T08:00:00.000Z",
        "turn_id": TID if type_ != "session.created" else None,
        "run_id": None,
        "client_id": None,
        "intent_id": None,
        "data": data,
    }


async def _accept(store: Store, now: float, deadline: float = 3600) -> None:
    content = [{"type": "text", "text": "Write the quarterly report"}]
    async with store.transaction() as tx:
        tx.create_session(SessionRecord(session_id=SID, created_at=now, title="demo"))
        tx.append(
            SID,
            [
                _action("session.created", {"title": "demo"}, "created"),
                _action(
                    "turn.started",
                    {
                        "execution_id": EID,
                        "message_id": "msg_u1",
                        "trigger": {"kind": "message", "principal_id": "prn_o"},
                        "input": content,
                        "trace_id": "tr1",
                    },
                    "turn",
                ),
            ],
        )
        tx.create_execution(
            Execution(
                execution_id=EID,
                session_id=SID,
                turn_id=TID,
                status="queued",
                created_at=now,
                input=content,
                deadline_at=now + deadline,
            )
        )


async def _wait(predicate: Any, timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (result := await predicate()):
            await asyncio.sleep(0.05)
        return result


async def _state(store: Store) -> Any:
    return replay(action_from_dict(raw) for raw in await store.read(SID, 0, 100_000))


@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
async def test_demo_suspends_resumes_after_answer_and_completes(
    tmp_path: Path, option: str
) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await _accept(store, time.time())
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id="sup_a",
            data_dir=tmp_path,
            ttl=5,
            poll_interval=0.05,
        )
        runner = asyncio.create_task(supervisor.run())
        try:
            requests = await _wait(lambda: store.list_input_requests(SID, status="open"))

            async def parked() -> bool:
                # The request opens with its step; the park (after the workspace commit)
                # is the attempt's next unit.
                return (await store.get_execution(EID)).status == "waiting_input"

            await _wait(parked)
            request = requests[0]
            state = await _state(store)
            assert state["status"] == "requires_action"
            resolved = _action(
                "input_request.resolved",
                {
                    "request_id": request.request_id,
                    "outcome": "selected",
                    "option_id": option,
                    "answered_by": {"client_id": "cli_t", "principal_id": "prn_o"},
                },
                "answer",
            )
            outcome = await store.resolve_input(
                request.request_id,
                {"outcome": "selected", "option_id": option},
                "prn_o",
                "cli_t",
                time.time(),
                actions=[resolved],
            )
            assert isinstance(outcome, Won)
            supervisor.nudge()

            async def finished() -> bool:
                return (await store.get_execution(EID)).status == "completed"

            await _wait(finished)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        state = await _state(store)
        turn = state["turns"][0]
        assert state["anomalies"] == []
        assert turn["state"] == "ended" and turn["stop_reason"] == "end_turn"
        assert [a["attempt"] for a in turn["attempts"]] == [1, 2]
        assert turn["attempts"][1]["resumed_from_checkpoint"] is True
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
        await _accept(store, clock[0], deadline=60)
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id="sup_a",
            data_dir=tmp_path,
            ttl=5,
            poll_interval=0.05,
            clock=lambda: clock[0],
        )
        runner = asyncio.create_task(supervisor.run())
        try:
            await _wait(lambda: store.list_input_requests(SID, status="open"))
            clock[0] += 61
            await supervisor.sweep_deadlines()
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        assert (await store.get_execution(EID)).status == "deadline_exceeded"
        state = await _state(store)
        assert state["anomalies"] == []
        assert state["turns"][0]["stop_reason"] == "deadline_exceeded"
        assert state["open_input_requests"] == []
        requests = list(state["turns"][0]["input_requests"].values())
        assert [r["outcome"] for r in requests] == ["expired"]
        assert state["status"] == "idle"


async def _run_until(supervisor: Supervisor) -> asyncio.Task[None]:
    return asyncio.create_task(supervisor.run())


async def _stop(supervisor: Supervisor, runner: asyncio.Task[None]) -> None:
    await supervisor.shutdown()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_cancel_reaches_a_running_attempt_within_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.3")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await _accept(store, time.time())
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id="sup_a",
            data_dir=tmp_path,
            ttl=0.6,
            poll_interval=0.05,
        )
        runner = await _run_until(supervisor)
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await _wait(running)
            await store.request_cancel(EID)
            cancelled_at = time.monotonic()

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "cancelled"

            await _wait(ended, timeout=5)
            # One heartbeat is TTL/3 = 0.2 s; allow for the step in flight to wind down.
            assert time.monotonic() - cancelled_at < 2.0
        finally:
            await _stop(supervisor, runner)
        state = await _state(store)
        turn = state["turns"][0]
        assert turn["stop_reason"] == "cancelled"
        assert state["status"] == "idle"
        assert all(c["status"] != "in_progress" for c in turn["tool_calls"].values())


async def test_graceful_shutdown_hands_the_execution_over_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.2")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await _accept(store, time.time())
        agent = default_agent("scripted:demo")
        first = Supervisor(
            store, agent, supervisor_id="sup_a", data_dir=tmp_path, ttl=30, poll_interval=0.05
        )
        runner = await _run_until(first)

        async def claimed_by(owner: str) -> bool:
            return (await store.get_execution(EID)).owner == owner

        await _wait(lambda: claimed_by("sup_a"))
        await _stop(first, runner)
        assert (await store.get_execution(EID)).status == "queued"
        second = Supervisor(
            store, agent, supervisor_id="sup_b", data_dir=tmp_path, ttl=30, poll_interval=0.05
        )
        runner = await _run_until(second)
        try:
            started = time.monotonic()
            # Far sooner than the 30 s lease: the first supervisor released it.
            await _wait(lambda: claimed_by("sup_b"), timeout=5)
            assert time.monotonic() - started < 5
            await _wait(lambda: store.list_input_requests(SID, status="open"))
        finally:
            await _stop(second, runner)
        attempts = (await _state(store))["turns"][0]["attempts"]
        assert [a["supervisor_id"] for a in attempts] == ["sup_a", "sup_b"]


async def test_deadline_passing_while_running_ends_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.3")
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        clock = [time.time()]
        await _accept(store, clock[0], deadline=60)
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id="sup_a",
            data_dir=tmp_path,
            ttl=0.6,
            poll_interval=0.05,
            clock=lambda: clock[0],
        )
        runner = await _run_until(supervisor)
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await _wait(running)
            clock[0] += 61  # the absolute deadline passes mid-run

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "deadline_exceeded"

            await _wait(ended, timeout=5)
        finally:
            await _stop(supervisor, runner)
        turn = (await _state(store))["turns"][0]
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
        await _accept(store, time.time())
        supervisor = Supervisor(
            store,
            default_agent("scripted:demo"),
            supervisor_id="sup_a",
            data_dir=tmp_path,
            ttl=0.6,
            poll_interval=0.05,
            grant_check=grant_check,
        )
        runner = await _run_until(supervisor)
        try:

            async def running() -> bool:
                return (await store.get_execution(EID)).status == "running"

            await _wait(running)
            verdict["now"] = "membership_removed"
            revoked_at = time.monotonic()

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "revoked"

            await _wait(ended, timeout=5)
            assert time.monotonic() - revoked_at < 2.0
        finally:
            await _stop(supervisor, runner)
        assert checks and set(checks) == {EID}
        execution = await store.get_execution(EID)
        assert execution.error["code"] == "grant_revoked"
        assert "membership_removed" in execution.error["message"]
        turn = (await _state(store))["turns"][0]
        assert turn["stop_reason"] == "revoked" and turn["error"]["code"] == "grant_revoked"
