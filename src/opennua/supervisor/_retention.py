"""Workspace retention: the workspaces of ended sessions are kept `retention` seconds, then
the blobs only they referenced are collected.

A session has *ended* when no execution of it is queued, running or waiting and the last
one finished more than `retention` seconds ago. The collector is candidate-driven: it only
ever deletes a blob that an ended session's workspace manifest names (the manifest itself
or one of its files) and that nothing live names — no manifest of a session still within
retention, no artifact (artifacts survive retention), no tool output or diff kept by
reference (they are history), no plugin file, no upload a workspace holds. Blobs of any
other kind are never even considered, so a reference the collector does not know of
cannot be lost to it.

Concurrent writers: content addressing lets a writer reuse a blob that exists (a file of a
live session with the same bytes as a retired one) and commit a manifest naming it a
moment later. So deleting is two-phase: the collector keeps the bytes of what it deleted,
waits `grace` seconds (longer than a writer takes from storing or finding a blob to
committing the manifest that names it), computes the live references again and puts back
every deleted blob that became live meanwhile. A writer that looked after the delete found
nothing and stored the bytes itself.

A new turn in the session being collected: its attempt would restore the session's last
manifest, whose blobs this pass deleted and has not put back yet (the restore failed, the
turn started empty). So the collector first takes a lease on each session it collects
(`Store.fence_collection`, granted only while the session has no active execution), and
no execution of a fenced session is claimed until the lease is released: the new turn
waits. While it waits the collector looks every `poll` seconds for sessions that got a
turn, puts back at once what their manifests name and releases them, so a new turn waits
about `poll`, not the whole grace. A lease outlives a collector that died by `hold`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from opennua.store import (
    ACTIVE_STATUSES,
    ExecutionJournal,
    FileStore,
    LogStore,
    NotFound,
    RegistryStore,
    StoreError,
)
from opennua.supervisor._workspace import WorkspaceLock, decode_manifest


class CollectorStore(LogStore, ExecutionJournal, FileStore, RegistryStore, Protocol):
    """What a collection reads and fences: sessions and their logs, executions, the blobs
    every artifact, manifest and published version names."""


#: A week, unless the operator says otherwise (`nua serve --workspace-retention`).
DEFAULT_RETENTION = 7 * 24 * 3600.0
#: Longer than a writer takes from storing (or finding) a blob to committing its manifest.
DEFAULT_GRACE = 60.0
#: How long a collection's lease on a session outlives the grace (a collector that died).
DEFAULT_HOLD = 600.0


@dataclass
class _Refs:
    manifests: set[str] = field(default_factory=set)
    #: Kept whatever the session's age: artifacts, tool outputs, diffs.
    kept: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Collected:
    """What one pass did: the sessions whose workspace it retired, and the blobs deleted
    (`deleted`, after the grace: what stayed deleted) or put back (`restored`)."""

    ended_sessions: tuple[str, ...]
    deleted: frozenset[str]
    restored: frozenset[str]


class Collector:
    def __init__(
        self,
        store: CollectorStore,
        *,
        retention: float = DEFAULT_RETENTION,
        grace: float = DEFAULT_GRACE,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        data_dir: Path | None = None,
        collector_id: str = "collector",
        poll: float = 1.0,
        hold: float = DEFAULT_HOLD,
    ) -> None:
        """`collector_id` names this collector's leases (the supervisor's id)."""
        self._store = store
        self._retention = retention
        self._grace = grace
        self._clock = clock
        self._sleep = sleep
        self._data_dir = data_dir
        self._id = collector_id
        self._poll = poll
        self._hold = hold

    async def collect(self) -> Collected:
        """One pass; safe to run while executions write and turns start (see the module
        docstring)."""
        refs = await self._references()
        ended = await self._ended(list(refs))
        live = await self._live(refs, ended)
        named: dict[str, set[str]] = {}  # by session: what its manifests name, not live
        for sid in sorted(ended):
            mine: set[str] = set()
            for manifest in refs[sid].manifests:
                mine.add(manifest)
                mine |= await self._files(manifest)
            # Fenced only with something left to take: an earlier pass took the rest.
            left = {sha for sha in sorted(mine - live) if await self._store.blobs.exists(sha)}
            if left or self._has_local(sid):
                named[sid] = left
        fenced = await self._fence(named)
        held: dict[str, bytes] = {}
        restored: set[str] = set()
        try:
            for sha in sorted(set().union(*(named[sid] for sid in fenced))):
                try:
                    held[sha] = await self._store.blobs.read(sha)
                except NotFound:
                    continue  # an earlier pass took it
                await self._store.blobs.delete(sha)
            for sid in sorted(fenced):
                self._forget_locally(sid)
            if held:
                restored |= await self._wait_grace(fenced, named, held)
                refs = await self._references()
                live = await self._live(refs, await self._ended(list(refs)))
                for sha in sorted((held.keys() & live) - restored):
                    await self._store.blobs.put(held[sha])
                    restored.add(sha)
        finally:
            for sid in sorted(fenced):
                await self._store.end_collection(sid, self._id)
        return Collected(
            tuple(sorted(ended)), frozenset(held.keys() - restored), frozenset(restored)
        )

    async def _fence(self, named: dict[str, set[str]]) -> set[str]:
        """Take the lease on each session to collect; keep those still ended after."""
        now = self._clock()
        until = now + self._grace + self._hold
        fenced = {
            sid
            for sid in sorted(named)
            if await self._store.fence_collection(sid, self._id, now, until)
        }
        # A claim that read "no lease" before ours committed found its execution already
        # queued, so it shows here, read after our commit: that session is not ours.
        for sid in sorted(fenced):
            if await self._store.list_executions(sid, active=True):
                await self._store.end_collection(sid, self._id)
                fenced.discard(sid)
        return fenced

    async def _wait_grace(
        self, fenced: set[str], named: dict[str, set[str]], held: dict[str, bytes]
    ) -> set[str]:
        """Sleep the grace in `poll` steps; a fenced session that got a turn meanwhile
        gets back what its manifests name and its lease released at once (its turn
        waits for that to be claimed). Returns what was put back."""
        restored: set[str] = set()
        waited = 0.0
        while True:
            step = min(self._poll, self._grace - waited) if self._poll > 0 else self._grace
            await self._sleep(max(step, 0.0))
            waited += step
            for sid in sorted(fenced):
                if not await self._store.list_executions(sid, active=True):
                    continue
                for sha in sorted((named[sid] & held.keys()) - restored):
                    await self._store.blobs.put(held[sha])
                    restored.add(sha)
                await self._store.end_collection(sid, self._id)
                fenced.discard(sid)
            if waited >= self._grace:
                return restored

    async def _references(self) -> dict[str, _Refs]:
        out: dict[str, _Refs] = {}
        cursor = None
        while True:
            page = await self._store.list_session_summaries(limit=200, cursor=cursor)
            for summary in page.items:
                sid = summary.session.session_id
                out[sid] = await self._session_refs(sid)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    async def _session_refs(self, session_id: str) -> _Refs:
        refs = _Refs()
        after = 0
        while page := await self._store.read(session_id, after, 1000):
            for action in page:
                _note(refs, action.get("type"), action.get("data") or {})
            after = page[-1]["seq"]
        refs.kept |= {a.sha256 for a in await self._store.list_artifacts(session_id)}
        return refs

    async def _ended(self, session_ids: list[str]) -> set[str]:
        now, ended = self._clock(), set()
        for sid in session_ids:
            executions = await self._store.list_executions(sid)
            if not executions or any(e.status in ACTIVE_STATUSES for e in executions):
                continue
            last = max(e.finished_at or e.created_at for e in executions)
            if last < now - self._retention:
                ended.add(sid)
        return ended

    async def _live(self, refs: dict[str, _Refs], ended: set[str]) -> set[str]:
        live: set[str] = set()
        for sid, r in refs.items():
            live |= r.kept
            if sid not in ended:
                for manifest in r.manifests:
                    live.add(manifest)
                    live |= await self._files(manifest)
        for name in await self._store.list_plugins():
            for version in await self._store.list_plugin_versions(name):
                live |= {f.sha256 for f in version.files}
        # What a workspace uploaded it may name in a publish: its bytes must stay.
        live |= await self._store.all_held_blobs()
        return live

    async def _files(self, manifest: str) -> set[str]:
        try:
            raw = await self._store.blobs.read(manifest)
        except (NotFound, StoreError):
            return set()
        return {entry.sha256 for entry in decode_manifest(raw).values()}

    def _has_local(self, session_id: str) -> bool:
        """This machine still has a copy of the session's workspace (another machine's
        collector may have taken the blobs already: the copy here is forgotten anyway)."""
        if self._data_dir is None:
            return False
        return (self._data_dir / "workspaces" / session_id).exists() or (
            self._data_dir / "workspace-index" / f"{session_id}.json"
        ).exists()

    def _forget_locally(self, session_id: str) -> None:
        # This machine's copy of a retired workspace, and its index, go with it; not while
        # an attempt restores it (a new turn in an old session: it is no longer ended).
        if self._data_dir is None:
            return
        index = self._data_dir / "workspace-index"
        lock = WorkspaceLock(index / f"{session_id}.lock")
        if not lock.try_acquire():
            return
        try:
            shutil.rmtree(self._data_dir / "workspaces" / session_id, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (index / f"{session_id}.json").unlink()
        finally:
            lock.release(remove=True)


def _ref(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value.removeprefix("blob:").removeprefix("sha256:")


def _note(refs: _Refs, kind: object, data: dict[str, object]) -> None:
    if kind == "workspace.committed" and (m := _ref(data.get("manifest"))):
        refs.manifests.add(m)
    elif kind == "tool_call.updated" and (o := _ref(data.get("output_ref"))):
        refs.kept.add(o)
    elif kind == "file.changed" and (d := _ref(data.get("diff_ref"))):
        refs.kept.add(d)
    elif kind == "artifact.published" and (a := _ref(data.get("sha256"))):
        refs.kept.add(a)
