"""The step writer: every durable change of an execution goes through it.

`apply` changes the state and queues the op; `commit` makes the step durable with its
events and ledger ops: the queued ops become one checkpoint step, and now and then a full
checkpoint. Commits are pipelined through one journal writer task (`_drain`): `commit`
queues the step and returns, and the loop goes on computing the next one while the writer
waits on the disk; steps queued meanwhile land together in the writer's next commit (group
commit: one transaction, their checkpoint ops merged into one step record). `settle` waits
until everything queued is durable; the queue is bounded, so the loop never runs far ahead.

Deltas (`push`) are batched by count and age and emitted without a checkpoint, always after
every queued step, so the log keeps its order; a batch still buffered when a step commits
rides in that step's commit, ahead of its events. A batch's consecutive deltas of one
message become one delta (keyed as the first: its identity is stable), and deltas still
buffered when the step that completes their message commits are dropped: the completion
carries the whole text, at the same moment (docs/server.md, "What a step costs, and why").
A message's `message.started` is buffered with its deltas (`start_message`) and its op
applied: whichever unit writes the one writes the other, so a checkpoint says a message was
started exactly when the log does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import suppress

from opennua.protocol import actions as pa
from opennua.runtime._checkpoint import encode_full, encode_step
from opennua.runtime._env import Limits
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._journal import CheckpointWrite, Journal, LedgerOp
from opennua.runtime._ops import Op
from opennua.runtime._pending import Step, merge_steps
from opennua.runtime._state import ExecState, apply

#: A full checkpoint is written once the ops since the last one that the state does not
#: keep as written (`EncodedStep.replaced`: counters, plans, waits, answers) reach this
#: many times its compressed size. The rest of what a resume replays is the history
#: itself, which a full holds too: replaying it costs about what loading a full would
#: (docs/runtime.md, "What a full checkpoint is for"), so rewriting the history into a full at every
#: doubling, as fulls once were, only stored it again. Each full is paid for by at least
#: twice its size in replaced ops, so the bytes written stay linear in the steps.
COMPACT_FACTOR = 2
#: Steps queued behind the commit in flight before the loop waits for the disk.
MAX_QUEUED = 64


class StepWriter:
    def __init__(
        self,
        journal: Journal,
        state: ExecState,
        limits: Limits,
        clock: Callable[[], float],
        *,
        full_bytes: int = 0,
        step_bytes: int = 0,
    ) -> None:
        """`full_bytes` and `step_bytes`: the stored full checkpoint's size and the bytes of
        the steps after it, when resuming (they decide when the next full is due: every
        step replayed counts as replaced, which a resume cannot tell apart without
        encoding its ops again)."""
        self.state = state
        self._journal = journal
        self._limits = limits
        self._clock = clock
        self._ops: list[Op] = []
        #: A message's start is buffered: the next flush is a commit (`start_message`).
        self._starting = False
        self._buf: list[RuntimeEvent] = []
        self._buf_t0 = 0.0
        self._last_full = COMPACT_FACTOR * full_bytes
        self._replaced = step_bytes
        self._queued: list[Step] = []
        self._writer: asyncio.Future[None] | None = None
        #: Steps committed (queued) and made durable so far; `on_durable` is told each time
        #: some became durable (spans wait for their actions' seqs this way).
        self.queued_steps = 0
        self.durable_steps = 0
        self.on_durable: Callable[[], None] | None = None

    def apply(self, op: Op) -> None:
        """Change the state now; the op is stored with the next `commit`."""
        apply(self.state, op)
        self._ops.append(op)

    async def commit(self, events: list[RuntimeEvent], ledger: Sequence[LedgerOp] = ()) -> None:
        """Queue one step: the buffered deltas `events` leave wanting, then `events`, the ops
        applied since the last commit, `ledger`. A failed earlier commit (e.g.
        `OwnershipLost`) is raised here."""
        if self._buf:
            buffered, self._buf = _coalesced(_unfinished(self._buf, events)), []
            events = buffered + events
        self._starting = False
        state = self.state
        ops, self._ops = self._ops, []
        step_no = state.step_no + 1
        digest = state.snapshot_digest if step_no == 1 else None
        payload, replaced = encode_step(state, ops, digest=digest)
        full = None
        self._replaced += replaced
        if step_no > 1 and self._replaced >= max(self._last_full, self._limits.compact_min_bytes):
            state.step_no = step_no
            full = encode_full(state)
            self._last_full, self._replaced = COMPACT_FACTOR * len(full), 0
        if len(self._queued) >= MAX_QUEUED:
            await self.settle()
        self._queued.append(Step(events, CheckpointWrite(step_no, payload, full), ledger))
        self.queued_steps += 1
        writer = self._writer
        if writer is None or writer.done():
            if writer is not None:
                writer.result()  # a failed commit stops the loop here
            self._writer = asyncio.ensure_future(self._drain())
        state.step_no = step_no

    async def start_message(self, op: Op, started: RuntimeEvent) -> None:
        """A message's text begins: `op` records it in the checkpoint and `started` goes out
        with its first deltas, in the same commit (`flush`), or with the step that
        completes it."""
        self.apply(op)
        self._starting = True
        await self.push(started)

    async def push(self, event: RuntimeEvent) -> None:
        """A delta: emitted in batches (by count and age), without a checkpoint."""
        if not self._buf:
            self._buf_t0 = self._clock()
        self._buf.append(event)
        if (
            len(self._buf) >= self._limits.delta_batch_size
            or self._clock() - self._buf_t0 >= self._limits.delta_batch_seconds
        ):
            await self.flush()

    async def flush(self) -> None:
        """Emit the batched deltas, after everything queued is durable; with a message's
        start among them, as a step of their own (its op with it)."""
        if self._starting:
            await self.commit([])
        elif self._buf:
            batch, self._buf = _coalesced(self._buf), []
            await self.settle()
            if batch:
                await self._journal.emit(batch)

    async def settle(self) -> None:
        """Wait until every queued step is durable; a failed commit is raised here."""
        writer = self._writer
        if writer is not None:
            await writer
            self._writer = None

    async def poll(self) -> None:
        """Let the writer reach the journal; if it already ended, settle it, so a failed
        commit stops the loop before it starts more work."""
        if self._writer is not None:
            await asyncio.sleep(0)
            if self._writer.done():
                await self.settle()

    async def abandon(self) -> None:
        """Leaving with an error while steps are queued: let them land (they are valid
        steps) without raising over the error already propagating."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with suppress(BaseException):
                await writer

    async def _drain(self) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            events, checkpoints, ledger = merge_steps(batch)
            await self._journal.commit(events, checkpoints, ledger)
            self.durable_steps += len(batch)
            if self.on_durable is not None:
                self.on_durable()


def _coalesced(batch: list[RuntimeEvent]) -> list[RuntimeEvent]:
    """`batch` with each run of consecutive deltas of one message and kind joined into the
    first of them: a client shows the same text, one action instead of several."""
    out: list[RuntimeEvent] = []
    for event in batch:
        data = event.data
        last = out[-1].data if out else None
        if isinstance(data, pa.MessageDelta | pa.ReasoningDelta) and type(last) is type(data):
            assert isinstance(last, pa.MessageDelta | pa.ReasoningDelta)
            if last.message_id == data.message_id:
                joined = last.model_copy(update={"delta": last.delta + data.delta})
                out[-1] = RuntimeEvent(out[-1].key, out[-1].run_id, joined)
                continue
        out.append(event)
    return out


def _unfinished(batch: list[RuntimeEvent], events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    """The buffered deltas whose message `events` do not complete: a completion with the
    whole text makes the deltas not yet sent redundant. An interrupted message's completion
    carries no text, so its deltas stay: they are all there is of it."""
    done: set[tuple[type, str]] = set()
    for event in events:
        data = event.data
        if isinstance(data, pa.MessageCompleted) and data.status == "complete":
            done.add((pa.MessageDelta, data.message_id))
        elif isinstance(data, pa.ReasoningCompleted):
            done.add((pa.ReasoningDelta, data.message_id))
    if not done:
        return batch
    return [e for e in batch if (type(e.data), getattr(e.data, "message_id", None)) not in done]
