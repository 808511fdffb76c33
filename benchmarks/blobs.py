"""Blob put/get throughput per backend: a local directory, the PostgreSQL database, and
S3-compatible storage (a local moto_server process, so this measures our path and the
protocol, not a network).

    python benchmarks/blobs.py [--mib 64] [--size-mib 4] [--pg postgresql://.../postgres]

Writes ``--mib`` MiB as distinct blobs of ``--size-mib`` MiB each, then reads them all
back (every read re-hashes), and prints MiB/s for both. PostgreSQL runs in its own
database ``nua_bench_<random>``, created and dropped here. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.store._s3_server import CREDENTIALS, make_bucket, s3_server

from opennua.store import BlobStore, FileBlobStore, open_store


async def measure(name: str, blobs: BlobStore, total_mib: int, size_mib: int) -> None:
    count = max(1, total_mib // size_mib)
    payloads = [os.urandom(size_mib << 20) for _ in range(count)]
    start = time.perf_counter()
    refs = [await blobs.put(p) for p in payloads]
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    for ref in refs:
        await blobs.read(ref.sha256)
    get_s = time.perf_counter() - start
    mib = count * size_mib
    print(
        f"{name:<10} put {mib / put_s:8.1f} MiB/s   get {mib / get_s:8.1f} MiB/s"
        f"   ({count} × {size_mib} MiB)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--size-mib", type=int, default=4)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        await measure("file", FileBlobStore(Path(tmp) / "blobs"), args.mib, args.size_mib)

        name = f"nua_bench_{secrets.token_hex(4)}"
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            url = args.pg.rsplit("/", 1)[0] + "/" + name
            async with await open_store(url) as store:
                await measure("postgres", store.blobs, args.mib, args.size_mib)
        finally:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        os.environ.update(CREDENTIALS)
        with s3_server() as endpoint:
            make_bucket(endpoint, "bench")
            async with await open_store(
                f"sqlite:///{tmp}/nua.db", blobs=f"s3://bench/b?endpoint_url={endpoint}"
            ) as store:
                await measure("s3 (moto)", store.blobs, args.mib, args.size_mib)


if __name__ == "__main__":
    asyncio.run(main())
