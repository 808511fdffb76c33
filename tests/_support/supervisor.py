"""A session whose first turn is accepted and queued, straight in the store (no Host), and
a Supervisor set up the way the supervisor tests run it: fast polling, a short lease."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage

from opennua.protocol import action_from_dict, replay
from opennua.protocol.ids import action_id
from opennua.runtime import AgentDefinition, default_agent
from opennua.runtime._scripted import first_prompt
from opennua.runtime.testing import ScriptStep, call, say
from opennua.store import Execution, SessionRecord, Store
from opennua.supervisor import Supervisor

SID, TID, EID = "ses_01JSUP000000000000000000", "trn_01JSUP000000000000000000", "exe_01JSUP0000"
EID2, TID2 = "exe_01JSUP0002", "trn_01JSUP000000000000000002"


def action(type_: str, data: dict[str, Any], key: str) -> dict[str, Any]:
    """An action of the test session, as the Host would have appended it."""
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


async def accept(store: Store, now: float, deadline: float = 3600) -> None:
    """The session, its `session.created` and a first turn whose execution is queued."""
    content = [{"type": "text", "text": "Write the quarterly report"}]
    async with store.transaction() as tx:
        tx.create_session(SessionRecord(session_id=SID, created_at=now, title="demo"))
        tx.append(
            SID,
            [
                action("session.created", {"title": "demo"}, "created"),
                action(
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


async def second_turn(store: Store, now: float) -> None:
    """A second turn of the session, queued (`EID2`)."""
    content = [{"type": "text", "text": "the second turn"}]
    async with store.transaction() as tx:
        started = action(
            "turn.started",
            {
                "execution_id": EID2,
                "message_id": "msg_u2",
                "trigger": {"kind": "message", "principal_id": "prn_o"},
                "input": content,
                "trace_id": "tr2",
            },
            "turn2",
        )
        started["turn_id"] = TID2
        tx.append(SID, [started])
        tx.create_execution(
            Execution(
                execution_id=EID2,
                session_id=SID,
                turn_id=TID2,
                status="queued",
                created_at=now,
                input=content,
                deadline_at=now + 3600,
            )
        )


async def session_state(store: Store) -> Any:
    """The session's state, replayed from its whole log."""
    return replay(action_from_dict(raw) for raw in await store.read(SID, 0, 100_000))


def make_supervisor(
    store: Store, data_dir: Path, agent: AgentDefinition | None = None, **options: Any
) -> Supervisor:
    """A Supervisor `sup_a` of the demo agent polling every 50 ms with a 5 s lease;
    `options` override any of that or add to it (model, sandbox, clock, grant_check…)."""
    settings: dict[str, Any] = {"supervisor_id": "sup_a", "ttl": 5, "poll_interval": 0.05}
    return Supervisor(
        store,
        agent or default_agent("scripted:demo"),
        data_dir=data_dir,
        **(settings | options),
    )


async def stop(running: Supervisor, runner: asyncio.Task[None]) -> None:
    """Shut the supervisor down and wait for its run task to end."""
    await running.shutdown()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


def two_turn_script(messages: list[ModelMessage]) -> ScriptStep:
    """The demo of a workdir kept across turns: turn 1 writes notes/plan.md, turn 2
    reads it and lists the files."""
    responses = sum(m.kind == "response" for m in messages)
    if "quarterly report" in first_prompt(messages):  # the first turn (accept)
        steps = [
            ScriptStep(calls=(call("write_file", path="notes/plan.md", content="from turn 1"),)),
            say("written"),
        ]
    else:
        steps = [
            ScriptStep(
                calls=(
                    call("read_file", path="notes/plan.md"),
                    call("list_files"),
                )
            ),
            say("read"),
        ]
    return steps[min(responses, len(steps) - 1)]
