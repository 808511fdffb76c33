"""What a SQLite point read costs the event loop: on its own thread (how `Store._read`
runs it) or handed to the reader pool (how `Store._scan` runs one).

    python benchmarks/reads.py [--reads 5000] [--concurrency 32]

One `get_session` by primary key over 100 sessions, `--reads` times, one at a time and
then `--concurrency` at once; prints wall and process CPU time per read. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opennua.store import _log as log
from opennua.store import open_store


async def _timed(
    label: str, read: Callable[[str], Awaitable[object]], n: int, concurrency: int
) -> None:
    async def worker(k: int) -> None:
        for i in range(n // concurrency):
            await read(f"ses_{(i + k) % 100}")

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    done = n // concurrency * concurrency
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  {label:<34} {wall / done * 1e6:7.1f} µs wall  {cpu / done * 1e6:7.1f} µs CPU")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with await open_store(f"sqlite:///{tmp}/nua.db", data_dir=Path(tmp)) as store:
            for i in range(100):
                await store.create_session(f"ses_{i}", created_at=1.0)
            print(f"SQLite get_session, {args.reads} reads per line")
            for concurrency in (1, args.concurrency):
                await _timed(
                    f"loop thread, {concurrency} at once",
                    lambda sid: store._read(log.get_session(sid)),
                    args.reads,
                    concurrency,
                )
                await _timed(
                    f"reader pool, {concurrency} at once",
                    lambda sid: store._scan(log.get_session(sid)),
                    args.reads,
                    concurrency,
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reads", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    asyncio.run(main(parser.parse_args()))
