"""The gateway's cost: MCP tool calls/s and latency, direct vs through the gateway.

    python benchmarks/gateway.py [--calls 2000] [--warmup 200] [--repeat 3]
                                 [--concurrency 8] [--gateway inprocess|process]
                                 [--pg postgresql://postgres@127.0.0.1/postgres]

A local remote MCP server (the `mcp` SDK's streamable HTTP server, stateless, JSON
answers, wanting a bearer token) runs as a subprocess. "Direct" is an MCP client that
holds the token and calls it. "Gateway" is the same client holding an attempt's ticket
and calling the real `Gateway` over a real store: per call it re-reads the execution and
its grant, resolves the server from the session's snapshot, checks egress and the
allowed tools, reads and opens the secret, injects it, forwards, redacts and queues an
audit record. The gateway runs where `nua serve` runs it: in the clients' process, as
role `all` runs it beside the supervisor whose executions call tools and reaches it
(`inprocess`: the runtime's client hands each request to the gateway's app, no loopback
hop), or as `nua serve --role gateway`, a process of its own reached over HTTP
(`process`, as a `--role supervisor` with `--gateway-url` reaches it).

Two runs per mode: one call in flight (latency p50/p99; calls/s is then 1 / latency),
and `--concurrency` calls in flight from as many MCP sessions, each with its own HTTP
client (through the gateway each is a separate execution with its own ticket): calls/s.
Both modes get the same client, the same sessions and the same concurrency. Modes
alternate `--repeat` times; the best run of each counts. Goal (issue 16): added p50
≤ 2 ms, throughput ≥ 0.8× direct. Prints figures only, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from opennua.auth import Authority
from opennua.gateway import PATH, Gateway, issue_ticket
from opennua.host import Actor, DeploymentSpec, Hub, Scope, SessionHost
from opennua.protocol import CreateSession, SendMessage
from opennua.protocol.actions import TextPart
from opennua.runtime._env import GatewayRoute
from opennua.runtime._mcp import gateway_client
from opennua.secrets import SecretKey, SecretStore
from opennua.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests._pgdb import scratch_database

TOKEN = "bench-owner-token"
SECRET = "bench-remote-credential-7f3a"
_NUA = "from opennua.cli import main; main()"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_remote(port: int) -> None:
    """The remote MCP server (this file run with --remote PORT)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str) -> str:
        """Look a word up."""
        return f"{word}: a short definition"

    inner = server.streamable_http_app(stateless_http=True, json_response=True)
    expected = f"Bearer {SECRET}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await inner(scope, receive, send)

    logging.disable(logging.INFO)  # the SDK logs every stateless request at INFO
    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


@contextlib.asynccontextmanager
async def _remote() -> AsyncIterator[str]:
    port = _port()
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--remote", str(port))
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):
            try:
                async with httpx.AsyncClient() as c:
                    await c.post(url, json={})
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        await proc.wait()


def _plugin(root: Path, url: str) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(
        '{"name": "bench-notes", "version": "1.0.0", "description": "bench"}'
    )
    (root / "AGENTS.md").write_text("Bench.\n")
    (root / ".mcp.json").write_text(f'{{"mcpServers": {{"notes": {{"url": "{url}"}}}}}}')
    (root / "opennua.toml").write_text('[access]\negress = ["127.0.0.1"]\n')
    return root


async def _executions(
    store_url: str, data: Path, remote: str, key: SecretKey, count: int
) -> list[str]:
    """`count` running executions of a deployment that uses `remote` (separate sessions,
    as separate agents calling tools at once would be), and a gateway ticket of each."""
    store = await open_store(store_url, data_dir=data)
    async with store:
        secrets = await SecretStore.open(store, key)
        authority = Authority(store)
        await authority.bootstrap(TOKEN)
        caller = await authority.authenticate(TOKEN)
        workspace = caller.default_workspace
        assert workspace is not None
        host = SessionHost(store, Hub(store), grant_check=authority.grant_problem)
        await host.registry.ensure_builtin("scripted:demo")
        await host.registry.publish_dir(_plugin(data / "plugin", remote))
        await host.registry.release("bench-notes", "stable", "1.0.0")
        await secrets.put(workspace, "notes-token", SECRET)
        spec = DeploymentSpec.model_validate(
            {
                "plugin": "bench-notes",
                "model": "scripted:demo",
                "credentials": [{"server": "notes", "secret": "notes-token"}],
                # The remote server is on loopback: reachable through an admin's entry only.
                "egress": ["127.0.0.1:1-65535"],
            }
        )
        await host.registry.deploy("bench", spec, Scope(workspace, caller.principal_id))
        actor = Actor(
            caller.principal_id,
            workspace,
            authority.grant_for(caller, workspace, model=None),
        )
        tickets = []
        for i in range(count):
            created = await host.submit(
                None,
                CreateSession(intent_id=f"int_c{i}", client_id="cli_bench", deployment="bench"),
                actor=actor,
            )
            sid = str(created.ids["session_id"])  # type: ignore[union-attr]
            message = SendMessage(
                intent_id=f"int_m{i}", client_id="cli_bench", content=[TextPart(text="go")]
            )
            sent = await host.submit(sid, message, actor=actor)
            execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
            claimed = await store.claim("sup_bench", time.time(), 3600.0)
            assert claimed is not None and claimed.execution.execution_id == execution_id
            tickets.append(await issue_ticket(store, execution_id, claimed.epoch, time.time()))
        return tickets


@contextlib.asynccontextmanager
async def _gateway_process(store_url: str, data: Path, key: SecretKey) -> AsyncIterator[str]:
    """`nua serve --role gateway` on the same store, a process of its own (a split
    deployment: executions run in other processes)."""
    port = _port()
    env = {**os.environ, "NUA_SECRET_KEY": key.encoded()}
    command = ["serve", "--role", "gateway", "--db", store_url, "--data", str(data)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _NUA, *command, "--port", str(port), env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as c:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await c.get(f"{url}/healthz")).status_code == 200:
                        break
                assert proc.returncode is None, "the gateway did not start"
                await asyncio.sleep(0.1)
        yield f"{url}{PATH}notes"
    finally:
        proc.terminate()
        await proc.wait()


#: The gateway of this process (`inprocess` mode), for the clients that reach it.
_HERE: dict[str, Gateway] = {}


@contextlib.asynccontextmanager
async def _gateway_here(store_url: str, data: Path, key: SecretKey) -> AsyncIterator[str]:
    """The gateway in this process, beside the MCP clients, as `nua serve` (role `all`)
    runs it beside the supervisor whose executions call tools: the same `Gateway` over
    the same store, reached as role `all` reaches it (in-process, `_client`)."""
    async with await open_store(store_url, data_dir=data) as store:
        gateway = _HERE["gateway"] = Gateway(store, await SecretStore.open(store, key))
        try:
            yield f"http://127.0.0.1{PATH}notes"
        finally:
            del _HERE["gateway"]
            await gateway.aclose()


@contextlib.asynccontextmanager
async def _client(url: str, bearer: str) -> AsyncIterator[Client]:
    """The MCP SDK's client over streamable HTTP, made as the runtime makes it: direct,
    with the remote's token; to the gateway, by the runtime's own `gateway_client` (with
    the ticket, handed to the gateway's app when it is in this process)."""
    if url.endswith(f"{PATH}notes"):
        route = GatewayRoute(url, bearer, app=_HERE.get("gateway"))
        http = gateway_client(route)
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"})
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


async def _call(client: Client, word: str) -> None:
    result = await client.call_tool("lookup", {"word": word})
    assert not result.is_error


async def _latencies(url: str, bearer: str, calls: int, warmup: int) -> list[float]:
    """One call in flight: each call's latency (ms)."""
    async with _client(url, bearer) as client:
        for _ in range(warmup):
            await _call(client, "warm")
        out = []
        for i in range(calls):
            started = time.perf_counter()
            await _call(client, f"w{i}")
            out.append((time.perf_counter() - started) * 1000)
        return out


async def _rate(url: str, bearers: list[str], calls: int, warmup: int) -> float:
    """`len(bearers)` calls in flight, one per MCP session (each its own HTTP client):
    calls/s over `calls` calls in all."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(_client(url, b)) for b in bearers]
        each = max(1, calls // len(clients))

        async def loop(client: Client, count: int) -> None:
            for i in range(count):
                await _call(client, f"w{i}")

        await asyncio.gather(*(loop(c, max(1, warmup // len(clients))) for c in clients))
        started = time.perf_counter()
        await asyncio.gather(*(loop(c, each) for c in clients))
        return each * len(clients) / (time.perf_counter() - started)


def _figures(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return 1000 * len(latencies) / sum(latencies), statistics.median(ordered), p99


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main(args: argparse.Namespace) -> None:
    n = max(1, args.concurrency)
    load_before = _load()
    with contextlib.ExitStack() as scratch:
        data = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="nua-bench-gw-")))
        store_url = f"sqlite:///{data}/nua.db"
        if args.pg:
            store_url = scratch.enter_context(scratch_database(args.pg, "nua_bench_gateway"))
        key = SecretKey.generate()
        async with _remote() as remote:
            tickets = await _executions(store_url, data, remote, key, n)
            where = _gateway_process if args.gateway == "process" else _gateway_here
            async with where(store_url, data, key) as gw:
                modes = {"direct": (remote, [SECRET] * n), "gateway": (gw, tickets)}
                latency: dict[str, tuple[float, float, float]] = {}
                rate: dict[str, float] = {}
                # Modes alternate, so a spell of load on the machine hits both; the best
                # run of each counts.
                for _ in range(args.repeat):
                    for mode, (url, bearers) in modes.items():
                        figures = _figures(
                            await _latencies(url, bearers[0], args.calls, args.warmup)
                        )
                        if mode not in latency or figures[0] > latency[mode][0]:
                            latency[mode] = figures
                        if n > 1:
                            calls_s = await _rate(url, bearers, args.calls, args.warmup)
                            rate[mode] = max(rate.get(mode, 0.0), calls_s)
    backend = "postgresql" if args.pg else "sqlite"
    (d_rate, d_p50, d_p99), (g_rate, g_p50, g_p99) = latency["direct"], latency["gateway"]
    print(f"gateway benchmark ({backend}; gateway {args.gateway}; best of {args.repeat}; "
          f"load average before {load_before}, after {_load()})")  # fmt: skip
    print(f"1 call in flight, {args.calls} calls:")
    print(f"  direct   p50 {d_p50:6.2f} ms   p99 {d_p99:6.2f} ms   {d_rate:7.1f} calls/s")
    print(f"  gateway  p50 {g_p50:6.2f} ms   p99 {g_p99:6.2f} ms   {g_rate:7.1f} calls/s")
    print(f"  added    p50 {g_p50 - d_p50:+6.2f} ms   p99 {g_p99 - d_p99:+6.2f} ms   "
          f"{g_rate / d_rate:.2f}x direct")  # fmt: skip
    if n > 1:
        d, g = rate["direct"], rate["gateway"]
        print(f"{n} calls in flight ({n} MCP sessions; gateway: {n} executions), "
              f"{n * max(1, args.calls // n)} calls:")  # fmt: skip
        print(f"  direct   {d:7.1f} calls/s")
        print(f"  gateway  {g:7.1f} calls/s   {g / d:.2f}x direct")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=8, help="calls in flight for the throughput run"
    )
    parser.add_argument(
        "--gateway",
        choices=("inprocess", "process"),
        default="inprocess",
        help="the gateway in the clients' process (nua serve --role all) or its own "
        "(--role gateway)",
    )
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (default: SQLite)")
    parser.add_argument("--remote", type=int, default=None, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.remote is not None:
        _serve_remote(parsed.remote)
    else:
        os.environ.setdefault("NUA_MODEL", "scripted:demo")
        asyncio.run(main(parsed))
