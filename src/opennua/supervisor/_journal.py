"""The runtime's Journal port on the Store: every write of an attempt is fenced.

A step's actions, its checkpoint record, its ledger ops, the Host-owned records the
step implies (an opened input request, a published artifact's metadata) and, after a tool
call that may have changed files, the workspace manifest (`workspace.committed`) commit in
one fenced unit, so what
clients see, what a new attempt resumes from and the files it finds never diverge.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opennua.protocol import action_id, envelope, timestamp
from opennua.protocol.actions import (
    ArtifactPublished,
    InputRequestOpened,
    ToolCallStarted,
    ToolCallUpdated,
)
from opennua.runtime import (
    BlobsUnavailable,
    CheckpointWrite,
    LedgerOp,
    OwnershipLost,
    RuntimeEvent,
    StoredCheckpoint,
)
from opennua.store import (
    ArtifactRecord,
    Claimed,
    Execution,
    ExecutionJournal,
    Fenced,
    FencedTransaction,
    FileStore,
    InputRequestRecord,
    Unavailable,
)
from opennua.supervisor._projector import project
from opennua.supervisor._workspace import Manifest, Workspace

_log = logging.getLogger(__name__)

#: `(session_id, actions)`: actions a unit committed, with their seqs, in seq order.
Committed = Callable[[str, list[dict[str, Any]]], Awaitable[None]]


def host_action(
    execution: Execution, key: str, type_: str, data: dict[str, Any], ts: str
) -> dict[str, Any]:
    """An action the supervisor emits about the execution itself (id derived, so it dedupes)."""
    return envelope(
        execution.session_id,
        action_id(execution.execution_id, key),
        type_,
        ts,
        data,
        turn_id=execution.turn_id,
    )


class StoreJournal:
    def __init__(
        self,
        store: ExecutionJournal,
        claimed: Claimed,
        *,
        owner: str,
        clock: Callable[[], float],
        on_fenced: Callable[[], None] = lambda: None,
        on_append: Callable[[int], None] = lambda count: None,
        on_committed: Committed | None = None,
        workspace: Workspace | None = None,
        track_seqs: bool = False,
        lease_held: Callable[[], bool] = lambda: True,
    ) -> None:
        self._store = store
        self._lease_held = lease_held
        #: The seqs this attempt's actions got, by run (for spans); kept only when traced.
        self.run_seqs: dict[str | None, list[int]] | None = {} if track_seqs else None
        self._execution = claimed.execution
        self._attempt = claimed.attempt
        self._epoch = claimed.epoch
        self._workspace = workspace
        self._manifest: str | None = None  # the last one committed (or restored)
        self._pending: str | None = None  # committed by the unit being written
        self._workspace_commits = 0
        #: The calls started in this attempt whose declared kind cannot change a file.
        self._no_writes: set[str] = set()
        self._owner = owner
        self._clock = clock
        self._on_fenced = on_fenced
        self._on_append = on_append
        self._on_committed = on_committed

    @property
    def session_id(self) -> str:
        return self._execution.session_id

    def actions(self, events: Sequence[RuntimeEvent]) -> list[dict[str, object]]:
        return project(
            events,
            session_id=self._execution.session_id,
            turn_id=self._execution.turn_id,
            execution_id=self._execution.execution_id,
            ts=timestamp(self._clock()),
        )

    async def write(self, fill: Callable[[FencedTransaction], object]) -> list[int]:
        """One fenced unit; the store's `Fenced` (the fence was lost) becomes the runtime's
        `OwnershipLost` (stop at once). Returns the seqs of the actions it appended."""
        try:
            async with self._store.fenced(
                self._execution.execution_id, self._epoch, owner=self._owner
            ) as tx:
                fill(tx)
        except Fenced as exc:
            self._on_fenced()
            raise OwnershipLost(str(exc)) from exc
        finally:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._manifest = pending
            self._workspace_commits += 1
        self._on_append(sum(len(seqs) for seqs in tx.seqs.values()))
        seqs = tx.seqs.get(self.session_id, [])
        if self._on_committed is not None and seqs:
            # Durable by now: a failure here must not fail the step (the Host's store
            # follower finds the actions anyway, as another process's Host does).
            try:
                await self._on_committed(self.session_id, tx.appended(self.session_id))
            except Exception:
                _log.warning("handing actions to the Host failed", exc_info=True)
        return seqs

    def seqs_of(self, name: str | None) -> list[int]:
        """The seqs of a run's actions (`name` a run id), or of the events whose key starts
        with `name` (a model call `run/sN/mK`, a tool call `run/call_…`)."""
        return (self.run_seqs or {}).get(name, [])

    def _track(self, events: Sequence[RuntimeEvent], seqs: list[int]) -> None:
        groups = self.run_seqs
        if groups is None:
            return
        for event, seq in zip(events, seqs, strict=False):
            groups.setdefault(event.run_id, []).append(seq)
            parts = event.key.split("/", 3)
            for n in (2, 3):
                if len(parts) > n:
                    groups.setdefault("/".join(parts[:n]), []).append(seq)

    def restored(self, manifest: Manifest) -> None:
        """The workspace this attempt starts from: commits that change nothing say nothing."""
        self._manifest = manifest.sha256

    async def workspace_actions(self) -> list[dict[str, Any]]:
        """Commit the workspace; the `workspace.committed` action to write in the next unit
        if the files changed since the last commit (none otherwise)."""
        if self._workspace is None:
            return []
        manifest = await self._workspace.commit()
        if manifest.sha256 == self._manifest:
            return []
        self._pending = manifest.sha256
        execution = self._execution
        data = {
            "execution_id": execution.execution_id,
            "manifest": manifest.sha256,
            "files": manifest.files,
            "bytes": manifest.bytes,
        }
        key = f"attempt/{self._attempt}/workspace/{self._workspace_commits}"
        return [host_action(execution, key, "workspace.committed", data, timestamp(self._clock()))]

    def _note_kinds(self, events: Sequence[RuntimeEvent]) -> None:
        for event in events:
            data = event.data
            if isinstance(data, ToolCallStarted) and data.kind in _READ_ONLY:
                self._no_writes.add(data.tool_call_id)

    def _may_have_written(self, event: RuntimeEvent) -> bool:
        """Whether `event` ends a tool call that may have written files. A model step or a
        plan update cannot have; nor can a call of a kind that only reads (its tool's
        declared kind, as ACP clients see it). A call an earlier attempt started may have."""
        data = event.data
        if not isinstance(data, ToolCallUpdated) or data.status not in _RAN:
            return False
        return data.tool_call_id not in self._no_writes

    async def emit(self, events: Sequence[RuntimeEvent]) -> None:
        self._note_kinds(events)
        actions = self.actions(events)
        self._track(events, await self.write(lambda tx: tx.append(self.session_id, actions)))

    async def commit(
        self,
        events: Sequence[RuntimeEvent],
        checkpoints: Sequence[CheckpointWrite],
        ledger: Sequence[LedgerOp] = (),
    ) -> None:
        self._note_kinds(events)
        actions = self.actions(events)
        if any(self._may_have_written(event) for event in events):
            actions += await self.workspace_actions()
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
                elif op.op == "ran":
                    tx.ledger_ran(op.tool_call_id, now=now)
                elif op.op == "complete":
                    tx.ledger_complete(op.tool_call_id, now=now)
                else:
                    tx.ledger_mark_unknown(op.tool_call_id, now=now)

        self._track(events, await self.write(fill))
        if any(op.op == "start" for op in ledger) and not self._lease_held():
            # The store took the start, but this attempt may have been frozen past its
            # lease since (SIGSTOP): another attempt may own the call by now, so it must
            # not run here. Its ledger says `started`: the next attempt reports it.
            self._on_fenced()
            raise OwnershipLost("the lease may have lapsed before the tool call ran")

    def _host_records(self, tx: FencedTransaction, event: RuntimeEvent, now: float) -> None:
        execution = self._execution
        data = event.data
        if isinstance(data, InputRequestOpened):
            tx.open_input_request(
                InputRequestRecord(
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
        elif isinstance(data, ArtifactPublished) and data.state == "published":
            # The artifacts table holds the downloadable ones: a row means durable bytes.
            # A failed upload lives in the log until a retry (Host.retry_artifact) adds it.
            tx.put_artifact(
                ArtifactRecord(
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


_RAN = frozenset({"completed", "failed", "cancelled", "unknown"})
#: Tool kinds declared not to change files: a workspace commit after them finds nothing.
_READ_ONLY = frozenset({"read", "search", "think", "fetch"})


class BlobArtifacts:
    """The runtime's artifact port on the blob store (content-addressed: re-runs are safe)."""

    def __init__(self, store: FileStore) -> None:
        self._store = store

    async def put(self, data: bytes, *, name: str, media_type: str) -> str:
        try:
            ref = await self._store.blobs.put(data)
        except Unavailable as exc:
            raise BlobsUnavailable(f"the blob store does not answer: {exc.detail}") from exc
        return ref.sha256
