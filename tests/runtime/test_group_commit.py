"""Group commit in the loop: steps queued behind a slow commit land together, without
changing what a resume or a client sees, and never ahead of a side effect's ledger entry."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from opennua.protocol import actions as pa
from opennua.runtime import (
    CheckpointWrite,
    Completed,
    LedgerOp,
    RuntimeEvent,
    ToolContext,
    default_agent,
    tool,
)
from opennua.runtime._checkpoint import join_steps, unpack
from opennua.runtime._pending import Step, merge_steps
from opennua.runtime._writer import MAX_QUEUED
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import facts, make_loop

CALLS = 40


class SlowJournal(InMemoryJournal):
    """Each commit takes `delay` seconds (or waits for `gate`), like a disk."""

    def __init__(self, delay: float = 0.005) -> None:
        super().__init__()
        self.delay = delay
        self.gate = asyncio.Event()
        self.gate.set()
        self.batches: list[tuple[list[RuntimeEvent], list[CheckpointWrite]]] = []
        self.ledger_ops: list[list[LedgerOp]] = []

    async def commit(
        self,
        events: Sequence[RuntimeEvent],
        checkpoints: Sequence[CheckpointWrite],
        ledger: Sequence[LedgerOp] = (),
    ) -> None:
        await self.gate.wait()
        await asyncio.sleep(self.delay)
        self.batches.append((list(events), list(checkpoints)))
        self.ledger_ops.append(list(ledger))
        await super().commit(events, checkpoints, ledger)


def _model(n: int = CALLS) -> ScriptedModel:
    return ScriptedModel(
        [ScriptStep(calls=tuple(call("emit", i=i) for i in range(n))), say("done")]
    )


def _agent(runs: list[int], journal: InMemoryJournal, *, idempotent: bool, durable: list[str]):  # type: ignore[no-untyped-def]
    @tool("emit", idempotent=idempotent)
    def emit(ctx: ToolContext, i: int) -> str:
        runs.append(i)
        durable.append(journal.ledger.get(ctx.tool_call_id, "absent"))
        return f"payload {i}"

    return dataclasses.replace(default_agent("scripted:test"), tools=(emit,))


def _results(events: list[RuntimeEvent]) -> int:
    return sum(
        1 for e in events if isinstance(e.data, pa.ToolCallUpdated) and e.data.status == "completed"
    )


async def test_idempotent_steps_queued_behind_a_commit_land_together(tmp_path: Path) -> None:
    journal = SlowJournal()
    runs: list[int] = []
    agent = _agent(runs, journal, idempotent=True, durable=[])
    outcome = await make_loop(agent, journal, tmp_path, _model()).run("go")
    assert isinstance(outcome, Completed) and outcome.output == "done"
    assert runs == list(range(CALLS))
    per_commit = [_results(events) for events, _ in journal.batches]
    assert sum(per_commit) == CALLS
    assert max(per_commit) > 1 and len(journal.batches) < CALLS
    # A call whose result lands in the commit that would have said it started running
    # never shows `in_progress`; every call still ends `completed` exactly once.
    for events, records in journal.batches:
        ended = {
            e.data.tool_call_id
            for e in events
            if isinstance(e.data, pa.ToolCallUpdated) and e.data.status == "completed"
        }
        assert not [
            e
            for e in events
            if isinstance(e.data, pa.ToolCallUpdated)
            and e.data.status == "in_progress"
            and e.data.tool_call_id in ended
        ]
        assert [r.step_no for r in records] == sorted(r.step_no for r in records)
    tools = facts(journal.log)["tools"]
    assert len(tools) == CALLS and {t["status"] for t in tools.values()} == {"completed"}
    # A call started and completed in one commit has one ledger op there, `ran`; every call
    # ends `completed` in the ledger.
    ops = [op for batch in journal.ledger_ops for op in batch]
    assert any(op.op == "ran" for op in ops)
    for batch in journal.ledger_ops:
        calls = [op.tool_call_id for op in batch]
        assert len(calls) == len(set(calls)), batch
    assert sorted(journal.ledger.values()) == ["completed"] * CALLS

    # The merged records replay to the state the loop had: a new attempt resumes at the
    # end and runs nothing again.
    again = make_loop(agent, journal.restarted(), tmp_path, _model())
    outcome = await again.run()
    assert isinstance(outcome, Completed) and outcome.output == "done"
    assert runs == list(range(CALLS))


async def test_a_side_effect_runs_only_after_its_started_entry_is_durable(tmp_path: Path) -> None:
    journal = SlowJournal()
    runs: list[int] = []
    durable: list[str] = []
    agent = _agent(runs, journal, idempotent=False, durable=durable)
    outcome = await make_loop(agent, journal, tmp_path, _model(10)).run("go")
    assert isinstance(outcome, Completed)
    assert runs == list(range(10)) and durable == ["started"] * 10
    # One commit per step: the next call's `started` rides with the previous result.
    assert [_results(events) for events, _ in journal.batches].count(1) == 10


async def test_the_queue_behind_a_stuck_commit_is_bounded(tmp_path: Path) -> None:
    journal = SlowJournal(delay=0)
    runs: list[int] = []
    agent = _agent(runs, journal, idempotent=True, durable=[])
    journal.gate.clear()
    task = asyncio.ensure_future(
        make_loop(agent, journal, tmp_path, _model(3 * MAX_QUEUED)).run("go")
    )
    stalled, still = -1, 0
    while still < 50:  # until the loop stops running tools
        await asyncio.sleep(0)
        still, stalled = (still + 1, stalled) if len(runs) == stalled else (0, len(runs))
    # The first step waits in the stuck commit; the loop queues MAX_QUEUED more and waits.
    assert MAX_QUEUED <= stalled <= MAX_QUEUED + 1, stalled
    journal.gate.set()
    outcome = await task
    assert isinstance(outcome, Completed) and len(runs) == 3 * MAX_QUEUED


def _record(no: int, ops: str, full: bytes | None = None) -> CheckpointWrite:
    return CheckpointWrite(no, b'{"v":2,"ops":[' + ops.encode() + b"]}", full)


def test_merge_writes_a_call_started_and_completed_in_one_commit_once() -> None:
    """`start` then `complete` of one call in one commit become one `ran` where the start
    was; a call with any other op here (only started, or marked unknown) keeps its ops."""
    steps = [
        Step([], _record(1, ""), (LedgerOp("complete", "call_a"), LedgerOp("start", "call_b"))),
        Step([], _record(2, ""), (LedgerOp("complete", "call_b"), LedgerOp("start", "call_c"))),
        Step([], _record(3, ""), (LedgerOp("unknown", "call_c"), LedgerOp("start", "call_d"))),
    ]
    _, _, ledger = merge_steps(steps)
    assert ledger == [
        LedgerOp("complete", "call_a"),
        LedgerOp("ran", "call_b"),
        LedgerOp("start", "call_c"),
        LedgerOp("unknown", "call_c"),
        LedgerOp("start", "call_d"),
    ]
    # A single step is written as it is.
    (only,) = steps[:1]
    assert merge_steps([only])[2] == [LedgerOp("complete", "call_a"), LedgerOp("start", "call_b")]


def test_merge_joins_steps_and_a_full_closes_its_record() -> None:
    steps = [
        Step([], _record(1, '{"op":"a"}'), ()),
        Step([], _record(2, ""), ()),
        Step([], _record(3, '{"op":"b"}', full=b"FULL3"), ()),
        Step([], _record(4, '{"op":"c"},{"op":"d"}'), (LedgerOp("start", "call_x"),)),
    ]
    events, records, ledger = merge_steps(steps)
    assert events == [] and ledger == [LedgerOp("start", "call_x")]
    # Each record is packed as it is stored (`pack_step`): compare what it holds.
    assert [CheckpointWrite(r.step_no, unpack(r.payload), r.full) for r in records] == [
        CheckpointWrite(3, b'{"v":2,"ops":[{"op":"a"},{"op":"b"}]}', b"FULL3"),
        CheckpointWrite(4, b'{"v":2,"ops":[{"op":"c"},{"op":"d"}]}', None),
    ]
    first = b'{"v":2,"digest":"sha256:x","ops":[{"op":"run"}]}'
    assert join_steps([first, b'{"v":2,"ops":[{"op":"y"}]}']) == (
        b'{"v":2,"digest":"sha256:x","ops":[{"op":"run"},{"op":"y"}]}'
    )
