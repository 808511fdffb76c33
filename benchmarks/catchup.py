"""Catch-up: a new client of a session with 100,000 actions gets snapshot + tail.

    python benchmarks/catchup.py [--actions 100000] [--repeat 3]

The session (200 turns of streamed deltas, tool calls, usage and plans: the log of
benchmarks/reducer.py) is written straight into a SQLite store, then a real `nua serve
--role host` process serves it on 127.0.0.1. A new client does what the protocol says:
`GET /v1/sessions/{sid}` (snapshot: `{seq, state}`), then `GET …/actions?after=<seq>`
(the tail since). Times are wall-clock on the client over loopback, so they bound the
server time from above (they include the transfer of the state JSON).

Cases, each on a freshly started server (nothing cached in the Host):
  * stored snapshot as far behind the head as the snapshot policy lets it fall (a
    twentieth of the log: `opennua.store.snapshot_due`; 4,761 actions at 100,000): load
    it, reduce the tail, answer;
  * cold: no stored snapshot, the Host folds all 100,000 actions (it then stores one);
and, on a running server, the same two requests again (the Host's folded state cached).
Goal (issue 5): ≤ 200 ms server time. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import free_port
from benchmarks.reducer import SESSION, make_log

from opennua.host._states import SNAPSHOT_EVERY
from opennua.protocol import action_from_dict, reduce, state_to_json
from opennua.protocol.state import initial_state
from opennua.store import open_store, snapshot_due

#: A client reconnecting with a local copy this far behind pages through `/actions`.
RECONNECT_BEHIND = 499


def worst_behind(total: int) -> int:
    """The longest tail a Host's snapshot policy leaves behind a stored snapshot."""
    tail = 0
    while tail < total and not snapshot_due(total, total - tail - 1, False, SNAPSHOT_EVERY):
        tail += 1
    return tail


async def write_session(db: str, data: str, total: int) -> tuple[int, str]:
    """Append the log in pages of 1,000; the snapshot the policy could leave last."""
    actions = [json.loads(line) for line in make_log(total)]
    store = await open_store(db, data_dir=data)
    async with store:
        await store.create_session(SESSION, created_at=time.time(), title="bench")
        for i in range(0, len(actions), 1000):
            await store.append(SESSION, actions[i : i + 1000])
        state = initial_state()
        snap_seq = len(actions) - worst_behind(len(actions))
        for raw in actions[:snap_seq]:
            state = reduce(state, action_from_dict(raw))
        snap_json = state_to_json(state)
        await store.put_snapshot(SESSION, snap_seq, snap_json)
    return len(actions), snap_json


class Serve:
    """`nua serve --role host` on loopback, stopped with SIGTERM (or killed)."""

    def __init__(self, data: str, db: str) -> None:
        self.data, self.db, self.port = data, db, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> httpx.Client:
        args = [
            sys.executable,
            "-m",
            "opennua.cli",
            "serve",
            "--role",
            "host",
            "--db",
            self.db,
            "--data",
            self.data,
            "--port",
            str(self.port),
        ]
        with open(Path(self.data, "serve.log"), "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"nua serve did not start; see {self.data}/serve.log")
            time.sleep(0.05)
        token = Path(self.data, "token").read_text().strip()
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        self.client.get("/v1/sessions", params={"limit": 1}).raise_for_status()  # warm route
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def catch_up(client: httpx.Client) -> tuple[float, float, int, int, int]:
    """(snapshot seconds, tail seconds, snapshot seq, state bytes, tail actions)."""
    t0 = time.perf_counter()
    snap = client.get(f"/v1/sessions/{SESSION}")
    t1 = time.perf_counter()
    snap.raise_for_status()
    seq = int(json.loads(snap.content[: snap.content.index(b",")].decode() + "}")["seq"])
    t2 = time.perf_counter()
    tail = client.get(f"/v1/sessions/{SESSION}/actions", params={"after": seq, "limit": 1000})
    t3 = time.perf_counter()
    tail.raise_for_status()
    return t1 - t0, t3 - t2, seq, len(snap.content), len(tail.json()["actions"])


def reconnect(client: httpx.Client, after: int) -> tuple[float, int]:
    """A client whose copy is at `after` pages the history up to the head."""
    t0 = time.perf_counter()
    count = 0
    while True:
        page = client.get(
            f"/v1/sessions/{SESSION}/actions", params={"after": after, "limit": 1000}
        ).json()
        count += len(page["actions"])
        after = page["next_after"]
        if not page["more"]:
            return time.perf_counter() - t0, count


def drop_snapshots(db_path: str) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM snapshots WHERE session_id = ?", (SESSION,))


def put_snapshot(db_path: str, seq: int, state_json: str) -> None:
    asyncio.run(_put(db_path, seq, state_json))


async def _put(db_path: str, seq: int, state_json: str) -> None:
    store = await open_store(f"sqlite:///{db_path}")
    async with store:
        await store.put_snapshot(SESSION, seq, state_json)


def ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:7.1f} ms  min {min(values) * 1000:7.1f} ms"
        f"  max {max(values) * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--actions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        db_path = f"{data}/nua.db"
        db = f"sqlite:///{db_path}"
        t0 = time.perf_counter()
        total, snap_json = asyncio.run(write_session(db, data, args.actions))
        print(
            f"catch-up: session of {total} actions written in {time.perf_counter() - t0:.1f} s;"
            f" state JSON {len(snap_json) / 1e6:.1f} MB; {os.cpu_count()} CPUs,"
            f" load average {os.getloadavg()[0]:.2f}"
        )
        rows: dict[str, list[tuple[float, float]]] = {}
        sizes: dict[str, tuple[int, int, int]] = {}
        paged: list[tuple[float, int]] = []

        def record(name: str, client: httpx.Client) -> None:
            snap, tail, seq, size, count = catch_up(client)
            rows.setdefault(name, []).append((snap, tail))
            sizes[name] = (seq, size, count)

        for _ in range(args.repeat):
            drop_snapshots(db_path)
            behind = worst_behind(total)
            put_snapshot(db_path, total - behind, snap_json)
            with Serve(data, db) as client:
                record(f"fresh server, stored snapshot {behind} behind head", client)
                for _ in range(10):
                    record("running server, state cached", client)
                for _ in range(10):
                    paged.append(reconnect(client, total - RECONNECT_BEHIND))
        for _ in range(args.repeat):
            drop_snapshots(db_path)
            with Serve(data, db) as client:
                record("fresh server, no stored snapshot (cold fold)", client)
        for name, samples in rows.items():
            seq, size, count = sizes[name]
            snap = [s for s, _ in samples]
            tail = [t for _, t in samples]
            both = [s + t for s, t in samples]
            print(
                f"  {name} (n={len(samples)}; seq {seq}, body {size / 1e6:.1f} MB,"
                f" tail {count} actions)"
            )
            print(f"    GET /v1/sessions/{{sid}}          {ms(snap)}")
            print(f"    GET …/actions?after=<seq>        {ms(tail)}")
            print(f"    snapshot + tail                  {ms(both)}")
        print(
            f"  reconnect with a local copy {RECONNECT_BEHIND} behind:"
            f" GET …/actions?after=<head-{RECONNECT_BEHIND}>"
            f" ({paged[0][1]} actions, n={len(paged)})"
        )
        print(f"    pages of <= 1000                 {ms([t for t, _ in paged])}")
    print(
        "goal (issue 5): <= 200 ms server time (figures above are client wall time on"
        " loopback: an upper bound)"
    )


if __name__ == "__main__":
    main()
