"""How long one workspace-retention pass takes: `--sessions` sessions of `--files` small
files each, half of them ended long ago, on SQLite with file blobs.

    python benchmarks/retention.py [--sessions 40] [--files 250]

Prints the time of the pass that collects the ended half (grace 0: the put-back wait is
a fixed sleep, not work) and of a second pass that finds nothing left. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opennua.protocol import action_id
from opennua.store import Execution, open_store
from opennua.supervisor import Collector
from opennua.supervisor._workspace import Workspace

DAY = 86400.0


async def main(sessions: int, files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with await open_store(f"sqlite:///{root}/nua.db", data_dir=root) as store:
            now = time.time()
            for s in range(sessions):
                sid = f"ses_bench{s:04d}"
                await store.create_session(sid, created_at=now - 30 * DAY)
                eid = f"exe_bench{s:04d}"
                await store.create_execution(
                    Execution(
                        execution_id=eid,
                        session_id=sid,
                        turn_id=f"trn_{s}",
                        status="queued",
                        created_at=now - 30 * DAY,
                    )
                )
                claimed = await store.claim("sup_bench", now - 20 * DAY, 30)
                assert claimed is not None
                async with store.fenced(claimed.execution.execution_id, claimed.epoch) as tx:
                    ended = now - (10 if s % 2 == 0 else 1) * DAY
                    tx.finish("completed", now=ended)
                ws_root = root / "workspaces" / sid
                ws_root.mkdir(parents=True)
                for f in range(files):
                    (ws_root / f"f{f}.txt").write_text(f"session {s} file {f}\n")
                ws = Workspace(ws_root, root / "index" / f"{sid}.json", store.blobs)
                m = await ws.commit()
                await store.append(
                    sid,
                    [
                        {
                            "v": 1,
                            "id": action_id("bench", sid),
                            "type": "workspace.committed",
                            "ts": "2026-12-01T00:00:00.000Z",
                            "turn_id": f"trn_{s}",
                            "data": {
                                "execution_id": eid,
                                "manifest": m.sha256,
                                "files": m.files,
                                "bytes": m.bytes,
                            },
                        }
                    ],
                )
            collector = Collector(store, retention=7 * DAY, grace=0, clock=time.time)
            start = time.perf_counter()
            first = await collector.collect()
            first_s = time.perf_counter() - start
            start = time.perf_counter()
            second = await collector.collect()
            second_s = time.perf_counter() - start
    total = sessions * files
    print(f"{sessions} sessions x {files} files ({total:,} blobs), half ended:")
    print(
        f"  collect: {first_s * 1000:.0f} ms, {len(first.deleted):,} blobs deleted "
        f"from {len(first.ended_sessions)} ended sessions"
    )
    print(f"  again:   {second_s * 1000:.0f} ms, {len(second.deleted)} deleted")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--files", type=int, default=250)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.files))
