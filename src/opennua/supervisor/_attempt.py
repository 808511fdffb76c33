"""One attempt at one execution: announce it, run or resume the loop, record the end.

The attempt owns the execution only while its lease holds. A heartbeat renews it every
TTL/3; a heartbeat or a write that finds the epoch moved on stops the attempt at once (its
loop task is cancelled, which kills tool subprocesses), and it writes nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from opennua.protocol import timestamp
from opennua.protocol.actions import LOST_PATHS_LIMIT
from opennua.runtime import (
    AgentDefinition,
    AgentLoop,
    Answer,
    Completed,
    DerivedIds,
    EgressRelay,
    GatewayRoute,
    OwnershipLost,
    RunEnv,
    RuntimeFailure,
    Sandbox,
    Stopped,
    Suspended,
    Tracing,
    client_tools,
    invoke_command,
)
from opennua.store import (
    Claimed,
    Execution,
    ExecutionJournal,
    Fenced,
    FencedTransaction,
    FileStore,
    InputStore,
    LogStore,
    NotFound,
    RegistryStore,
    Unavailable,
)
from opennua.supervisor._journal import BlobArtifacts, Committed, StoreJournal, host_action
from opennua.supervisor._snapshot import Agents, SandboxSecret, agent_for
from opennua.supervisor._tracing import attempt_scope, emit_turn_span
from opennua.supervisor._workspace import EMPTY, Workspace, WorkspaceLock


class AttemptStore(LogStore, ExecutionJournal, InputStore, FileStore, RegistryStore, Protocol):
    """What an attempt needs: its execution's journal, its input requests, and what its
    snapshot and workspace are read from."""


log = logging.getLogger("opennua.supervisor")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

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
    #: This process's Host, handed each unit's committed actions (None: no Host here).
    on_committed: Committed | None = None
    #: How `shell` commands and stdio MCP servers run: confined (and how), or (the
    #: operator's choice) not; each attempt adds its egress proxy's socket.
    sandbox: Sandbox = dataclasses.field(default_factory=Sandbox)
    #: Why the execution's grant no longer holds, or None (renewing it when it does).
    grant_check: GrantCheck | None = None
    #: The runtime's interval clock (delta batching); a simulation passes its virtual one.
    monotonic: Callable[[], float] = time.monotonic
    #: Where spans go; None: tracing is off.
    tracing: Tracing | None = None
    #: Issues an attempt's way to the gateway (for remote MCP servers); None: no gateway.
    gateway: GatewayIssuer | None = None
    #: Reads a secret for a deployment's confirmed `sandbox_env`; None: no secret store.
    sandbox_secret: SandboxSecret | None = None
    #: The agents built per execution snapshot, shared by this supervisor's attempts.
    agents: Agents = dataclasses.field(default_factory=Agents)


#: How often an attempt waiting for its workspace looks again.
_LOCK_POLL = 0.05

#: `execution_id -> problem code or None`: see `Supervisor`.
GrantCheck = Callable[[str], Awaitable[str | None]]
#: `(execution_id, epoch) -> the route to the gateway` with a ticket for that attempt.
GatewayIssuer = Callable[[str, int], Awaitable[GatewayRoute]]


def execution_dir(data_dir: Path, execution: Execution) -> Path:
    """The directory an execution's tools work in, created if need be.

    It is the session's: an attempt restores into it the last workspace manifest the
    session committed (``_workspace``), so the files of one turn are there in the next, on
    whichever machine runs it. The directories are 0700 whatever the umask: they hold the
    session's files.
    """
    if not _SAFE_NAME.fullmatch(execution.session_id):
        raise ValueError(f"session id {execution.session_id!r} cannot name a directory")
    root = data_dir / "workspaces"
    path = root / execution.session_id
    for directory in (root, path):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)  # mkdir's mode is masked by the umask
    return path


class AttemptRunner:
    def __init__(
        self, store: AttemptStore, agent: AgentDefinition, claimed: Claimed, config: AttemptConfig
    ) -> None:
        self.store = store
        self.agent = agent
        self.claimed = claimed
        self.config = config
        self.cancel = asyncio.Event()
        self.deadline_passed = False
        #: Why the grant stopped holding, once it has (the run then ends `revoked`).
        self.revoked: str | None = None
        self.fenced = False
        self._task: asyncio.Task[Any] | None = None
        execution = claimed.execution
        index = config.data_dir / "workspace-index"
        self.workspace = Workspace(
            execution_dir(config.data_dir, execution),
            index / f"{execution.session_id}.json",
            store.blobs,
        )
        self._workspace_lock = WorkspaceLock(index / f"{execution.session_id}.lock")
        #: Until when (``config.monotonic``) the lease surely holds: the last renewal's
        #: send time plus the TTL (the claim's, at first).
        self._lease_until = config.monotonic() + config.ttl
        self.journal = StoreJournal(
            store,
            claimed,
            owner=config.supervisor_id,
            clock=config.clock,
            on_fenced=self._lost,
            on_append=config.on_append,
            on_committed=config.on_committed,
            workspace=self.workspace,
            lease_held=lambda: self.config.monotonic() < self._lease_until,
            track_seqs=config.tracing is not None and config.tracing.tracer_provider is not None,
        )

    def _lost(self) -> None:
        self.fenced = True
        self.config.on_fenced()

    def _ts(self) -> str:
        return timestamp(self.config.clock())

    async def _write(self, fill: Callable[[FencedTransaction], object]) -> list[int]:
        return await self.journal.write(fill)

    async def run(self) -> None:
        execution = self.claimed.execution
        try:
            await self._announce()
            if execution.deadline_at is not None and self.config.clock() >= execution.deadline_at:
                await self._end("deadline_exceeded", None)
                return
            if execution.cancel_requested:
                self.cancel.set()
            # Checked at every claim, so also on resume after an answer.
            if await self._grant_revoked():
                await self._end("revoked", self._revoked_error())
                return
            self._task = asyncio.create_task(self._run_loop())
            heartbeat = asyncio.create_task(self._heartbeat())
            try:
                outcome = await self._task
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            await self._record(outcome)
        except (OwnershipLost, Fenced):
            log.warning("attempt %s fenced: stopping", self.claimed.attempt_id)
        except Unavailable as exc:
            # The store went away (a database restart): the execution did not fail, so
            # it is not ended. The attempt stops; its lease lapses and a later attempt
            # resumes from the checkpoint, as after a crash.
            log.warning("attempt %s stopped, store unavailable: %s", self.claimed.attempt_id, exc)
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

    async def _hold_workspace(self) -> None:
        """Take the workspace lock for the restore, then prove the lease is still this
        attempt's: a fenced attempt must not restore a manifest over its successor's files.

        The holder may be an attempt paused past its lease in the middle of its restore;
        while waiting, this one renews its own lease, as its heartbeat would."""
        renew_at = self.config.monotonic() + self.config.ttl / 3
        while not self._workspace_lock.try_acquire():
            if self.config.monotonic() >= renew_at:
                await self._renew()
                renew_at = self.config.monotonic() + self.config.ttl / 3
            await asyncio.sleep(_LOCK_POLL)
        # Waiting, or paused between the claim and here, another attempt may have run and
        # committed the whole execution: a fenced attempt must not touch its files.
        await self._renew()

    async def _renew(self) -> None:
        execution = self.claimed.execution
        sent = self.config.monotonic()
        try:
            await self.store.heartbeat(
                execution.execution_id, self.claimed.epoch, self.config.clock(), self.config.ttl
            )
        except Fenced:
            self._lost()
            raise
        self._lease_until = sent + self.config.ttl

    async def _announce(self) -> None:
        claimed, ts = self.claimed, self._ts()
        stored = await self.store.load_checkpoint(claimed.execution.execution_id)
        resumed = stored.full is not None or bool(stored.steps)
        # Held for the restore only: an attempt frozen later in its run (SIGSTOP) must not
        # keep the next one from taking over once its lease lapses.
        try:
            # Inside: an attempt fenced once it holds the lock must let go of it too.
            await self._hold_workspace()
            restored = await self._restore_workspace(ts)
        finally:
            self._workspace_lock.release()
        actions = [
            host_action(
                claimed.execution,
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
            *restored,
        ]
        await self._write(lambda tx: tx.append(claimed.execution.session_id, actions))

    async def _restore_workspace(self, ts: str) -> list[dict[str, Any]]:
        """Bring the workspace to the session's last committed manifest; the
        `workspace.restored` action when that changed anything or lost anything."""
        claimed = self.claimed
        manifest = await self.store.last_workspace_manifest(claimed.execution.session_id)
        lost: list[str] = []
        retired = False
        if manifest is None:
            # Nothing was ever committed: the files here (if any) are the first commit's.
            if claimed.attempt == 1:
                return []
            restored, written = EMPTY, 0
        else:
            try:
                restored, lost, written = await self.workspace.restore(manifest)
            except NotFound:
                # Retention collected it (the session had ended long ago): the turn starts
                # from an empty workspace, and says so.
                restored, lost, written = EMPTY, await self.workspace.clear(), 0
                retired = True
        self.journal.restored(restored)
        calls: list[str] = []
        if claimed.attempt > 1:
            ledger = await self.store.get_ledger(claimed.execution.execution_id)
            # `started` and never completed: the attempt before this one died running it
            # (a call an earlier attempt already marked `unknown` was reported then).
            calls = sorted(e.tool_call_id for e in ledger if e.status == "started")
        if not (lost or calls or written or retired):
            return []
        data = {
            "execution_id": claimed.execution.execution_id,
            "attempt": claimed.attempt,
            "manifest": manifest,
            "files": restored.files,
            "bytes": restored.bytes,
            "lost_paths": lost[:LOST_PATHS_LIMIT],
            "lost_more": max(0, len(lost) - LOST_PATHS_LIMIT),
            "lost_tool_call_ids": calls,
        }
        key = f"attempt/{claimed.attempt}/workspace-restored"
        return [host_action(claimed.execution, key, "workspace.restored", data, ts)]

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
        env = RunEnv(
            execution_id=execution.execution_id,
            root_run_id=ids("run", "root"),
            workdir=execution_dir(self.config.data_dir, execution),
            ids=ids,
            artifacts=BlobArtifacts(self.store),
            sandbox=self.config.sandbox,
            clock=self.config.monotonic,
            wall_clock=self.config.clock,
            trace=None
            if self.config.tracing is None
            else attempt_scope(
                self.config.tracing,
                self.claimed,
                self.config.supervisor_id,
                self.journal.seqs_of,
            ),
        )
        cache = self.config.data_dir / "plugins"
        bound = await agent_for(
            self.store, self.agent, execution, cache, self.config.sandbox_secret, self.config.agents
        )
        agent = bound.agent
        # Network for sandboxed code goes through the egress proxy, only what the
        # deployment lists (unconfined, the operator's choice, it has the host's anyway).
        egress = bool(bound.egress) and env.sandbox.mode != "none"
        route = None
        remote = agent.a2a_agents or any(s.url for s in agent.mcp_servers)
        if self.config.gateway is not None and (egress or remote):
            # A ticket for this attempt only: a later attempt (epoch) gets its own.
            route = await self.config.gateway(execution.execution_id, self.claimed.epoch)
            route = dataclasses.replace(route, on_revoked=self._gateway_refused)
            env = dataclasses.replace(env, gateway=route)
        async with contextlib.AsyncExitStack() as stack:
            if egress:
                if route is None:
                    raise RuntimeFailure(
                        "the deployment allows egress, which goes through the gateway, and "
                        "this supervisor has none (run `nua serve --role all`, or give "
                        "supervisors --gateway-url)",
                        code="gateway_unavailable",
                    )
                socket = await stack.enter_async_context(EgressRelay(route))
                env.sandbox = dataclasses.replace(env.sandbox, egress=socket)
            parts = execution.input or []
            text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
            # `/name args`: the plugin's command, expanded here from the pinned plugin, so
            # every attempt of the execution runs the same prompt with the same tools.
            agent, prompt = invoke_command(agent, text)
            loop = AgentLoop(
                agent,
                self.journal,
                env,
                model=self.config.model,
                limits=bound.limits,
                client_tools=client_tools(execution.client_tools),
            )
            return await loop.run(prompt, answers=await self._answers(), cancel=self.cancel)

    async def _heartbeat(self) -> None:
        execution = self.claimed.execution
        while True:
            await asyncio.sleep(self.config.ttl / 3)
            now, sent = self.config.clock(), self.config.monotonic()
            try:
                lease = await self.store.heartbeat(
                    execution.execution_id, self.claimed.epoch, now, self.config.ttl
                )
            except Fenced:
                self._lost()
                if self._task is not None:
                    self._task.cancel()
                return
            self._lease_until = sent + self.config.ttl
            if lease.cancel_requested:
                self.cancel.set()
            if await self._grant_revoked():
                self.cancel.set()  # the loop stops; a tool call in flight is `unknown`
            if execution.deadline_at is not None and now >= execution.deadline_at:
                self.deadline_passed = True
                self.cancel.set()

    async def recheck_grant(self) -> bool:
        """Check the grant now, as the next heartbeat would (a revocation named its
        principal): when it no longer holds, the attempt stops. True if it stops."""
        if await self._grant_revoked():
            self.cancel.set()  # the loop stops; a tool call in flight is `unknown`
            return True
        return False

    async def _gateway_refused(self) -> None:
        """The gateway refused a call because the grant no longer holds: check it now,
        as the next heartbeat would, so no further model or tool call is made."""
        if await self._grant_revoked():
            self.cancel.set()

    async def _grant_revoked(self) -> bool:
        if self.config.grant_check is None or self.revoked is not None:
            return self.revoked is not None
        try:
            self.revoked = await self.config.grant_check(self.claimed.execution.execution_id)
        except Exception:
            # The check could not be made (the store hiccuped): the grant is still within
            # its expiry, so carry on; the next heartbeat checks again.
            log.warning("grant check of %s failed", self.claimed.execution.execution_id)
            return False
        return self.revoked is not None

    def _revoked_error(self) -> dict[str, Any]:
        return {
            "code": "grant_revoked",
            "message": f"the execution's grant is revoked: {self.revoked}",
        }

    async def _record(self, outcome: Any) -> None:
        if isinstance(outcome, Suspended):
            action = host_action(
                self.claimed.execution,
                f"suspend/{outcome.step_no}",
                "turn.state",
                {"state": "requires_action"},
                self._ts(),
            )

            committed = await self.journal.workspace_actions()

            def park(tx: FencedTransaction) -> None:
                tx.append(self.claimed.execution.session_id, [*committed, action])
                tx.park_for_input()

            await self._write(park)
        elif isinstance(outcome, Completed):
            # The structured result rides on the turn's end: one fact, seen by every client
            # and every subscriber of `turn.ended`.
            result = {"output": outcome.result} if outcome.structured else {}
            await self._end("end_turn", None, result)
        elif isinstance(outcome, Stopped):
            reason: str = "deadline_exceeded" if self.deadline_passed else outcome.stop_reason
            error = outcome.error.model_dump(mode="json") if outcome.error else None
            if self.revoked is not None:
                reason, error = "revoked", self._revoked_error()
            await self._end(reason, error)

    async def _end(
        self, stop_reason: str, error: dict[str, Any] | None, extra: dict[str, Any] | None = None
    ) -> None:
        action = host_action(
            self.claimed.execution,
            "turn.ended",
            "turn.ended",
            {"stop_reason": stop_reason, "error": error, **(extra or {})},
            self._ts(),
        )
        status = _EXECUTION_STATUS[stop_reason]
        try:
            committed = await self.journal.workspace_actions()
        except Exception:
            # The turn ends either way; its files stay as last committed.
            log.exception("attempt %s: the final workspace commit failed", self.claimed.attempt_id)
            committed = []

        def end(tx: FencedTransaction) -> None:
            tx.append(self.claimed.execution.session_id, [*committed, action])
            tx.finish(status, error=error, now=self.config.clock())

        seqs = await self._write(end)
        if self.config.tracing is not None and self.config.tracing.tracer_provider is not None:
            emit_turn_span(
                self.config.tracing,
                self.claimed.execution,
                attempts=self.claimed.attempt,
                stop_reason=stop_reason,
                error=error,
                ended_at=self.config.clock(),
                seqs=seqs,
            )
