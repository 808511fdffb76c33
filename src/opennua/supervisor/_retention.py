"""Workspace retention: the workspaces of ended sessions are kept `retention` seconds, then
the blobs only they referenced are collected.

A session has *ended* when no execution of it is queued, running or waiting and the last
one finished more than `retention` seconds ago. The collector is candidate-driven: it only
ever deletes a blob that an ended session's workspace manifest names (the manifest itself
or one of its files) and that nothing live names — no manifest of a session still within
retention, no artifact (artifacts survive retention), no tool output or diff kept by
reference (they are history), no plugin file. Blobs of any other kind are never even
considered, so a reference the collector does not know of cannot be lost to it.

Concurrent writers: content addressing lets a writer reuse a blob that exists (a file of a
live session with the same bytes as a retired one) and commit a manifest naming it a
moment later. So deleting is two-phase: the collector keeps the bytes of what it deleted,
waits `grace` seconds (longer than a writer takes from storing or finding a blob to
committing the manifest that names it), computes the live references again and puts back
every deleted blob that became live meanwhile. A writer that looked after the delete found
nothing and stored the bytes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from opennua.store import NotFound, Store, StoreError
from opennua.supervisor._workspace import WorkspaceLock, decode_manifest

ACTIVE = frozenset({"queued", "running", "waiting_input"})
#: A week, unless the operator says otherwise (`nua serve --workspace-retention`).
DEFAULT_RETENTION = 7 * 24 * 3600.0
#: Longer than a writer takes from storing (or finding) a blob to committing its manifest.
DEFAULT_GRACE = 60.0


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
        store: Store,
        *,
        retention: float = DEFAULT_RETENTION,
        grace: float = DEFAULT_GRACE,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        data_dir: Path | None = None,
    ) -> None:
        self._store = store
        self._retention = retention
        self._grace = grace
        self._clock = clock
        self._sleep = sleep
        self._data_dir = data_dir

    async def collect(self) -> Collected:
        """One pass; safe to run while executions write (see the module docstring)."""
        refs = await self._references()
        ended = await self._ended(list(refs))
        live = await self._live(refs, ended)
        candidates: set[str] = set()
        for sid in ended:
            for manifest in refs[sid].manifests:
                candidates.add(manifest)
                candidates |= await self._files(manifest)
        candidates -= live
        held: dict[str, bytes] = {}
        for sha in sorted(candidates):
            try:
                held[sha] = await self._store.blobs.read(sha)
            except NotFound:
                continue  # an earlier pass took it
            await self._store.blobs.delete(sha)
        for sid in ended:
            self._forget_locally(sid)
        restored: set[str] = set()
        if held:
            await self._sleep(self._grace)
            refs = await self._references()
            live = await self._live(refs, await self._ended(list(refs)))
            for sha in sorted(held.keys() & live):
                await self._store.blobs.put(held[sha])
                restored.add(sha)
        return Collected(
            tuple(sorted(ended)), frozenset(held.keys() - restored), frozenset(restored)
        )

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
            if not executions or any(e.status in ACTIVE for e in executions):
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
        return live

    async def _files(self, manifest: str) -> set[str]:
        try:
            raw = await self._store.blobs.read(manifest)
        except (NotFound, StoreError):
            return set()
        return {entry.sha256 for entry in decode_manifest(raw).values()}

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
