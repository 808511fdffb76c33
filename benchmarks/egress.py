"""The egress proxy's cost: added latency per connection, and a download's throughput.

    python benchmarks/egress.py [--connections 300] [--mib 10] [--repeat 3]

An HTTP server on loopback (a subprocess) serves a small answer and a `--mib` MiB body.
"Direct" is a client connecting to it. "Proxy" is the same client going the way sandboxed
code goes: to the forwarder the sandbox's launcher starts (the real `_sandbox_init.py`,
run here outside a namespace so this process can reach it), over its Unix socket to the
attempt's relay (`EgressRelay`), into the gateway's egress proxy in this process (as
`nua serve --role all` runs it), which checks the ticket and the grant over a real SQLite
store, checks the deployment's egress list, connects and audits. Per connection: a plain
proxy request (`GET http://…`) and a `CONNECT` tunnel, each sequential (latency p50/p99);
then the download, direct and proxied, best of `--repeat` (MiB/s). Prints figures only,
with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from opennua.gateway import Gateway
from opennua.runtime import EgressRelay, GatewayRoute
from opennua.runtime._sandbox import _INIT
from opennua.secrets import SecretKey, SecretStore
from opennua.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.gateway._running import running_execution

SMALL = b"ok\n"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _upstream(port: int, mib: int) -> None:
    """The HTTP server: `/big` is `mib` MiB, anything else a few bytes; one request per
    connection (the proxy asks for `Connection: close` anyway)."""
    big = b"x" * (mib * 1024 * 1024)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            writer.close()  # a probe of whether it listens
            return
        body = big if b" /big " in head.split(b"\r\n")[0] + b" " else SMALL
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


async def _fetch(port: int, request: bytes, connect: bytes = b"") -> int:
    """One connection: (CONNECT and its answer,) the request, the whole answer; its size."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if connect:
            writer.write(connect)
            answer = await reader.readuntil(b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 200"), answer
        writer.write(request)
        await writer.drain()
        size = 0
        while chunk := await reader.read(1 << 16):
            size += len(chunk)
        return size
    finally:
        writer.close()


async def _timed(n: int, call: Callable[[], Awaitable[int]]) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def _execution(data: Path, up: int) -> tuple[Gateway, str, Callable[[], Awaitable[None]]]:
    """A running execution of a deployment whose egress lists the upstream, its ticket,
    and the gateway over the store (a closer to call at the end)."""
    store = await open_store(f"sqlite:///{data}/nua.db", data_dir=data)
    await store.__aenter__()
    secrets = await SecretStore.open(store, SecretKey.generate())
    _, ticket = await running_execution(store, [f"127.0.0.1:{up}"])
    gateway = Gateway(store, secrets)

    async def close() -> None:
        await gateway.aclose()
        await store.__aexit__(None, None, None)

    return gateway, ticket, close


@contextlib.asynccontextmanager
async def _forwarder(socket_path: Path, port: int) -> AsyncIterator[None]:
    """The sandbox launcher's forwarder, outside any namespace: 127.0.0.1:port → socket."""
    config = {
        "argv": ["sleep", "3600"],
        "limits": {},
        "proxy": str(socket_path),
        "port": port,
        "cwd": "/",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", _INIT, json.dumps(config), start_new_session=True
    )
    try:
        await _listening(port)
        yield
    finally:
        os.killpg(proc.pid, 9)
        await proc.wait()


async def _listening(port: int) -> None:
    for _ in range(600):
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def _ms(times: list[float]) -> str:
    p99 = statistics.quantiles(times, n=100)[98] if len(times) >= 2 else times[0]
    return f"p50 {statistics.median(times):.2f} ms, p99 {p99:.2f} ms"


async def main(connections: int, mib: int, repeat: int) -> None:
    up = _port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--upstream", str(up), "--mib", str(mib)
    )
    with tempfile.TemporaryDirectory(prefix="nua-bench-egress-") as tmp:
        close: Callable[[], Awaitable[None]] | None = None
        try:
            gateway, ticket, close = await _execution(Path(tmp), up)
            route = GatewayRoute("http://in-process", ticket, egress=gateway.egress.over_stream)
            forward = _port()
            async with EgressRelay(route) as socket_path, _forwarder(socket_path, forward):
                await _listening(up)
                small = b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                absolute = b"GET http://127.0.0.1:%d/small HTTP/1.1\r\nHost: x\r\n\r\n" % up
                tunnel = b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % up
                runs = {
                    "direct": lambda: _fetch(up, small),
                    "proxy GET": lambda: _fetch(forward, absolute),
                    "proxy CONNECT": lambda: _fetch(forward, small, tunnel),
                }
                for call in runs.values():  # warm up every path
                    await _timed(max(5, connections // 10), call)
                latency = {name: await _timed(connections, call) for name, call in runs.items()}
                big = b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                rates: dict[str, float] = {"direct": 0.0, "proxy": 0.0}
                for _ in range(repeat):
                    for name, port, request, connect in (
                        ("direct", up, big, b""),
                        ("proxy", forward, big, tunnel),
                    ):
                        started = time.perf_counter()
                        size = await _fetch(port, request, connect)
                        assert size >= mib * 1024 * 1024, size
                        rates[name] = max(rates[name], mib / (time.perf_counter() - started))
        finally:
            if close is not None:
                await close()
            server.terminate()
            await server.wait()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"egress proxy, {connections} connections each way, load average {load}")
    direct = statistics.median(latency["direct"])
    for name, times in latency.items():
        added = (
            "" if name == "direct" else f"  (added p50 +{statistics.median(times) - direct:.2f} ms)"
        )
        print(f"{name:14} {_ms(times)}{added}")
    ratio = rates["proxy"] / rates["direct"] if rates["direct"] else 0.0
    print(
        f"download {mib} MiB: direct {rates['direct']:.0f} MiB/s, "
        f"proxy {rates['proxy']:.0f} MiB/s ({ratio:.2f}x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        asyncio.run(_upstream(args.upstream, args.mib))
    else:
        asyncio.run(main(args.connections, args.mib, args.repeat))
