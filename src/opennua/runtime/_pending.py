"""Steps queued for the journal, and how several of them become one commit.

A commit may carry several steps when the loop ran ahead of the disk (idempotent tools).
Merging keeps what a resume and a client see exactly as if each step had committed alone,
minus what nobody could ever have observed: a tool call's `in_progress` update whose result
lands in the same commit, and the `started` ledger state of a call that completes in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opennua.protocol.actions import ToolCallUpdated
from opennua.runtime._checkpoint import join_steps, pack_step
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._journal import CheckpointWrite, LedgerOp


@dataclass(frozen=True, slots=True)
class Step:
    """One `_commit` of the loop: its events, its checkpoint record, its ledger ops."""

    events: list[RuntimeEvent]
    checkpoint: CheckpointWrite
    ledger: Sequence[LedgerOp]


def merge_steps(
    steps: Sequence[Step],
) -> tuple[list[RuntimeEvent], list[CheckpointWrite], list[LedgerOp]]:
    """The events, checkpoint records and ledger ops of one commit holding `steps`, in order.

    Consecutive checkpoint steps become one record (their ops joined, numbered by the last,
    compressed when that is smaller); a step carrying a full checkpoint closes its record,
    since the full is the state at exactly that step.
    """
    if len(steps) == 1:
        only, cp = steps[0], steps[0].checkpoint
        return (
            only.events,
            [CheckpointWrite(cp.step_no, pack_step(cp.payload), cp.full)],
            list(only.ledger),
        )
    events = [event for step in steps for event in step.events]
    ledger = _ran_at_once([op for step in steps for op in step.ledger])
    records: list[CheckpointWrite] = []
    group: list[bytes] = []
    for step in steps:
        group.append(step.checkpoint.payload)
        if step.checkpoint.full is not None or step is steps[-1]:
            cp = step.checkpoint
            records.append(CheckpointWrite(cp.step_no, pack_step(join_steps(group)), cp.full))
            group = []
    return _drop_unseen_progress(events), records, ledger


def _ran_at_once(ledger: list[LedgerOp]) -> list[LedgerOp]:
    """A call whose only ops here are `start` then `complete` becomes one `ran`: the same
    entry after the commit, written once (on PostgreSQL the `started` version of a row was
    ~60 bytes a call until a vacuum, `benchmarks/peers.py`)."""
    ops_of: dict[str, list[str]] = {}
    for op in ledger:
        ops_of.setdefault(op.tool_call_id, []).append(op.op)
    ran = {call for call, ops in ops_of.items() if ops == ["start", "complete"]}
    if not ran:
        return ledger
    return [
        LedgerOp("ran", op.tool_call_id, op.tool_name) if op.tool_call_id in ran else op
        for op in ledger
        if not (op.op == "complete" and op.tool_call_id in ran)
    ]


def _drop_unseen_progress(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    ended = {
        e.data.tool_call_id
        for e in events
        if isinstance(e.data, ToolCallUpdated) and e.data.status != "in_progress"
    }
    if not ended:
        return events
    return [
        e
        for e in events
        if not (
            isinstance(e.data, ToolCallUpdated)
            and e.data.status == "in_progress"
            and e.data.tool_call_id in ended
        )
    ]
