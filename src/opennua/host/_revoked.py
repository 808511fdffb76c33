"""Ending what a broken grant leaves where nobody runs it (docs/auth.md, "Execution
grants"): a queued or parked execution whose grant no longer holds ends `revoked` here,
in one unit with its open input requests (`expired`, reason `revoked`) and its
`turn.ended`, so every client sees why. A running one is its supervisor's to stop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from opennua.protocol import action_id, envelope, timestamp
from opennua.store import AuthStore, Execution, GrantFacts, InputStore, LogStore

from ._inputs import Clock


class RevocationStore(LogStore, InputStore, AuthStore, Protocol):
    """What ending revoked work reads and writes: grants, open requests, the log."""


class GrantCheck(Protocol):
    """Why an execution's grant no longer holds (a code), or None: checked when an answer
    would resume it (the server passes `opennua.auth.Authority.grant_problem`). `facts`:
    the grant's facts the Host read with the answer's request (None: read them now)."""

    async def __call__(self, execution_id: str, *, facts: GrantFacts | None = None) -> str | None:
        """The check."""


class RevokedWork:
    def __init__(
        self,
        store: RevocationStore,
        grant_check: GrantCheck | None,
        clock: Clock,
        committed: Callable[[str, int], Awaitable[None]],
    ) -> None:
        self.store = store
        self._grant_check = grant_check
        self._clock = clock
        self._committed = committed

    async def end_all(self, principal_ids: Collection[str]) -> int:
        """End every queued or parked execution nobody runs whose grant, one of these
        principals', no longer holds; how many it ended."""
        if self._grant_check is None or not principal_ids:
            return 0
        ended = 0
        for execution, facts in await self.store.unowned_with_grants(sorted(principal_ids)):
            ended += await self.end_if_broken(execution, facts, self._clock()) is not None
        return ended

    async def end_if_broken(
        self, execution: Execution, grant: GrantFacts | None, now: float
    ) -> str | None:
        """Check a parked (or queued) execution's grant, as read with the answer or the
        revocation's wake-up. When it no longer holds, the turn ends `revoked` here
        (nobody runs it to end it), its open requests expire, and clients see why."""
        if self._grant_check is None:
            return None
        problem = await self._grant_check(execution.execution_id, facts=grant)
        if problem is None:
            return None
        error = {"code": "grant_revoked", "message": f"the execution's grant is revoked: {problem}"}
        requests = await self.store.list_input_requests(
            execution.session_id, execution_id=execution.execution_id, status="open"
        )
        actions = [
            self._execution_action(
                execution,
                f"revoked/{r.request_id}",
                "input_request.resolved",
                {"request_id": r.request_id, "outcome": "expired", "reason": "revoked"},
                now,
            )
            for r in requests
        ]
        actions.append(
            self._execution_action(
                execution,
                "turn.ended",  # the key the Supervisor ends a turn with: one turn.ended
                "turn.ended",
                {"stop_reason": "revoked", "error": error},
                now,
            )
        )
        await self.store.revoke_grant(execution.execution_id, now, problem)
        async with self.store.transaction() as tx:
            ended = tx.end_unowned(
                execution.execution_id,
                "revoked",
                error=error,
                now=now,
                actions=actions,
                request_status="expired",
            )
        if ended.value:
            await self._committed(execution.session_id, len(actions))
        return error["message"]

    def _execution_action(
        self, execution: Execution, key: str, type_: str, data: dict[str, Any], now: float
    ) -> dict[str, Any]:
        return envelope(
            execution.session_id,
            action_id(execution.execution_id, key),
            type_,
            timestamp(now),
            data,
            turn_id=execution.turn_id,
        )
