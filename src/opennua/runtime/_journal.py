"""The Journal port: how the loop makes its facts and its checkpoints durable.

`commit` is the one durable write: the events of a step, the checkpoint record of that step
and the tool-ledger ops, all in one fenced transaction, so what clients saw and what a new
attempt resumes from never diverge. `emit` streams progress (deltas) with no checkpoint.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from opennua.runtime._errors import OwnershipLost
from opennua.runtime._events import RuntimeEvent

LedgerStatus = Literal["started", "completed", "unknown"]


@dataclass(frozen=True, slots=True)
class LedgerOp:
    """One tool-effect ledger write: `start` before a tool runs, `complete` after, `unknown`;
    `ran` for a call whose `start` and `complete` commit together (`_pending.merge_steps`).

    No idempotency key: a tool's key is its call id (``ToolContext.idempotency_key``), which
    the entry is keyed by already; writing it again cost ~40 bytes per call.
    """

    op: Literal["start", "ran", "complete", "unknown"]
    tool_call_id: str
    tool_name: str = ""


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """What one commit adds to the checkpoint: a step (ops, JSON bytes) and, now and then,
    a compacted full state that replaces everything before it."""

    step_no: int
    payload: bytes
    full: bytes | None = None


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """What `load` returns: the latest full state, the steps after it, and the ledger."""

    full: bytes | None
    full_step_no: int
    steps: list[tuple[int, bytes]]
    ledger: dict[str, LedgerStatus]


class Journal(Protocol):
    async def emit(self, events: Sequence[RuntimeEvent]) -> None:
        """Append streaming progress without a checkpoint (may be lost in a crash)."""

    async def commit(
        self,
        events: Sequence[RuntimeEvent],
        checkpoints: Sequence[CheckpointWrite],
        ledger: Sequence[LedgerOp] = (),
    ) -> None:
        """Make the events, the checkpoint records (in step order) and the ledger ops
        durable, atomically.

        Raises `OwnershipLost` when a newer attempt owns the execution; the caller stops at once.
        """

    async def load(self) -> StoredCheckpoint | None:
        """The checkpoint to resume from, or None for an execution that never committed."""


class SimulatedCrash(Exception):
    """Raised by `InMemoryJournal` to stop a loop right after (or instead of) a commit."""


@dataclass
class _Durable:
    log: list[RuntimeEvent] = field(default_factory=list)
    full: bytes | None = None
    full_step_no: int = 0
    steps: list[tuple[int, bytes]] = field(default_factory=list)
    ledger: dict[str, LedgerStatus] = field(default_factory=dict)
    commits: int = 0
    bytes_written: int = 0
    full_bytes_written: int = 0
    crashed: bool = False


class InMemoryJournal:
    """A journal in memory for tests, that can crash on purpose.

    `crash_after=k` makes the execution's k-th commit land and then raises `SimulatedCrash`
    (the process died right after it); `crash_before=k` raises instead of landing the k-th
    commit. k counts the execution's durable commits, across suspensions; a crash fires
    once. `restarted()` is the journal a new process sees: the same durable state.
    """

    def __init__(
        self,
        *,
        crash_after: int | None = None,
        crash_before: int | None = None,
        _durable: _Durable | None = None,
    ) -> None:
        self._d = _durable if _durable is not None else _Durable()
        self.crash_after = crash_after
        self.crash_before = crash_before
        self.fenced = False

    # -- the port --------------------------------------------------------------------------

    async def emit(self, events: Sequence[RuntimeEvent]) -> None:
        if self.fenced:
            raise OwnershipLost("in-memory journal fenced")
        self._d.log.extend(events)

    async def commit(
        self,
        events: Sequence[RuntimeEvent],
        checkpoints: Sequence[CheckpointWrite],
        ledger: Sequence[LedgerOp] = (),
    ) -> None:
        if self.fenced:
            raise OwnershipLost("in-memory journal fenced")
        d = self._d
        if self.crash_before is not None and not d.crashed and d.commits + 1 >= self.crash_before:
            d.crashed = True
            raise SimulatedCrash(f"crash before commit {d.commits + 1}")
        ledger_after = _apply_ledger(d.ledger, ledger)
        d.log.extend(events)
        for checkpoint in checkpoints:
            if checkpoint.full is not None:
                # A compacted full state replaces every step before it: storage stays linear.
                d.full, d.full_step_no, d.steps = checkpoint.full, checkpoint.step_no, []
                d.bytes_written += len(checkpoint.full)
                d.full_bytes_written += len(checkpoint.full)
            else:
                d.steps.append((checkpoint.step_no, checkpoint.payload))
                d.bytes_written += len(checkpoint.payload)
        d.ledger = ledger_after
        d.commits += 1
        if self.crash_after is not None and not d.crashed and d.commits >= self.crash_after:
            d.crashed = True
            raise SimulatedCrash(f"crash after commit {d.commits}")

    async def load(self) -> StoredCheckpoint | None:
        d = self._d
        if d.full is None and not d.steps:
            return None
        return StoredCheckpoint(
            full=d.full, full_step_no=d.full_step_no, steps=list(d.steps), ledger=dict(d.ledger)
        )

    # -- for tests -------------------------------------------------------------------------

    def restarted(
        self,
    ) -> InMemoryJournal:
        return InMemoryJournal(
            crash_after=self.crash_after, crash_before=self.crash_before, _durable=self._d
        )

    def snapshot(self) -> InMemoryJournal:
        """An independent copy of the durable state (to branch several resumes from one point)."""
        return InMemoryJournal(_durable=copy.deepcopy(self._d))

    @property
    def log(self) -> list[RuntimeEvent]:
        return self._d.log

    @property
    def ledger(self) -> dict[str, LedgerStatus]:
        return self._d.ledger

    @property
    def commits(self) -> int:
        return self._d.commits

    @property
    def bytes_written(self) -> int:
        """Checkpoint bytes committed so far (steps and fulls), pruned ones included."""
        return self._d.bytes_written

    @property
    def full_bytes_written(self) -> int:
        """Of `bytes_written`, those of full checkpoints."""
        return self._d.full_bytes_written

    @property
    def stored_bytes(self) -> int:
        return (len(self._d.full) if self._d.full else 0) + sum(len(p) for _, p in self._d.steps)


def _apply_ledger(
    ledger: dict[str, LedgerStatus], ops: Sequence[LedgerOp]
) -> dict[str, LedgerStatus]:
    """The ledger after `ops`, with the store's rules: a call that completed never starts
    again, and only a call that has an entry can complete or become unknown."""
    out = dict(ledger)
    for op in ops:
        current = out.get(op.tool_call_id)
        if op.op in ("start", "ran"):
            if current == "completed":
                raise ValueError(f"tool call {op.tool_call_id!r} already completed")
            out[op.tool_call_id] = "started" if op.op == "start" else "completed"
        elif current is None:
            raise ValueError(f"tool call {op.tool_call_id!r} not found in the ledger")
        elif op.op == "complete":
            out[op.tool_call_id] = "completed"
        elif current != "started":
            raise ValueError(f"tool call {op.tool_call_id!r} is {current}, not started")
        else:
            out[op.tool_call_id] = "unknown"
    return out
