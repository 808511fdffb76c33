"""Workspace retention and blob collection on real stores (SQLite with file blobs,
PostgreSQL with its own blob tables): the workspace of a session that ended longer ago than
the retention is collected, and nothing live is ever lost — not a file another session
shares, not an artifact, not a tool output, not what a concurrent writer commits while the
collector runs. A later turn in a retired session starts empty and says so."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest

from opennua.protocol import action_id
from opennua.store import ArtifactRecord, Execution, Store, open_store
from opennua.supervisor._retention import Collector
from opennua.supervisor._workspace import Workspace, WorkspaceLock, decode_manifest

DAY = 86400.0
NOW = 1_900_000_000.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/nua.db"
    url: str = request.getfixturevalue("pg_url")
    return url


class World:
    def __init__(self, store: Store, root: Path) -> None:
        self.store = store
        self.root = root
        self.n = 0

    async def session(self, sid: str, *, ended_at: float | None) -> None:
        """A session with one execution: finished at `ended_at`, or still running."""
        await self.store.create_session(sid, created_at=NOW - 30 * DAY)
        await self.store.create_execution(
            Execution(
                execution_id=f"exe_{sid}",
                session_id=sid,
                turn_id=f"trn_{sid}",
                status="queued",
                created_at=NOW - 30 * DAY,
            )
        )
        if ended_at is not None:
            claimed = await self.store.claim(f"sup_{sid}", ended_at - 1, 30)
            assert claimed is not None and claimed.execution.execution_id == f"exe_{sid}"
            async with self.store.fenced(claimed.execution.execution_id, claimed.epoch) as tx:
                tx.finish("completed", now=ended_at)

    def workspace(self, sid: str) -> Workspace:
        root = self.root / "workspaces" / sid
        root.mkdir(parents=True, exist_ok=True)
        return Workspace(root, self.root / "index" / f"{sid}.json", self.store.blobs)

    async def commit(self, sid: str, files: dict[str, bytes]) -> str:
        """Write `files` into the session's workspace, commit it and record the commit in
        the session's log, as an execution's step does."""
        ws = self.workspace(sid)
        for rel, data in files.items():
            (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws.root / rel).write_bytes(data)
        manifest = await ws.commit()
        self.n += 1
        await self.store.append(
            sid,
            [
                {
                    "v": 1,
                    "id": action_id("retention", f"{sid}/{self.n}"),
                    "type": "workspace.committed",
                    "ts": "2030-03-17T17:46:40.000Z",
                    "turn_id": f"trn_{sid}",
                    "data": {
                        "execution_id": f"exe_{sid}",
                        "manifest": manifest.sha256,
                        "files": manifest.files,
                        "bytes": manifest.bytes,
                    },
                }
            ],
        )
        assert manifest.sha256 is not None
        return manifest.sha256

    async def files_of(self, manifest: str) -> set[str]:
        return {e.sha256 for e in decode_manifest(await self.store.blobs.read(manifest)).values()}


async def _no_wait(seconds: float) -> None:
    return None


async def test_an_ended_sessions_workspace_is_collected_and_nothing_live_is(
    store_url: str, tmp_path: Path
) -> None:
    async with await open_store(store_url, data_dir=tmp_path) as store:
        w = World(store, tmp_path)
        await w.session("ses_old", ended_at=NOW - 10 * DAY)
        await w.session("ses_recent", ended_at=NOW - 1 * DAY)
        await w.session("ses_running", ended_at=None)
        uploaded = b"also a plugin file some workspace uploaded"
        old = await w.commit(
            "ses_old",
            {"only-old.txt": b"only in the old one", "shared.txt": b"s", "up.txt": uploaded},
        )
        held = (await store.blobs.put(uploaded)).sha256
        await store.hold_blob("wsp_uploader", held, len(uploaded), NOW)
        old2 = await w.commit("ses_old", {"later.txt": b"a later commit of the old one"})
        recent = await w.commit("ses_recent", {"r.txt": b"recent"})
        running = await w.commit("ses_running", {"shared.txt": b"s", "run.txt": b"running"})
        # The old session published an artifact and kept a big tool output by reference.
        report = await store.blobs.put(b"the report")
        await store.put_artifact(
            ArtifactRecord(
                artifact_id="art_old",
                session_id="ses_old",
                name="r.md",
                media_type="text/markdown",
                size=report.size,
                sha256=report.sha256,
                created_at=NOW - 10 * DAY,
            )
        )
        output = await store.blobs.put(b"a long tool output")
        await store.append(
            "ses_old",
            [
                {
                    "v": 1,
                    "id": action_id("retention", "out"),
                    "type": "tool_call.updated",
                    "ts": "2030-03-17T17:46:40.000Z",
                    "turn_id": "trn_ses_old",
                    "data": {"tool_call_id": "call_1", "status": "completed",
                             "output_ref": f"sha256:{output.sha256}"},
                }
            ],
        )  # fmt: skip
        gone = {old, old2} | (await w.files_of(old) | await w.files_of(old2))
        gone -= await w.files_of(running)  # shared.txt is the running session's too
        gone.discard(held)  # a workspace holds it: it may name it in a publish
        kept = {recent, running, report.sha256, output.sha256, held}
        kept |= await w.files_of(recent) | await w.files_of(running)

        collector = Collector(
            store, retention=7 * DAY, clock=lambda: NOW, sleep=_no_wait, data_dir=tmp_path
        )
        result = await collector.collect()
        assert result.ended_sessions == ("ses_old",)
        assert result.deleted == gone and not result.restored
        for sha in gone:
            assert not await store.blobs.exists(sha), sha
        for sha in kept:
            assert await store.blobs.exists(sha), sha
        assert not (tmp_path / "workspaces" / "ses_old").exists()
        assert (tmp_path / "workspaces" / "ses_recent" / "r.txt").exists()
        # The artifact still downloads; a second pass finds nothing more to do.
        assert await store.blobs.read(report.sha256) == b"the report"
        again = await collector.collect()
        assert again.deleted == frozenset() and again.ended_sessions == ("ses_old",)


async def test_a_workspace_an_attempt_holds_is_not_removed_and_a_retired_ones_lock_goes(
    tmp_path: Path,
) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        w = World(store, tmp_path)
        await w.session("ses_old", ended_at=NOW - 10 * DAY)
        await w.commit("ses_old", {"a.txt": b"a"})
        collector = Collector(
            store, retention=7 * DAY, clock=lambda: NOW, sleep=_no_wait, data_dir=tmp_path
        )
        lock_path = tmp_path / "workspace-index" / "ses_old.lock"
        held = WorkspaceLock(lock_path)
        assert held.try_acquire()  # an attempt of a new turn in the old session
        await collector.collect()
        assert (tmp_path / "workspaces" / "ses_old" / "a.txt").exists()
        held.release()
        await collector.collect()
        assert not (tmp_path / "workspaces" / "ses_old").exists()
        assert not lock_path.exists()
        # A lock taken on the file retention removed would guard nothing: taken anew.
        again = WorkspaceLock(lock_path)
        assert again.try_acquire() and lock_path.exists()
        assert not WorkspaceLock(lock_path).try_acquire()
        again.release()


async def test_concurrent_writers_never_lose_a_blob_they_commit(
    store_url: str, tmp_path: Path
) -> None:
    """Live sessions keep committing files whose bytes equal the retired session's while
    collections run: every manifest any live session committed still has all its blobs."""
    async with await open_store(store_url, data_dir=tmp_path) as store:
        w = World(store, tmp_path)
        contents = [f"file number {i}\n".encode() for i in range(600)]
        await w.session("ses_old", ended_at=NOW - 10 * DAY)
        await w.commit("ses_old", {f"f{i}.txt": c for i, c in enumerate(contents)})
        writers = [f"ses_live{i}" for i in range(3)]
        for sid in writers:
            await w.session(sid, ended_at=None)
        committed: list[str] = []
        stop = asyncio.Event()

        async def writer(sid: str, seed: int) -> None:
            rng = random.Random(seed)
            n = 0
            while not stop.is_set() and n < 25:
                n += 1
                pick = rng.sample(range(len(contents)), 3)
                # The same bytes as the retired workspace's files: found by content address.
                files = {f"w{n}-{i}.txt": contents[i] for i in pick}
                committed.append(await w.commit(sid, files))
                await asyncio.sleep(0)

        async def collect_repeatedly() -> list[Any]:
            results = []
            for _ in range(2):
                collector = Collector(
                    store, retention=7 * DAY, grace=0.2, clock=lambda: NOW, data_dir=None
                )
                results.append(await collector.collect())
            return results

        tasks = [asyncio.create_task(writer(sid, i)) for i, sid in enumerate(writers)]
        try:
            results = await collect_repeatedly()
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        assert results[0].ended_sessions == ("ses_old",)
        # The collector did delete and did race the writers (some blobs came back).
        assert any(r.deleted or r.restored for r in results)
        assert len(committed) > 10, len(committed)
        for manifest in committed:
            assert await store.blobs.exists(manifest), manifest
            for sha in await w.files_of(manifest):
                assert await store.blobs.exists(sha), (manifest, sha)


async def test_a_new_turn_in_a_session_being_collected_waits_for_its_workspace(
    store_url: str, tmp_path: Path
) -> None:
    """The interleaving of issue 35: a collection deleted the session's blobs and waited
    out its grace; a new turn claimed inside that window and its restore found them
    missing. Now the claim waits while the collection holds the session, and the
    collector, seeing the turn, puts the blobs back and lets go one poll later."""
    async with await open_store(store_url, data_dir=tmp_path) as store:
        w = World(store, tmp_path)
        await w.session("ses_old", ended_at=NOW - 10 * DAY)
        manifest = await w.commit("ses_old", {"notes.txt": b"the notes", "b.txt": b"bee"})
        claims: list[Any] = []

        async def inside_the_grace(seconds: float) -> None:
            if not claims:  # a person writes in the old session; a supervisor claims
                turn = Execution(
                    execution_id="exe_new",
                    session_id="ses_old",
                    turn_id="trn_new",
                    status="queued",
                    created_at=NOW,
                )
                await store.create_execution(turn)
            claims.append(await store.claim("sup_b", NOW, 30))

        collector = Collector(
            store,
            retention=7 * DAY,
            grace=60,
            poll=1,
            clock=lambda: NOW,
            sleep=inside_the_grace,
            collector_id="sup_a",
        )
        result = await collector.collect()
        assert claims[0] is None  # the blobs were gone: the claim waited
        assert claims[1] is not None and claims[1].execution.execution_id == "exe_new"
        assert all(c is None for c in claims[2:])
        everything = {manifest} | await w.files_of(manifest)
        assert result.restored == everything and not result.deleted
        # The new attempt's restore (on a machine without a copy) finds every file.
        elsewhere = Workspace(tmp_path / "elsewhere", tmp_path / "e.json", store.blobs)
        (tmp_path / "elsewhere").mkdir()
        _, lost, written = await elsewhere.restore(manifest)
        assert written == 2 and not lost
        assert (tmp_path / "elsewhere" / "notes.txt").read_bytes() == b"the notes"


async def test_a_turn_accepted_before_the_fence_keeps_its_session_from_collection(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await open_store(store_url, data_dir=tmp_path) as store:
        w = World(store, tmp_path)
        await w.session("ses_old", ended_at=NOW - 10 * DAY)
        manifest = await w.commit("ses_old", {"notes.txt": b"the notes"})
        fence = store.fence_collection

        async def a_turn_first(sid: str, *args: Any) -> bool:
            # Judged ended, then a turn arrives before the collector takes the lease.
            turn = Execution(
                execution_id="exe_new",
                session_id=sid,
                turn_id="trn_new",
                status="queued",
                created_at=NOW,
            )
            await store.create_execution(turn)
            return await fence(sid, *args)

        monkeypatch.setattr(store, "fence_collection", a_turn_first)
        collector = Collector(store, retention=7 * DAY, clock=lambda: NOW, sleep=_no_wait)
        result = await collector.collect()
        assert result.ended_sessions == ("ses_old",) and not result.deleted
        for sha in {manifest} | await w.files_of(manifest):
            assert await store.blobs.exists(sha)
        claimed = await store.claim("sup_b", NOW, 30)
        assert claimed is not None and claimed.execution.execution_id == "exe_new"


async def test_a_turn_in_a_retired_session_starts_empty_and_says_so(tmp_path: Path) -> None:
    from opennua.runtime import default_agent
    from opennua.runtime.testing import ScriptedModel
    from tests._support.polling import until
    from tests._support.supervisor import (
        EID,
        EID2,
        SID,
        accept,
        make_supervisor,
        second_turn,
        session_state,
        two_turn_script,
    )

    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        await accept(store, time.time())
        supervisor = make_supervisor(
            store, tmp_path, default_agent("scripted:test"), model=ScriptedModel(two_turn_script)
        )
        runner = asyncio.create_task(supervisor.run())

        def completed(eid: str) -> Any:
            async def check() -> bool:
                return (await store.get_execution(eid)).status == "completed"

            return check

        try:
            await until(completed(EID))
            later = time.time() + 8 * DAY
            collector = Collector(
                store, retention=7 * DAY, grace=0, clock=lambda: later, data_dir=tmp_path
            )
            result = await collector.collect()
            assert result.ended_sessions == (SID,) and result.deleted
            assert not (tmp_path / "workspaces" / SID / "notes").exists()
            await second_turn(store, time.time())
            supervisor.nudge()
            await until(completed(EID2))
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        state = await session_state(store)
    second = state["turns"][1]
    assert second["stop_reason"] == "end_turn"
    (restore,) = second["workspace_restores"].values()
    assert restore["files"] == 0 and restore["manifest"] is not None
    read = next(c for c in second["tool_calls"].values() if c["name"] == "read_file")
    assert read["status"] == "failed"
