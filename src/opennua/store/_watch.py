"""Wake-ups after appends. A wake-up only: consumers re-read from their last seq."""

from __future__ import annotations

import asyncio
import itertools


class Watcher:
    """Async iterator of ``(session_id, seq)``, coalescing per session.

    It never drops a wake-up and never grows past one entry per session: if a session
    is appended to five times before the consumer looks, it sees one item, the newest seq.
    """

    def __init__(self, hub: WatchHub) -> None:
        self._hub = hub
        self._pending: dict[str, int] = {}
        self._event = asyncio.Event()
        self._closed = False

    def _push(self, session_id: str, seq: int) -> None:
        if seq > self._pending.get(session_id, 0):
            self._pending[session_id] = seq
            self._event.set()

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, int]:
        taken = await self.batch(1)
        if not taken:
            raise StopAsyncIteration
        return taken[0]

    async def batch(self, limit: int) -> list[tuple[str, int]]:
        """Up to `limit` pending wake-ups at once, oldest first, as soon as there is one
        (for a consumer that reads one thing for many sessions); empty once closed."""
        while not self._pending:
            if self._closed:
                return []
            self._event.clear()
            await self._event.wait()
        taken = list(itertools.islice(self._pending.items(), limit))
        for session_id, _ in taken:
            del self._pending[session_id]
        return taken

    def close(self) -> None:
        self._closed = True
        self._hub.discard(self)
        self._event.set()

    async def __aenter__(self) -> Watcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class WatchHub:
    """In-process fan-out of wake-ups (called on the event loop thread only)."""

    def __init__(self) -> None:
        # Insertion-ordered (a dict as an ordered set): wake-ups in registration order.
        self._watchers: dict[Watcher, None] = {}

    def subscribe(self) -> Watcher:
        watcher = Watcher(self)
        self._watchers[watcher] = None
        return watcher

    def discard(self, watcher: Watcher) -> None:
        self._watchers.pop(watcher, None)

    def publish(self, wakeups: dict[str, int]) -> None:
        for watcher in self._watchers:
            for session_id, seq in wakeups.items():
                watcher._push(session_id, seq)

    def close(self) -> None:
        for watcher in list(self._watchers):
            watcher.close()
