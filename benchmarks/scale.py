"""Throughput as the work grows (issue 20): aggregate durable steps/s and completed turns/s
of one `nua serve` at 1, 10, 100 (and with --with-1000, 1,000) concurrent sessions, on
SQLite and PostgreSQL, beside LangGraph's checkpointer driven with the same concurrency in
the same run; then the RSS growth of `nua serve` for sessions parked on approvals.

    pip install -e '.[bench]'
    python benchmarks/scale.py [--seconds 20] [--warmup 5] [--levels 1,10,100] [--with-1000]
                               [--backends sqlite,postgres] [--parked 1000] [--long 60]
                               [--pg postgresql://postgres@127.0.0.1:5432/postgres]

Ours: one `nua serve` (host + supervisor, the zero-delay `scripted:demo` model:
NUA_DEMO_STEP_DELAY=0). Each session's client runs demo turns back to back over SSE: send
the task, approve the `shell` call (the side-effecting tool of every turn), read until
`turn.ended`. A durable step is one model response recorded with its checkpoint (one
`usage.recorded` action; the demo has 10 per turn, its sub-agent's included); counted
when it reaches the client within the window.

LangGraph's checkpointer *library*, driven in this process (no server, no run queue, no
stream to a client, so not like for like with a server: benchmarks/peers_server.py measures
the LangGraph Agent Server beside `nua serve`; this keeps the durability comparison): a
10-node-step graph per "turn" (each step writes a 300-byte payload into the
state, checkpointed by SqliteSaver / PostgresSaver), N threads each on its own thread_id,
turns back to back for the same window; once with `durability="async"` (LangGraph's
default: a step's checkpoint is written while the next step runs) and once with "sync"
(committed before the next step, as every opennua step is).

Each level runs `--warmup` seconds (plus one per 50 sessions) before its window opens:
what is counted is the steady rate at that concurrency, not the ramp of every session
starting at once.

Long: with `--long S`, one session runs turns back to back for S seconds and its steps/s
is printed per tenth: a turn must not cost more as the session's history grows.

Parked: `--parked` sessions each left waiting on the demo's approval; RSS (VmRSS of the
`nua serve` process) after minus before, per session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e._proc import Server

TASK = "Write the quarterly report"
LG_STEPS = 10  # LangGraph steps per turn: the demo's model steps per turn
PAYLOAD = 300


Durability = Literal["async", "sync"]


@dataclass(frozen=True)
class Window:
    """Steps count between `start` and `stop`: the seconds before `start` are the ramp
    (at 1,000 sessions every session sends its first message at once, and a turn can
    outlast a short window), so the figure is the steady rate at that concurrency."""

    start: float
    stop: float

    @classmethod
    def after(cls, warmup: float, seconds: float) -> Window:
        start = time.monotonic() + warmup
        return cls(start, start + seconds)

    def inside(self) -> bool:
        return self.start <= time.monotonic() < self.stop

    def open(self) -> bool:
        return time.monotonic() < self.stop


@dataclass
class Counts:
    steps: int = 0
    turns: int = 0
    steps_per_turn: int = 0


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST with an Idempotency-Key, sent again (same key) across connection errors: with
    1,000 sessions a pooled connection can sit idle past uvicorn's keep-alive (5 s) and be
    closed as a request goes out on it, as any client of a busy server meets."""
    key = secrets.token_hex(8)
    for _ in range(4):
        try:
            return await http.post(path, json=body, headers={"Idempotency-Key": key})
        except httpx.TransportError:
            await asyncio.sleep(0.2)
    return await http.post(path, json=body, headers={"Idempotency-Key": key})


async def _turns(http: httpx.AsyncClient, sid: str, window: Window, counts: Counts) -> None:
    """Demo turns back to back on one session, over one SSE stream per turn."""
    seq = 0
    while window.open():
        sent = await _post(
            http, f"/v1/sessions/{sid}/messages", {"content": [{"type": "text", "text": TASK}]}
        )
        sent.raise_for_status()
        steps = 0
        async for action in _events(http, sid, seq):
            seq = action["seq"]
            kind = action["type"]
            inside = window.inside()
            if kind == "usage.recorded":
                steps += 1
                counts.steps += inside
            elif kind == "input_request.opened":
                rid = action["data"]["request_id"]
                answered = await _post(
                    http,
                    f"/v1/sessions/{sid}/input-requests/{rid}/answer",
                    {"option_id": "allow_once"},
                )
                if answered.is_error:
                    raise RuntimeError(f"answer {rid}: {answered.status_code} {answered.text}")
            elif kind == "turn.ended":
                counts.turns += inside
                counts.steps_per_turn = steps
                break


async def _events(http: httpx.AsyncClient, sid: str, after: int) -> AsyncIterator[dict[str, Any]]:
    """The session's actions after `after`, resumed from the last one seen when the
    stream's connection fails (see `_post`), as every client of the protocol does."""
    for _ in range(5):
        try:
            async with http.stream(
                "GET", f"/v1/sessions/{sid}/events", params={"after": after}, timeout=None
            ) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    action = json.loads(line[5:])
                    if isinstance(action, dict) and "type" in action:
                        after = action["seq"]
                        yield action
            return
        except httpx.TransportError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the events of {sid} could not be read")


async def _ours_level(server: Server, n: int, window: Callable[[int], Window]) -> Counts:
    headers = {"Authorization": f"Bearer {server.token}"}
    limits = httpx.Limits(max_connections=2 * n + 10, max_keepalive_connections=2 * n + 10)
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, timeout=120, limits=limits
    ) as http:
        sids = []
        for i in range(n):
            created = await _post(http, "/v1/sessions", {"title": f"scale {n}/{i}"})
            created.raise_for_status()
            sids.append(created.json()["session_id"])
        counts = Counts()
        level = window(n)
        await asyncio.gather(*(_turns(http, sid, level, counts) for sid in sids))
        return counts


async def _long_session(server: Server, seconds: float) -> list[float]:
    """Steps/s of one session running turns back to back for `seconds`, per tenth of it:
    whether a turn costs more as the session's history grows."""
    counts = Counts()
    rates: list[float] = []
    tenth = seconds / 10

    async def sample() -> None:
        last = 0
        while True:
            await asyncio.sleep(tenth)
            rates.append((counts.steps - last) / tenth)
            last = counts.steps

    headers = {"Authorization": f"Bearer {server.token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as http:
        created = await _post(http, "/v1/sessions", {"title": "long"})
        created.raise_for_status()
        sampler = asyncio.create_task(sample())
        try:
            await _turns(http, created.json()["session_id"], Window.after(0, seconds), counts)
        finally:
            sampler.cancel()
    return rates[:10]


class _State(TypedDict):
    i: int
    data: str


def _langgraph_level(
    saver: Any, n: int, window: Callable[[int], Window], durability: Durability
) -> Counts:
    from langgraph.graph import END, START, StateGraph

    def node(state: _State) -> _State:
        return {"i": state["i"] + 1, "data": secrets.token_hex(PAYLOAD // 2)}

    def route(state: _State) -> str:
        return END if state["i"] % LG_STEPS == 0 else "node"

    graph = StateGraph(_State)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", route)
    app = graph.compile(checkpointer=saver)
    counts = Counts(steps_per_turn=LG_STEPS)
    lock = threading.Lock()
    level = window(n)
    run = secrets.token_hex(4)

    def worker(k: int) -> None:
        # Each step counts as it is streamed (after its checkpoint), like ours as its
        # `usage.recorded` arrives: at 1,000 threads a whole turn outlasts the window.
        config: Any = {"configurable": {"thread_id": f"{run}-{n}-{k}"}, "recursion_limit": 100}
        i = 0
        while level.open():
            updates = app.stream(
                {"i": i, "data": ""}, config, stream_mode="updates", durability=durability
            )
            for update in updates:
                i = update["node"]["i"]
                if level.inside():
                    with lock:
                        counts.steps += 1
            if level.inside():
                with lock:
                    counts.turns += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def _row(name: str, n: int, counts: Counts, seconds: float, base: float | None) -> float:
    rate = counts.steps / seconds
    ratio = f"  {rate / base:5.1f}x the 1-session rate" if base else ""
    print(
        f"  {name:32s} {n:5d} sessions  {rate:8.1f} steps/s  {counts.turns / seconds:7.2f} turns/s"
        f"{ratio}"
    )
    return rate


def _saver(backend: str, url: str, tmp: Path) -> tuple[Any, Callable[[], None]]:
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(str(tmp / "langgraph.db"), check_same_thread=False)
        return SqliteSaver(conn), conn.close
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, max_size=20, kwargs={"autocommit": True, "prepare_threshold": 0})
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    return saver, pool.close


def _pg_db(admin: str, created: list[str]) -> str:
    name = f"nua_scale_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    created.append(name)
    return admin.rsplit("/", 1)[0] + "/" + name


def _started(data: Path, db: str | None) -> Server:
    """`nua serve` with the zero-delay demo model, warmed up (imports, the first plugin
    load) by a turn."""
    data.mkdir()
    # the default lease: the tests' 2 s one churns under load
    server = Server(data, db=db, step_delay="0", model="scripted:demo", lease_ttl="15")
    server.start()
    asyncio.run(_ours_level(server, 1, lambda n: Window.after(0, 2)))
    return server


def _park(server: Server, parked: int) -> tuple[int, int]:
    """(RSS growth in KiB, sessions parked on their approval)."""
    assert server.proc is not None
    pid = server.proc.pid

    async def go() -> int:
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as http:
            sem = asyncio.Semaphore(20)

            async def one(i: int) -> str:
                async with sem:
                    created = await http.post("/v1/sessions", json={"title": f"parked {i}"})
                    sid = str(created.json()["session_id"])
                    body = {"content": [{"type": "text", "text": TASK}]}
                    (await http.post(f"/v1/sessions/{sid}/messages", json=body)).raise_for_status()
                    return sid

            sids = await asyncio.gather(*(one(i) for i in range(parked)))
            waiting = 0
            deadline = time.monotonic() + 60 + parked
            pending = list(sids)
            while pending and time.monotonic() < deadline:
                still = []
                for sid in pending:
                    state = (await http.get(f"/v1/sessions/{sid}")).json()["state"]
                    if state["open_input_requests"]:
                        waiting += 1
                    else:
                        still.append(sid)
                pending = still
                if pending:
                    await asyncio.sleep(1)
            return waiting

    before = _rss_kb(pid)
    waiting = asyncio.run(go())
    time.sleep(2)
    return _rss_kb(pid) - before, waiting


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--warmup",
        type=float,
        default=5,
        help="seconds of each level before counting starts (plus one per 50 sessions)",
    )
    parser.add_argument("--levels", default="1,10,100")
    parser.add_argument("--with-1000", action="store_true")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--parked", type=int, default=1000)
    parser.add_argument("--no-langgraph", action="store_true")
    parser.add_argument(
        "--long", type=float, default=0, help="then one session for this many seconds"
    )
    parser.add_argument(
        "--pg",
        default=os.environ.get("NUA_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")] + ([1000] if args.with_1000 else [])
    created: list[str] = []
    print(
        f"scale: {args.seconds:.0f} s per level after {args.warmup:.0f} s of warm-up"
        " (plus 1 s per 50 sessions),"
        f" levels {levels}"
    )

    def window(n: int) -> Window:
        # 1,000 sessions on PostgreSQL took ~12 s to ramp up (their first messages and
        # streams all at once): a second more per 50 sessions.
        return Window.after(args.warmup + n / 50, args.seconds)

    try:
        for backend in args.backends.split(","):
            tmp = Path(tempfile.mkdtemp(prefix=f"nua-scale-{backend}-"))
            db = None if backend == "sqlite" else _pg_db(args.pg, created)
            print(f"{backend}:")
            server = _started(tmp / "data", db)
            try:
                base = None
                for n in levels:
                    counts = asyncio.run(_ours_level(server, n, window))
                    rate = _row("opennua nua serve", n, counts, args.seconds, base)
                    base = base or rate
                rates = asyncio.run(_long_session(server, args.long)) if args.long else []
                if rates:  # a run shorter than a tenth's sleep has none
                    print(
                        f"  one session for {args.long:.0f} s, steps/s per tenth: "
                        + " ".join(f"{rate:.0f}" for rate in rates)
                        + f"  (last / first: {rates[-1] / max(rates[0], 1e-9):.2f})"
                    )
            finally:
                server.stop()
            if args.parked and backend == "sqlite":
                # A process of its own: after the levels, the busy process's heap has
                # room to spare, and 1,000 parked sessions measured +0 KiB.
                server = _started(tmp / "parked", None)
                try:
                    growth, waiting = _park(server, args.parked)
                finally:
                    server.stop()
                per = growth * 1024 / max(waiting, 1) / 1000
                print(
                    f"  parked on approval: {waiting} of {args.parked} sessions,"
                    f" RSS +{growth} KiB = {per:.1f} KB per session"
                )
            if args.no_langgraph:
                continue
            lg_db = None if backend == "sqlite" else _pg_db(args.pg, created)
            saver, close = _saver(backend, lg_db or "", tmp)
            try:
                # "async" (LangGraph's default) writes a step's checkpoint while the next
                # step runs; "sync" commits it first, as every opennua step is.
                modes: tuple[Durability, ...] = ("async", "sync")
                print(
                    "  LangGraph's checkpointer library in this process, beside the server"
                    " above (no server, no stream: for the server peer see peers_server.py):"
                )
                for durability in modes:
                    base = None
                    for n in levels:
                        counts = _langgraph_level(saver, n, window, durability)
                        name = f"langgraph library {type(saver).__name__} {durability}"
                        rate = _row(name, n, counts, args.seconds, base)
                        base = base or rate
            finally:
                close()
    finally:
        for name in created:
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(args.pg, autocommit=True) as conn,
            ):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
