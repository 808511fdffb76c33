"""An in-memory store for tests and the deterministic simulation (``open_store("memory:")``).

Not a toy: it is SQLite's schema and the very same op programs as the SQLite backend,
on one ``:memory:`` connection, run to completion on the event loop instead of a writer
thread. So it passes the storage contract suite, and nothing it does depends on threads
or wall time: under a seeded scheduler, a run is reproducible. Each unit is its own
transaction (no group commit: there is no disk to wait for).

``faults`` lets a simulation decide, per unit, to fail it before it runs (``"unavailable"``:
nothing written) or to commit it and then raise :class:`CommitUnknown` (``"unknown"``: the
caller cannot tell). Both are scheduling points, as a real round trip is. ``on_commit``
sees each committed unit and its results right after its COMMIT, before anything else
runs: where a simulation checks invariants that must hold at every commit.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any, Literal, TypeVar

from ._base import Store
from ._blobs import BlobRef, BlobStore, checked_sha256, iterate
from ._errors import CommitUnknown, NotFound, StoreError, Unavailable, unit_failure
from ._migrations import migrate_sqlite
from ._sql import Effects, Program
from ._sqlite import drive
from ._sqlite_ops import SQLiteDialect
from ._unit import Unit, unit_program
from ._watch import Watcher, WatchHub

T = TypeVar("T")
Fault = Literal["unavailable", "unknown"]
_DIALECT = SQLiteDialect()


class MemoryBlobs(BlobStore):
    """Blobs in a dict: content-addressed like the others, gone with the process."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    async def put(self, data: bytes) -> BlobRef:
        sha = hashlib.sha256(data).hexdigest()
        self._blobs[sha] = bytes(data)
        return BlobRef(sha, len(data))

    async def put_stream(self, chunks: AsyncIterable[bytes] | Iterable[bytes]) -> BlobRef:
        parts = [bytes(chunk) async for chunk in iterate(chunks)]
        return await self.put(b"".join(parts))

    async def read(self, sha256: str) -> bytes:
        data = self._blobs.get(checked_sha256(sha256))
        if data is None:
            raise NotFound("blob", sha256)
        return data

    async def exists(self, sha256: str) -> bool:
        return checked_sha256(sha256) in self._blobs

    async def delete(self, sha256: str) -> None:
        self._blobs.pop(checked_sha256(sha256), None)


class MemoryStore(Store):
    def __init__(
        self, blobs: BlobStore | None, *, faults: Callable[[Unit], Fault | None] | None = None
    ) -> None:
        super().__init__(blobs if blobs is not None else MemoryBlobs())
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        migrate_sqlite(self._conn)
        self._hub = WatchHub()
        self._closed = False
        #: Set by a simulation: which units fail, and how.
        self.faults = faults
        self.on_commit: Callable[[Unit, list[Any]], None] | None = None

    async def _commit(self, unit: Unit) -> list[Any]:
        if self._closed:
            raise StoreError("the store is closed")
        await asyncio.sleep(0)  # the round trip: others run before the unit does
        fault = self.faults(unit) if self.faults is not None else None
        if fault == "unavailable":
            raise Unavailable("memory: injected failure before commit")
        fx = Effects()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = drive(conn, unit_program(_DIALECT, unit.fence, unit.ops, fx))
        except Exception as exc:
            conn.execute("ROLLBACK")
            raise unit_failure(exc, "memory")  # noqa: B904 - its cause is set
        conn.execute("COMMIT")
        if self.on_commit is not None:
            self.on_commit(unit, results)
        if fx.wakeups:
            self._hub.publish(fx.wakeups)
        await asyncio.sleep(0)  # ... and the way back: committed, not yet told
        if fault == "unknown":
            execution_id, epoch = (unit.fence[0], unit.fence[1]) if unit.fence else ("", -1)
            raise CommitUnknown("memory: injected loss of the outcome", execution_id, epoch)
        return results

    async def _read(self, program: Program[T]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        await asyncio.sleep(0)
        return self.read_now(program)

    def read_now(self, program: Program[T]) -> T:
        """Run a read program at once, without yielding (for invariant checks)."""
        return drive(self._conn, program)

    def watch(self) -> Watcher:
        return self._hub.subscribe()

    async def check_writable(self) -> None:
        if self._closed:
            raise Unavailable("the store is closed")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hub.close()
        self._rights.close()
        self._conn.close()
