"""What a revocation stops, within a second and on every host (docs/auth.md, "What a
revocation ends").

The store announces every change that may take rights away from a principal (a token
revoked, a membership removed or lowered, a principal disabled: `Store.watch_rights`; on
PostgreSQL a NOTIFY that reaches every process). `follow_revocations` turns each of those
wake-ups, in this order, into:

1. the Authority's caches forgotten, so the next request on this host is judged anew;
2. every open stream (SSE, WebSocket) of those principals re-checked: one that may no
   longer read its session ends (SSE: a last `revoked` event, then the end of the
   response; WebSocket: close 4401 when the credential itself is gone, 4403 when it no
   longer opens the session's workspace), and a WebSocket that may no longer act has its
   intents refused;
3. every attempt this process runs on their grants re-checked at once (as its next
   heartbeat would), and those that stop waited for;
4. every queued or parked execution nobody runs whose grant broke ended `revoked`, its
   open requests `expired` (reason `revoked`), in one unit (`SessionHost.end_revoked`).

A stream is also checked as it registers (a wake-up that came while its request was on
its way found nothing to end), and every `recheck_every` seconds: a token that expires
mid-stream ends it then, and so does a change whose wake-up was lost (a LISTEN
connection that broke).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from opennua.auth import Authority, Caller, Denied, allows
from opennua.host import SessionHost
from opennua.store import StoreError, Watcher

_log = logging.getLogger(__name__)

#: How often open streams are re-checked when no wake-up came (a token that expired, a
#: wake-up that was lost): as often as an idle stream sends its heartbeat.
RECHECK_SECONDS = 15.0
#: Close codes of a WebSocket whose caller may no longer read (HTTP's 401 and 403).
UNAUTHORIZED_CLOSE_CODE = 4401
FORBIDDEN_CLOSE_CODE = 4403
_CREDENTIAL_GONE = frozenset(
    {"unauthorized", "token_revoked", "token_expired", "principal_disabled"}
)


@dataclass(eq=False)
class Watched:
    """One open stream's caller, in the workspace of the session it reads."""

    caller: Caller
    workspace_id: str | None
    may_act: bool
    #: Why the caller may no longer read (then the stream has been told to stop).
    denied: Denied | None = None
    _stops: list[Stoppable] = field(default_factory=list)

    def attach(self, stream: Stoppable) -> None:
        """The hub subscription to stop when the caller loses the session."""
        self._stops.append(stream)
        if self.denied is not None:
            stream.stop()

    def end(self, denied: Denied) -> None:
        self.denied = denied
        for stream in self._stops:
            stream.stop()

    @property
    def close_code(self) -> int:
        gone = self.denied is not None and self.denied.code in _CREDENTIAL_GONE
        return UNAUTHORIZED_CLOSE_CODE if gone else FORBIDDEN_CLOSE_CODE


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Streams:
    """The open streams of this process, each re-checked when its principal's rights
    change."""

    def __init__(self, authority: Authority) -> None:
        self._authority = authority
        self._open: dict[Watched, None] = {}

    def __len__(self) -> int:
        return len(self._open)

    @contextlib.asynccontextmanager
    async def watching(self, caller: Caller, workspace_id: str | None) -> AsyncIterator[Watched]:
        """Register a stream for as long as it streams. It is checked once more as it
        registers: a revocation whose wake-up came between the request's authentication
        and now found no stream to end, but emptied the cache this check reads."""
        watched = Watched(caller, workspace_id, allows(caller.role_in(workspace_id), "act"))
        self._open[watched] = None
        try:
            await self._check(watched)
            yield watched
        finally:
            self._open.pop(watched, None)

    async def recheck(self, principal_ids: Collection[str] | None = None) -> int:
        """Re-check the streams of these principals (None: all); how many it ended."""
        ended = 0
        for watched in list(self._open):
            if principal_ids is None or watched.caller.principal_id in principal_ids:
                ended += await self._check(watched)
        return ended

    async def _check(self, watched: Watched) -> bool:
        if watched.denied is not None:
            return False
        try:
            current, denied = await self._authority.recheck(watched.caller, watched.workspace_id)
        except StoreError:
            # Who the caller is cannot be read now: the next wake-up or re-check decides.
            _log.warning("re-checking a stream's caller failed", exc_info=True)
            return False
        if denied is not None:
            watched.end(denied)
            return True
        if current is not None:
            watched.may_act = allows(current.role_in(watched.workspace_id), "act")
        return False


class Rechecks(Protocol):
    """A supervisor: re-checks the grants of the attempts it runs (`Supervisor`)."""

    async def recheck_grants(self, principal_ids: Collection[str]) -> None: ...


async def follow_revocations(
    watcher: Watcher,
    authority: Authority,
    *,
    streams: Streams | None = None,
    supervisor: Rechecks | None = None,
    host: SessionHost | None = None,
    recheck_every: float = RECHECK_SECONDS,
) -> None:
    """Run until the watcher closes (or the task is cancelled): see the module docstring."""
    # Steps 3 and 4 may wait (for attempts to stop): in a task of their own per wake-up,
    # so the next wake-up's caches and streams are not held up behind them.
    ending: set[asyncio.Task[None]] = set()

    async def end_work(principals: set[str]) -> None:
        if supervisor is not None:
            await _guarded(supervisor.recheck_grants(principals))
        if host is not None:
            await _guarded(host.end_revoked(principals))

    try:
        while True:
            try:
                batch = await asyncio.wait_for(watcher.batch(10_000), recheck_every)
            except TimeoutError:
                if streams is not None:
                    await _guarded(streams.recheck())
                continue
            if not batch:
                return
            principals = {principal_id for principal_id, _ in batch}
            authority.forget()
            if streams is not None:
                await _guarded(streams.recheck(principals))
            if supervisor is not None or host is not None:
                task = asyncio.create_task(end_work(principals))
                ending.add(task)
                task.add_done_callback(ending.discard)
    finally:
        for task in list(ending):
            task.cancel()


async def _guarded(step: Awaitable[object]) -> None:
    # One failed step (the store hiccuped) must not end the follower: the next wake-up,
    # the next heartbeat or the next periodic re-check tries again.
    try:
        await step
    except Exception:
        _log.warning("acting on a revocation failed", exc_info=True)
