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
    now = time.time()
    ms = int(now * 1000)
    sid = new_id("session", ms=ms, entropy=b"bench-ses1")
    eid = new_id("execution", ms=ms, entropy=b"bench-exe1")
    tid = new_id("turn", ms=ms, entropy=b"bench-trn1")
    await store.create_session(sid, created_at=now)
    await store.create_execution(
        Execution(execution_id=eid, session_id=sid, turn_id=tid, status="queued", created_at=now)
    )
    claimed = await store.claim("bench", now, 3600.0)
    assert claimed is not None
    journal = StoreJournal(store, claimed, owner="bench", clock=time.time, track_seqs=track_seqs)
    return store, journal, eid
