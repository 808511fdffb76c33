"""The Session Host's intent service (docs/architecture.md §1, §3, §4).

One door, `submit`, takes the protocol's intent object, so HTTP, the WebSocket and every
client behind them share validation; one private method per intent implements it. Every
accepted intent is one store unit of work that records the facts, appends the
client-visible actions and completes the idempotency record together: a crash leaves
either all of it or none of it. The Host never runs models or tools; it records
accepted commands (executions) that the Supervisor claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any, Protocol, assert_never

from opennua.plugins import parse_invocation, unknown_command
from opennua.protocol import (
    Accepted,
    AnswerInput,
    Cancel,
    Conflict,
    CreateSession,
    IntentResult,
    Rejected,
    ReportDelivery,
    RetryTurn,
    SendMessage,
    SessionState,
    UpdateSession,
    action_id,
    envelope,
    timestamp,
)
from opennua.protocol.actions import TextPart
from opennua.protocol.intents import INTENT_RESULT_ADAPTER
from opennua.protocol.state import Artifact
from opennua.store import (
    ACTIVE_STATUSES,
    ArtifactRecord,
    AttemptRecord,
    AuthStore,
    Execution,
    ExecutionJournal,
    FileStore,
    InFlight,
    InputStore,
    LogStore,
    Lost,
    Mismatch,
    NotFound,
    Page,
    RegistryStore,
    Replay,
    SealedSecretStore,
    SessionBusy,
    SessionFilter,
    SessionRecord,
    SessionSummary,
    Transaction,
    Watcher,
    WriteConflict,
)

from ._artifacts import ArtifactRetries
from ._hub import Hub
from ._inputs import (
    Actor,
    AutomatedRun,
    Clock,
    Ids,
    RecordTrigger,
    random_ids,
    request_hash,
)
from ._plugin_files import DEFAULT_WORKSPACE_QUOTA
from ._refused import Refused
from ._registry import (
    DEFAULT_DEPLOYMENT,
    ExecutionSnapshot,
    Registry,
    Scope,
    execution_principal,
)
from ._revoked import GrantCheck, RevokedWork
from ._schema_check import check_answer
from ._states import SessionStates
from ._tracing import trace_parent, turn_trace


class HostStore(
    LogStore,
    ExecutionJournal,
    InputStore,
    FileStore,
    RegistryStore,
    AuthStore,
    SealedSecretStore,
    Protocol,
):
    """What the Host arbitrates with: the log and idempotency, executions and input
    requests, and what its registry, states, retries and revocations need."""


_log = logging.getLogger(__name__)

#: The intents that act on a session that exists.
SessionIntent = SendMessage | Cancel | AnswerInput | RetryTurn | UpdateSession | ReportDelivery

#: Delivery states after which the platform's answer is final.
CLOSED_DELIVERY = ("sent", "failed", "delivered", "abandoned")


class SessionHost:
    """Arbitrates client intents for every session; see the module docstring."""

    def __init__(
        self,
        store: HostStore,
        hub: Hub,
        *,
        clock: Clock = time.time,
        ids: Ids | None = None,
        deadline_seconds: float = 3600.0,
        principal_id: str = "prn_owner",
        on_append: Callable[[int], None] | None = None,
        grant_check: GrantCheck | None = None,
        workspace_quota: int | None = DEFAULT_WORKSPACE_QUOTA,
        priced: Callable[[str], bool] | None = None,
        agent_tools: frozenset[str] = frozenset(),
    ) -> None:
        """`priced`: see `Registry` (whether a model's cost can be capped).
        `agent_tools`: the names of the runtime's own tools, which a client tool may not
        take (the runtime fails a turn whose client tool clashes with one it finds only
        then, a plugin's MCP tool)."""
        self.store = store
        self.hub = hub
        self._clock = clock
        self._ids = ids or random_ids(clock)
        self._deadline_seconds = deadline_seconds
        self._principal_id = principal_id
        self._on_append = on_append
        self._grant_check = grant_check
        self._agent_tools = agent_tools
        #: Plugins, channels and deployments; resolves a new session's snapshot.
        self.registry = Registry(store, clock=clock, workspace_quota=workspace_quota, priced=priced)
        #: Folded states and the snapshot policy.
        self.states = SessionStates(store)
        #: Ends the parked turns whose grant broke (on an answer, or a revocation).
        self._revocations = RevokedWork(store, grant_check, clock, self._committed)
        self._artifacts = ArtifactRetries(
            store, self.states, clock=clock, ids=self._ids, committed=self._committed
        )
        self._delivery_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _delivery_lock(self, session_id: str) -> asyncio.Lock:
        """Serialises "is this delivery closed?" with appending a report, within this
        process (turns are decided in the store unit instead: `Transaction.require_idle`)."""
        lock = self._delivery_locks.get(session_id)
        if lock is None:
            lock = self._delivery_locks[session_id] = asyncio.Lock()
        return lock

    def new_intent_id(self) -> str:
        """For callers whose client gave no key: a fresh one (no idempotency across calls)."""
        return self._ids("intent")

    # -- intents ---------------------------------------------------------------------

    async def submit(
        self,
        session_id: str | None,
        intent: CreateSession | SessionIntent,
        *,
        actor: Actor | None = None,
    ) -> IntentResult:
        """The one door for a client's intent, from HTTP, the WebSocket and every client
        behind them (the CLI, the bridge): arbitrated, and answered with what was decided.
        `session_id` None only for `CreateSession`; `actor` None: this Host's own principal.
        An accepted answer carries its resolution, so no caller reads it back."""
        if isinstance(intent, CreateSession):
            return await self._create_session(intent, actor=actor)
        if session_id is None:
            raise TypeError(f"{intent.type} needs a session_id")
        match intent:
            case SendMessage():
                return await self._send_message(session_id, intent, actor=actor)
            case Cancel():
                return await self._cancel(session_id, intent, actor=actor)
            case AnswerInput():
                return await self._answer_input(session_id, intent, actor=actor)
            case RetryTurn():
                return await self._retry_turn(session_id, intent, actor=actor)
            case UpdateSession():
                return await self._update_session(session_id, intent, actor=actor)
            case ReportDelivery():
                return await self._report_delivery(session_id, intent, actor=actor)
            case _:
                assert_never(intent)

    def _principal(self, actor: Actor | None) -> str:
        return self._principal_id if actor is None else actor.principal_id

    async def _create_session(
        self, intent: CreateSession, *, actor: Actor | None = None
    ) -> IntentResult:
        principal_id = self._principal(actor)
        workspace_id = actor.workspace_id if actor is not None else None

        async def body() -> tuple[IntentResult, bool]:
            # Resolved once, here: releasing a new version affects only later sessions.
            try:
                scope = Scope(workspace_id, principal_id) if workspace_id is not None else None
                snap = await self.registry.resolve(intent.deployment or DEFAULT_DEPLOYMENT, scope)
            except Refused as exc:
                return self._reject(intent, exc.code, exc.detail), False
            session_id = self._ids("session")
            result = Accepted(intent_id=intent.intent_id, ids={"session_id": session_id})
            session, created = self._new_session(
                session_id, intent, snap, workspace_id, principal_id, intent.title, intent.metadata
            )
            async with self.store.transaction() as tx:
                tx.create_session(session)
                tx.append(session_id, [created])
                self._claim(tx, "create_session", intent, result)
            await self._published(session_id, tx)
            return result, True

        return await self._idempotent("create_session", intent, body)

    def _new_session(
        self,
        session_id: str,
        intent: Any,
        snap: ExecutionSnapshot,
        workspace_id: str | None,
        principal_id: str,
        title: str,
        metadata: dict[str, Any],
    ) -> tuple[SessionRecord, dict[str, Any]]:
        """A new session bound to `snap`, and its `session.created`."""
        now = self._clock()
        created = self._action(
            session_id,
            intent,
            "created",
            "session.created",
            {
                "title": title,
                "workspace_id": workspace_id,
                "principal_id": principal_id,
                "plugin": {
                    "name": snap.plugin,
                    "version": snap.version,
                    "digest": snap.plugin_digest,
                },
                "deployment_digest": snap.deployment_digest,
                "metadata": metadata,
                "deployment": snap.deployment,
                "model": snap.model,
                "snapshot_digest": snap.digest,
            },
            now=now,
        )
        session = SessionRecord(
            session_id=session_id,
            created_at=now,
            workspace_id=workspace_id,
            principal_id=principal_id,
            title=title or None,
            plugin_digest=snap.plugin_digest,
            deployment_digest=snap.deployment_digest,
            metadata=metadata,
            plugin=f"{snap.plugin}@{snap.version}",
            deployment=snap.deployment,
            model=snap.model,
            snapshot_digest=snap.digest,
        )
        return session, created

    async def _send_message(
        self, session_id: str, intent: SendMessage, *, actor: Actor | None = None
    ) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            session, active = await self._active(session_id)
            if active and intent.if_busy == "reject":
                return self._reject(intent, "session_busy", "a turn is already active"), False
            unknown = await self._unknown_command(session_id, intent)
            if unknown is not None:
                return self._reject(intent, "unknown_command", unknown), False
            taken = sorted(t.name for t in intent.client_tools if t.name in self._agent_tools)
            if taken:
                why = f"the agent has tools of these names: {', '.join(taken)}"
                return self._reject(intent, "client_tool_conflict", why), False
            interrupt = active if intent.if_busy == "interrupt" else []
            input_parts = [part.model_dump(mode="json") for part in intent.content]
            trigger = {"kind": "message", "client_id": intent.client_id}
            try:
                result = await self._start_turn(
                    session_id,
                    intent,
                    trigger,
                    input_parts,
                    None,
                    interrupt,
                    actor,
                    require_idle=intent.if_busy == "reject",
                    session=session,
                    client_tools=[t.model_dump(mode="json") for t in intent.client_tools],
                )
            except SessionBusy:
                # Another host (or task) started a turn between our read and our commit.
                return self._reject(intent, "session_busy", "a turn is already active"), False
            except Refused as exc:
                return self._reject(intent, exc.code, exc.detail), False
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def _retry_turn(
        self, session_id: str, intent: RetryTurn, *, actor: Actor | None = None
    ) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            executions = await self.store.list_executions(session_id)
            old = next((e for e in executions if e.turn_id == intent.turn_id), None)
            if old is None:
                return self._reject(intent, "not_found", f"turn {intent.turn_id} not found"), False
            if old.status in ACTIVE_STATUSES:
                # A retry is a new decision about a finished turn, never a second runner.
                return self._reject(intent, "turn_active", "the turn is still active"), False
            trigger = {"kind": "retry", "client_id": intent.client_id}
            try:
                result = await self._start_turn(
                    session_id,
                    intent,
                    trigger,
                    old.input,
                    old,
                    [],
                    actor,
                    client_tools=old.client_tools or [],
                )
            except Refused as exc:
                return self._reject(intent, exc.code, exc.detail), False
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def _cancel(
        self, session_id: str, intent: Cancel, *, actor: Actor | None = None
    ) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            _, active = await self._active(session_id)
            if intent.turn_id is not None:
                executions = await self.store.list_executions(session_id)
                if not any(e.turn_id == intent.turn_id for e in executions):
                    return self._reject(
                        intent, "not_found", f"turn {intent.turn_id} not found"
                    ), False
                active = [e for e in active if e.turn_id == intent.turn_id]
            if not active:
                return self._reject(intent, "turn_not_active", "no active turn to cancel"), False
            result = Accepted(
                intent_id=intent.intent_id,
                ids={"execution_id": active[0].execution_id, "turn_id": active[0].turn_id},
            )
            # The Supervisor ends the turn (turn.ended cancelled): it owns the attempt.
            async with self.store.transaction() as tx:
                for execution in active:
                    tx.request_cancel(execution.execution_id)
                self._claim(tx, session_id, intent, result)
            await self._close_requests(session_id, intent, active)
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def _update_session(
        self, session_id: str, intent: UpdateSession, *, actor: Actor | None = None
    ) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            await self.store.get_session(session_id)
            result = Accepted(intent_id=intent.intent_id, ids={"session_id": session_id})
            updated = self._action(
                session_id, intent, "updated", "session.updated", {"title": intent.title}
            )
            async with self.store.transaction() as tx:
                tx.update_session_title(session_id, intent.title)
                tx.append(session_id, [updated])
                self._claim(tx, session_id, intent, result)
            await self._published(session_id, tx)
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def _report_delivery(
        self, session_id: str, intent: ReportDelivery, *, actor: Actor | None = None
    ) -> IntentResult:
        """Append a bridge's report on an external delivery as `delivery.updated`.

        Delivery is the platform's fact, witnessed by the bridge; the Host only orders the
        report into the log. A delivery that reached `sent` or `failed` is closed: a later,
        different report is refused, so no client sees a sent message turn back to pending.
        """

        async def body() -> tuple[IntentResult, bool]:
            async with self._delivery_lock(session_id):
                state = await self.states.fold(session_id)
                known = state["deliveries"].get(intent.delivery_id)
                if known is not None and known["status"] in CLOSED_DELIVERY:
                    msg = f"delivery {intent.delivery_id} is already {known['status']}"
                    return self._reject(intent, "delivery_closed", msg), False
                data = intent.model_dump(mode="json", exclude={"type", "intent_id", "client_id"})
                action = self._action(session_id, intent, "delivery", "delivery.updated", data)
                result = Accepted(
                    intent_id=intent.intent_id, ids={"delivery_id": intent.delivery_id}
                )
                async with self.store.transaction() as tx:
                    tx.append(session_id, [action])
                    self._claim(tx, session_id, intent, result)
            await self._published(session_id, tx)
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def start_automated(self, run: AutomatedRun) -> IntentResult:
        """Start a turn for a schedule's fire or a webhook's delivery (docs/automation.md).

        One unit: the session (when the run makes one) with `session.created`, the
        execution with `turn.started` and `queued`, its grant, and the trigger's own fact
        (`run.record`: the fire, the delivery), whose key is the slot or the `webhook-id`.
        That record is the idempotency: a second start for the same key (a retried fire,
        a redelivery, a second scheduler) fails the whole unit with `WriteConflict` and
        writes nothing, and the caller reads the first acceptance from the record.
        """
        actor = Actor(run.principal_id, run.workspace_id, run.grant)
        intent = SendMessage(
            intent_id=run.key,
            client_id=run.client_id,
            content=[TextPart(text=run.prompt)],
            if_busy="enqueue",
        )
        new_session = None
        if run.session_id is None:
            try:
                scope = Scope(run.workspace_id, run.principal_id)
                snap = await self.registry.resolve(
                    run.deployment, scope, record=run.deployment_record
                )
            except Refused as exc:
                return self._reject(intent, exc.code, exc.detail)
            session_id = self._ids("session")
            new_session = self._new_session(
                session_id, intent, snap, run.workspace_id, run.principal_id, run.title, {}
            )
        else:
            session_id = run.session_id
        parts = [part.model_dump(mode="json") for part in intent.content]
        try:
            result = await self._start_turn(
                session_id,
                intent,
                run.trigger,
                parts,
                None,
                [],
                actor,
                also=run.record,
                new_session=new_session,
            )
        except Refused as exc:
            return self._reject(intent, exc.code, exc.detail)
        return result.model_copy(update={"ids": {**result.ids, "session_id": session_id}})

    async def _answer_input(
        self, session_id: str, intent: AnswerInput, *, actor: Actor | None = None
    ) -> IntentResult:
        principal_id = self._principal(actor)

        async def body() -> tuple[IntentResult, bool]:
            try:
                # One read for everything the answer is checked against, grant included.
                facts = await self.store.answer_facts(intent.request_id)
            except NotFound:
                facts = None
            if facts is None or facts.request.session_id != session_id:
                msg = f"input request {intent.request_id} not found in this session"
                return self._reject(intent, "not_found", msg), False
            request = facts.request
            now = self._clock()
            if request.status == "resolved":
                return _conflict(intent, request.resolution), True
            execution = facts.execution
            if request.status != "open" or (
                request.expires_at is not None and request.expires_at <= now
            ):
                return _gone(intent, execution, f"the input request is {request.status}"), False
            if execution.status not in ACTIVE_STATUSES or execution.cancel_requested:
                # Nobody will resume with this answer, unless another one won meanwhile
                # (a winner re-queues the execution, so re-read before saying "gone").
                latest = await self.store.get_input_request(intent.request_id)
                if latest.status == "resolved":
                    return _conflict(intent, latest.resolution), True
                return _gone(intent, execution, f"the turn is {execution.status}"), False
            problem = check_answer(request.payload, intent)
            if problem is not None:
                return self._reject(intent, "validation_error", problem), False
            revoked = await self._revocations.end_if_broken(execution, facts.grant, now)
            if revoked is not None:
                return self._reject(intent, "grant_revoked", revoked), False
            answered_by = {
                "client_id": intent.client_id,
                "principal_id": principal_id,
                "on_behalf_of": intent.on_behalf_of,
            }
            resolution: dict[str, Any] = {
                "request_id": intent.request_id,
                "outcome": "selected" if intent.option_id is not None else "answered",
                "option_id": intent.option_id,
                "payload": intent.payload,
                "answered_by": answered_by,
            }
            resolved = self._action(
                session_id,
                intent,
                "resolved",
                "input_request.resolved",
                resolution,
                turn_id=request.turn_id,
                now=now,
            )
            result = Accepted(
                intent_id=intent.intent_id,
                ids={"request_id": intent.request_id, "execution_id": request.execution_id},
                resolution=resolution,
            )
            async with self.store.transaction() as tx:
                resolving = tx.resolve_input(
                    intent.request_id,
                    resolution,
                    principal_id,
                    intent.client_id,
                    now,
                    actions=[resolved],
                    idempotency=(*_key(session_id, intent), request_hash(intent), _dump(result)),
                )
            outcome = resolving.value
            if isinstance(outcome, Lost):
                if outcome.status == "resolved":
                    return _conflict(intent, outcome.resolution), True
                return self._reject(intent, "gone", f"the input request is {outcome.status}"), False
            await self._published(session_id, tx)
            return result, True

        return await self._idempotent(session_id, intent, body)

    # -- reads -----------------------------------------------------------------------
    # Every read a client makes goes through here, not to the store: this is where the
    # Host decides what a client may see (today the one owner sees everything).

    async def snapshot(self, session_id: str) -> tuple[int, SessionState]:
        """`(seq, state)`: the stored snapshot (or the cached fold) plus the reduced tail."""
        return await self.states.snapshot(session_id)

    async def snapshot_json(self, session_id: str) -> tuple[int, str]:
        """`(seq, canonical state JSON)`, without copying the state (the catch-up path)."""
        return await self.states.snapshot_json(session_id)

    async def keep_snapshots(self, wakeups: Watcher) -> None:
        """Run until cancelled: keep stored snapshots up with every session that grows."""
        await self.states.keep_snapshots(wakeups)

    async def session(self, session_id: str) -> SessionRecord:
        """The session's record; NotFound for an unknown session."""
        return await self.store.get_session(session_id)

    async def list_sessions(
        self, *, limit: int = 50, cursor: str | None = None, where: SessionFilter | None = None
    ) -> Page[SessionSummary]:
        """Newest first, with what a list shows, only those `where` admits; pass
        `next_cursor` back for the next page."""
        return await self.store.list_session_summaries(limit=limit, cursor=cursor, where=where)

    async def execution(self, execution_id: str) -> tuple[Execution, list[AttemptRecord]]:
        """An execution and its attempts; NotFound when unknown."""
        execution = await self.store.get_execution(execution_id)
        return execution, await self.store.list_attempts(execution_id)

    async def artifact(self, artifact_id: str) -> ArtifactRecord:
        return await self.store.get_artifact(artifact_id)

    async def retry_artifact(self, session_id: str, artifact_id: str) -> Artifact:
        """Upload again an artifact of this session whose upload failed (see _artifacts)."""
        return await self._artifacts.retry(session_id, artifact_id)

    async def artifact_content(self, artifact_id: str) -> tuple[ArtifactRecord, bytes]:
        """The artifact and its bytes, re-hashed on read (BlobCorrupted, never bad bytes)."""
        artifact = await self.store.get_artifact(artifact_id)
        return artifact, await self.store.blobs.read(artifact.sha256)

    async def tool_output(self, session_id: str, tool_call_id: str) -> bytes:
        """The full output a tool call of this session stored by reference (`output_ref`).

        A sha alone opens nothing: a blob is exactly as readable as the session whose tool
        call produced it. NotFound when that call of that session has none.
        """
        state = await self.states.fold(session_id)
        ref = next(
            (
                turn["tool_calls"][tool_call_id]["output_ref"]
                for turn in state["turns"]
                if tool_call_id in turn["tool_calls"]
            ),
            None,
        )
        sha = (ref or "").removeprefix("blob:").removeprefix("sha256:")
        if not sha:
            raise NotFound("tool output", tool_call_id)
        return await self.store.blobs.read(sha)

    async def file_diff(self, session_id: str, change_id: str) -> str:
        """The whole diff of a file change of this session: inline, or its blob (`diff_ref`).
        NotFound when that change of that session has no diff (a binary file)."""
        state = await self.states.fold(session_id)
        change = next(
            (
                t["file_changes"][change_id]
                for t in state["turns"]
                if change_id in t["file_changes"]
            ),
            None,
        )
        if change is not None and change["diff"] is not None:
            return change["diff"]
        sha = ((change["diff_ref"] if change else None) or "").removeprefix("sha256:")
        if not sha:
            raise NotFound("file diff", change_id)
        return (await self.store.blobs.read(sha)).decode("utf-8", "replace")

    async def history(
        self, session_id: str, after: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Actions with `seq > after`, at most `limit`; NotFound for an unknown session."""
        page = await self.store.read(session_id, after, limit)
        if not page:
            await self.store.get_session(session_id)
        return page

    # -- internals -------------------------------------------------------------------

    async def end_revoked(self, principal_ids: Collection[str]) -> int:
        """End every queued or parked execution nobody runs whose grant, one of these
        principals', no longer holds: what a revocation breaks (the server calls this on
        the store's `watch_rights` wake-up; running ones are their supervisor's to stop).
        Returns how many it ended."""
        return await self._revocations.end_all(principal_ids)

    async def _unknown_command(self, session_id: str, intent: SendMessage) -> str | None:
        """Why `/name args` cannot run (None: it is no command, or the session's plugin
        has it). The runtime expands it; the Host refuses what it could not expand before
        a turn starts, so every client gets the same answer at once."""
        text = "".join(p.text for p in intent.content if isinstance(p, TextPart))
        invoked = parse_invocation(text)
        if invoked is None:
            return None
        session = await self.store.get_session(session_id)
        if session.plugin is None:
            return unknown_command(invoked[0], ())
        name, _, version = session.plugin.rpartition("@")
        try:
            plugin = await self.registry.plugin_of(await self.registry.version(name, version))
        except Refused:
            return None  # the turn fails on the plugin itself, with its own reason
        if plugin.command(invoked[0]) is not None:
            return None
        return unknown_command(invoked[0], plugin.commands)

    async def _readable(self, plugin: str, scope: Scope) -> None:
        """`Refused` (`plugin_not_visible`) unless `scope` may read `plugin` (name@version)."""
        name, _, version = plugin.rpartition("@")
        try:
            await self.registry.version(name, version, scope)
        except Refused as exc:
            raise Refused(
                "plugin_not_visible",
                f"this turn would run as {scope.principal_id}, who may not read the "
                f"session's plugin {plugin}",
            ) from exc

    async def _start_turn(
        self,
        session_id: str,
        intent: SendMessage | RetryTurn,
        trigger: dict[str, Any],
        input_parts: Any,
        retry_of: Execution | None,
        interrupt: list[Execution],
        actor: Actor | None,
        *,
        require_idle: bool = False,
        also: RecordTrigger | None = None,
        new_session: tuple[SessionRecord, dict[str, Any]] | None = None,
        session: SessionRecord | None = None,
        client_tools: list[dict[str, Any]] | None = None,
    ) -> Accepted:
        """One unit: the execution, `turn.started` + `queued`, the idempotency record.
        `require_idle` puts the busy check in that unit (`SessionBusy` if it fails), so two
        hosts on one PostgreSQL cannot both start a turn for `if_busy=reject`.
        `new_session` (record, `session.created`) is created in the same unit. With `also`
        the turn has no idempotency record: the trigger's record `also` writes keys it.
        `session`: the session's record when the caller read it already (read once).
        `client_tools`: the tools the client runs itself (in `turn.started` only when
        there are some, so a turn without them logs what it always did)."""
        if session is None:
            session = new_session[0] if new_session else await self.store.get_session(session_id)
        spec = await self.registry.spec_of(session.deployment_digest)
        deadline = spec.limits.deadline_seconds if spec is not None else None
        now = self._clock()
        turn_id = self._ids("turn")
        execution_id = self._ids("execution")
        message_id = self._ids("message")
        principal_id = self._principal(actor)
        grant = actor.grant if actor is not None else None
        # The trigger is who caused the turn, for causality; the execution principal (a
        # deployment's, or the caller's) is whose rights and bill it runs on.
        trigger = {"principal_id": principal_id, **trigger}
        if (
            spec is not None
            and spec.run_as == "principal"
            and also is None  # an automated turn's actor is the deployment's already
            and session.workspace_id is not None
            and grant is not None
        ):
            principal_id = await execution_principal(self.store, spec, session.workspace_id)
            # The principal's own rights: no person's token is part of its grant.
            grant = replace(grant, principal_id=principal_id, token_id=None)
        if grant is not None and session.plugin and session.workspace_id is not None:
            # One rule for every trigger (a message, a retry, a schedule, a hook): whom the
            # turn runs as must be able to read the plugin version the session pinned,
            # judged now, as its grant is made.
            await self._readable(session.plugin, Scope(session.workspace_id, principal_id))
        # The request's trace when it sent one, else one derived from the execution.
        trace = turn_trace(
            execution_id,
            trace_parent.get(),
            retry_of=retry_of.trace_context if retry_of else None,
        )
        trace_id = trace["traceparent"][3:35]
        turn_data: dict[str, Any] = {
            "execution_id": execution_id,
            "trigger": trigger,
            "input": input_parts,
            "message_id": message_id,
            "retry_of": retry_of.turn_id if retry_of else None,
            "trace_id": trace_id,
        }
        if client_tools:
            turn_data["client_tools"] = client_tools
        result = Accepted(
            intent_id=intent.intent_id, ids={"turn_id": turn_id, "execution_id": execution_id}
        )
        started = self._action(
            session_id,
            intent,
            "turn.started",
            "turn.started",
            turn_data,
            turn_id=turn_id,
            now=now,
        )
        async with self.store.transaction() as tx:
            if new_session is not None:
                tx.create_session(new_session[0])
            if require_idle:
                tx.require_idle(session_id)
            for execution in interrupt:
                tx.request_cancel(execution.execution_id)
            tx.create_execution(
                Execution(
                    execution_id=execution_id,
                    session_id=session_id,
                    turn_id=turn_id,
                    status="queued",
                    created_at=now,
                    principal_id=principal_id,
                    trigger=trigger,
                    input=input_parts,
                    retry_of=retry_of.execution_id if retry_of else None,
                    snapshot_digest=session.snapshot_digest,
                    deadline_at=now + (deadline or self._deadline_seconds),
                    trace_context=trace,
                    client_tools=client_tools or None,
                )
            )
            if grant is not None:
                # The grant binds the snapshot this execution pins (the session's).
                tx.put_grant(
                    replace(
                        grant, execution_id=execution_id, snapshot_digest=session.snapshot_digest
                    )
                )
            if also is not None:
                also(tx, session_id, turn_id, execution_id)
            first = [new_session[1]] if new_session else []
            # `turn.started` opens the turn `queued` (the reducer): no `turn.state` says it again.
            tx.append(session_id, [*first, started])
            if also is None:
                self._claim(tx, session_id, intent, result)
        await self._published(session_id, tx)
        return result

    async def _close_requests(
        self, session_id: str, intent: Cancel, executions: list[Execution]
    ) -> None:
        """Close the cancelled turns' open input requests (the Host owns them), so no
        client keeps offering an answer nobody will resume with."""
        closes: list[tuple[str, dict[str, Any]]] = []
        for execution in executions:
            if execution.status != "waiting_input":
                continue
            requests = await self.store.list_input_requests(
                session_id, execution_id=execution.execution_id, status="open"
            )
            for request in requests:
                closed = self._action(
                    session_id,
                    intent,
                    f"cancelled/{request.request_id}",
                    "input_request.resolved",
                    {
                        "request_id": request.request_id,
                        "outcome": "cancelled",
                        "answered_by": {
                            "client_id": intent.client_id,
                            "principal_id": self._principal_id,
                        },
                    },
                    turn_id=request.turn_id,
                )
                closes.append((request.request_id, closed))
        if not closes:
            return
        now = self._clock()
        async with self.store.transaction() as tx:
            handles = [tx.cancel_input(rid, now, actions=[closed]) for rid, closed in closes]
        # False when an answer won the race: then that answer's action stands.
        appended = sum(1 for handle in handles if handle.value)
        if appended:
            await self._committed(session_id, appended)

    async def _active(self, session_id: str) -> tuple[SessionRecord, list[Execution]]:
        """The session (NotFound for an unknown one) and its active executions."""
        session = await self.store.get_session(session_id)
        return session, await self.store.list_executions(session_id, active=True)

    async def _idempotent(
        self,
        session_id: str,
        intent: Any,
        body: Callable[[], Awaitable[tuple[IntentResult, bool]]],
    ) -> IntentResult:
        """Run `body` at most once per key. Nothing is claimed ahead: the key is read, and
        an accepted intent claims it in the unit that accepts it (`_claim`), so a request
        that loses a race to its own retransmission writes nothing and replays the
        winner's result. Conflicts are stored too; rejections are not, so a client may
        retry the same key once the condition changed (e.g. the session is no longer busy)."""
        scope, key = _key(session_id, intent)
        held = await self._held(scope, key, intent)
        if held is not None:
            return held
        try:
            result, store_it = await body()
        except NotFound as exc:
            return self._reject(intent, "not_found", f"{exc.kind} {exc.key} not found")
        except WriteConflict:
            # Another request with this key committed first (else the conflict is not ours).
            held = await self._held(scope, key, intent)
            if held is None:
                raise
            return held
        if isinstance(result, Rejected):
            # Rejected meanwhile because of the winner of a race with our own
            # retransmission (its turn made the session busy): that winner's result stands.
            return await self._held(scope, key, intent) or result
        if isinstance(result, Conflict) and store_it:
            with contextlib.suppress(WriteConflict):  # another copy stored it first
                async with self.store.transaction() as tx:
                    self._claim(tx, session_id, intent, result)
        # An Accepted result claimed its key in the unit that accepted it.
        return result

    async def _held(self, scope: str, key: str, intent: Any) -> IntentResult | None:
        """What the key's earlier request decided (a replay, or a refusal), or None."""
        outcome = await self.store.lookup_idempotency(
            scope, key, request_hash(intent), self._clock()
        )
        if isinstance(outcome, Replay):
            return INTENT_RESULT_ADAPTER.validate_python(outcome.response)
        if isinstance(outcome, Mismatch):
            msg = "this intent_id was used with a different request"
            return self._reject(intent, "idempotency_key_reused", msg)
        if isinstance(outcome, InFlight):
            return self._reject(intent, "request_in_flight", "the first request is still running")
        return None

    def _claim(self, tx: Transaction, session_id: str, intent: Any, result: IntentResult) -> None:
        """The intent's key, with its result, in the unit that accepts it."""
        scope, key = _key(session_id, intent)
        tx.claim_idempotency(scope, key, request_hash(intent), self._clock(), _dump(result))

    def _reject(self, intent: Any, code: str, message: str) -> Rejected:
        return Rejected(intent_id=intent.intent_id, code=code, message=message)

    def _action(
        self,
        session_id: str,
        intent: Any,
        what: str,
        type_: str,
        data: dict[str, Any],
        *,
        turn_id: str | None = None,
        now: float | None = None,
    ) -> dict[str, Any]:
        return envelope(
            session_id,
            # Derived from the intent: a retransmitted intent cannot append a second fact.
            action_id(f"host:{session_id}", f"{intent.intent_id}/{what}"),
            type_,
            timestamp(self._clock() if now is None else now),
            data,
            turn_id=turn_id,
            client_id=intent.client_id,
            intent_id=intent.intent_id,
        )

    async def _published(self, session_id: str, tx: Transaction) -> None:
        """After a unit committed: hand its actions to this process's Hub as they are, not
        read back (other processes' Hubs hear of them through the store's wake-up)."""
        appended = tx.appended(session_id)
        await self._committed(session_id, len(appended), appended)

    async def published(self, session_id: str, actions: list[dict[str, Any]]) -> None:
        """Actions a Supervisor of this process just committed (with their seqs, in seq
        order): fanned out and folded as they are, not read back from the store."""
        await self.hub.publish(session_id, actions)
        await self.states.advance(session_id, actions)

    async def _committed(
        self, session_id: str, count: int, appended: list[dict[str, Any]] | None = None
    ) -> None:
        # The intent is durable by now: a failure to wake subscribers must not turn an
        # accepted intent into an error (the client could retry it without a key). The
        # Hub's store follower delivers the actions anyway.
        try:
            if self._on_append is not None:
                self._on_append(count)
            if appended is None:
                await self.hub.notify(session_id)
            else:
                await self.hub.publish(session_id, appended)
        except Exception:
            _log.warning("post-commit notify failed for %s", session_id, exc_info=True)


def _key(session_id: str, intent: Any) -> tuple[str, str]:
    return f"{session_id}/{intent.type}", intent.intent_id


def _dump(result: IntentResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def _conflict(intent: AnswerInput, resolution: Any) -> Conflict:
    return Conflict(
        intent_id=intent.intent_id,
        code="input_request_resolved",
        resolution=resolution if isinstance(resolution, dict) else {"value": resolution},
    )


__all__ = ["SessionHost"]


def _gone(intent: AnswerInput, execution: Execution, detail: str) -> Rejected:
    """An answer nobody will resume with. Where the turn ended because its grant was
    revoked (the request expired with it, possibly on another host a moment earlier), the
    answerer is told that, as they would have been had they answered first."""
    error = execution.error if isinstance(execution.error, dict) else {}
    if execution.status == "revoked" and error.get("code") == "grant_revoked":
        message = str(error.get("message") or detail)
        return Rejected(intent_id=intent.intent_id, code="grant_revoked", message=message)
    return Rejected(intent_id=intent.intent_id, code="gone", message=detail)
