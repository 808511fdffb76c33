"""The claim loop: who executes what (docs/architecture.md §1, §4).

Claims queued executions (or ones whose lease expired) and runs each as an `AttemptRunner`.
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
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Protocol

from opennua.protocol import timestamp
from opennua.runtime import AgentDefinition, Sandbox, Tracing, sandbox_problem
from opennua.store import Execution, StoreError
from opennua.supervisor._attempt import (
    AttemptConfig,
    AttemptRunner,
    AttemptStore,
    GatewayIssuer,
    GrantCheck,
)
from opennua.supervisor._journal import Committed, host_action
from opennua.supervisor._retention import Collector, CollectorStore
from opennua.supervisor._snapshot import SandboxSecret
from opennua.supervisor._tracing import emit_turn_span


class SupervisorStore(AttemptStore, CollectorStore, Protocol):
    """What a supervisor claims, sweeps and collects with, and hands its attempts."""


log = logging.getLogger("opennua.supervisor")


class Supervisor:
    def __init__(
        self,
        store: SupervisorStore,
        agent: AgentDefinition,
        *,
        supervisor_id: str,
        data_dir: Path,
        ttl: float = 15.0,
        poll_interval: float = 0.2,
        concurrency: int = 8,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        model: Any = None,
        sandbox: Sandbox | None = None,
        tracing: Tracing | None = None,
        on_claim: Callable[[], None] = lambda: None,
        on_fenced: Callable[[], None] = lambda: None,
        on_append: Callable[[int], None] = lambda count: None,
        on_committed: Committed | None = None,
        grant_check: GrantCheck | None = None,
        gateway: GatewayIssuer | None = None,
        sandbox_secret: SandboxSecret | None = None,
        retention: float | None = None,
        collect_every: float = 3600.0,
    ) -> None:
        """`sandbox`: how `shell` commands and stdio MCP servers run, confined (refused
        where the sandbox cannot start; default bubblewrap) or, the operator's explicit
        choice, mode "none", and their resource limits. `grant_check`
        re-checks (and renews) an execution's grant at claim and every heartbeat:
        `opennua.auth.Authority.renew_grant`. `gateway` issues each attempt that has remote
        MCP servers its route (and ticket) to the gateway. `retention`: seconds an ended
        session's workspace is kept; then, every `collect_every` seconds, its blobs are
        collected (`_retention.Collector`; None: never). `concurrency`: executions run at
        once, at least 1 (ValueError otherwise: none would ever run)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.store = store
        self.agent = agent
        self.config = AttemptConfig(
            supervisor_id=supervisor_id,
            ttl=ttl,
            data_dir=data_dir,
            clock=clock,
            monotonic=monotonic,
            model=model,
            on_fenced=on_fenced,
            on_append=on_append,
            on_committed=on_committed,
            sandbox=sandbox or Sandbox(),
            grant_check=grant_check,
            tracing=tracing,
            gateway=gateway,
            sandbox_secret=sandbox_secret,
        )
        self._collector = (
            None
            if retention is None
            else Collector(
                store,
                retention=retention,
                clock=clock,
                data_dir=data_dir,
                collector_id=supervisor_id,
            )
        )
        self._collect_every = collect_every
        self._on_claim = on_claim
        self._poll = poll_interval
        self._slots = asyncio.Semaphore(concurrency)
        self._attempts: dict[asyncio.Task[None], AttemptRunner] = {}
        self._stopping = asyncio.Event()
        self._nudge = asyncio.Event()
        self.claims = 0

    def nudge(self) -> None:
        """Something may have become claimable (a message accepted, an answer given)."""
        self._nudge.set()

    async def run(self) -> None:
        # Bubblewrap is tried once, now, not at the first command (its answer is cached).
        problem = await asyncio.to_thread(sandbox_problem, self.config.sandbox.mode)
        if problem is not None:
            log.warning("shell commands will be refused: %s", problem)
        sweeper = asyncio.create_task(self._sweep_forever())
        collecting = asyncio.create_task(self._collect_forever())
        try:
            while not self._stopping.is_set():
                await self._slots.acquire()
                try:
                    claimed = await self.store.claim(
                        self.config.supervisor_id, self.config.clock(), self.config.ttl
                    )
                except StoreError:
                    # A claim that failed, or whose outcome is unknown (it may have
                    # committed: lease expiry hands that execution to the next claim),
                    # must not end the claim loop. Found by the simulation (issue 20).
                    log.warning("claim failed; retrying", exc_info=True)
                    claimed = None
                if claimed is None:
                    self._slots.release()
                    self._nudge.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._nudge.wait(), self._poll)
                    continue
                self.claims += 1
                self._on_claim()
                attempt = AttemptRunner(self.store, self.agent, claimed, self.config)
                task = asyncio.create_task(attempt.run())
                self._attempts[task] = attempt
                task.add_done_callback(self._done)
        finally:
            for background in (sweeper, collecting):
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background

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

    async def _collect_forever(self) -> None:
        if self._collector is None:
            return
        while True:
            try:
                result = await self._collector.collect()
                if result.deleted:
                    log.info(
                        "retention: %d blobs of %d ended sessions collected",
                        len(result.deleted),
                        len(result.ended_sessions),
                    )
            except Exception:
                log.exception("workspace retention pass failed")
            await asyncio.sleep(self._collect_every)

    async def sweep_deadlines(self) -> None:
        """End executions nobody runs whose deadline passed, and tell their session.

        Clients are told each open request expired (not merely closed) before the turn
        ends; the store commits those actions with the end itself.
        """
        now = self.config.clock()
        ts = timestamp(now)

        def narrate(execution: Execution, expired: list[str]) -> list[dict[str, Any]]:
            actions = [
                host_action(
                    execution,
                    f"request/{request_id}/expired",
                    "input_request.resolved",
                    {"request_id": request_id, "outcome": "expired"},
                    ts,
                )
                for request_id in expired
            ]
            ended = {"stop_reason": "deadline_exceeded", "error": None}
            return [*actions, host_action(execution, "turn.ended", "turn.ended", ended, ts)]

        for execution, seqs in await self.store.sweep_deadlines(now, narrate):
            tracing = self.config.tracing
            if tracing is not None and tracing.tracer_provider is not None:
                emit_turn_span(
                    tracing,
                    execution,
                    attempts=execution.attempt,
                    stop_reason="deadline_exceeded",
                    error=None,
                    ended_at=now,
                    seqs=seqs,
                )

    async def recheck_grants(self, principal_ids: Collection[str], grace: float = 2.0) -> None:
        """These principals' rights changed (the store's `watch_rights`): every attempt
        here that runs on one of their grants checks it now instead of at its next
        heartbeat. Those that stop are waited for (up to `grace`), so that a turn one
        parked meanwhile is parked by the time the caller ends what nobody runs
        (`SessionHost.end_revoked`)."""
        running = [
            (task, attempt)
            for task, attempt in self._attempts.items()
            if attempt.claimed.execution.principal_id in principal_ids
        ]
        stops = await asyncio.gather(*(attempt.recheck_grant() for _, attempt in running))
        stopped = [task for (task, _), stops_now in zip(running, stops, strict=True) if stops_now]
        if stopped:
            await asyncio.wait(stopped, timeout=grace)

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
