"""Why a side-effecting durable step costs what it does on SQLite: pages per commit.

A side-effecting tool's ledger `started` must be durable before it runs, so each step is
its own fsynced COMMIT (benchmarks/peers.py). SQLite writes every page a transaction
dirtied to the WAL as a frame and fsyncs them all, so the cost of that commit grows with
its pages. This prints

1. the frames per COMMIT of a peers.py-style side-effecting run, by table or index
   (parsed from the WAL, with the background checkpointer held off so every frame stays);
2. what raw sqlite3 (WAL, synchronous=FULL) commits per second when each transaction
   dirties 1, 6 or 11 pages (one row into that many tables), on this machine, now.

    python benchmarks/commit_pages.py [--steps 400]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peers import ours

from opennua.store import _sqlite

_WAL_HEADER = 32
_FRAME_HEADER = 24


def wal_commits(wal: bytes) -> list[list[int]]:
    """The page numbers of each committed transaction in a WAL file's current generation."""
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = wal[16:24]
    commits, current, at = [], [], _WAL_HEADER
    while at + _FRAME_HEADER + page_size <= len(wal):
        page, size_after = struct.unpack(">II", wal[at : at + 8])
        if page == 0 or wal[at + 8 : at + 16] != salts:
            break
        current.append(page)
        if size_after:  # a commit frame: the transaction ends here
            commits.append(current)
            current = []
        at += _FRAME_HEADER + page_size
    return commits


def frames_by_object(folder: Path, steps: int) -> tuple[float, collections.Counter[str], int]:
    db, copy = folder / "pages.db", folder / "copy.db"

    def keep_wal() -> None:
        shutil.copy(f"{db}-wal", f"{copy}-wal")
        shutil.copy(db, copy)

    # Every frame must stay in the WAL to be counted: no background checkpoint, no
    # preallocation (its rolled-back frames would sit among the real ones).
    _sqlite._CHECKPOINT_INTERVAL_S = 3600.0
    _sqlite._WAL_PREALLOC_BYTES = 0
    asyncio.run(ours(f"sqlite:///{db}", steps, False, str(folder), before_close=keep_wal))
    commits = wal_commits(Path(f"{copy}-wal").read_bytes())
    # The steady state: leave out setup and the model responses at either end.
    middle = commits[len(commits) // 4 : 3 * len(commits) // 4]
    conn = sqlite3.connect(copy)  # reads the copied WAL too
    names = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    conn.close()
    counts: collections.Counter[str] = collections.Counter()
    for pages in middle:
        for page in pages:
            counts[names.get(page, "(free or new page)")] += 1
    return sum(map(len, middle)) / len(middle), counts, len(middle)


def raw_commits_per_s(folder: Path, pages: int, n: int = 1500) -> float:
    path = folder / f"raw{pages}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for t in range(pages):
        conn.execute(f"CREATE TABLE t{t} (x BLOB)")
    start = time.perf_counter()
    for _ in range(n):
        conn.execute("BEGIN")
        for t in range(pages):
            conn.execute(f"INSERT INTO t{t} VALUES (?)", (os.urandom(100),))
        conn.execute("COMMIT")
    rate = n / (time.perf_counter() - start)
    conn.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mean, counts, n = frames_by_object(folder, args.steps)
        print(f"side-effecting step on SQLite: {mean:.1f} WAL frames per COMMIT ({n} commits)")
        for name, count in counts.most_common():
            print(f"  {count / n:5.2f}  {name}")
        print("raw sqlite3 (WAL, synchronous=FULL), one row into each of k tables per COMMIT:")
        one = raw_commits_per_s(folder, 1)
        for k in (1, 6, 11):
            rate = one if k == 1 else raw_commits_per_s(folder, k)
            print(f"  k={k:2d}  {rate:7,.0f} commits/s  ({rate / one:.2f}x of k=1)")


if __name__ == "__main__":
    main()
