"""Fan-out latency: append → delivered to N WebSocket or SSE subscribers at a steady rate.

    python benchmarks/fanout.py [--subscribers 100] [--rate 1000] [--seconds 10]
                                [--client-procs 2] [--transport ws|sse]
                                [--sse-encoding gzip|identity]

A server process runs the Host's HTTP app under uvicorn on 127.0.0.1 (the app `nua serve
--role host` builds, SQLite store in a temporary directory) and, in the same process and
on the same store, appends one `message.delta` at a time at a steady rate through
`store.append` — the path a supervisor's writes take: the store's wake-up reaches the Hub,
which reads the new actions once and queues them for every subscriber. N WebSocket clients
(the `websockets` library, or httpx streams of the session's SSE with `--transport sse`,
spread over a few client processes) subscribe before the first append. SSE subscribers ask
for gzip as browsers do (`--sse-encoding identity`: the text as is), so the server
compresses each subscriber's stream on its own: the server's CPU over the appends is
printed to show what that costs. For every action and every subscriber we take the receipt
time minus (a) the time just before the `append` call (it is embedded in the action) and
(b) the time the `append` call returned (a durable commit). The first second is warm-up
and not counted. Goal (issue 5): p99 ≤ 50 ms at 100 subscribers and 1,000 actions/s.
Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import (
    TOKEN,
    dumps,
    envelope,
    free_port,
    new_session,
    serving,
    streaming_turn,
    summary_ms,
)

ID_PREFIX = "act_bench"
MARK = '"id":"' + ID_PREFIX


# -- the server process ----------------------------------------------------------------------


async def serve_and_append(data: str, port: int) -> None:
    from opennua.store import open_store

    store = await open_store(f"sqlite:///{data}/nua.db", data_dir=data)
    loop = asyncio.get_running_loop()
    async with store, serving(store, port):
        sid = await new_session(store)
        turn = await streaming_turn(store, sid)
        print(dumps({"sid": sid}), flush=True)
        rate, seconds = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
        total = int(rate * seconds)
        t_call = [0.0] * total
        t_return = [0.0] * total
        late = 0.0

        async def one(i: int) -> None:
            t_call[i] = time.time()
            delta = f"{t_call[i]:.6f} token token token token "
            action = envelope(
                sid,
                f"{ID_PREFIX}{i:010d}",
                "message.delta",
                {"message_id": "msg_bench", "delta": delta},
            )
            action["turn_id"], action["run_id"] = turn, "run_" + sid[4:]
            await store.append(sid, [action])
            t_return[i] = time.time()

        tasks: set[asyncio.Task[None]] = set()
        cpu = _cpu()
        start = time.perf_counter() + 0.05
        for i in range(total):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                late = max(late, -delay)
            task = asyncio.create_task(one(i))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.gather(*list(tasks))
        elapsed = time.perf_counter() - start
        cpu = _cpu() - cpu
        times = dumps({"call": t_call, "return": t_return})
        await asyncio.to_thread(Path(data, "times.json").write_text, times)
        print(dumps({"elapsed": elapsed, "late": late, "cpu": cpu}), flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)  # until told to stop


def _cpu() -> float:
    """This process's CPU seconds, every thread's: the loop, the store's writer, uvicorn."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the subscriber processes ----------------------------------------------------------------


def _received(text: str, now: float, got: array[float]) -> int:
    """Record (action number, `now`) for every benchmark action in `text`; the last number
    found, or -1."""
    at, last = text.find(MARK), -1
    while at >= 0:
        last = int(text[at + len(MARK) : at + len(MARK) + 10])
        got.append(last)
        got.append(now)
        at = text.find(MARK, at + len(MARK))
    return last


def subscriber_proc(
    port: int,
    sid: str,
    first: int,
    count: int,
    total: int,
    timeout: float,
    mode: str,
    out: Any,
) -> None:
    """`mode`: `ws`, `ws-deflate`, `sse-gzip` or `sse-identity`."""
    if mode.startswith("sse"):
        encoding = mode.removeprefix("sse-")
        asyncio.run(sse_subscribers(port, sid, first, count, total, timeout, encoding, out))
    else:
        deflate = mode == "ws-deflate"
        asyncio.run(subscribers(port, sid, first, count, total, timeout, deflate, out))


async def subscribers(
    port: int,
    sid: str,
    first: int,
    count: int,
    total: int,
    timeout: float,
    deflate: bool,
    out: Any,
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    headers = {"Authorization": f"Bearer {TOKEN}"}
    conns = []
    for k in range(first, first + count):
        url = f"ws://127.0.0.1:{port}/v1/sessions/{sid}/ws?after=0&client_id=cli_bench{k}"
        conns.append(
            await connect(
                url,
                additional_headers=headers,
                max_size=None,
                compression="deflate" if deflate else None,
            )
        )
    out.put(("ready", first))
    resyncs = 0

    async def read(ws: Any) -> array[float]:
        nonlocal resyncs
        got: array[float] = array("d")  # pairs: action number, receipt time
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                now = time.time()
                if message.startswith('{"type": "resync"'):
                    resyncs += 1
                    break
                # One message carries every action queued since the last one.
                if _received(message, now, got) == total - 1:
                    break
        return got

    try:
        results = await asyncio.wait_for(asyncio.gather(*(read(ws) for ws in conns)), timeout)
    except TimeoutError:
        results = []
    for ws in conns:
        await ws.close()
    out.put(("done", first, [r.tobytes() for r in results], resyncs))


async def sse_subscribers(
    port: int,
    sid: str,
    first: int,
    count: int,
    total: int,
    timeout: float,
    encoding: str,
    out: Any,
) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}", "Accept-Encoding": encoding}
    limits = httpx.Limits(max_connections=count + 1)
    url = f"http://127.0.0.1:{port}/v1/sessions/{sid}/events?after=0"
    resyncs = 0
    async with (
        httpx.AsyncClient(headers=headers, limits=limits, timeout=None) as http,
        contextlib.AsyncExitStack() as streams,
    ):
        responses = []
        for _ in range(count):
            responses.append(await streams.enter_async_context(http.stream("GET", url)))
        for response in responses:
            response.raise_for_status()
        out.put(("ready", first))

        async def read(response: httpx.Response) -> array[float]:
            nonlocal resyncs
            got: array[float] = array("d")  # pairs: action number, receipt time
            pending = ""
            async for text in response.aiter_text():
                now = time.time()
                # Whole events only: a read may end inside one.
                pending += text
                cut = pending.rfind("\n\n") + 2
                events, pending = pending[:cut], pending[cut:]
                if "event: resync" in events:
                    resyncs += 1
                    break
                if _received(events, now, got) == total - 1:
                    break
            return got

        try:
            results = await asyncio.wait_for(asyncio.gather(*(read(r) for r in responses)), timeout)
        except TimeoutError:
            results = []
    out.put(("done", first, [r.tobytes() for r in results], resyncs))


# -- the driver ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument(
        "--no-deflate",
        action="store_true",
        help="WebSocket subscribers do not offer permessage-deflate (browsers and websockets do)",
    )
    parser.add_argument("--transport", choices=["ws", "sse"], default="ws")
    parser.add_argument(
        "--sse-encoding",
        choices=["gzip", "identity"],
        default="gzip",
        help="the SSE subscribers' Accept-Encoding (browsers and httpx ask for gzip)",
    )
    parser.add_argument("--child", metavar="DATA_DIR")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.child:
        asyncio.run(serve_and_append(args.child, args.port))
        return
    run(args)


def run(args: argparse.Namespace) -> None:
    total = int(args.rate * args.seconds)
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            [sys.executable, __file__, "--child", data, "--port", str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs: list[Any] = []
        try:
            assert server.stdin is not None and server.stdout is not None
            sid = json.loads(server.stdout.readline())["sid"]
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            per = [
                len(range(k, args.subscribers, args.client_procs)) for k in range(args.client_procs)
            ]
            first = 0
            timeout = args.seconds + 30
            if args.transport == "sse":
                mode = f"sse-{args.sse_encoding}"
            else:
                mode = "ws" if args.no_deflate else "ws-deflate"
            for count in per:
                proc = ctx.Process(
                    target=subscriber_proc,
                    args=(port, sid, first, count, total, timeout, mode, out),
                    daemon=True,
                )
                proc.start()
                procs.append(proc)
                first += count
            for _ in procs:
                assert out.get(timeout=60)[0] == "ready"
            server.stdin.write(dumps([args.rate, args.seconds]) + "\n")
            server.stdin.flush()
            appended = json.loads(server.stdout.readline())
            received: list[array[float]] = []
            resyncs = 0
            for _ in procs:
                _, _, chunks, r = out.get(timeout=timeout + 10)
                resyncs += r
                for chunk in chunks:
                    pairs: array[float] = array("d")
                    pairs.frombytes(chunk)
                    received.append(pairs)
            times = json.loads(Path(data, "times.json").read_text())
            server.stdin.write("stop\n")
            server.stdin.flush()
            server.wait(20)
        finally:
            for proc in procs:
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
            if server.poll() is None:
                server.kill()
                server.wait(5)
    report(args, total, appended, times, received, resyncs)


def report(
    args: argparse.Namespace,
    total: int,
    appended: dict[str, float],
    times: dict[str, list[float]],
    received: list[array[float]],
    resyncs: int,
) -> None:
    skip = int(args.warmup * args.rate)
    from_call: list[float] = []
    from_return: list[float] = []
    deliveries = 0
    per_subscriber = sorted(len(pairs) // 2 for pairs in received)
    if all(n < total for n in per_subscriber) and resyncs:
        skip = 0  # everyone was resynced early: report what was delivered before that
    for pairs in received:
        for j in range(0, len(pairs), 2):
            n, at = int(pairs[j]), pairs[j + 1]
            deliveries += 1
            if n >= skip:
                from_call.append(at - times["call"][n])
                from_return.append(at - times["return"][n])
    commit = [r - c for c, r in zip(times["call"], times["return"], strict=True)][skip:]
    if args.transport == "sse":
        how = f"SSE subscribers (Accept-Encoding: {args.sse_encoding})"
    else:
        offered = "not offered" if args.no_deflate else "offered; the server keeps it off"
        how = f"WebSocket subscribers (permessage-deflate {offered})"
    print(
        f"fan-out: {args.subscribers} {how}, {total} appends at "
        f"{args.rate:.0f}/s target ({total / appended['elapsed']:.0f}/s achieved, "
        f"pacing fell behind by at most {appended['late'] * 1000:.1f} ms), "
        f"{os.cpu_count()} CPUs, {args.client_procs} subscriber processes"
    )
    print(
        f"  server CPU over the appends {appended['cpu']:.2f} s in {appended['elapsed']:.2f} s"
        f" ({appended['cpu'] / appended['elapsed'] * 100:.0f} % of a core)"
    )
    print(
        f"  deliveries {deliveries} of {total * args.subscribers} expected; resyncs {resyncs}"
        f" (a subscriber stops at its resync); actions received per subscriber: min"
        f" {per_subscriber[0] if per_subscriber else 0}, median"
        f" {per_subscriber[len(per_subscriber) // 2] if per_subscriber else 0};"
        + (f" warm-up {args.warmup:g} s excluded" if skip else " no warm-up excluded")
    )
    print(f"  append call → durable (return)    {summary_ms(commit)}")
    print(f"  append call → subscriber receipt  {summary_ms(from_call)}")
    print(f"  append return → subscriber receipt {summary_ms(from_return)}")
    print("goal (issue 5): p99 <= 50 ms")


if __name__ == "__main__":
    main()
