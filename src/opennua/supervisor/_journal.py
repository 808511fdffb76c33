"""The runtime's Journal port on the Store: every write of an attempt is fenced.

A step's actions, its checkpoint record, its ledger ops and the Host-owned records the
step implies (an opened input request, a published artifact's metadata) commit in one
fenced unit, so what clients see and what a new attempt resumes from never diverge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from opennua.host.projector import project
from opennua.protocol.actions import ArtifactPublished, InputRequestOpened
from opennua.runtime._journal import CheckpointRecord, LedgerOp, StoredCheckpoint
from opennua.runtime.errors import Fenced as RuntimeFenced
from opennua.runtime.events import RuntimeEvent
from opennua.store import Artifact, Claimed, Fenced, FencedTransaction, InputRequest, Store


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class StoreJournal:
    def __init__(
        self,
        store: Store,
        claimed: Claimed,
        *,
        owner: str,
        clock: Callable[[], float],
        on_fenced: Callable[[], None] = lambda: None,
        on_append: Callable[[int], None] = lambda count: None,
    ) -> None:
        self._store = store
        self._execution = claimed.execution
        self._epoch = claimed.epoch
        self._owner = owner
        self._clock = clock
        self._on_fenced = on_fenced
        self._on_append = on_append

    @property
    def session_id(self) -> str:
        return self._execution.session_id

    def actions(self, events: Sequence[RuntimeEvent]) -> list[dict[str, object]]:
        return project(
            events,
            session_id=self._execution.session_id,
            turn_id=self._execution.turn_id,
            execution_id=self._execution.execution_id,
            ts=rfc3339(self._clock()),
        )

    async def write(self, fill: Callable[[FencedTransaction], None]) -> None:
        """One fenced unit; a lost fence becomes the runtime's `Fenced` (stop at once)."""
        try:
            async with self._store.fenced(
                self._execution.execution_id, self._epoch, owner=self._owner
            ) as tx:
                fill(tx)
        except Fenced as exc:
            self._on_fenced()
            raise RuntimeFenced(str(exc)) from exc
        self._on_append(sum(len(seqs) for seqs in tx.seqs.values()))

    async def emit(self, events: Sequence[RuntimeEvent]) -> None:
        actions = self.actions(events)
        await self.write(lambda tx: tx.append(self.session_id, actions))

    async def commit(
        self,
        events: Sequence[RuntimeEvent],
        checkpoints: Sequence[CheckpointRecord],
        ledger: Sequence[LedgerOp] = (),
    ) -> None:
        actions = self.actions(events)
        now = self._clock()

        def fill(tx: FencedTransaction) -> None:
            tx.append(self.session_id, actions)
            for event in events:
                self._host_records(tx, event, now)
            for checkpoint in checkpoints:
                if checkpoint.full is None:
                    tx.put_checkpoint_step(checkpoint.step_no, checkpoint.payload)
                else:
                    # The full holds this step too: its step record would only be pruned.
                    tx.put_full_checkpoint(checkpoint.step_no, checkpoint.full)
                    tx.prune_checkpoints(checkpoint.step_no)
            for op in ledger:
                if op.op == "start":
                    tx.ledger_start(op.tool_call_id, now=now)
                elif op.op == "complete":
                    tx.ledger_complete(op.tool_call_id, now=now)
                else:
                    tx.ledger_mark_unknown(op.tool_call_id, now=now)

        await self.write(fill)

    def _host_records(self, tx: FencedTransaction, event: RuntimeEvent, now: float) -> None:
        execution = self._execution
        data = event.data
        if isinstance(data, InputRequestOpened):
            tx.open_input_request(
                InputRequest(
                    request_id=data.request_id,
                    session_id=execution.session_id,
                    execution_id=execution.execution_id,
                    turn_id=execution.turn_id,
                    status="open",
                    payload=data.model_dump(mode="json"),
                    created_at=now,
                    tool_call_id=data.tool_call_id,
                )
            )
        elif isinstance(data, ArtifactPublished):
            tx.put_artifact(
                Artifact(
                    artifact_id=data.artifact_id,
                    session_id=execution.session_id,
                    name=data.name,
                    media_type=data.media_type,
                    size=data.size,
                    sha256=data.sha256,
                    created_at=now,
                    turn_id=execution.turn_id,
                    tool_call_id=data.tool_call_id,
                )
            )

    async def load(self) -> StoredCheckpoint | None:
        stored = await self._store.load_checkpoint(self._execution.execution_id)
        if stored.full is None and not stored.steps:
            return None
        ledger = await self._store.get_ledger(self._execution.execution_id)
        return StoredCheckpoint(
            full=stored.full.payload if stored.full else None,
            full_step_no=stored.full.step_no if stored.full else 0,
            steps=[(step.step_no, step.payload) for step in stored.steps],
            ledger={entry.tool_call_id: entry.status for entry in ledger},
        )


class BlobArtifacts:
    """The runtime's artifact port on the blob store (content-addressed: re-runs are safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, data: bytes, *, name: str, media_type: str) -> str:
        ref = await self._store.blobs.put(data)
        return ref.sha256
