"""Event subscription deliveries: how long from an action's commit to its signed POST
reaching a receiver, and how many the one deliverer sends a second (docs/subscriptions.md).

    python benchmarks/subscriptions.py [--sessions 50] [--actions 20] [--burst]
        [--concurrency 64] [--backend sqlite|postgres]

A store (SQLite in a temp dir, or a scratch database on the PostgreSQL server at --pg), a
subscription to `session.updated`, `--sessions` sessions each committing `--actions`
actions in turn, the deliverer running as `nua serve` runs it, and a receiver on a
loopback port that verifies every signature. Prints the lag (commit → received)
p50/p99/max and the throughput, and checks that every event arrived once, verified.
`--burst` commits everything before the deliverer starts: the throughput is then how
fast it drains a backlog.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests._pgdb import scratch_database
from tests.automation._receiver import receiving

from opennua.auth import Authority
from opennua.automation import (
    Deliverer,
    Outbound,
    RetryPolicy,
    Subscriptions,
    SubscriptionSpec,
)
from opennua.protocol import action_id
from opennua.secrets import SecretKey, SecretStore
from opennua.store import open_store


async def run(args: argparse.Namespace, data: Path, url: str) -> int:
    store = await open_store(url, data_dir=data)
    async with store:
        authority = Authority(store)
        workspace = await authority.bootstrap("bench-owner-token")
        secrets = await SecretStore.open(store, SecretKey.generate())
        with receiving() as receiver:
            service = Subscriptions(store, secrets)
            spec = SubscriptionSpec(url=receiver.url, events=["session.updated"])
            _, receiver.secret = await service.create(workspace.workspace_id, "prn_bench", spec)
            deliverer = Deliverer(
                store, secrets, deliverer_id="bench", outbound=Outbound(allow_private=True),
                retry=RetryPolicy(base=0.5), poll_interval=1.0, concurrency=args.concurrency,
            )  # fmt: skip
            task = None if args.burst else asyncio.create_task(deliverer.run())
            committed: dict[str, float] = {}
            sessions = [f"ses_{i:026d}" for i in range(args.sessions)]
            for sid in sessions:
                await store.create_session(
                    sid, created_at=time.time(), workspace_id=workspace.workspace_id
                )
            started = time.perf_counter()
            for n in range(args.actions):
                for sid in sessions:
                    aid = action_id(sid, f"t{n}")
                    envelope = {"v": 1, "session_id": sid, "seq": 0, "id": aid,
                                "type": "session.updated", "ts": "2026-12-06T09:00:00.000Z",
                                "turn_id": None, "run_id": None, "client_id": None,
                                "intent_id": None, "data": {"title": f"t{n}"}}  # fmt: skip
                    await store.append(sid, [envelope])
                    committed["evt_" + aid.removeprefix("act_")] = time.perf_counter()
                await asyncio.sleep(args.pause)
            committing = time.perf_counter() - started
            if task is None:  # --burst: all committed first; how fast the backlog drains
                started = time.perf_counter()
                task = asyncio.create_task(deliverer.run())
            total = args.sessions * args.actions
            arrived: dict[str, float] = {}
            deadline = time.perf_counter() + 120
            while len(arrived) < total and time.perf_counter() < deadline:
                with receiver.lock:
                    for p in receiver.posts:
                        arrived.setdefault(p.webhook_id, p.at)
                await asyncio.sleep(0.005)
            elapsed = max(arrived.values(), default=started) - started
            await deliverer.shutdown()
            await task
            lags = sorted(arrived[k] - committed[k] for k in arrived if k in committed)
            verified = all(p.verified for p in receiver.posts)
            dupes = len(receiver.posts) - len({p.webhook_id for p in receiver.posts})
    if not lags:
        print("nothing arrived")
        return 1
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    print(f"{args.backend}: {len(arrived)} of {total} events arrived, verified: {verified}, "
          f"duplicates: {dupes}")  # fmt: skip
    print(f"lag commit -> received: p50 {statistics.median(lags) * 1000:.1f} ms, "
          f"p99 {p99 * 1000:.1f} ms, max {lags[-1] * 1000:.1f} ms")  # fmt: skip
    print(f"throughput: {len(arrived) / elapsed:.0f} events/s over {elapsed:.2f} s "
          f"(the commits took {committing:.2f} s of it)")  # fmt: skip
    return 0 if len(arrived) == total and verified and dupes == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--actions", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=64, help="tries at once")
    parser.add_argument("--pause", type=float, default=0.01, help="seconds between rounds")
    parser.add_argument(
        "--burst", action="store_true", help="commit everything, then start the deliverer"
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "sqlite":
            return asyncio.run(run(args, Path(tmp), f"sqlite:///{tmp}/nua.db"))
        # A database of its own, dropped after: never the server's shared one.
        with scratch_database(args.pg, "bench_subscriptions") as url:
            return asyncio.run(run(args, Path(tmp), url))


if __name__ == "__main__":
    sys.exit(main())
