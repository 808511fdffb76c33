"""The claim loop: who executes what (DESIGN.md §1, §4).

Claims queued executions (or ones whose lease expired) and runs each as an `Attempt`.
A sweeper ends executions whose absolute deadline passed while nobody ran them (waiting
for input, or queued). `shutdown()` stops claiming, cancels running attempts and releases
their leases so another supervisor resumes them at once; a `kill -9` is recovered by
lease expiry instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opennua.runtime import AgentDefinition
from opennua.store import Store
from opennua.supervisor._attempt import Attempt, AttemptConfig, host_action
from opennua.supervisor._journal import rfc3339

log = logging.getLogger("opennua.supervisor")


class Supervisor:
    def __init__(
        self,
        store: Store,
        agent: AgentDefinition,
        *,
        supervisor_id: str,
        data_dir: Path,
        ttl: float = 15.0,
        poll_interval: float = 0.2,
        concurrency: int = 8,
        clock: Callable[[], float] = time.time,
        model: Any = None,
        on_claim: Callable[[], None] = lambda: None,
        on_fenced: Callable[[], None] = lambda: None,
        on_append: Callable[[int], None] = lambda count: None,
    ) -> None:
        self.store = store
        self.agent = agent
        self.config = AttemptConfig(
            supervisor_id, ttl, data_dir, clock, model, on_fenced, on_append
        )
        self._on_claim = on_claim
        self._poll = poll_interval
        self._slots = asyncio.Semaphore(concurrency)
        self._attempts: dict[asyncio.Task[None], Attempt] = {}
        self._stopping = asyncio.Event()
        self._nudge = asyncio.Event()
        self.claims = 0

    def nudge(self) -> None:
        """Something may have become claimable (a message accepted, an answer given)."""
        self._nudge.set()

    async def run(self) -> None:
        sweeper = asyncio.create_task(self._sweep_forever())
        try:
            while not self._stopping.is_set():
                await self._slots.acquire()
                claimed = await self.store.claim(
                    self.config.supervisor_id, self.config.clock(), self.config.ttl
                )
                if claimed is None:
                    self._slots.release()
                    self._nudge.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._nudge.wait(), self._poll)
                    continue
                self.claims += 1
                self._on_claim()
                attempt = Attempt(self.store, self.agent, claimed, self.config)
                task = asyncio.create_task(attempt.run())
                self._attempts[task] = attempt
                task.add_done_callback(self._done)
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper

    def _done(self, task: asyncio.Task[None]) -> None:
        self._attempts.pop(task, None)
        self._slots.release()

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep_deadlines()
            except Exception:
                log.exception("deadline sweep failed")
            await asyncio.sleep(max(self._poll * 5, 1.0))

    async def sweep_deadlines(self) -> None:
        """End executions nobody runs whose deadline passed, and tell their session.

        The store expired their open input requests in the same commit; clients are told
        each request expired (not merely closed) before the turn ends.
        """
        now = self.config.clock()
        ts = rfc3339(now)
        for execution in await self.store.sweep_deadlines(now):
            target = _Unclaimed(execution)
            expired = await self.store.list_input_requests(
                execution_id=execution.execution_id, status="expired"
            )
            actions = [
                host_action(
                    target,
                    f"request/{request.request_id}/expired",
                    "input_request.resolved",
                    {"request_id": request.request_id, "outcome": "expired"},
                    ts,
                )
                for request in expired
            ]
            actions.append(
                host_action(
                    target,
                    "turn.ended",
                    "turn.ended",
                    {"stop_reason": "deadline_exceeded", "error": None},
                    ts,
                )
            )
            await self.store.append(execution.session_id, actions)

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop claiming; cancel running attempts and release their leases. Idempotent."""
        self._stopping.set()
        self._nudge.set()
        attempts = list(self._attempts.items())
        for task, _ in attempts:
            task.cancel()
        if attempts:
            await asyncio.wait([task for task, _ in attempts], timeout=grace)
        for _, attempt in attempts:
            with contextlib.suppress(Exception):
                await self.store.release(
                    attempt.claimed.execution.execution_id, attempt.claimed.epoch
                )


class _Unclaimed:
    """Lets `host_action` address an execution that no attempt holds (the sweeper's)."""

    def __init__(self, execution: Any) -> None:
        self.execution = execution
