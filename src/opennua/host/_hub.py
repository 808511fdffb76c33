"""Per-session fan-out with bounded subscriber queues (docs/architecture.md §5).

Backpressure protects connections and memory; it never sets the agent's pace. The Hub
follows the store's wake-ups, reads new actions once per session, serialises each once,
and offers them to every subscriber without waiting. A subscriber whose queue passes its
bound loses the queue and gets one `resync` frame; it then fetches a snapshot and
subscribes again from the snapshot's seq. Catch-up after `after=N` comes from an in-memory
ring when it still holds N+1, else from the store in pages.

A session's channel starts at the log's head, never at a subscriber's cursor: a cursor
is that subscriber's own business (one beyond the head gets `resync`), and every joiner
brings the channel up to the head itself, so no subscriber leaving early (even in the
middle of the channel's first read) leaves the next one without its backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from opennua._common import json_text
from opennua.store import SessionRecord


class SessionLog(Protocol):
    """What the Hub reads: the store's action log (a `Store` is one)."""

    async def read(
        self, session_id: str, after: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    async def get_session(self, session_id: str) -> SessionRecord: ...


PAGE = 500
#: How long a wake-up waits for the rest of a burst before the Hub reads it. At 1,000
#: appends/s to 100 subscribers, reading (and waking 100 writers) per append costs more
#: CPU than one process has; a few ms per read bounds it at any append rate.
COALESCE_SECONDS = 0.01


@dataclass(frozen=True, slots=True)
class Frame:
    """What a subscriber receives: one action (as JSON text), or the order to resync."""

    kind: Literal["action", "resync"]
    seq: int
    json: str = ""


def encode(action: dict[str, Any]) -> str:
    # Once per action for every subscriber: orjson, and the frame is always valid UTF-8.
    return json_text(action)


@dataclass(eq=False)
class Subscriber:
    session_id: str
    max_actions: int
    max_bytes: int
    last_seq: int
    frames: deque[Frame] = field(default_factory=deque)
    queued_bytes: int = 0
    overflowed: bool = False
    #: Its reader may no longer read (a revocation): its stream ends, delivering nothing more.
    stopped: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self) -> None:
        self.stopped = True
        self.frames.clear()
        self.queued_bytes = 0
        self.wakeup.set()

    def offer(self, frame: Frame) -> bool:
        """Queue without blocking; False when this overflowed the bound (queue dropped)."""
        if self.overflowed or self.stopped or frame.seq <= self.last_seq:
            return True
        self.last_seq = frame.seq
        self.frames.append(frame)
        self.queued_bytes += len(frame.json)
        if len(self.frames) > self.max_actions or self.queued_bytes > self.max_bytes:
            self.frames.clear()
            self.queued_bytes = 0
            self.overflowed = True
            self.frames.append(Frame("resync", self.last_seq))
            self.wakeup.set()
            return False
        self.wakeup.set()
        return True

    async def take(self, wait_seconds: float) -> list[Frame]:
        """Everything queued, waiting up to `wait_seconds` for the first; [] when none came.

        Draining in one go lets a transport write a burst as one message: at 1,000
        actions/s to 100 subscribers, per-frame writes (and a task per wait) were the cost.
        """
        if not self.frames and not self.stopped:
            # No await between the check and the clear: a stop() is never missed.
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_seconds):
                    await self.wakeup.wait()
        batch = list(self.frames)
        self.frames.clear()
        self.queued_bytes = 0
        return batch


@dataclass
class _Channel:
    """One session's live state in this process: its ring and its subscribers."""

    frontier: int
    ring_size: int
    ring_bytes_max: int
    ring: deque[Frame] = field(default_factory=deque)
    ring_bytes: int = 0
    #: Insertion-ordered (a dict as an ordered set): wake-ups go out in subscription order.
    subscribers: dict[Subscriber, None] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def remember(self, frame: Frame) -> None:
        """Keep recent frames for quick catch-up, bounded by count and by bytes."""
        self.ring.append(frame)
        self.ring_bytes += len(frame.json)
        while self.ring and (
            len(self.ring) > self.ring_size or self.ring_bytes > self.ring_bytes_max
        ):
            self.ring_bytes -= len(self.ring.popleft().json)


@dataclass
class HubStats:
    delivered: int = 0
    resyncs: int = 0


class Hub:
    def __init__(
        self,
        log: SessionLog,
        *,
        ring_size: int = 4096,
        ring_bytes: int = 4 << 20,
        max_actions: int = 1000,
        max_bytes: int = 1 << 20,
        coalesce_seconds: float = COALESCE_SECONDS,
    ) -> None:
        self._log = log
        self._coalesce = coalesce_seconds
        self._ring_size = ring_size
        self._ring_bytes = ring_bytes
        self._max_actions = max_actions
        self._max_bytes = max_bytes
        self._channels: dict[str, _Channel] = {}
        # Every open subscription, including those dropped from their channel after a
        # resync whose stream has not ended yet.
        self._open: dict[Subscriber, None] = {}
        self.stats = HubStats()

    @property
    def subscriber_count(self) -> int:
        """Subscribers that receive live actions."""
        return sum(len(channel.subscribers) for channel in self._channels.values())

    @property
    def open_streams(self) -> int:
        """Subscriptions not yet closed (live or waiting to deliver their `resync`)."""
        return len(self._open)

    @property
    def queued_bytes(self) -> int:
        """Bytes of frames queued for open subscriptions, all sessions together."""
        return sum(subscriber.queued_bytes for subscriber in self._open)

    async def follow(self, wakeups: AsyncIterator[tuple[str, int]]) -> None:
        """Run until cancelled: turn store wake-ups into deliveries."""
        pending: dict[str, asyncio.Task[None]] = {}
        # Sessions woken again while their pull was under way: that pull's read may have
        # missed the append, and no later wake-up may come (a turn's last action).
        again: set[str] = set()

        async def pull_soon(session_id: str, channel: _Channel) -> None:
            try:
                while True:
                    await asyncio.sleep(self._coalesce)
                    again.discard(session_id)
                    await self._pull(session_id, channel)
                    if session_id not in again:
                        return
            finally:
                pending.pop(session_id, None)
                again.discard(session_id)

        try:
            async for session_id, seq in wakeups:
                channel = self._channels.get(session_id)
                if channel is None or seq <= channel.frontier:
                    continue
                if session_id in pending:
                    again.add(session_id)
                else:
                    pending[session_id] = asyncio.create_task(pull_soon(session_id, channel))
        finally:
            for task in list(pending.values()):
                task.cancel()

    async def notify(self, session_id: str) -> None:
        """Pull now (for callers that just appended and want no wake-up latency)."""
        channel = self._channels.get(session_id)
        if channel is not None:
            await self._pull(session_id, channel)

    async def publish(self, session_id: str, actions: Sequence[dict[str, Any]]) -> None:
        """Deliver actions this process just committed (with their seqs, in seq order)
        without reading them back. When they do not continue the channel (another
        writer's actions came between), read up to the log's end instead; the store's
        wake-up for them finds them delivered."""
        channel = self._channels.get(session_id)
        if channel is None or not actions:
            return
        async with channel.lock:
            first = actions[0]["seq"]
            if first == channel.frontier + 1 and all(
                action["seq"] == first + i for i, action in enumerate(actions)
            ):
                self._deliver(channel, actions)
            elif actions[-1]["seq"] > channel.frontier:
                await self._advance(session_id, channel)

    async def _pull(self, session_id: str, channel: _Channel) -> None:
        async with channel.lock:
            await self._advance(session_id, channel)

    async def _advance(self, session_id: str, channel: _Channel) -> None:
        """Read the channel up to the log's end (the caller holds its lock)."""
        while True:
            page = await self._log.read(session_id, channel.frontier, PAGE)
            self._deliver(channel, page)
            if len(page) < PAGE:
                return

    def _deliver(self, channel: _Channel, actions: Sequence[dict[str, Any]]) -> None:
        """Offer the channel's next actions to its subscribers (the caller holds its lock)."""
        for action in actions:
            frame = Frame("action", action["seq"], encode(action))
            channel.remember(frame)
            channel.frontier = frame.seq
            for subscriber in list(channel.subscribers):
                if subscriber.offer(frame):
                    self.stats.delivered += 1
                else:
                    self.stats.resyncs += 1
                    channel.subscribers.pop(subscriber, None)

    def _history(self, channel: _Channel) -> Callable[[str, int, int], Awaitable[list[Frame]]]:
        async def read(session_id: str, after: int, until: int) -> list[Frame]:
            """Frames after `after` up to `until` (inclusive): from the ring, else the store."""
            ring = channel.ring
            if ring and ring[0].seq <= after + 1:
                return [frame for frame in ring if after < frame.seq <= until][:PAGE]
            page = await self._log.read(session_id, after, min(PAGE, until - after))
            return [Frame("action", action["seq"], encode(action)) for action in page]

        return read

    @contextlib.asynccontextmanager
    async def subscribe(self, session_id: str, after: int) -> AsyncIterator[FrameStream]:
        """Frames after `after` (exclusive): history first, then live, in seq order.

        A cursor beyond the log's head gets one `resync` frame (with the head's seq) and
        nothing else: the client holds a state this log never had. NotFound for an
        unknown session.
        """
        channel: _Channel | None = None
        subscriber: Subscriber | None = None
        try:
            while True:
                channel = self._channels.get(session_id)
                if channel is None:
                    head = (await self._log.get_session(session_id)).last_seq
                    channel = self._channels.get(session_id)  # created while we read?
                    if channel is None:
                        channel = _Channel(head, self._ring_size, self._ring_bytes)
                        self._channels[session_id] = channel
                async with channel.lock:
                    if self._channels.get(session_id) is not channel:
                        continue  # retired while we waited: join the live one
                    # Every joiner reads up to the head under the lock: a wake-up that came
                    # before the channel existed, or a first read cut short, loses nothing.
                    await self._advance(session_id, channel)
                    frontier = channel.frontier
                    subscriber = Subscriber(
                        session_id, self._max_actions, self._max_bytes, max(frontier, after)
                    )
                    self._open[subscriber] = None
                    if after > frontier:
                        subscriber.overflowed = True
                        subscriber.frames.append(Frame("resync", frontier))
                        self.stats.resyncs += 1
                    else:
                        # Registered under the lock: everything up to `frontier` is history,
                        # everything after it reaches the queue; nothing falls between.
                        channel.subscribers[subscriber] = None
                    break
            yield FrameStream(
                subscriber, min(after, frontier), frontier, self._history(channel), self.stats
            )
        finally:
            if subscriber is not None:
                self._open.pop(subscriber, None)
                subscriber.frames.clear()
                subscriber.queued_bytes = 0
            if channel is not None:
                if subscriber is not None:
                    channel.subscribers.pop(subscriber, None)
                # A channel nobody listens to is retired, or a long-running host would keep
                # a ring for every session it ever served.
                if (
                    not channel.subscribers
                    and not channel.lock.locked()
                    and self._channels.get(session_id) is channel
                ):
                    del self._channels[session_id]


class FrameStream:
    """Batches of frames in seq order: history first, then live; ends after `resync`."""

    def __init__(
        self,
        subscriber: Subscriber,
        after: int,
        history_until: int,
        history: Callable[[str, int, int], Awaitable[list[Frame]]],
        stats: HubStats,
    ) -> None:
        self._subscriber = subscriber
        self._cursor = after
        self._history_until = history_until
        self._history = history
        self._stats = stats

    def stop(self) -> None:
        """End this stream at once: `batches` returns without another frame (its reader
        may no longer read the session: docs/auth.md, "What a revocation ends")."""
        self._subscriber.stop()

    @property
    def queued(self) -> tuple[int, int]:
        """(frames, bytes) waiting for this subscriber: bounded by the Hub's limits."""
        return len(self._subscriber.frames), self._subscriber.queued_bytes

    async def batches(self, heartbeat: float = 15.0) -> AsyncIterator[list[Frame]]:
        """Non-empty batches as frames arrive, and [] after `heartbeat` seconds of quiet;
        ends after `resync`, and at once after `stop`."""
        session_id = self._subscriber.session_id
        while self._cursor < self._history_until:
            page = await self._history(session_id, self._cursor, self._history_until)
            if not page or self._subscriber.stopped:
                break
            yield page
            self._cursor = page[-1].seq
        while True:
            batch = await self._subscriber.take(heartbeat)
            if self._subscriber.stopped:
                return
            yield batch
            if batch and batch[-1].kind == "resync":
                return

    def __aiter__(self) -> AsyncIterator[Frame]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Frame]:
        async for batch in self.batches():
            for frame in batch:
                yield frame
