"""The gateway's cost: MCP tool calls/s and latency, direct vs through the gateway.

    python benchmarks/gateway.py [--calls 2000] [--warmup 200] [--repeat 2]
                                 [--pg postgresql://postgres@127.0.0.1/postgres]

A local remote MCP server (the `mcp` SDK's streamable HTTP server, stateless, JSON
answers, wanting a bearer token) runs as a subprocess. "Direct" is an MCP client that
holds the token and calls it. "Gateway" is the same client holding an attempt's ticket
and calling `nua serve`'s gateway (uvicorn on 127.0.0.1 in this process, the real
`Gateway` over a real store): per call it re-reads the execution and its grant, resolves
the server from the session's snapshot, checks egress and the allowed tools, reads and
opens the secret, injects it, forwards, redacts and queues an audit record. One call in
flight at a time, so calls/s is 1 / latency. Modes alternate `--repeat` times; the best
run of each counts. Goal (issue 16): added p50 ≤ 2 ms, throughput ≥ 0.8× direct.
Prints figures only.
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
from opennua.secrets import SecretKey, SecretStore
from opennua.store import open_store

TOKEN = "bench-owner-token"
SECRET = "bench-remote-credential-7f3a"


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


@contextlib.asynccontextmanager
async def _gateway(store_url: str, data: Path, remote: str) -> AsyncIterator[tuple[str, str]]:
    """A running execution of a deployment that uses `remote`, its ticket, and the
    gateway serving it: (gateway URL, ticket)."""
    store = await open_store(store_url, data_dir=data)
    async with store:
        secrets = await SecretStore.open(store, SecretKey.generate())
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
            }
        )
        await host.registry.deploy("bench", spec, Scope(workspace, caller.principal_id))
        actor = Actor(
            caller.principal_id,
            workspace,
            authority.grant_for(caller, workspace, model=None),
        )
        created = await host.create_session(
            CreateSession(intent_id="int_c", client_id="cli_bench", deployment="bench"),
            actor=actor,
        )
        sid = str(created.ids["session_id"])  # type: ignore[union-attr]
        content = [TextPart(text="go")]
        sent = await host.send_message(
            sid, SendMessage(intent_id="int_m", client_id="cli_bench", content=content), actor=actor
        )
        execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
        claimed = await store.claim("sup_bench", time.time(), 3600.0)
        assert claimed is not None and claimed.execution.execution_id == execution_id
        ticket = await issue_ticket(store, execution_id, claimed.epoch, time.time())
        gateway = Gateway(store, secrets)
        port = _port()
        config = uvicorn.Config(gateway, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off")  # fmt: skip
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}{PATH}notes", ticket
        finally:
            server.should_exit = True
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)
            await gateway.aclose()


async def _measure(url: str, bearer: str, calls: int, warmup: int) -> list[float]:
    headers = {"Authorization": f"Bearer {bearer}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        for _ in range(warmup):
            await client.call_tool("lookup", {"word": "warm"})
        out = []
        for i in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("lookup", {"word": f"w{i}"})
            out.append((time.perf_counter() - started) * 1000)
            assert not result.is_error
        return out


def _figures(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return 1000 * len(latencies) / sum(latencies), statistics.median(ordered), p99


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="nua-bench-gw-") as tmp:
        data = Path(tmp)
        store_url = args.pg or f"sqlite:///{data}/nua.db"
        async with _remote() as remote, _gateway(store_url, data, remote) as (gw, ticket):
            best: dict[str, tuple[float, float, float]] = {}
            for _ in range(args.repeat):
                for mode, url, bearer in (("direct", remote, SECRET), ("gateway", gw, ticket)):
                    figures = _figures(await _measure(url, bearer, args.calls, args.warmup))
                    if mode not in best or figures[0] > best[mode][0]:
                        best[mode] = figures
    backend = "postgresql" if args.pg else "sqlite"
    (d_rate, d_p50, d_p99), (g_rate, g_p50, g_p99) = best["direct"], best["gateway"]
    print(
        f"gateway benchmark ({backend}, {args.calls} sequential tools/call, best of {args.repeat})"
    )
    print(f"direct   {d_rate:8.1f} calls/s   p50 {d_p50:6.2f} ms   p99 {d_p99:6.2f} ms")
    print(f"gateway  {g_rate:8.1f} calls/s   p50 {g_p50:6.2f} ms   p99 {g_p99:6.2f} ms")
    print(f"added    p50 {g_p50 - d_p50:+.2f} ms   p99 {g_p99 - d_p99:+.2f} ms   "
          f"throughput {g_rate / d_rate:.2f}x direct")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (default: SQLite)")
    parser.add_argument("--remote", type=int, default=None, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.remote is not None:
        _serve_remote(parsed.remote)
    else:
        os.environ.setdefault("NUA_MODEL", "scripted:demo")
        asyncio.run(main(parsed))
