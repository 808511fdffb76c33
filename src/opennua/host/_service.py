"""The Session Host's intent service (DESIGN.md §1, §3, §4).

One method per intent; each takes the protocol's intent object, so HTTP, WebSocket and CLI
share validation. Every accepted intent is one store unit of work that records the facts,
appends the client-visible actions and completes the idempotency record together: a crash
leaves either all of it or none of it. The Host never runs models or tools; it records
accepted commands (executions) that the Supervisor claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from opennua.protocol import (
    Accepted,
    AnswerInput,
    Cancel,
    Conflict,
    IntentResult,
    Rejected,
    RetryTurn,
    SendMessage,
    UpdateSession,
    action_from_dict,
    action_id,
    initial_state,
    reduce,
    state_from_json,
    state_to_json,
)
from opennua.protocol.intents import INTENT_RESULT_ADAPTER
from opennua.protocol.state import Session as State
from opennua.protocol.state import copy_state
from opennua.store import (
    Execution,
    InFlight,
    Lost,
    Mismatch,
    NotFound,
    Replay,
    Session,
    Store,
)

from ._inputs import Clock, CreateSession, Ids, random_ids, request_hash, rfc3339
from ._schema_check import check_answer
from .hub import Hub

_log = logging.getLogger(__name__)

ACTIVE = ("queued", "running", "waiting_input")
SNAPSHOT_EVERY = 500
_CACHE_SESSIONS = 256


class SessionHost:
    """Arbitrates client intents for every session; see the module docstring."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        *,
        clock: Clock = time.time,
        ids: Ids | None = None,
        agent_digest: str,
        deadline_seconds: float = 3600.0,
        principal_id: str = "prn_owner",
        on_append: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.hub = hub
        self._clock = clock
        self._ids = ids or random_ids(clock)
        self._agent_digest = agent_digest
        self._deadline_seconds = deadline_seconds
        self._principal_id = principal_id
        self._on_append = on_append
        # Folded states per session, so a snapshot request reduces only the new tail.
        self._states: OrderedDict[str, tuple[State, int]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._turn_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _turn_lock(self, session_id: str) -> asyncio.Lock:
        """Serialises "is the session busy?" with starting a turn, within this process.

        The store has no conditional "create unless busy", so across processes on one
        PostgreSQL two `reject` messages can still both be accepted (see docs/server.md).
        """
        lock = self._turn_locks.get(session_id)
        if lock is None:
            lock = self._turn_locks[session_id] = asyncio.Lock()
        return lock

    def new_intent_id(self) -> str:
        """For callers whose client gave no key: a fresh one (no idempotency across calls)."""
        return "int_" + self._ids("action").removeprefix("act_")

    # -- intents ---------------------------------------------------------------------

    async def create_session(self, intent: CreateSession) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            session_id = self._ids("session")
            now = self._clock()
            result = Accepted(intent_id=intent.intent_id, ids={"session_id": session_id})
            created = self._action(
                session_id,
                intent,
                "created",
                "session.created",
                {
                    "title": intent.title,
                    "principal_id": self._principal_id,
                    "plugin": None,
                    "deployment_digest": self._agent_digest,
                    "metadata": intent.metadata,
                },
                now=now,
            )
            async with self.store.transaction() as tx:
                tx.create_session(
                    Session(
                        session_id=session_id,
                        created_at=now,
                        principal_id=self._principal_id,
                        title=intent.title or None,
                        deployment_digest=self._agent_digest,
                        metadata=intent.metadata,
                    )
                )
                tx.append(session_id, [created])
                tx.complete_idempotency(*_key("create_session", intent), _dump(result))
            await self._committed(session_id, 1)
            return result, True

        return await self._idempotent("create_session", intent, body)

    async def send_message(self, session_id: str, intent: SendMessage) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            async with self._turn_lock(session_id):
                active = await self._active(session_id)
                if active and intent.if_busy == "reject":
                    return self._reject(intent, "session_busy", "a turn is already active"), False
                interrupt = active if intent.if_busy == "interrupt" else []
                input_parts = [part.model_dump(mode="json") for part in intent.content]
                trigger = {"kind": "message", "client_id": intent.client_id}
                result = await self._start_turn(
                    session_id, intent, trigger, input_parts, None, interrupt
                )
                return result, True

        return await self._idempotent(session_id, intent, body)

    async def retry_turn(self, session_id: str, intent: RetryTurn) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            executions = await self.store.list_executions(session_id)
            old = next((e for e in executions if e.turn_id == intent.turn_id), None)
            if old is None:
                return self._reject(intent, "not_found", f"turn {intent.turn_id} not found"), False
            if old.status in ACTIVE:
                # A retry is a new decision about a finished turn, never a second runner.
                return self._reject(intent, "turn_active", "the turn is still active"), False
            trigger = {"kind": "retry", "client_id": intent.client_id}
            result = await self._start_turn(session_id, intent, trigger, old.input, old, [])
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def cancel(self, session_id: str, intent: Cancel) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            active = await self._active(session_id)
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
                tx.complete_idempotency(*_key(session_id, intent), _dump(result))
            await self._close_requests(session_id, intent, active)
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def update_session(self, session_id: str, intent: UpdateSession) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            await self.store.get_session(session_id)
            result = Accepted(intent_id=intent.intent_id, ids={"session_id": session_id})
            updated = self._action(
                session_id, intent, "updated", "session.updated", {"title": intent.title}
            )
            async with self.store.transaction() as tx:
                tx.update_session_title(session_id, intent.title)
                tx.append(session_id, [updated])
                tx.complete_idempotency(*_key(session_id, intent), _dump(result))
            await self._committed(session_id, 1)
            return result, True

        return await self._idempotent(session_id, intent, body)

    async def answer_input(self, session_id: str, intent: AnswerInput) -> IntentResult:
        async def body() -> tuple[IntentResult, bool]:
            try:
                request = await self.store.get_input_request(intent.request_id)
            except NotFound:
                request = None
            if request is None or request.session_id != session_id:
                msg = f"input request {intent.request_id} not found in this session"
                return self._reject(intent, "not_found", msg), False
            now = self._clock()
            if request.status == "resolved":
                return _conflict(intent, request.resolution), True
            if request.status != "open" or (
                request.expires_at is not None and request.expires_at <= now
            ):
                return self._reject(intent, "gone", f"the input request is {request.status}"), False
            execution = await self.store.get_execution(request.execution_id)
            if execution.status not in ACTIVE or execution.cancel_requested:
                # Nobody will resume with this answer, unless another one won meanwhile
                # (a winner re-queues the execution, so re-read before saying "gone").
                latest = await self.store.get_input_request(intent.request_id)
                if latest.status == "resolved":
                    return _conflict(intent, latest.resolution), True
                return self._reject(intent, "gone", f"the turn is {execution.status}"), False
            problem = check_answer(request.payload, intent)
            if problem is not None:
                return self._reject(intent, "validation_error", problem), False
            answered_by = {"client_id": intent.client_id, "principal_id": self._principal_id}
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
            outcome = await self.store.resolve_input(
                intent.request_id,
                resolution,
                self._principal_id,
                intent.client_id,
                now,
                actions=[resolved],
            )
            if isinstance(outcome, Lost):
                if outcome.status == "resolved":
                    return _conflict(intent, outcome.resolution), True
                return self._reject(intent, "gone", f"the input request is {outcome.status}"), False
            await self._committed(session_id, 1)
            result = Accepted(
                intent_id=intent.intent_id,
                ids={"request_id": intent.request_id, "execution_id": request.execution_id},
            )
            return result, True

        return await self._idempotent(session_id, intent, body)

    # -- reads -----------------------------------------------------------------------

    async def snapshot(self, session_id: str) -> tuple[int, State]:
        """`(seq, state)`: the stored snapshot (or the cached fold) plus the reduced tail."""
        state = await self._fold(session_id)
        return state["seq"], copy_state(state)

    async def snapshot_json(self, session_id: str) -> tuple[int, str]:
        """`(seq, canonical state JSON)`, without copying the state (the catch-up path)."""
        state = await self._fold(session_id)
        return state["seq"], state_to_json(state)

    async def _fold(self, session_id: str) -> State:
        """The cached state advanced to the log's end (shared: callers must not mutate)."""
        if session_id not in self._states:
            # Checked before a lock exists: unknown ids must not leave one behind.
            await self.store.get_session(session_id)
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            cached = self._states.get(session_id)
            if cached is None:
                stored = await self.store.get_snapshot(session_id)
                if stored is None:
                    cached = (initial_state(), 0)
                else:
                    cached = (state_from_json(stored.state_json), stored.seq)
            state, snapshot_seq = cached
            turn_ended = False
            while True:
                page = await self.store.read(session_id, state["seq"], 1000)
                for raw in page:
                    state = reduce(state, action_from_dict(raw))
                    turn_ended = turn_ended or raw["type"] == "turn.ended"
                if len(page) < 1000:
                    break
            if state["seq"] > snapshot_seq and (
                turn_ended or state["seq"] - snapshot_seq >= SNAPSHOT_EVERY
            ):
                await self.store.put_snapshot(session_id, state["seq"], state_to_json(state))
                snapshot_seq = state["seq"]
            self._states[session_id] = (state, snapshot_seq)
            self._states.move_to_end(session_id)
            while len(self._states) > _CACHE_SESSIONS:
                evicted, _ = self._states.popitem(last=False)
                self._locks.pop(evicted, None)
            return state

    async def history(
        self, session_id: str, after: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Actions with `seq > after`, at most `limit`; NotFound for an unknown session."""
        page = await self.store.read(session_id, after, limit)
        if not page:
            await self.store.get_session(session_id)
        return page

    # -- internals -------------------------------------------------------------------

    async def _start_turn(
        self,
        session_id: str,
        intent: SendMessage | RetryTurn,
        trigger: dict[str, Any],
        input_parts: Any,
        retry_of: Execution | None,
        interrupt: list[Execution],
    ) -> IntentResult:
        now = self._clock()
        turn_id = self._ids("turn")
        execution_id = self._ids("execution")
        message_id = self._ids("message")
        trigger = {**trigger, "principal_id": self._principal_id}
        # The trace id is derived from the execution: W3C format, 32 lowercase hex.
        trace_id = hashlib.sha256(execution_id.encode()).hexdigest()[:32]
        result = Accepted(
            intent_id=intent.intent_id, ids={"turn_id": turn_id, "execution_id": execution_id}
        )
        started = self._action(
            session_id,
            intent,
            "turn.started",
            "turn.started",
            {
                "execution_id": execution_id,
                "trigger": trigger,
                "input": input_parts,
                "message_id": message_id,
                "retry_of": retry_of.turn_id if retry_of else None,
                "trace_id": trace_id,
            },
            turn_id=turn_id,
            now=now,
        )
        queued = self._action(
            session_id,
            intent,
            "turn.state",
            "turn.state",
            {"state": "queued"},
            turn_id=turn_id,
            now=now,
        )
        async with self.store.transaction() as tx:
            for execution in interrupt:
                tx.request_cancel(execution.execution_id)
            tx.create_execution(
                Execution(
                    execution_id=execution_id,
                    session_id=session_id,
                    turn_id=turn_id,
                    status="queued",
                    created_at=now,
                    principal_id=self._principal_id,
                    trigger=trigger,
                    input=input_parts,
                    retry_of=retry_of.execution_id if retry_of else None,
                    snapshot_digest=self._agent_digest,
                    deadline_at=now + self._deadline_seconds,
                )
            )
            tx.append(session_id, [started, queued])
            tx.complete_idempotency(*_key(session_id, intent), _dump(result))
        await self._committed(session_id, 2)
        return result

    async def _close_requests(
        self, session_id: str, intent: Cancel, executions: list[Execution]
    ) -> None:
        """Close the cancelled turns' open input requests (the Host owns them), so no
        client keeps offering an answer nobody will resume with."""
        appended = 0
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
                # False when an answer won the race: then that answer's action stands.
                if await self.store.cancel_input(
                    request.request_id, self._clock(), actions=[closed]
                ):
                    appended += 1
        if appended:
            await self._committed(session_id, appended)

    async def _active(self, session_id: str) -> list[Execution]:
        await self.store.get_session(session_id)
        return [e for e in await self.store.list_executions(session_id) if e.status in ACTIVE]

    async def _idempotent(
        self,
        session_id: str,
        intent: Any,
        body: Callable[[], Awaitable[tuple[IntentResult, bool]]],
    ) -> IntentResult:
        """Run `body` at most once per key. Accepted results and conflicts are stored (a
        retransmission replays them); rejections are not, so a client may retry the same
        key once the condition changed (e.g. the session is no longer busy)."""
        scope, key = _key(session_id, intent)
        try:
            outcome = await self.store.begin(scope, key, request_hash(intent), self._clock())
        except NotFound:
            return self._reject(intent, "not_found", f"session {session_id} not found")
        if isinstance(outcome, Replay):
            return INTENT_RESULT_ADAPTER.validate_python(outcome.response)
        if isinstance(outcome, Mismatch):
            msg = "this intent_id was used with a different request"
            return self._reject(intent, "idempotency_key_reused", msg)
        if isinstance(outcome, InFlight):
            return self._reject(intent, "request_in_flight", "the first request is still running")
        try:
            result, store_it = await body()
        except NotFound as exc:
            await _abandon(self.store, scope, key)
            return self._reject(intent, "not_found", f"{exc.kind} {exc.key} not found")
        except BaseException:
            await _abandon(self.store, scope, key)
            raise
        if isinstance(result, Rejected):
            await _abandon(self.store, scope, key)
        elif isinstance(result, Conflict) and store_it:
            await self.store.complete(scope, key, _dump(result))
        elif isinstance(result, Accepted) and intent.type == "answer_input":
            # resolve_input is its own unit (the conditional update), so the key is
            # completed right after it; a crash in between leaves the key in flight.
            await self.store.complete(scope, key, _dump(result))
        return result

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
        return {
            "v": 1,
            "session_id": session_id,
            # Derived from the intent: a retransmitted intent cannot append a second fact.
            "id": action_id(f"host:{session_id}", f"{intent.intent_id}/{what}"),
            "type": type_,
            "ts": rfc3339(self._clock() if now is None else now),
            "turn_id": turn_id,
            "run_id": None,
            "client_id": intent.client_id,
            "intent_id": intent.intent_id,
            "data": data,
        }

    async def _committed(self, session_id: str, count: int) -> None:
        # The intent is durable by now: a failure to wake subscribers must not turn an
        # accepted intent into an error (the client could retry it without a key). The
        # Hub's store follower delivers the actions anyway.
        try:
            if self._on_append is not None:
                self._on_append(count)
            await self.hub.notify(session_id)
        except Exception:
            _log.warning("post-commit notify failed for %s", session_id, exc_info=True)

    async def keep_snapshots(self, wakeups: AsyncIterator[tuple[str, int]]) -> None:
        """Run until cancelled: fold every session that grows and store snapshots (every
        ~500 actions and at turn end) even when no client asks for one, so a cold read
        never replays a long log."""
        async for session_id, _seq in wakeups:
            try:
                await self._fold(session_id)
            except Exception:
                _log.warning("snapshot of %s failed", session_id, exc_info=True)


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


async def _abandon(store: Store, scope: str, key: str) -> None:
    # Shielded: a cancelled request must still release its key, or retries see 409 for a day.
    with contextlib.suppress(Exception):
        await asyncio.shield(store.abandon(scope, key))


__all__ = ["SessionHost"]
