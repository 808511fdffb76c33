"""Durable append throughput and latency of opennua.store, against raw sqlite3.

    python benchmarks/store_append.py [--actions 30000] [--pg postgresql://.../postgres]

Prints, for SQLite and PostgreSQL: one session appending sequentially, and 100
sessions with 100 concurrent writers (one action per append, each awaited until its
commit is durable). In the same run, a raw-driver baseline at the same durability
(plain sqlite3, WAL + synchronous=FULL, the same tables and indexes, the same
session interleaving): one commit per row and one commit per batch of 100. Our
figures are printed as ratios of it. The 100-writer SQLite figure and its raw baseline
are the medians of ``--runs`` interleaved runs (default 3): on a small VM the disk
makes single runs swing by a quarter. PostgreSQL runs in its own database
``nua_bench_<random>``, created and dropped here. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from opennua.store import Store, open_store
from opennua.store._bodies import pack
from opennua.store._json import dumps
from opennua.store._migrations import migrate_sqlite


def stored(envelope: dict[str, Any], seq: int) -> bytes:
    """The body SQLite stores for an envelope (docs/store.md): the envelope with its seq
    and 0 in place of the fields the row's columns hold, deflated (store/_bodies.py).
    Built here the plain way, so the baseline costs what it always did;
    tests/store/test_pg_functions.py checks that the store encodes exactly this."""
    body = dict(envelope)
    body["session_id"] = body["id"] = body["type"] = 0
    body["seq"] = seq
    return pack(dumps(body))


def make_action(session_id: str, n: int) -> dict[str, Any]:
    """A realistic ~300-byte envelope (a streamed text delta)."""
    return {
        "v": 1,
        "session_id": session_id,
        "seq": None,
        "id": f"act_01JDXBENCH{n:016d}",
        "type": "message.delta",
        "ts": "2026-11-29T08:00:00.123Z",
        "turn_id": "trn_01JDX4A7Q2V3M5N6P7R8S9T0VW",
        "run_id": "run_01JDX4A7Q2V3M5N6P7R8S9T0VX",
        "client_id": None,
        "intent_id": None,
        "data": {"message_id": "msg_01JDX4A7Q2V3M5N6P7R8S9T0VY", "delta": f"token {n} " * 4},
    }


def sid(i: int) -> str:
    return f"ses_01JDXBENCH{i:016d}"


class Result:
    def __init__(self, name: str, count: int, seconds: float, latencies: list[float]) -> None:
        self.name, self.count, self.seconds = name, count, seconds
        self.rate = count / seconds
        q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
        self.p50, self.p99 = q[49] * 1e3, q[98] * 1e3

    def line(self, baseline: float | None = None) -> str:
        ratio = f"  {self.rate / baseline:5.2f}x raw" if baseline else ""
        return (
            f"  {self.name:<44} {self.rate:>9,.0f} actions/s   "
            f"p50 {self.p50:6.2f} ms   p99 {self.p99:6.2f} ms{ratio}"
        )


async def bench_sequential(store: Store, n: int) -> Result:
    await store.create_session(sid(0), created_at=1.0)
    latencies = []
    start = time.perf_counter()
    for k in range(n):
        t = time.perf_counter()
        await store.append(sid(0), [make_action(sid(0), k)])
        latencies.append(time.perf_counter() - t)
    return Result("1 session, sequential", n, time.perf_counter() - start, latencies)


async def bench_concurrent(store: Store, n: int, writers: int = 100) -> Result:
    for w in range(writers):
        await store.create_session(sid(1000 + w), created_at=2.0)
    latencies: list[float] = []

    async def writer(w: int) -> None:
        session = sid(1000 + w)
        for k in range(n // writers):
            t = time.perf_counter()
            await store.append(session, [make_action(session, k)])
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    name = f"{writers} sessions, {writers} concurrent writers"
    return Result(name, len(latencies), time.perf_counter() - start, latencies)


def raw_sqlite(folder: Path, n: int, batch: int, sessions: int) -> Result:
    """What plain sqlite3 does with the same tables, rows and fsync policy."""
    conn = sqlite3.connect(folder / f"raw-{batch}-{sessions}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    migrate_sqlite(conn)  # every migration: the tables and indexes the store writes
    latencies = []
    start = time.perf_counter()
    for b in range(n // batch):
        t = time.perf_counter()
        conn.execute("BEGIN")
        rows = []
        for k in range(b * batch, (b + 1) * batch):
            session = sid(k % sessions)
            envelope = make_action(session, k)
            body = stored(envelope, k)  # the row the store writes
            rows.append((k % sessions + 1, k, envelope["id"], envelope["type"], body))
        conn.executemany(
            "INSERT INTO action_log (sk, seq, action_id, type, body) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.execute("COMMIT")
        latencies.append(time.perf_counter() - t)
    seconds = time.perf_counter() - start
    conn.close()
    what = "row" if batch == 1 else f"batch of {batch}"
    return Result(f"raw sqlite3, commit per {what}, {sessions} session(s)", n, seconds, latencies)


async def run(args: argparse.Namespace) -> None:
    n = args.actions
    print(f"opennua.store append benchmark: {n:,} actions per concurrent run, ~300-byte actions")
    print(f"machine: {os.cpu_count()} CPUs\n")
    with tempfile.TemporaryDirectory(prefix="nua bench ") as tmp:
        folder = Path(tmp)
        print("raw sqlite3 baseline (WAL, synchronous=FULL, same schema):")
        raw_row = raw_sqlite(folder, min(n, 3000) // 100 * 100 or 100, 1, 1)
        raw_batch_1 = raw_sqlite(folder, n, 100, 1)
        for r in (raw_row, raw_batch_1):
            print(r.line())

        async with await open_store(f"sqlite:///{folder}/store seq.db") as store:
            seq = await bench_sequential(store, min(n, 3000))
        # The concurrent figure swings with this VM's disk from run to run, so it is taken
        # `runs` times, each right after the raw run it is compared with, and the medians
        # are the figures.
        raws, concs = [], []
        for k in range(args.runs):
            (folder / f"r{k}").mkdir()
            raws.append(raw_sqlite(folder / f"r{k}", n, 100, 100))
            async with await open_store(f"sqlite:///{folder}/r{k}/store conc.db") as store:
                concs.append(await bench_concurrent(store, n))
        raw_batch_100, conc = _median(raws), _median(concs)
        print(raw_batch_100.line() + f"  (median of {args.runs}: {_rates(raws)})")

        print("\nopennua.store, SQLite (one writer thread, group commit):")
        print(seq.line(raw_row.rate) + "  (vs commit per row)")
        print(conc.line(raw_batch_100.rate) + "  (vs batch of 100, same interleaving)")
        print(f"  {'':<44} median of {args.runs}: {_rates(concs)}")
        print(
            f"  {'':<44} {'':>9}                                            "
            f"{conc.rate / raw_batch_1.rate:5.2f}x raw batch of 100, 1 session"
        )
        goal = conc.rate >= 30_000 and conc.rate >= 0.5 * raw_batch_100.rate
        print(f"  goal (>= 30,000/s and >= 0.5x raw batched): {'met' if goal else 'NOT met'}")

    if args.pg:
        name = f"nua_bench_{secrets.token_hex(4)}"
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            url = args.pg.rsplit("/", 1)[0] + "/" + name
            print("\nopennua.store, PostgreSQL (pooled writers, session-row locks):")
            async with await open_store(url) as store:
                seq = await bench_sequential(store, min(n, 3000))
                conc = await bench_concurrent(store, n)
            print(seq.line())
            print(conc.line())
            verdict = "met" if conc.rate >= 10_000 else "NOT met"
            print(f"  goal (>= 10,000/s with 100 writers): {verdict}")
        finally:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _median(results: list[Result]) -> Result:
    return sorted(results, key=lambda r: r.rate)[len(results) // 2]


def _rates(results: list[Result]) -> str:
    return ", ".join(f"{r.rate:,.0f}" for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3, help="concurrent SQLite runs (median)")
    parser.add_argument(
        "--pg",
        default=os.environ.get("NUA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="admin URL of a PostgreSQL server ('' to skip)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
