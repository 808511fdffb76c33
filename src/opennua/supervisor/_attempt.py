"""One attempt at one execution: announce it, run or resume the loop, record the end.

The attempt owns the execution only while its lease holds. A heartbeat renews it every
TTL/3; a heartbeat or a write that finds the epoch moved on stops the attempt at once (its
loop task is cancelled, which kills tool subprocesses), and it writes nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opennua.protocol.actions import PROTOCOL_VERSION
from opennua.protocol.ids import action_id
from opennua.runtime import AgentDefinition, AgentLoop, Answer, Completed, Stopped, Suspended
from opennua.runtime._env import DerivedIds, RunEnv
from opennua.runtime.errors import Fenced as RuntimeFenced
from opennua.runtime.errors import RuntimeFailure
from opennua.store import Claimed, Fenced, FencedTransaction, Store
from opennua.supervisor._journal import BlobArtifacts, StoreJournal, rfc3339

log = logging.getLogger("opennua.supervisor")

_EXECUTION_STATUS = {
    "end_turn": "completed",
    "cancelled": "cancelled",
    "failed": "failed",
    "max_steps": "failed",
    "deadline_exceeded": "deadline_exceeded",
    "revoked": "revoked",
}


@dataclass
class AttemptConfig:
    supervisor_id: str
    ttl: float
    data_dir: Path
    clock: Callable[[], float]
    model: Any = None  # a pydantic-ai Model overriding the agent's (tests)
    on_fenced: Callable[[], None] = lambda: None  # metrics: a write or renewal was fenced
    on_append: Callable[[int], None] = lambda count: None  # metrics: actions appended


def host_action(
    claimed: Claimed, key: str, type_: str, data: dict[str, Any], ts: str
) -> dict[str, Any]:
    """An action the supervisor emits about the execution itself (id derived, so it dedupes)."""
    execution = claimed.execution
    return {
        "v": PROTOCOL_VERSION,
        "session_id": execution.session_id,
        "id": action_id(execution.execution_id, key),
        "type": type_,
        "ts": ts,
        "turn_id": execution.turn_id,
        "run_id": None,
        "client_id": None,
        "intent_id": None,
        "data": data,
    }


class Attempt:
    def __init__(
        self, store: Store, agent: AgentDefinition, claimed: Claimed, config: AttemptConfig
    ) -> None:
        self.store = store
        self.agent = agent
        self.claimed = claimed
        self.config = config
        self.cancel = asyncio.Event()
        self.deadline_passed = False
        self.fenced = False
        self._task: asyncio.Task[Any] | None = None
        self.journal = StoreJournal(
            store,
            claimed,
            owner=config.supervisor_id,
            clock=config.clock,
            on_fenced=self._lost,
            on_append=config.on_append,
        )

    def _lost(self) -> None:
        self.fenced = True
        self.config.on_fenced()

    def _ts(self) -> str:
        return rfc3339(self.config.clock())

    async def _write(self, fill: Callable[[FencedTransaction], None]) -> None:
        await self.journal.write(fill)

    async def run(self) -> None:
        execution = self.claimed.execution
        try:
            await self._announce()
            if execution.deadline_at is not None and self.config.clock() >= execution.deadline_at:
                await self._end("deadline_exceeded", None)
                return
            if execution.cancel_requested:
                self.cancel.set()
            self._task = asyncio.create_task(self._run_loop())
            heartbeat = asyncio.create_task(self._heartbeat())
            try:
                outcome = await self._task
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            await self._record(outcome)
        except (RuntimeFenced, Fenced):
            log.warning("attempt %s fenced: stopping", self.claimed.attempt_id)
        except asyncio.CancelledError:
            if self.fenced:
                log.warning("attempt %s lost its lease: stopped", self.claimed.attempt_id)
                return
            raise
        except RuntimeFailure as failure:
            await self._end("failed", {"code": failure.code, "message": failure.message})
        except Exception as exc:
            log.exception("attempt %s failed", self.claimed.attempt_id)
            await self._end("failed", {"code": "internal_error", "message": str(exc)})

    async def _announce(self) -> None:
        claimed, ts = self.claimed, self._ts()
        stored = await self.store.load_checkpoint(claimed.execution.execution_id)
        resumed = stored.full is not None or bool(stored.steps)
        actions = [
            host_action(
                claimed,
                f"attempt/{claimed.attempt}/started",
                "execution.attempt_started",
                {
                    "execution_id": claimed.execution.execution_id,
                    "attempt": claimed.attempt,
                    "attempt_id": claimed.attempt_id,
                    "supervisor_id": self.config.supervisor_id,
                    "resumed_from_checkpoint": resumed,
                },
                ts,
            ),
            host_action(
                claimed,
                f"attempt/{claimed.attempt}/running",
                "turn.state",
                {"state": "running", "attempt": claimed.attempt},
                ts,
            ),
        ]
        await self._write(lambda tx: tx.append(claimed.execution.session_id, actions))

    async def _answers(self) -> dict[str, Answer]:
        requests = await self.store.list_input_requests(
            execution_id=self.claimed.execution.execution_id, status="resolved"
        )
        answers = {}
        for request in requests:
            resolution = request.resolution or {}
            answers[request.request_id] = Answer(
                option_id=resolution.get("option_id"), payload=resolution.get("payload")
            )
        return answers

    async def _run_loop(self) -> Any:
        execution = self.claimed.execution
        ids = DerivedIds(execution.execution_id, ms=int(execution.created_at * 1000))
        workspace = self.config.data_dir / "workspaces" / execution.execution_id
        workspace.mkdir(parents=True, exist_ok=True)
        env = RunEnv(
            execution_id=execution.execution_id,
            root_run_id=ids("run", "root"),
            workspace=workspace,
            ids=ids,
            artifacts=BlobArtifacts(self.store),
        )
        loop = AgentLoop(self.agent, self.journal, env, model=self.config.model)
        parts = execution.input or []
        prompt = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        return await loop.run(prompt, answers=await self._answers(), cancel=self.cancel)

    async def _heartbeat(self) -> None:
        execution = self.claimed.execution
        while True:
            await asyncio.sleep(self.config.ttl / 3)
            now = self.config.clock()
            try:
                lease = await self.store.heartbeat(
                    execution.execution_id, self.claimed.epoch, now, self.config.ttl
                )
            except Fenced:
                self._lost()
                if self._task is not None:
                    self._task.cancel()
                return
            if lease.cancel_requested:
                self.cancel.set()
            if execution.deadline_at is not None and now >= execution.deadline_at:
                self.deadline_passed = True
                self.cancel.set()

    async def _record(self, outcome: Any) -> None:
        if isinstance(outcome, Suspended):
            action = host_action(
                self.claimed,
                f"suspend/{outcome.step_no}",
                "turn.state",
                {"state": "requires_action"},
                self._ts(),
            )

            def park(tx: FencedTransaction) -> None:
                tx.append(self.claimed.execution.session_id, [action])
                tx.park_for_input()

            await self._write(park)
        elif isinstance(outcome, Completed):
            await self._end("end_turn", None)
        elif isinstance(outcome, Stopped):
            reason = "deadline_exceeded" if self.deadline_passed else outcome.stop_reason
            error = outcome.error.model_dump(mode="json") if outcome.error else None
            await self._end(reason, error)

    async def _end(self, stop_reason: str, error: dict[str, Any] | None) -> None:
        action = host_action(
            self.claimed,
            "turn.ended",
            "turn.ended",
            {"stop_reason": stop_reason, "error": error},
            self._ts(),
        )
        status = _EXECUTION_STATUS[stop_reason]

        def end(tx: FencedTransaction) -> None:
            tx.append(self.claimed.execution.session_id, [action])
            tx.finish(status, error=error, now=self.config.clock())

        await self._write(end)
