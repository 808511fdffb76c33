"""Isolation: the runtime's pace with one stalled WebSocket subscriber ÷ with none.

    python benchmarks/isolation.py [--steps 1000] [--repeat 3] [--with-reading]

A server process runs the Host's HTTP app under uvicorn on 127.0.0.1 and, in the same
process and on the same SQLite store, the runtime: an `AgentLoop` on the Supervisor's
fenced `StoreJournal` (a scripted model, one tool call per step, each step's actions and
checkpoint in one durable transaction) — the path a supervisor in `nua serve --role all`
takes. Its actions reach the Hub through the store's wake-ups.

Conditions, alternated `--repeat` times: no subscriber; one **stalled** subscriber (a
`websockets` client on a socket with a 4 KiB receive buffer that never reads after the
handshake, so the server's sends back up and the Hub's bounded queue fills); and, with
`--with-reading`, one subscriber that reads everything. We print the loop's steps/s and
actions/s for each, the ratio stalled ÷ none, and what the Hub held for the stalled
subscriber (its queued bytes, sampled every millisecond; the bound is 1,000 actions /
1 MiB, then `resync`). A separate pass under tracemalloc prints the memory still
allocated at the end of a run with the stalled subscriber connected, minus the same
figure with a reading one (the session's ring of recent actions exists for either).
Goals (issue 5): ratio ≥ 0.95, memory ≤ 1 MiB. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import TOKEN, dumps, free_port, new_session, serving

from opennua.host import Hub
from opennua.protocol.ids import new_id
from opennua.runtime import AgentLoop, DerivedIds, Limits, RunEnv, default_agent, tool
from opennua.runtime.testing import ScriptedModel, ScriptStep, call
from opennua.store import Execution, Store, open_store
from opennua.supervisor._journal import StoreJournal

# -- the server process ----------------------------------------------------------------------


def script(steps: int) -> ScriptedModel:
    def step(messages: list[Any]) -> ScriptStep:
        n = sum(1 for m in messages if m.kind == "response")
        if n >= steps:
            return ScriptStep(text="done")
        return ScriptStep(calls=(call("lookup", i=n),))

    return ScriptedModel(step)


def lookup(i: int) -> str:
    """Return item i: ~7 KiB that permessage-deflate cannot shrink much (inline: < 8 KiB).

    Large enough that a run outgrows the kernel's socket buffers (up to 4 MiB on loopback)
    and the stalled subscriber's queue in the Hub fills up."""
    return base64.b64encode(random.Random(i).randbytes(5200)).decode()


async def prepare(store: Store, n: int) -> tuple[str, StoreJournal]:
    sid = await new_session(store, f"iso{n}".encode())
    now = time.time()
    ms = int(now * 1000)
    eid = new_id("execution", ms=ms, entropy=f"isoe{n}".encode().ljust(10, b"-"))
    tid = new_id("turn", ms=ms, entropy=f"isot{n}".encode().ljust(10, b"-"))
    await store.create_execution(
        Execution(execution_id=eid, session_id=sid, turn_id=tid, status="queued", created_at=now)
    )
    claimed = await store.claim("sup_bench", now, 3600.0)
    assert claimed is not None
    return sid, StoreJournal(store, claimed, owner="sup_bench", clock=time.time)


async def run_loop(store: Store, sid: str, journal: StoreJournal, steps: int, ws: Path) -> float:
    agent = dataclasses.replace(
        default_agent("scripted:bench"), tools=(tool("lookup", idempotent=True)(lookup),)
    )
    env = RunEnv(
        execution_id=journal._execution.execution_id,
        root_run_id=new_id("run", ms=int(time.time() * 1000), entropy=os.urandom(10)),
        workdir=ws,
        ids=DerivedIds(sid, ms=int(time.time() * 1000)),
    )
    loop = AgentLoop(agent, journal, env, model=script(steps), limits=Limits(max_steps=steps + 5))
    t0 = time.perf_counter()
    outcome = await loop.run("go")
    elapsed = time.perf_counter() - t0
    assert type(outcome).__name__ == "Completed", outcome
    return elapsed


async def sample(hub: Hub, sid: str, stop: asyncio.Event, peak: list[int]) -> None:
    """Every millisecond: the largest queue (frames, bytes) of any subscriber of `sid`."""
    while not stop.is_set():
        channel = hub._channels.get(sid)
        for sub in list(channel.subscribers) if channel else ():
            peak[0] = max(peak[0], len(sub.frames))
            peak[1] = max(peak[1], sub.queued_bytes)
        await asyncio.sleep(0.001)


async def child(data: str, port: int) -> None:
    store = await open_store(f"sqlite:///{data}/nua.db", data_dir=data)
    loop = asyncio.get_running_loop()
    ws = Path(data, "ws")
    await asyncio.to_thread(ws.mkdir)
    n = 0
    async with store, serving(store, port) as running:
        hub = running.hub
        print(dumps({"ready": True}), flush=True)
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            if command["op"] == "prepare":
                if command.get("traced"):
                    tracemalloc.start()
                n += 1
                sid, journal = await prepare(store, n)
                print(dumps({"sid": sid}), flush=True)
            elif command["op"] == "run":
                peak = [0, 0]
                stop = asyncio.Event()

                resyncs = hub.stats.resyncs
                sampler = asyncio.create_task(sample(hub, sid, stop, peak))
                head0 = len(await store.read(sid, 0, 1000))
                elapsed = await run_loop(store, sid, journal, command["steps"], ws)
                stop.set()
                await sampler
                actions = head0
                while page := await store.read(sid, actions, 1000):
                    actions += len(page)
                channel = hub._channels.get(sid)
                ring = sum(len(f.json) for f in channel.ring) if channel else 0
                traced = 0
                if tracemalloc.is_tracing():
                    await asyncio.sleep(0.5)  # let the Hub and the connection settle
                    traced = tracemalloc.get_traced_memory()[0]
                    tracemalloc.stop()
                print(
                    dumps(
                        {
                            "elapsed": elapsed,
                            "actions": actions - head0,
                            "peak_frames": peak[0],
                            "peak_bytes": peak[1],
                            "resyncs": hub.stats.resyncs - resyncs,
                            "traced": traced,
                            "ring": ring,
                        }
                    ),
                    flush=True,
                )
            else:
                return


# -- subscribers (driver process) ------------------------------------------------------------


@contextlib.asynccontextmanager
async def subscriber(port: int, sid: str, mode: str) -> Any:
    from websockets.asyncio.client import connect

    if mode == "none":
        yield None
        return
    url = f"ws://127.0.0.1:{port}/v1/sessions/{sid}/ws?after=0&client_id=cli_{mode}"
    sock = socket.socket()
    if mode == "stalled":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    ws = await connect(
        url,
        sock=sock,
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
        max_size=None,
        max_queue=1 if mode == "stalled" else 16,
    )
    reader = None
    if mode == "reading":

        async def read() -> None:
            with contextlib.suppress(Exception):
                async for _ in ws:
                    pass

        reader = asyncio.create_task(read())
    try:
        yield ws
    finally:
        if reader is not None:
            reader.cancel()
        ws.transport.abort()


class Child:
    def __init__(self, data: str, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", data, "--port", str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self.readline())["ready"]

    def readline(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the server process exited")
        return line

    async def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(dumps(command) + "\n")
        self.proc.stdin.flush()
        reply: dict[str, Any] = json.loads(await asyncio.to_thread(self.readline))
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


async def one(child: Child, port: int, mode: str, steps: int, traced: bool) -> dict[str, Any]:
    sid = (await child.ask(op="prepare", traced=traced))["sid"]
    async with subscriber(port, sid, mode):
        await asyncio.sleep(0.2)  # handshake done, history (one action) sent
        result = await child.ask(op="run", steps=steps)
    await asyncio.sleep(0.2)
    return result


async def drive(args: argparse.Namespace) -> None:
    port = free_port()
    modes = ["none", "stalled"] + (["reading"] if args.with_reading else [])
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as data:
        child = Child(data, port)
        try:
            await one(child, port, "none", 50, False)  # warm-up
            for _ in range(args.repeat):
                for mode in modes:
                    results[mode].append(await one(child, port, mode, args.steps, False))
            traced = {
                m: await one(child, port, m, args.steps, True) for m in ("stalled", "reading")
            }
        finally:
            child.close()
    print(
        f"isolation: {args.steps}-step scripted tool loop on the fenced SQLite journal, "
        f"in the server process; median of {args.repeat}; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    rate: dict[str, float] = {}
    for mode in modes:
        rows = results[mode]
        elapsed = statistics.median(r["elapsed"] for r in rows)
        actions = statistics.median(r["actions"] for r in rows)
        rate[mode] = actions / elapsed
        print(
            f"  {mode:8s} subscriber: {args.steps / elapsed:7.0f} steps/s"
            f"  {actions / elapsed:7.0f} actions/s  ({actions:.0f} actions,"
            f" runs: {', '.join(str(round(r['elapsed'] * 1000)) for r in rows)} ms)"
        )
    print(
        f"  throughput stalled ÷ none: {rate['stalled'] / rate['none']:.3f}"
        + (
            f"   (reading ÷ none: {rate['reading'] / rate['none']:.3f},"
            f" stalled ÷ reading: {rate['stalled'] / rate['reading']:.3f})"
            if "reading" in rate
            else ""
        )
    )
    stalled = results["stalled"]
    print(
        f"  Hub queue for the stalled subscriber: peak {max(r['peak_frames'] for r in stalled)}"
        f" frames, {max(r['peak_bytes'] for r in stalled) / 1024:.0f} KiB;"
        f" resync sent in {sum(r['resyncs'] for r in stalled)} of {len(stalled)} runs"
    )
    print(
        f"  the session's ring in the Hub (shared by all its subscribers, kept while one is"
        f" connected): {max(r['ring'] for r in stalled) / 2**20:.2f} MiB"
    )
    mib = {m: traced[m]["traced"] / 2**20 for m in traced}
    print(
        f"  tracemalloc, still allocated 0.5 s after a run (subscriber connected):"
        f" stalled {mib['stalled']:.2f} MiB, reading {mib['reading']:.2f} MiB;"
        f" stalled − reading {mib['stalled'] - mib['reading']:.2f} MiB"
    )
    print("goals (issue 5): stalled ÷ none >= 0.95; memory for the stalled one <= 1 MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--with-reading", action="store_true", help="also time runs with a reading subscriber"
    )
    parser.add_argument("--child", metavar="DATA_DIR")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.port))
    else:
        asyncio.run(drive(args))


if __name__ == "__main__":
    main()
