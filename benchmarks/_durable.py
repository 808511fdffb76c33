"""Shared by the runtime benchmarks: an execution claimed on a real store, and its journal."""

from __future__ import annotations

import time
from typing import Any

from opennua.protocol.ids import new_id
from opennua.store import Execution, Store, open_store
from opennua.supervisor import StoreJournal


async def claimed_journal(
    url: str, data_dir: str | None = None, *, track_seqs: bool = False
) -> tuple[Store, Any, str]:
    """Open the store, create a session and an execution, claim it; return its journal."""
    store = await open_store(url, data_dir=data_dir)
    journal, eid = await claim_journal(store, track_seqs=track_seqs)
    return store, journal, eid


async def claim_journal(store: Store, k: int = 1, *, track_seqs: bool = False) -> tuple[Any, str]:
    """Create the k-th session of a run and its execution, claim it; return its journal."""
    now = time.time()
    ms = int(now * 1000)
    sid = new_id("session", ms=ms, entropy=f"bench-s{k:03d}".encode())
    eid = new_id("execution", ms=ms, entropy=f"bench-e{k:03d}".encode())
    tid = new_id("turn", ms=ms, entropy=f"bench-t{k:03d}".encode())
    await store.create_session(sid, created_at=now)
    await store.create_execution(
        Execution(execution_id=eid, session_id=sid, turn_id=tid, status="queued", created_at=now)
    )
    claimed = await store.claim("bench", now, 3600.0)
    assert claimed is not None and claimed.execution.execution_id == eid
    journal = StoreJournal(store, claimed, owner="bench", clock=time.time, track_seqs=track_seqs)
    return journal, eid
