"""Workspace manifests: commit after one change, and restore on an empty disk.

    python benchmarks/workspace.py [--files 10000] [--mib 200] [--pg postgresql://.../postgres]

Builds a workspace of ``--files`` files totalling ``--mib`` MiB, commits it once (every
file hashed and stored), changes one file and commits again — the figure the issue sets a
goal for (≤ 100 ms: only the change is hashed and stored, the index vouches for the rest)
— then restores the manifest into an empty directory. Blobs in a local directory, and in
PostgreSQL (its own database ``nua_bench_<random>``, created and dropped here) unless
``--no-pg``. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
import time
from pathlib import Path

import psycopg

from opennua.store import BlobStore, FileBlobStore, open_store
from opennua.supervisor._workspace import Workspace


def build(root: Path, files: int, size: int) -> None:
    for i in range(files):
        folder = root / f"d{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:05d}.bin").write_bytes(os.urandom(size))


async def measure(name: str, blobs: BlobStore, tmp: Path, files: int, mib: int) -> None:
    root = tmp / f"{name}-ws"
    root.mkdir()
    build(root, files, (mib << 20) // files)
    ws = Workspace(root, tmp / f"{name}-index.json", blobs)
    start = time.perf_counter()
    first = await ws.commit()
    full = time.perf_counter() - start
    (root / "d000" / "f00000.bin").write_bytes(os.urandom((mib << 20) // files))
    start = time.perf_counter()
    second = await ws.commit()
    one = time.perf_counter() - start
    assert second.sha256 != first.sha256
    empty = tmp / f"{name}-restored"
    empty.mkdir()
    other = Workspace(empty, tmp / f"{name}-other-index.json", blobs)
    start = time.perf_counter()
    _, lost, written = await other.restore(second.sha256 or "")
    restore = time.perf_counter() - start
    assert not lost and written == files
    print(
        f"{name:<9} {files} files / {second.bytes / 2**20:.0f} MiB: first commit {full:6.2f} s · "
        f"commit after one change {one * 1000:6.1f} ms · restore on an empty disk {restore:6.2f} s"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        await measure("file", FileBlobStore(tmp / "blobs"), tmp, args.files, args.mib)
        if args.no_pg:
            return
        name = f"nua_bench_{secrets.token_hex(4)}"
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            async with await open_store(args.pg.rsplit("/", 1)[0] + "/" + name) as store:
                await measure("postgres", store.blobs, tmp, args.files, args.mib)
        finally:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
