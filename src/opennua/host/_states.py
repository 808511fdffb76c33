"""Folded session states and the snapshot policy (docs/server.md, "Host").

A snapshot request reduces only the log's new tail onto a cached state; the cache keeps
the most recently used sessions. A state is stored as a snapshot after a turn ends or
`SNAPSHOT_EVERY` actions, once the log grew by a twentieth since the last one
(`opennua.store.snapshot_due`), so a cold read (a new Host process) never replays a long
log and a long session does not pay its whole state per turn. Reading is the only way
states change here: the log is the truth.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from opennua.protocol import (
    SessionState,
    action_from_dict,
    copy_state,
    initial_state,
    reduce,
    state_from_json,
    state_to_json,
)
from opennua.store import MAX_SNAPSHOTS_DUE, LogStore, Watcher, snapshot_due

from ._snapshot_text import TurnTexts

_log = logging.getLogger(__name__)

SNAPSHOT_EVERY = 500
CACHE_SESSIONS = 256
_PAGE = 1000


@dataclass
class _Cached:
    state: SessionState
    #: seq of the snapshot stored last, and whether a turn ended after it
    snapshot_seq: int
    ended_since: bool = False
    #: The turns' texts of the last snapshot, for the next one.
    texts: TurnTexts = field(default_factory=TurnTexts)


class SessionStates:
    """An LRU of reduced states over one store, advanced to the log's end on every read."""

    def __init__(
        self,
        store: LogStore,
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        max_sessions: int = CACHE_SESSIONS,
    ) -> None:
        self._store = store
        self._snapshot_every = snapshot_every
        self._max_sessions = max_sessions
        self._states: OrderedDict[str, _Cached] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._states)

    async def snapshot(self, session_id: str) -> tuple[int, SessionState]:
        """`(seq, state)` at the log's end; the state is the caller's to change."""
        state = await self.fold(session_id)
        return state["seq"], copy_state(state)

    async def snapshot_json(self, session_id: str) -> tuple[int, str]:
        """`(seq, canonical state JSON)`, without copying the state (the catch-up path)."""
        state = await self.fold(session_id)
        return state["seq"], state_to_json(state)

    async def fold(self, session_id: str, *, known_end: int = 0) -> SessionState:
        """The cached state advanced to the log's end (shared: callers must not mutate).
        `known_end`: a seq the log is known to have reached (a wake-up's); a cached state
        already there is not read again.

        NotFound for an unknown session.
        """
        if session_id not in self._states:
            # Checked before a lock exists: unknown ids must not leave one behind.
            await self._store.get_session(session_id)
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            cached = self._states.get(session_id)
            if cached is None:
                stored = await self._store.get_snapshot(session_id)
                if stored is None:
                    cached = _Cached(initial_state(), 0)
                else:
                    cached = _Cached(state_from_json(stored.state_json), stored.seq)
            state = cached.state
            # The keeper's wake-ups are mostly for units this process committed and
            # `advance` folded already: reading the log for nothing there was ~5 % of a
            # busy server's Python time (py-spy, `peers_server.py` at N = 10).
            while not known_end or state["seq"] < known_end:
                page = await self._store.read(session_id, state["seq"], _PAGE)
                for raw in page:
                    state = reduce(state, action_from_dict(raw))
                    cached.ended_since = cached.ended_since or raw["type"] == "turn.ended"
                    cached.texts.touched(raw.get("turn_id"))
                if len(page) < _PAGE:
                    break
            cached.state = state
            if snapshot_due(
                state["seq"], cached.snapshot_seq, cached.ended_since, self._snapshot_every
            ):
                # Not the canonical form clients get (`state_to_json`: sorted keys, floats
                # as JavaScript spells them, after a float scan that was ~15 % of a busy
                # loop): only a Host reads a stored snapshot back (`state_from_json`).
                text = cached.texts.encode(state)
                await self._store.put_snapshot(session_id, state["seq"], text)
                cached.snapshot_seq, cached.ended_since = state["seq"], False
            self._states[session_id] = cached
            self._states.move_to_end(session_id)
            while len(self._states) > self._max_sessions:
                evicted, _ = self._states.popitem(last=False)
                self._locks.pop(evicted, None)
            return state

    async def advance(self, session_id: str, actions: list[dict[str, Any]]) -> None:
        """Fold actions this process just committed (in seq order) onto a cached state they
        continue, instead of reading them back at the next fold; anything else is left to
        the next fold, which reads the log."""
        cached = self._states.get(session_id)
        lock = self._locks.get(session_id)
        if cached is None or lock is None or not actions:
            return
        async with lock:
            state = cached.state
            if actions[0]["seq"] != state["seq"] + 1:
                return
            for raw in actions:
                if raw["seq"] != state["seq"] + 1:
                    break
                state = reduce(state, action_from_dict(raw))
                cached.ended_since = cached.ended_since or raw["type"] == "turn.ended"
                cached.texts.touched(raw.get("turn_id"))
            cached.state = state

    async def keep_snapshots(self, wakeups: Watcher) -> None:
        """Run until the watcher closes or this is cancelled: snapshots are stored (every
        ~500 actions and at turn end) even when no client asks for one. A cached session
        is folded on every wake-up, others only when `Store.snapshots_due` says a snapshot
        is."""
        while woken := await wakeups.batch(MAX_SNAPSHOTS_DUE):
            # A session no reader holds is folded only when a snapshot is due: the fold
            # would decode and reduce its whole log since the last snapshot, and store
            # nothing (a new session from a webhook: a seventh of the loop's time per
            # delivery, for a state the cache then evicted unread). Which are due is one
            # read for all the sessions woken at once (a point read each was ~8 % of the
            # loop's time per webhook delivery).
            uncached = {sid for sid, _ in woken if sid not in self._states}
            try:
                due = await self._store.snapshots_due(list(uncached), self._snapshot_every)
            except Exception:  # the cached ones are still folded; the others next time
                _log.warning("which snapshots are due is unknown", exc_info=True)
                due = set()
            for session_id, seq in woken:
                if session_id in uncached and session_id not in due:
                    continue
                try:
                    await self.fold(session_id, known_end=seq)
                except Exception:
                    _log.warning("snapshot of %s failed", session_id, exc_info=True)


__all__ = ["SNAPSHOT_EVERY", "SessionStates"]
