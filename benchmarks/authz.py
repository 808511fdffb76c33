"""Authorization's cost: requests/s of `GET /v1/sessions/{sid}` and of answering an
input request, with authorization and without, on SQLite and PostgreSQL.

    python benchmarks/authz.py [--seconds 4] [--concurrency 16] [--answers 300]
                               [--repeat 2] [--pg postgresql://postgres@127.0.0.1/postgres]
                               [--asgi]

"With" is what `nua serve` runs: the bearer token looked up by id and compared by hash,
the caller's roles, the workspace of the session the path names, the role check, and
on an answer the execution grant re-read from the store (principal, membership, token).
"Without" is the path before issue 15: one constant-time compare against one token and
nothing per object (an `Authority` that answers from memory, no grant check). Same app,
same store, same client; uvicorn on 127.0.0.1 in this process, an httpx client with
`--concurrency` requests in flight. Modes alternate `--repeat` times; the best run of
each counts. Goal (issue 15): with ÷ without ≥ 0.9. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import secrets
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn

from opennua.auth import Authority, Caller
from opennua.host import Actor, Hub, SessionHost
from opennua.protocol import CreateSession, SendMessage, action_id, timestamp
from opennua.protocol.actions import TextPart
from opennua.server import create_app
from opennua.server._serve import uvicorn_config
from opennua.store import InputRequestRecord, Store, open_store

TOKEN = "bench-owner-token"
OPTIONS = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]


class Unchecked(Authority):
    """The pre-issue-15 path: one token, compared in constant time; everyone is owner."""

    def __init__(self, store: Store, caller: Caller) -> None:
        super().__init__(store)
        self._owner = caller

    async def authenticate(self, token: str) -> Caller:
        if not hmac.compare_digest(token.encode(), TOKEN.encode()):
            return await super().authenticate(token)
        return self._owner

    async def session_workspace(self, session_id: str) -> str | None:
        return self._owner.default_workspace


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def _serving(
    store: Store, checked: bool, asgi: bool
) -> AsyncIterator[tuple[Any, SessionHost, Actor]]:
    authority = Authority(store)
    await authority.bootstrap(TOKEN)
    caller = await authority.authenticate(TOKEN)
    workspace = caller.default_workspace
    assert workspace is not None
    if not checked:
        authority = Unchecked(store, caller)
    hub = Hub(store)
    host = SessionHost(store, hub, grant_check=authority.grant_problem if checked else None)
    await host.registry.ensure_builtin("scripted:demo")
    actor = Actor(
        caller.principal_id,
        workspace,
        authority.grant_for(caller, workspace, model=None),
    )
    app = create_app(host, store, hub, authority=authority, follow_store=False)
    if asgi:
        # In process, no sockets: the CPU cost of the app alone, the steadiest figure on
        # a loaded machine.
        yield (
            (
                lambda **kw: httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url="http://bench", **kw
                )
            ),
            host,
            actor,
        )
        return
    port = _port()
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    try:
        yield (lambda **kw: httpx.AsyncClient(base_url=url, **kw)), host, actor
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


async def _parked(store: Store, host: SessionHost, actor: Actor, n: int) -> list[tuple[str, str]]:
    """`n` sessions, each with a turn parked on an input request: (session, request)."""
    out = []
    for i in range(n):
        created = await host.submit(
            None,
            CreateSession(intent_id=f"int_c{i}", client_id="cli_bench", title="bench"),
            actor=actor,
        )
        sid = str(created.ids["session_id"])  # type: ignore[union-attr]
        sent = await host.submit(
            sid,
            SendMessage(
                intent_id=f"int_m{i}", client_id="cli_bench", content=[TextPart(text="go")]
            ),
            actor=actor,
        )
        execution_id = str(sent.ids["execution_id"])  # type: ignore[union-attr]
        turn_id = str(sent.ids["turn_id"])  # type: ignore[union-attr]
        now = time.time()
        claimed = await store.claim("sup_bench", now, 60.0)
        assert claimed is not None and claimed.execution.execution_id == execution_id
        rid = f"req_{secrets.token_hex(12)}"
        opened = {"request_id": rid, "reason": "tool_call", "prompt": "May I?", "options": OPTIONS}
        action = {
            "v": 1,
            "session_id": sid,
            "id": action_id(execution_id, "opened"),
            "type": "input_request.opened",
            "ts": timestamp(now),
            "turn_id": turn_id,
            "data": opened,
        }
        async with store.fenced(execution_id, claimed.epoch) as tx:
            tx.open_input_request(
                InputRequestRecord(
                    request_id=rid,
                    session_id=sid,
                    execution_id=execution_id,
                    turn_id=turn_id,
                    status="open",
                    payload=opened,
                    created_at=now,
                )
            )
            tx.append(sid, [action])
            tx.park_for_input()
        out.append((sid, rid))
    return out


async def _reads(client_of: Any, sids: list[str], seconds: float, concurrency: int) -> float:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with client_of(headers=headers, limits=limits) as client:
        stop = time.perf_counter() + seconds
        done = 0

        async def worker(k: int) -> None:
            nonlocal done
            while time.perf_counter() < stop:
                response = await client.get(f"/v1/sessions/{sids[(done + k) % len(sids)]}")
                assert response.status_code == 200, response.text
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        return done / (time.perf_counter() - started)


async def _answers(client_of: Any, parked: list[tuple[str, str]], concurrency: int) -> float:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    queue = list(parked)
    async with client_of(headers=headers, limits=limits) as client:

        async def worker() -> None:
            while queue:
                sid, rid = queue.pop()
                response = await client.post(
                    f"/v1/sessions/{sid}/input-requests/{rid}/answer", json={"option_id": "allow"}
                )
                assert response.status_code == 200, response.text

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(parked) / (time.perf_counter() - started)


async def _one(
    url_of_store: str, data: Path, checked: bool, args: argparse.Namespace
) -> tuple[float, float]:
    async with (
        await open_store(url_of_store, data_dir=data) as store,
        _serving(store, checked, args.asgi) as (client_of, host, actor),
    ):
        parked = await _parked(store, host, actor, args.answers)
        sids = [s for s, _ in parked[:16]]
        reads = await _reads(client_of, sids, args.seconds, args.concurrency)
        answers = await _answers(client_of, parked, args.concurrency)
        return reads, answers


@contextlib.contextmanager
def _database(kind: str, admin: str | None) -> Any:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield lambda i: (f"sqlite:///{tmp}/b{i}/nua.db", Path(tmp) / f"b{i}")
        return
    assert admin is not None
    names: list[str] = []

    def make(i: int) -> tuple[str, Path]:
        name = f"nua_bench_authz_{secrets.token_hex(4)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        names.append(name)
        return admin.rsplit("/", 1)[0] + "/" + name, Path(tempfile.mkdtemp())

    try:
        yield make
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def main(args: argparse.Namespace) -> None:
    backends = ["sqlite"] + (["postgres"] if args.pg else [])
    for kind in backends:
        best: dict[bool, list[float]] = {True: [0.0, 0.0], False: [0.0, 0.0]}
        with _database(kind, args.pg) as fresh:
            run = 0
            for _ in range(args.repeat):
                for checked in (False, True):
                    url, data = fresh(run)
                    run += 1
                    reads, answers = await _one(url, data, checked, args)
                    best[checked] = [max(best[checked][0], reads), max(best[checked][1], answers)]
        without, with_ = best[False], best[True]
        for i, what in enumerate(("GET /v1/sessions/{sid}", "answer")):
            print(
                f"{kind}: {what:<24} without {without[i]:8.0f}/s  with {with_[i]:8.0f}/s  "
                f"ratio {with_[i] / without[i]:.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pg", default=None, help="an admin URL; omit to skip PostgreSQL")
    parser.add_argument(
        "--asgi", action="store_true", help="in process over ASGI (no sockets, no uvicorn)"
    )
    asyncio.run(main(parser.parse_args()))
