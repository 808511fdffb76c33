"""Revocation → stream closed: how long an open SSE stream and WebSocket of a caller keep
going after their token is revoked (issue 29; the promise is ≤ 1 s).

    python benchmarks/revocation.py [--rounds 200] [--backends sqlite,postgres]
                                    [--pg postgresql://postgres@127.0.0.1:5432/postgres]

Backends, each real `nua serve` processes on one data directory:
- `sqlite`: the embedded default, one process (`--role all`): the revocation reaches the
  streams through the store's in-process wake-up;
- `postgres`: two hosts on a fresh database `nua_bench_<random>` (created here, dropped at
  the end): `--role all` takes the revocations, `--role host` holds the streams, so the
  revocation reaches them through PostgreSQL's NOTIFY.

Each round: the server admin adds a person as a member, who opens a session and holds an
SSE stream and a WebSocket on it (on the stream host) until both are live; then the
person's token is revoked (`DELETE /v1/tokens/{id}`, on the revoking host) and the time
is taken from just before that request is sent until the SSE response ends and until the
WebSocket's close frame arrives, as this client sees them. Prints p50, p99 and max per
backend; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import free_port, summary_ms


class Serve:
    """One `nua serve` process."""

    def __init__(self, role: str, data: Path, db: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data / f"serve-{role}-{self.port}.log"
        args = [sys.executable, "-m", "opennua.cli", "serve", "--role", role]
        args += ["--data", str(data), "--port", str(self.port)]
        if db is not None:
            args += ["--db", db]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not _healthy(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nua serve {role} did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def postgres(admin_url: str) -> Iterator[str]:
    name = f"nua_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(admin_url, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield "postgresql://" + admin_url.split("://", 1)[1].rsplit("/", 1)[0] + "/" + name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


async def _sse(url: str, sid: str, bearer: dict[str, str], live: asyncio.Event) -> float:
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as c,
        c.stream("GET", f"/v1/sessions/{sid}/events", headers=bearer) as response,
    ):
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith(": connected"):
                live.set()
    return time.monotonic()


async def one_round(
    revoker: httpx.AsyncClient, streams_at: str, workspace: str
) -> tuple[float, float]:
    """(SSE ended, WebSocket closed), seconds after the revocation was sent."""
    user = (await revoker.post("/v1/users", json={"name": f"p{secrets.token_hex(6)}"})).json()
    added = await revoker.put(
        f"/v1/workspaces/{workspace}/members/{user['principal_id']}", json={"role": "member"}
    )
    added.raise_for_status()
    bearer = {"Authorization": f"Bearer {user['token']}"}
    created = await revoker.post("/v1/sessions", json={}, headers=bearer)
    sid = created.json()["session_id"]
    live = asyncio.Event()
    sse = asyncio.ensure_future(_sse(streams_at, sid, bearer, live))
    ws_url = streams_at.replace("http://", "ws://") + f"/v1/sessions/{sid}/ws"
    async with connect(ws_url, additional_headers=bearer) as ws:
        await asyncio.wait_for(live.wait(), 30)
        await asyncio.wait_for(ws.recv(), 30)  # the catch-up: the socket is live
        token_id = user["token"].split(".")[1]
        sent = time.monotonic()
        (await revoker.delete(f"/v1/tokens/{token_id}", headers=bearer)).raise_for_status()
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.wait_for(ws.recv(), 30)
        closed = time.monotonic()
    ended = await asyncio.wait_for(sse, 30)
    return ended - sent, closed - sent


async def measure(
    revoking: Serve, streaming: Serve, data: Path, rounds: int
) -> list[tuple[float, float]]:
    token = (data / "token").read_text().strip()
    async with httpx.AsyncClient(
        base_url=revoking.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as revoker:
        workspace = (await revoker.get("/v1/whoami")).json()["workspaces"][0]["workspace_id"]
        return [await one_round(revoker, streaming.url, workspace) for _ in range(rounds)]


def report(label: str, results: list[tuple[float, float]]) -> None:
    for kind, index in (("SSE ended", 0), ("WebSocket closed", 1)):
        print(f"  {label}: {kind:<17} {summary_ms([r[index] for r in results])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    backends = args.backends.split(",")
    print(
        f"revocation → stream closed, {args.rounds} rounds per backend; {os.cpu_count()} CPUs,"
        f" load average {os.getloadavg()[0]:.2f}; times from sending the revocation"
    )
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            data = Path(tmp)
            if backend == "sqlite":
                one = Serve("all", data, None)
                stack.callback(one.stop)
                results = asyncio.run(measure(one, one, data, args.rounds))
                report("sqlite, one process", results)
            else:
                db = stack.enter_context(postgres(args.pg))
                revoking = Serve("all", data, db)
                stack.callback(revoking.stop)
                streaming = Serve("host", data, db)
                stack.callback(streaming.stop)
                results = asyncio.run(measure(revoking, streaming, data, args.rounds))
                report("postgres, revoked on one host, streams on the other", results)
    print("goal (issue 29): p99 <= 1000 ms")


if __name__ == "__main__":
    main()
