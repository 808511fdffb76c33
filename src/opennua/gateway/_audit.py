"""The gateway's audit: one record per call it answered, written in batches.

A call does not wait for a commit of its own (that would put an fsync on every tool
call): records are queued and a background task writes what accumulated, at least every
`interval` seconds. `flush()` writes now (shutdown, tests, `nua audit` in-process).
A crash loses at most the last interval's records, never a tool result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ulid import ULID

from opennua.protocol.ids import prefixed
from opennua.store import AuditRecord, GatewayStore, StoreError

log = logging.getLogger("opennua.gateway")


#: Seconds between batches (a crash loses at most this much of the audit). At 50 ms the
#: gateway made 6-7 % fewer calls/s at 8 in flight than at 250 ms (benchmarks/gateway.py,
#: alternating): a commit, its WAL pages and their checkpoint 20 times a second.
AUDIT_INTERVAL = 0.25


def audit_id(now: float) -> str:
    return prefixed("audit", ULID.from_timestamp(now))


def record_of(
    call: dict[str, Any], outcome: str, code: str | None, started: float, now: float, **more: Any
) -> AuditRecord:
    """The audit record of what a request learnt of itself (`call`) and how it ended;
    `started` is its `time.perf_counter()` at the start."""
    return AuditRecord(
        audit_id=audit_id(now),
        at=now,
        server=str(call.get("server", ""))[:200],
        outcome=outcome,
        code=code,
        latency_ms=(time.perf_counter() - started) * 1000,
        workspace_id=call.get("workspace_id"),
        principal_id=call.get("principal_id"),
        execution_id=call.get("execution_id"),
        tool=call.get("tool"),
        host=(str(call["host"])[:255] if call.get("host") else None),
        credential=call.get("credential"),
        **more,
    )


class AuditLog:
    def __init__(
        self, store: GatewayStore, *, interval: float = AUDIT_INTERVAL, max_batch: int = 500
    ) -> None:
        self._store = store
        self._interval = interval
        self._max_batch = max_batch
        self._queue: list[AuditRecord] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def add(self, record: AuditRecord) -> None:
        self._queue.append(record)
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        if len(self._queue) >= self._max_batch:
            self._wake.set()

    async def flush(self) -> None:
        async with self._lock:
            while self._queue:
                batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                try:
                    await self._store.append_audit(batch)
                except StoreError:
                    log.warning("audit records not written; kept for the next try", exc_info=True)
                    self._queue[:0] = batch
                    return

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            await self.flush()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        await self.flush()
