"""A live view of one session that survives disconnects, restarts and slow consumers.

The subscription keeps `local.state` by reducing every action with the shared reducer.
It reads the Host's SSE stream from its last seq; when the connection drops it
reconnects with jittered backoff *from that seq* (reconnect never restarts work or
re-sends anything). When the Host says `resync` (this subscriber fell too far behind) or
an action arrives past a hole (`SequenceGap`), it fetches a snapshot and continues from
the snapshot's seq — or, with `replay_gaps`, pages the missing actions from history so a
consumer that records every action (`nua run --json`) misses none.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx

from opennua.protocol import Action, SequenceGap, SessionState, action_from_dict

from ._errors import ServerError, UnreachableError, error_from_response
from ._local import LocalSession
from ._sse import parse_sse

if TYPE_CHECKING:
    from ._client import SessionClient


@dataclass(frozen=True)
class ActionEvent:
    """An action the Host appended, already reduced into `local.state`; `raw` is its JSON
    exactly as the Host sent it (what a recorder should keep)."""

    action: Action
    raw: dict[str, Any]
    kind: Literal["action"] = "action"


@dataclass(frozen=True)
class ResyncEvent:
    """The state jumped from `from_seq` to `to_seq` via a snapshot (no actions between)."""

    from_seq: int
    to_seq: int
    kind: Literal["resync"] = "resync"


@dataclass(frozen=True)
class ConnectionEvent:
    """The stream was lost (`retry_in` seconds until the next try) or is back."""

    status: Literal["disconnected", "connected"]
    error: str | None = None
    retry_in: float = 0.0
    kind: Literal["connection"] = "connection"


Event = ActionEvent | ResyncEvent | ConnectionEvent


class Subscription:
    """Iterate for events; `local.state` is always the confirmed state up to `local.seq`.

    `after=None` starts from a fresh snapshot; `after=N` starts at seq N (the state up to
    N is rebuilt from history) and yields every action after it. Use as an async context
    manager so the stream is closed when you stop.
    """

    def __init__(
        self,
        session: SessionClient,
        after: int | None = None,
        *,
        replay_gaps: bool = False,
        heartbeat_timeout: float = 45.0,
    ) -> None:
        self.session = session
        self.after = after
        self.replay_gaps = replay_gaps
        self.heartbeat_timeout = heartbeat_timeout
        self.reconnects = 0
        self.resyncs = 0
        self._started = False
        self._events: AsyncGenerator[Event, None] | None = None

    @property
    def local(self) -> LocalSession:
        return self.session.local

    @property
    def state(self) -> SessionState:
        return self.session.local.state

    async def __aenter__(self) -> Subscription:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Load the starting state (raises NotFoundError for an unknown session)."""
        if self._started:
            return
        self._started = True
        local = self.session.local
        if self.after is None:
            _, state = await self.session.snapshot()
            local.reset(state)
            return
        local.reset(LocalSession().state)
        if self.after > 0:
            async with contextlib.aclosing(self.session.history(0)) as actions:
                async for raw in actions:
                    if raw["seq"] > self.after:
                        break
                    local.apply(action_from_dict(raw))

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._events is None:
            self._events = self._run()
        return self._events

    async def aclose(self) -> None:
        if self._events is not None:
            await self._events.aclose()

    async def wait_for(self, predicate: Callable[[SessionState], object]) -> SessionState:
        """Consume events until `predicate(state)` holds; return that state."""
        await self.start()
        if predicate(self.state):
            return self.state
        async for _ in self:
            if predicate(self.state):
                return self.state
        raise AssertionError("unreachable: a subscription never ends by itself")

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> AsyncGenerator[Event, None]:
        await self.start()
        client = self.session.client
        failures = 0
        lost = False
        while True:
            resync = False
            error: str | None = "the server ended the stream"
            try:
                async with contextlib.aclosing(self._stream()) as stream:
                    async for item in stream:
                        if item is None:  # connected
                            if lost:
                                lost = False
                                self.reconnects += 1
                                yield ConnectionEvent("connected")
                            continue
                        if item == "resync":
                            resync = True
                            break
                        failures = 0
                        yield item
                if resync:
                    async for event in self._resync():
                        yield event
                    continue
            except (httpx.TransportError, UnreachableError, ServerError) as exc:
                error = f"{type(exc).__name__}: {exc}".rstrip(": ")
            # Lost: retry from the last seq after a jittered pause, forever. Stopping is
            # the consumer's choice (it stops iterating); the work never depended on us.
            delay = client.backoff.delay(failures)
            failures += 1
            lost = True
            yield ConnectionEvent("disconnected", error, delay)
            await client.sleep(delay)

    async def _stream(self) -> AsyncGenerator[ActionEvent | Literal["resync"] | None, None]:
        """One connection: None once connected, then reduced actions; "resync" and the
        end when the Host says so or a gap shows we missed actions."""
        http = self.session.client.http
        path = f"{self.session.path}/events"
        timeout = httpx.Timeout(http.timeout.connect, read=self.heartbeat_timeout)
        async with http.stream(
            "GET", path, params={"after": self.local.seq}, timeout=timeout
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise error_from_response(response)
            yield None
            async for sse in parse_sse(response.aiter_lines()):
                if sse.event == "resync":
                    yield "resync"
                    return
                if sse.event != "action":
                    continue
                raw = json.loads(sse.data)
                action = action_from_dict(raw)
                try:
                    advanced = self.local.apply(action)
                except SequenceGap:
                    yield "resync"
                    return
                if advanced:
                    yield ActionEvent(action, raw)

    async def _resync(self) -> AsyncGenerator[Event, None]:
        self.resyncs += 1
        before = self.local.seq
        if self.replay_gaps:
            async with contextlib.aclosing(self.session.history(before)) as actions:
                async for raw in actions:
                    action = action_from_dict(raw)
                    if self.local.apply(action):
                        yield ActionEvent(action, raw)
            return
        seq, state = await self.session.snapshot()
        if seq > before:
            self.local.reset(state)
            yield ResyncEvent(before, seq)


__all__ = ["ActionEvent", "ConnectionEvent", "Event", "ResyncEvent", "Subscription"]
